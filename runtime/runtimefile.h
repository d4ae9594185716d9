/* SPDX-License-Identifier: Apache-2.0 */
/* /run/dstack/app-compose-runtime.json: written by the guest before Compose
 * starts; names the Compose project and the nerdctl namespace/snapshotter. */
#ifndef HEALTHD_RUNTIMEFILE_H
#define HEALTHD_RUNTIMEFILE_H

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

#endif
