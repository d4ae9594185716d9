/* SPDX-License-Identifier: Apache-2.0 */
/* Serves a fixed verdict with the real pRPC server, for tests of what the
 * binary's own refresh loop cannot be made to show on demand (a stale
 * snapshot, listener errors, how fast a stop is):
 *   rpc_serve LISTEN healthy|unhealthy|stale
 * Prints "listening on ADDR" once ready, serves until SIGTERM or SIGINT, then
 * prints "stopped in N ms". A bad LISTEN exits 2 with the error on stderr. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/cache.h"
#include "base/clock.h"
#include "rpc/encode.h"
#include "rpc/listen.h"
#include "rpc/server.h"

static struct snapshot *verdict_for(const char *mode)
{
	struct verdict v;
	verdict_init(&v);
	int64_t at = clock_mono_ms();
	if (!strcmp(mode, "healthy")) {
		v.healthy = true;
	} else if (!strcmp(mode, "stale")) {
		v.healthy = true;
		at -= 47000;
	} else {
		verdict_add(&v, "web", "unhealthy");
		verdict_add(&v, "db\"x\"", "starting\n(last health check: none)");
	}
	struct snapshot *s = rpc_snapshot_new(&v, at);
	verdict_free(&v);
	if (s)
		s->max_age_ms = 15000;
	return s;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: rpc_serve LISTEN healthy|unhealthy|stale\n");
		return 2;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	struct errbuf err = { "" };
	int fd;
	if (rpc_listen(argv[1], &fd, &err) < 0) {
		fprintf(stderr, "rpc_serve: %s\n", err.msg);
		return 2;
	}
	char where[128];
	if (rpc_listen_describe(fd, where, sizeof(where)) < 0)
		return 1;
	struct cache *c = cache_new(verdict_for(argv[2]));
	struct rpc_server_opts o = { .listen_fd = fd, .cache = c };
	struct rpc_server *s;
	if (!c || rpc_server_start(&o, &s, &err) < 0) {
		fprintf(stderr, "rpc_serve: %s\n", err.msg);
		return 1;
	}
	printf("listening on %s\n", where);
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	int64_t t0 = clock_mono_ms();
	rpc_server_stop(s);
	printf("stopped in %lld ms\n", (long long)(clock_mono_ms() - t0));
	cache_free(c);
	return 0;
}
