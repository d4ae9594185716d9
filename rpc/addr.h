/* SPDX-License-Identifier: Apache-2.0 */
/* The addresses the agent listens on and connects to, in one spelling:
 * HOST:PORT, [IPv6]:PORT or unix:PATH. The listeners (rpc/listen.h), the
 * relay (rpc/relay.h) and the configuration's checks (agent/config.c) read
 * them here, so that each says the same of a bad one. No name is ever
 * looked up: the agent starts before any resolver. */
#ifndef HEALTHD_ADDR_H
#define HEALTHD_ADDR_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/err.h"

/* What rpc_addr_parse accepts, for messages and --help. */
#define RPC_ADDR_FORMS                                                                \
	"HOST:PORT (HOST a numeric IPv4 address, localhost, or * or nothing for "     \
	"every address), [IPv6]:PORT or unix:PATH"

/* Room for any of them, read as the socket calls want it. */
union rpc_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
	struct sockaddr_storage ss;
};

/* spec into *a and *alen. err names the value as what ("listen address",
 * "relay address") and says what is wrong with it. */
int rpc_addr_parse(const char *what, const char *spec, union rpc_addr *a, socklen_t *alen,
		   struct errbuf *err);
/* a in the spelling above, for logs: "127.0.0.1:41234", "[::1]:8090",
 * "unix:/run/x.sock". -EAFNOSUPPORT; -ENAMETOOLONG when n is short. */
int rpc_addr_format(const union rpc_addr *a, char *buf, size_t n);

#endif
