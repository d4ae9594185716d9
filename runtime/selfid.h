/* SPDX-License-Identifier: Apache-2.0 */
/* The id of the container the agent runs in (a sidecar, issue 28 §3), from
 * what the container cannot rename: /proc/self/mountinfo
 * (docs/design/sidecar.md). Two kinds of line name it:
 *  - a cgroup mount whose root is the container's cgroup: cgroup v1, or v2
 *    in the host's cgroup namespace ("/docker/ID", "/system.slice/docker-ID.scope",
 *    nerdctl's "/NAMESPACE/ID" and "nerdctl-ID.scope"). Under cgroup v2 with
 *    a private cgroup namespace (Docker's default there) the root is "/".
 *  - the bind mount of /etc/hostname, /etc/hosts or /etc/resolv.conf from
 *    the runtime's folder for the container: Docker's
 *    DATA-ROOT/containers/ID/{hostname,hosts,resolv.conf}, nerdctl's
 *    DATAROOT/ADDRHASH/containers/NS/ID/{hostname,resolv.conf} and
 *    DATAROOT/ADDRHASH/etchosts/NS/ID/hosts. These are another container's
 *    when this one joined its network (network_mode: service:X), so a
 *    cgroup that names an id comes first. */
#ifndef HEALTHD_SELFID_H
#define HEALTHD_SELFID_H

#include <stddef.h>

#define SELFID_LEN 64

enum selfid_source {
	SELFID_NONE,     /* not found: not in a container, or no line names it */
	SELFID_CGROUP,   /* a cgroup mount's root */
	SELFID_HOSTNAME, /* the /etc/hostname bind mount */
	SELFID_HOSTS,    /* the /etc/hosts bind mount */
	SELFID_RESOLV,   /* the /etc/resolv.conf bind mount */
};

/* Pure: the container id mountinfo text (len bytes, need not end in NUL)
 * names, into id (SELFID_LEN hex digits and a NUL), by the first source in
 * the order above. */
enum selfid_source selfid_parse(const char *text, size_t len, char id[SELFID_LEN + 1]);

/* The same from /proc/self/mountinfo (at most 1 MiB of it; more, or a
 * read that fails, is SELFID_NONE). */
enum selfid_source selfid_read(char id[SELFID_LEN + 1]);

/* "its cgroup", "its /etc/hostname mount", ...: for log lines. */
const char *selfid_source_name(enum selfid_source s);

#endif
