/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's listening sockets: the public pRPC port, the control socket,
 * the metrics port. Addresses as rpc/addr.h spells them. */
#ifndef HEALTHD_LISTEN_H
#define HEALTHD_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* Kernel accept queue: a burst waits here while the slots turn over (the
 * kernel caps it at net.core.somaxconn). */
#define RPC_LISTEN_BACKLOG 4096

/* Parses a --listen value (RPC_ADDR_FORMS) and returns a bound, listening,
 * close-on-exec, non-blocking socket in *fd. Port 0 picks a free port (see
 * rpc_listen_describe). A stale unix socket at PATH is replaced; anything
 * else there, or a socket someone still listens on, is an error. err names
 * the value and what was wrong. */
int rpc_listen(const char *spec, int *fd, struct errbuf *err);
/* The parse alone, nothing bound: a configuration check. tcp_only refuses
 * unix:PATH. */
int rpc_listen_parse(const char *spec, bool tcp_only, struct errbuf *err);
/* Where a listening socket is bound, for logs: "127.0.0.1:41234",
 * "[::1]:8090", "unix:/run/x.sock". -errno; -ENAMETOOLONG when n is short. */
int rpc_listen_describe(int fd, char *buf, size_t n);

#endif
