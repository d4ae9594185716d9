/* SPDX-License-Identifier: Apache-2.0 */
/* nerdctl backend: nerdctl is a CLI over containerd with no daemon socket, so
 * each refresh runs it as a child process with a deadline and capped output. */
#ifndef HEALTHD_NERDCTL_H
#define HEALTHD_NERDCTL_H

#include <stdint.h>

#include "base/err.h"
#include "runtime/container.h"
#include "runtime/runtimefile.h"

#define NERDCTL_PROCESS_TIMEOUT_MS 5000
#define NERDCTL_MAX_OUTPUT (16u << 20)
/* Containers of one project passed to one inspect (argv stays far below
 * ARG_MAX); more is an error, not a silent cut. */
#define NERDCTL_MAX_IDS 1024

struct nerdctl_opts {
	const char *path;    /* the nerdctl binary (absolute, or looked up in PATH) */
	const char *address; /* containerd socket for --address, or NULL */
	int cancel_fd;       /* readable: kill the child and give up (-ECANCELED); -1 */
};

/* Runs `nerdctl [--address A] [--namespace NS] [--snapshotter S] ps -a -q
 * --no-trunc --filter label=com.docker.compose.project=P`, then one
 * `container inspect` of all ids. Each process is killed with its process
 * group and reaped at min(NERDCTL_PROCESS_TIMEOUT_MS, deadline)
 * (CLOCK_MONOTONIC ms). Appends to out the containers whose project label
 * (as inspect prints it) is P; one-offs are left to the judge. err says which
 * step failed. See nerdctl_list_with for when a container may be missing. */
int nerdctl_list(const struct nerdctl_opts *o, const struct runtime_info *ri,
		 int64_t deadline, struct container_list *out, struct errbuf *err);

#define NERDCTL_STDERR_KEEP 512

/* What one nerdctl run left behind. */
struct nerdctl_answer {
	char *out; /* stdout (malloc'd, may be NULL), len bytes */
	size_t len;
	char err[NERDCTL_STDERR_KEEP + 1]; /* the start of stderr */
};

/* How nerdctl is run: the real child process, or a stand-in (fuzzing). run
 * runs nerdctl with rest[0..n) after the global flags ("ps" or "inspect" in
 * what): 0 when it exited 0; -EIO when it exited non-zero (or was killed),
 * with ans->err kept; another -errno when it did not finish (timeout,
 * cancel, output over the cap, cannot start). err says why. */
struct nerdctl_runner {
	int (*run)(void *ctx, const char *what, const char *const *rest, size_t n,
		   struct nerdctl_answer *ans, struct errbuf *err);
	void *ctx;
};

/* nerdctl_list's logic over any runner. Fails closed: every id ps listed is
 * in the result, unless a one-by-one inspect of it failed with nerdctl
 * saying "no such container" or "no such object" AND a fresh ps no longer
 * lists it. Any other failure (a non-zero exit, output that cannot be read,
 * an answer missing an id, a timeout) fails the whole list, and nothing is
 * appended. */
int nerdctl_list_with(const struct nerdctl_runner *rn, const char *project,
		      struct container_list *out, struct errbuf *err);

/* Pure parsers, for tests and fuzzing. */
/* `ps -q` output: one hex id (12..64 digits) per line, blank lines ignored,
 * at most NERDCTL_MAX_IDS. -EINVAL naming the line, -E2BIG, -ENOMEM. Free
 * with nerdctl_free_ids. */
int nerdctl_parse_ids(const char *buf, size_t len, char ***ids, size_t *n,
		      struct errbuf *err);
void nerdctl_free_ids(char **ids, size_t n);

#endif
