/* SPDX-License-Identifier: Apache-2.0 */
/* The probe thread (runtime/prober.c) against servers on 127.0.0.1: HTTP,
 * refused, silent past the timeout, TCP, HTTPS with a self-signed
 * certificate (`openssl s_server`, when installed: the TLS path is what
 * tests/e2e/trixie.sh checks against mbedtls 3.6), and TLS spoken to a plain
 * HTTP server. Each container is "network_mode: host", so its own address
 * is loopback. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "runtime/prober.h"
#include "tests/lib/tap.h"

static atomic_int kicks;

static void kick(void *arg)
{
	(void)arg;
	atomic_fetch_add(&kicks, 1);
}

static int listener(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

/* Answers every connection with 200 until the listener is shut down. */
static void *http_server(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[4096];
		if (recv(c, buf, sizeof(buf), 0) > 0) {
			static const char ok200[] =
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
			if (send(c, ok200, sizeof(ok200) - 1, MSG_NOSIGNAL) < 0) {
				/* the probe gave up */
			}
		}
		close(c);
	}
}

static void add(struct container_list *l, const char *name, const char *probe)
{
	struct container *c = container_list_add(l);
	char id[65];
	snprintf(id, sizeof(id), "%064zu", l->n);
	c->id = strdup(id);
	c->name = strdup(name);
	c->state = strdup("running");
	c->running = true;
	c->network_mode = strdup("host");
	c->probe_labels.probe = strdup(probe);
	c->probe_labels.interval = strdup("1s");
	c->probe_labels.timeout = strdup("500ms");
	c->probe_labels.retries = strdup("1");
}

static const struct container_probe *find(const struct container_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return l->v[i].probe;
	return NULL;
}

/* openssl s_server -www on a free port, with a self-signed certificate made
 * in dir; its pid, or -1 when openssl is not installed. */
static pid_t tls_server(const char *dir, int *port)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=probe -days 1 "
		 "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1",
		 dir, dir);
	if (system(cmd) != 0)
		return -1;
	int fd = listener(port); /* a free port: taken, then freed for openssl */
	if (fd < 0)
		return -1;
	close(fd);
	pid_t pid = fork();
	if (pid == 0) {
		char acc[32], cert[512], key[512];
		snprintf(acc, sizeof(acc), "127.0.0.1:%d", *port);
		snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
		snprintf(key, sizeof(key), "%s/key.pem", dir);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execlp("openssl", "openssl", "s_server", "-quiet", "-www", "-accept", acc, "-cert",
		       cert, "-key", key, (char *)NULL);
		_exit(127);
	}
	/* Up when it accepts. */
	for (int i = 0; i < 200; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int r = connect(s, (struct sockaddr *)&a, sizeof(a));
		close(s);
		if (r == 0)
			return pid;
		usleep(50000);
	}
	return pid;
}

int main(void)
{
	char dir[] = "/tmp/test_prober.XXXXXX", probe[64];
	int hport, refused, silent_port, tport = 0;
	signal(SIGPIPE, SIG_IGN);
	if (!ok(mkdtemp(dir) != NULL, "scratch folder"))
		return done_testing();
	int hfd = listener(&hport), sfd = listener(&silent_port), rfd = listener(&refused);
	close(rfd); /* nothing listens there any more */
	pthread_t th;
	pthread_create(&th, NULL, http_server, &hfd);
	pid_t tls = tls_server(dir, &tport);

	struct container_list l = { 0 };
	snprintf(probe, sizeof(probe), "http://:%d/healthz", hport);
	add(&l, "http", probe);
	snprintf(probe, sizeof(probe), "tcp://:%d", hport);
	add(&l, "tcp", probe);
	snprintf(probe, sizeof(probe), "http://:%d/", refused);
	add(&l, "refused", probe);
	snprintf(probe, sizeof(probe), "http://:%d/", silent_port);
	add(&l, "silent", probe);
	snprintf(probe, sizeof(probe), "https://:%d/", hport);
	add(&l, "tls-to-plain", probe);
	if (tls > 0) {
		snprintf(probe, sizeof(probe), "https://:%d/", tport);
		add(&l, "https", probe);
	}

	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(kick, NULL, &p, &err) == 0, "prober starts (%s)", err.msg))
		return done_testing();
	/* Every probe has a result within a few timeouts, however loaded. */
	int64_t until = clock_mono_ms() + 20000;
	bool all = false;
	while (!all && clock_mono_ms() < until) {
		usleep(100000);
		all = prober_sync(p, &l) == 0;
		for (size_t i = 0; i < l.n; i++)
			all = all && l.v[i].probe && l.v[i].probe->probed &&
			      l.v[i].probe->state.runs > 0;
	}
	ok(all, "every probe ran");
	static const struct {
		const char *name;
		enum probe_status st;
		enum probe_result last;
	} want[] = {
		{ "http", PROBE_HEALTHY, PROBE_PASS },
		{ "tcp", PROBE_HEALTHY, PROBE_PASS },
		{ "refused", PROBE_UNHEALTHY, PROBE_REFUSED },
		{ "silent", PROBE_UNHEALTHY, PROBE_TIMEOUT },
		{ "tls-to-plain", PROBE_UNHEALTHY, PROBE_TLS },
		{ "https", PROBE_HEALTHY, PROBE_PASS },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct container_probe *cp = find(&l, want[i].name);
		if (!cp) {
			ok(1, "# SKIP %s: openssl is not installed", want[i].name);
			continue;
		}
		is_str(probe_result_name(cp->state.last), probe_result_name(want[i].last),
		       "%s: last result", want[i].name);
		is_int(cp->state.status, want[i].st, "%s: status", want[i].name);
	}
	const struct container_probe *h = find(&l, "http");
	ok(h && h->state.last_status == 200, "http: the status is kept for the operator");
	ok(atomic_load(&kicks) > 0, "a changed record asks for a refresh (%d kicks)",
	   atomic_load(&kicks));
	uint64_t counts[PROBE_N_RESULTS];
	prober_counts(p, counts);
	ok(counts[PROBE_PASS] >= 2 && counts[PROBE_REFUSED] >= 1 && counts[PROBE_TIMEOUT] >= 1,
	   "counted by result");

	/* A stopped container is no target: its record goes. */
	free(l.v[0].state);
	l.v[0].state = strdup("exited");
	l.v[0].running = false;
	prober_sync(p, &l);
	ok(!l.v[0].probe->probed, "a container that stopped is not probed");

	int64_t t0 = clock_mono_ms();
	prober_stop(p);
	ok(clock_mono_ms() - t0 < 2000, "stops at once, probes in flight closed");
	container_list_free(&l);
	shutdown(hfd, SHUT_RDWR);
	close(hfd);
	pthread_join(th, NULL);
	close(sfd);
	if (tls > 0) {
		kill(tls, SIGTERM);
		waitpid(tls, NULL, 0);
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return done_testing();
}
