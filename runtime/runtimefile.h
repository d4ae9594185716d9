/* SPDX-License-Identifier: Apache-2.0 */
/* /run/dstack/app-compose-runtime.json: written by the guest before Compose
 * starts; names the Compose project and the nerdctl namespace/snapshotter. */
#ifndef HEALTHD_RUNTIMEFILE_H
#define HEALTHD_RUNTIMEFILE_H

#include <stdint.h>

#include "base/err.h"

struct runtime_info {
	char *project;     /* required, non-empty */
	char *namespace;   /* may be NULL */
	char *snapshotter; /* may be NULL */
};

/* -ENOENT when the file does not exist (Compose has not started yet); other
 * negative errno with err naming the file and field, tagged
 * ERR_KIND_RUNTIME_FILE_UNREADABLE or _INVALID. Reads at most 64 KiB. */
int runtimefile_read(const char *path, struct runtime_info *out, struct errbuf *err);
/* Pure part, for tests and fuzzing. */
int runtimefile_parse(const char *buf, size_t len, struct runtime_info *out,
		      struct errbuf *err);
void runtime_info_free(struct runtime_info *ri);

/* The runtime file's modification time, seconds since the epoch: when the
 * guest last started Compose (issue 29). Upstream's app-compose.sh
 * (Dstack-TEE/dstack os/common/rootfs/app-compose.sh, record_compose_runtime)
 * rewrites it, on tmpfs, on every start of app-compose.service, right before
 * `docker compose up`; the file holds no time of its own. -ENOENT when it
 * does not exist (runner bash writes none), another negative errno when it
 * cannot be stat'ed. */
int runtimefile_mtime(const char *path, int64_t *sec);

#endif
