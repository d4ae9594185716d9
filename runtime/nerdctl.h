/* nerdctl backend: nerdctl is a CLI over containerd with no daemon socket, so
 * each refresh runs it as a child process with a deadline and capped output. */
#ifndef HEALTHD_NERDCTL_H
#define HEALTHD_NERDCTL_H

#include <stdint.h>

#include "../agent/err.h"
#include "container.h"
#include "runtimefile.h"

#define NERDCTL_PROCESS_TIMEOUT_MS 5000
#define NERDCTL_MAX_OUTPUT (16u << 20)

struct nerdctl_opts {
	const char *path;    /* the nerdctl binary (absolute, or looked up in PATH) */
	const char *address; /* containerd socket for --address, or NULL */
};

int nerdctl_list(const struct nerdctl_opts *o, const struct runtime_info *ri,
		 int64_t deadline, struct container_list *out, struct errbuf *err);

/* Pure parsers, for tests and fuzzing. */
int nerdctl_parse_ids(const char *buf, size_t len, char ***ids, size_t *n,
		      struct errbuf *err);

#endif
