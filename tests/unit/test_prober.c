/* SPDX-License-Identifier: Apache-2.0 */
/* The probe thread (probe/prober.c) against servers on 127.0.0.1: HTTP,
 * refused, silent past the timeout, TCP, HTTPS with a self-signed
 * certificate (`openssl s_server`, when installed: the TLS path is what
 * tests/e2e/trixie.sh checks against mbedtls 3.6), servers whose RSA key is
 * too costly to check a signature with, and TLS spoken to a plain HTTP
 * server; the first probe at once, a restart starting the record over,
 * and the socket bound counted in the process's own fds. Each container is
 * "network_mode: host", so its own address is loopback. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "runtime/probes.h"
#include "tests/lib/tap.h"

static atomic_int kicks;

static void kick(void *arg)
{
	(void)arg;
	atomic_fetch_add(&kicks, 1);
}

static int listener_backlog(int *port, int backlog)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int listener(int *port)
{
	return listener_backlog(port, 16);
}

/* A socket connected to 127.0.0.1:port, or -1. */
static int connect_loopback(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

struct server {
	int fd;
	int delay_ms;      /* between the request and the answer */
	atomic_int *asked; /* set when a request came (NULL: none) */
	atomic_int *after; /* answers only once this is set (10 s at most) */
	atomic_int *code;  /* the status it answers (NULL: 200) */
	atomic_int *hold;  /* no answer while this is set (30 s at most) */
};

/* Answers every connection with 200 until the listener is shut down. */
static void *http_server(void *arg)
{
	const struct server *s = arg;
	for (;;) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[4096];
		if (recv(c, buf, sizeof(buf), 0) > 0) {
			if (s->asked)
				atomic_store(s->asked, 1);
			for (int64_t until = clock_mono_ms() + 10000;
			     s->after && !atomic_load(s->after) && clock_mono_ms() < until;)
				usleep(1000);
			for (int64_t until = clock_mono_ms() + 30000;
			     s->hold && atomic_load(s->hold) && clock_mono_ms() < until;)
				usleep(1000);
			usleep((useconds_t)s->delay_ms * 1000);
			char answer[128];
			int n = snprintf(answer, sizeof(answer),
					 "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: "
					 "close\r\n\r\nok",
					 s->code ? atomic_load(s->code) : 200);
			if (send(c, answer, (size_t)n, MSG_NOSIGNAL) < 0) {
				/* the probe gave up */
			}
		}
		close(c);
	}
}

/* The process's open fds, less the one that reads them. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static struct container *add(struct container_list *l, const char *name, const char *probe)
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
	c->started_at_ns = 1700000000000000000LL;
	return c;
}

static const struct container_probe *find(const struct container_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return l->v[i].probe;
	return NULL;
}

/* The TLS servers' RSA keys: made once per run, in dir, all at once (one
 * generation takes seconds on a busy machine), each with a self-signed
 * certificate (NAME.key, NAME.pem). False when openssl is not installed. */
static const struct {
	const char *name, *opts;
} tls_keys[] = {
	{ "rsa2048", "-pkeyopt rsa_keygen_bits:2048" },
	/* The largest the probes take, then one just over it. */
	{ "rsa4096", "-pkeyopt rsa_keygen_bits:4096" },
	{ "rsa4098", "-pkeyopt rsa_keygen_bits:4098" },
	/* An exponent just over 65537. */
	{ "e65539", "-pkeyopt rsa_keygen_bits:2048 -pkeyopt rsa_keygen_pubexp:65539" },
};

static bool make_keys(const char *dir)
{
	char cmd[2048];
	size_t off = (size_t)snprintf(cmd, sizeof(cmd), "cd %s || exit 1; ", dir);
	for (size_t i = 0; i < sizeof(tls_keys) / sizeof(tls_keys[0]); i++)
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off,
					"{ openssl genpkey -algorithm RSA %s -out %s.key && "
					"openssl req -x509 -new -key %s.key -subj /CN=probe -days 1 "
					"-out %s.pem; } >/dev/null 2>&1 & ",
					tls_keys[i].opts, tls_keys[i].name, tls_keys[i].name,
					tls_keys[i].name);
	snprintf(cmd + off, sizeof(cmd) - off, "wait");
	if (system(cmd) != 0)
		return false;
	for (size_t i = 0; i < sizeof(tls_keys) / sizeof(tls_keys[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s.pem", dir, tls_keys[i].name);
		if (access(path, R_OK) != 0)
			return false;
	}
	return true;
}

/* What an `openssl s_server` offers: any version, TLS 1.2 alone (its
 * ServerKeyExchange signature in the clear, for flip_relay), or TLS 1.2
 * with DHE-RSA alone. */
enum tls_offer { TLS_ANY, TLS_12, TLS_DHE };

/* openssl s_server -www on a free port with key (one of tls_keys, made in
 * dir). Its pid, or -1 when it cannot start. */
static pid_t tls_server(const char *dir, const char *key, int *port, enum tls_offer offer)
{
	int fd = listener(port); /* a free port: taken, then freed for openssl */
	if (fd < 0)
		return -1;
	close(fd);
	pid_t pid = fork();
	if (pid == 0) {
		char acc[32], cert[512], keyfile[512];
		snprintf(acc, sizeof(acc), "127.0.0.1:%d", *port);
		snprintf(cert, sizeof(cert), "%s/%s.pem", dir, key);
		snprintf(keyfile, sizeof(keyfile), "%s/%s.key", dir, key);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		char *argv[16] = { "openssl", "s_server", "-quiet", "-www", "-accept", acc,
				   "-cert", cert, "-key", keyfile };
		int n = 10;
		if (offer != TLS_ANY)
			argv[n++] = "-tls1_2";
		if (offer == TLS_DHE) {
			argv[n++] = "-cipher";
			argv[n++] = "DHE-RSA-AES128-GCM-SHA256";
		}
		execvp("openssl", argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	/* Up when it accepts. */
	for (int i = 0; i < 200; i++) {
		int s = connect_loopback(*port);
		if (s >= 0) {
			close(s);
			return pid;
		}
		usleep(50000);
	}
	return pid;
}

/* A relay in front of a TLS 1.2 server that changes the last byte of each
 * ServerKeyExchange it passes on, so that the server's signature is wrong.
 * A probe that judges the server's key before checking that signature
 * fails on the key; one that checks the signature first fails on it. */
struct flip_relay {
	int fd;       /* the relay's listener */
	int upstream; /* the server's port */
	pthread_t thread;
};

/* Sends the whole TLS records at the head of buf[0..*len) to fd, each
 * ServerKeyExchange (handshake type 12) changed; keeps what is left. */
static void flip_records(int fd, unsigned char *buf, size_t *len)
{
	size_t off = 0;
	while (*len - off >= 5) {
		size_t rec = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (*len - off < 5 + rec)
			break;
		/* Handshake messages before ChangeCipherSpec are in the clear. */
		for (size_t m = off + 5; buf[off] == 22 && m + 4 <= off + 5 + rec;) {
			size_t mlen = (size_t)buf[m + 1] << 16 | (size_t)buf[m + 2] << 8 | buf[m + 3];
			if (m + 4 + mlen > off + 5 + rec)
				break;
			if (buf[m] == 12 && mlen > 0)
				buf[m + 4 + mlen - 1] ^= 0x01;
			m += 4 + mlen;
		}
		if (send(fd, buf + off, 5 + rec, MSG_NOSIGNAL) < 0)
			break;
		off += 5 + rec;
	}
	memmove(buf, buf + off, *len - off);
	*len -= off;
}

static void relay_one(int client, int upstream_port)
{
	int server = connect_loopback(upstream_port);
	unsigned char down[1 << 16]; /* four TLS records of the largest */
	size_t held = 0;
	if (server < 0)
		return;
	/* Until either side closes; 30 s at most. */
	for (int64_t until = clock_mono_ms() + 30000; clock_mono_ms() < until;) {
		struct pollfd pf[2] = { { .fd = client, .events = POLLIN },
					{ .fd = server, .events = POLLIN } };
		if (poll(pf, 2, 1000) < 0)
			break;
		char up[4096];
		if (pf[0].revents) {
			ssize_t n = recv(client, up, sizeof(up), 0);
			if (n <= 0 || send(server, up, (size_t)n, MSG_NOSIGNAL) < 0)
				break;
		}
		if (pf[1].revents) {
			ssize_t n = recv(server, down + held, sizeof(down) - held, 0);
			if (n <= 0)
				break;
			held += (size_t)n;
			flip_records(client, down, &held);
			if (held == sizeof(down))
				break; /* a record over any TLS bound: not a TLS server */
		}
	}
	close(server);
}

static void *flip_relay_run(void *arg)
{
	const struct flip_relay *r = arg;
	for (;;) {
		int c = accept(r->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		relay_one(c, r->upstream);
		close(c);
	}
}

/* The ids of this process's threads, into v (at most n); how many. */
static size_t tasks(long *v, size_t n)
{
	DIR *d = opendir("/proc/self/task");
	size_t k = 0;
	for (struct dirent *e; d && k < n && (e = readdir(d));)
		if (e->d_name[0] != '.')
			v[k++] = strtol(e->d_name, NULL, 10);
	if (d)
		closedir(d);
	return k;
}

/* Waits (5 s at most) until the thread started after the snapshot
 * before[n] sleeps in epoll_wait, as the kernel names where it waits. */
static void wait_idle(const long *before, size_t n)
{
	long now[64], tid = 0;
	size_t m = tasks(now, 64);
	for (size_t i = 0; i < m && !tid; i++) {
		tid = now[i];
		for (size_t j = 0; j < n && tid; j++)
			tid = before[j] == now[i] ? 0 : tid;
	}
	char path[64], w[64] = "";
	snprintf(path, sizeof(path), "/proc/self/task/%ld/wchan", tid);
	for (int64_t until = clock_mono_ms() + 5000; tid && clock_mono_ms() < until; usleep(5000)) {
		FILE *f = fopen(path, "r");
		size_t r = f ? fread(w, 1, sizeof(w) - 1, f) : 0;
		w[r] = '\0';
		if (f)
			fclose(f);
		if (strstr(w, "epoll") || strstr(w, "ep_poll"))
			return;
	}
	printf("# the prober's thread (%ld) was not seen in epoll_wait (wchan \"%s\")\n", tid, w);
}

/* Runs l's probes on a prober of their own (kick k) until each has a
 * result or 30 s pass; the records into l. Synced once before and once
 * after, and the first sync only once the thread sleeps in epoll_wait:
 * what wakes it then is that sync alone, as at a refresh. */
static void run_alone(struct container_list *l, void (*k)(void *))
{
	struct prober *p = NULL;
	struct errbuf err = { "" };
	long before[64];
	size_t nb = tasks(before, 64);
	if (!ok(prober_start(k, NULL, NULL, &p, &err) == 0, "a prober of its own starts (%s)", err.msg))
		return;
	wait_idle(before, nb);
	probes_sync(p, l, NULL, false);
	int64_t until = clock_mono_ms() + 30000;
	uint64_t done = 0;
	while (done < l->n && clock_mono_ms() < until) {
		uint64_t counts[PROBE_N_RESULTS];
		usleep(20000);
		prober_counts(p, counts);
		done = 0;
		for (int r = 0; r < PROBE_N_RESULTS; r++)
			done += counts[r];
	}
	probes_sync(p, l, NULL, false);
	prober_stop(p);
}

static atomic_int stall_armed, stalled;

/* Stands for a handshake step that runs long on the prober's thread: the
 * first kick (the first record that changes) holds it for 4 s. */
static void stall_kick(void *arg)
{
	(void)arg;
	if (atomic_exchange(&stall_armed, 0)) {
		usleep(4000000);
		atomic_store(&stalled, 1);
	}
}

/* While the thread is held past a probe's deadline, that probe's answer
 * comes (300 ms after its request): it came in time, and is read, not timed
 * out. The hold is the kick of another probe, whose server answers only
 * once the first one's request has come, so that the first is waiting for
 * its answer when the thread is held. */
static void stall_spares_answers(void)
{
	int aport, tport;
	atomic_int asked = 0;
	struct server as = { .fd = listener(&aport), .delay_ms = 300, .asked = &asked },
		      ts = { .fd = listener(&tport), .after = &asked };
	pthread_t ath, tth;
	pthread_create(&ath, NULL, http_server, &as);
	pthread_create(&tth, NULL, http_server, &ts);
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", aport);
	add(&l, "answered", probe);
	snprintf(probe, sizeof(probe), "http://:%d/", tport);
	add(&l, "trigger", probe);
	for (size_t i = 0; i < l.n; i++) {
		free(l.v[i].probe_labels.interval);
		free(l.v[i].probe_labels.timeout);
		l.v[i].probe_labels.interval = strdup("1h");
		l.v[i].probe_labels.timeout = strdup("2s");
	}
	atomic_store(&stall_armed, 1);
	run_alone(&l, stall_kick);
	ok(atomic_load(&stalled), "the prober's thread was held 4 s");
	for (size_t i = 0; i < l.n; i++)
		is_str(probe_result_name(l.v[i].probe->state.last), "pass",
		       "%s: an answer that came while the thread was held passes", l.v[i].name);
	container_list_free(&l);
	for (int i = 0; i < 2; i++) {
		shutdown(i ? ts.fd : as.fd, SHUT_RDWR);
		close(i ? ts.fd : as.fd);
		pthread_join(i ? tth : ath, NULL);
	}
}

/* A peer that drops the SYN (its accept queue full) sends no event: the
 * probe's own deadline still ends the wait. */
static void deadline_without_events(void)
{
	int port, lfd = listener_backlog(&port, 0);
	int fill = connect_loopback(port);
	ok(fill >= 0, "the one-place accept queue is full");
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "tcp://:%d", port);
	add(&l, "dropped", probe);
	int64_t t0 = clock_mono_ms();
	run_alone(&l, NULL);
	int64_t took = clock_mono_ms() - t0;
	is_str(probe_result_name(l.v[0].probe->state.last), "timeout", "a dropped SYN times out");
	ok(took < 20000, "at its timeout (500 ms), not at the loop's longest wait (%lld ms)",
	   (long long)took);
	container_list_free(&l);
	if (fill >= 0)
		close(fill);
	close(lfd);
}

/* 100 probes due at once against a server that never answers: never more
 * than 64 sockets open (counted in the process's fds, not the prober's
 * word), and each one that times out is closed. */
static void sockets_bounded(int silent_port)
{
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", silent_port);
	for (int i = 0; i < 100; i++) {
		struct container *c = add(&l, "silent", probe);
		free(c->probe_labels.interval);
		free(c->probe_labels.timeout);
		c->probe_labels.interval = strdup("1h");
		c->probe_labels.timeout = strdup("2s");
	}
	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(NULL, NULL, NULL, &p, &err) == 0, "a second prober starts (%s)", err.msg))
		return;
	int base = count_fds(), most = base;
	probes_sync(p, &l, NULL, false);
	int64_t until = clock_mono_ms() + 60000;
	uint64_t counts[PROBE_N_RESULTS] = { 0 };
	while (counts[PROBE_TIMEOUT] < 100 && clock_mono_ms() < until) {
		int n = count_fds();
		if (n > most)
			most = n;
		usleep(5000);
		prober_counts(p, counts);
	}
	is_int(counts[PROBE_TIMEOUT], 100, "all 100 silent probes timed out");
	is_int(most - base, 64, "at most 64 sockets at once, and all 64 used");
	is_int(count_fds() - base, 0, "every socket of a timed-out probe is closed");
	prober_stop(p);
	container_list_free(&l);
}

static atomic_int kicks_spaced, kicks_soon;

static void kick_spaced(void *arg)
{
	(void)arg;
	atomic_fetch_add(&kicks_spaced, 1);
}

static void kick_soon(void *arg)
{
	(void)arg;
	atomic_fetch_add(&kicks_soon, 1);
}

/* Only a change of the verdict's class (healthy or not) asks for a refresh
 * at once; a failing probe whose reason moves (500, then 503) asks for a
 * spaced one (issue 34): each step waits for the record that shows it. */
static void kick_by_class(void)
{
	int port;
	atomic_int code = 500;
	struct server hs = { .fd = listener(&port), .code = &code };
	pthread_t th;
	pthread_create(&th, NULL, http_server, &hs);
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", port);
	add(&l, "flips", probe);
	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(kick_spaced, kick_soon, NULL, &p, &err) == 0, "a prober starts (%s)",
		err.msg))
		return;
	static const struct {
		int code;
		enum probe_status st;
		int spaced, soon;
		const char *what;
	} steps[] = {
		{ 500, PROBE_UNHEALTHY, 1, 0, "500: a first failure, never healthy, is a spaced kick" },
		{ 503, PROBE_UNHEALTHY, 2, 0, "503 after 500: the reason moves, the class stays: spaced" },
		{ 200, PROBE_HEALTHY, 2, 1, "200: healthy, a change of class: at once" },
		{ 500, PROBE_UNHEALTHY, 2, 2, "500 again: unhealthy, a change of class: at once" },
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		atomic_store(&code, steps[i].code);
		bool seen = false;
		for (int64_t until = clock_mono_ms() + 20000; !seen && clock_mono_ms() < until;) {
			usleep(20000);
			probes_sync(p, &l, NULL, false);
			const struct container_probe *cp = l.v[0].probe;
			seen = cp && cp->probed && cp->state.last_status == steps[i].code &&
			       cp->state.status == steps[i].st;
		}
		ok(seen, "step %zu: the record shows %d", i, steps[i].code);
		is_int(atomic_load(&kicks_spaced) * 10 + atomic_load(&kicks_soon),
		       steps[i].spaced * 10 + steps[i].soon, "%s (spaced, soon)", steps[i].what);
	}
	prober_stop(p);
	container_list_free(&l);
	shutdown(hs.fd, SHUT_RDWR);
	close(hs.fd);
	pthread_join(th, NULL);
}

static void set_timing(struct container *c, const char *interval, const char *timeout)
{
	free(c->probe_labels.interval);
	free(c->probe_labels.timeout);
	c->probe_labels.interval = strdup(interval);
	c->probe_labels.timeout = strdup(timeout);
}

/* 128 probes of a silent server, every 1 s with a 1 s timeout, and one of a
 * server that answers, last in the list: more are due than the 64 sockets
 * take, over and over. Taken in list order the last one never got a socket
 * (issue 34); the longest overdue first, it is probed and healthy. */
static void earliest_due_first(int silent_port, int http_port)
{
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", silent_port);
	for (int i = 0; i < 128; i++)
		set_timing(add(&l, "silent", probe), "1s", "1s");
	snprintf(probe, sizeof(probe), "http://:%d/", http_port);
	struct container *h = add(&l, "last", probe);
	set_timing(h, "1s", "500ms");
	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(NULL, NULL, NULL, &p, &err) == 0, "a prober starts (%s)", err.msg))
		return;
	bool probed = false;
	for (int64_t until = clock_mono_ms() + 20000; !probed && clock_mono_ms() < until;) {
		usleep(100000);
		probes_sync(p, &l, NULL, false);
		const struct container_probe *cp = l.v[l.n - 1].probe;
		probed = cp && cp->state.runs > 0 && cp->state.status == PROBE_HEALTHY;
	}
	ok(probed, "the last of 129 always-due probes is probed and healthy (runs %llu)",
	   (unsigned long long)l.v[l.n - 1].probe->state.runs);
	prober_stop(p);
	container_list_free(&l);
}

/* The thread started after the snapshot before[n], or 0. */
static long new_task(const long *before, size_t n)
{
	long now[64], tid = 0;
	size_t m = tasks(now, 64);
	for (size_t i = 0; i < m && !tid; i++) {
		tid = now[i];
		for (size_t j = 0; j < n && tid; j++)
			tid = before[j] == now[i] ? 0 : tid;
	}
	return tid;
}

/* How many times thread tid slept and woke (voluntary_ctxt_switches). */
static long wakes(long tid)
{
	char path[64], line[128];
	long v = -1;
	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* A record the prober cannot renew is not the app's word: a probe that
 * passed, then finds every socket held for 10 s, is "probe stalled" once
 * interval + timeout + 2 s have passed, not "healthy" (issue 34). */
static void stalled_record(int silent_port, int http_port)
{
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", http_port);
	set_timing(add(&l, "renewed", probe), "1s", "500ms");
	struct prober *p = NULL;
	struct errbuf err = { "" };
	long before[64];
	size_t nb = tasks(before, 64);
	if (!ok(prober_start(NULL, NULL, NULL, &p, &err) == 0, "a prober starts (%s)", err.msg))
		return;
	long tid = new_task(before, nb);
	bool healthy = false;
	for (int64_t until = clock_mono_ms() + 20000; !healthy && clock_mono_ms() < until;) {
		usleep(50000);
		probes_sync(p, &l, NULL, false);
		healthy = l.v[0].probe && l.v[0].probe->state.status == PROBE_HEALTHY;
	}
	ok(healthy, "stall: the probe passed first");
	/* Now 64 probes that hold every socket for 10 s. */
	snprintf(probe, sizeof(probe), "http://:%d/", silent_port);
	for (int i = 0; i < PROBER_MAX_SOCKETS; i++)
		set_timing(add(&l, "holder", probe), "1h", "10s");
	probes_sync(p, &l, NULL, false);
	int64_t t0 = clock_mono_ms();
	long w0 = wakes(tid);
	bool seen = false;
	while (!seen && clock_mono_ms() - t0 < 9000) {
		usleep(100000);
		probes_sync(p, &l, NULL, false);
		seen = l.v[0].probe->state.last == PROBE_STALLED;
	}
	int64_t took = clock_mono_ms() - t0;
	char text[160];
	probe_state_text(&l.v[0].probe->state, text, sizeof(text));
	ok(seen && l.v[0].probe->state.status == PROBE_UNHEALTHY,
	   "stall: with no socket for it, the record says so after %lld ms (%s)", (long long)took,
	   text);
	is_str(text, "probe unhealthy (probe stalled)", "stall: the public words");
	/* Its due time was the pass and an interval (1 s); the stall, a timeout
	 * (500 ms) and the slack (2 s) after that: 3.5 s, far from the 8 s ten
	 * timeouts would make. */
	ok(seen && took < 6500, "stall: at its timeout and the slack past its due time, not later "
	   "(%lld ms after the holders came; 3500 expected)", (long long)took);
	/* Meanwhile a probe was due with every socket full: the thread waits
	 * for a socket to free, not on a 10 ms timer (that was 100 wakes a
	 * second). What woke it: this test's syncs, 10 a second. */
	long woke = wakes(tid) - w0;
	double rate = (double)woke * 1000 / (double)(took > 0 ? took : 1);
	ok(tid > 0 && w0 >= 0 && rate < 40, "stall: the thread woke %ld times in %lld ms (%.0f/s)",
	   woke, (long long)took, rate);
	prober_stop(p);
	container_list_free(&l);
}

/* Stops thread tid of this process, that thread alone, from a child that
 * traces it (PTRACE_SEIZE, then PTRACE_INTERRUPT, as tests/lib/thread_stop.py
 * does: the other threads run on, as SIGSTOP would not let them); the
 * child's pid, or -1 when it cannot (no right to trace). *go: the pipe to
 * close to let the thread go on. */
static pid_t stop_thread(long tid, int *go)
{
	int told[2], wait_go[2];
	if (pipe(told) < 0 || pipe(wait_go) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(told[0]);
		close(wait_go[1]);
		char r = 'f';
		if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) == 0 &&
		    ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) == 0 &&
		    waitpid((pid_t)tid, NULL, __WALL) == (pid_t)tid)
			r = 's';
		if (write(told[1], &r, 1) != 1 || r != 's')
			_exit(1);
		char c;
		while (read(wait_go[0], &c, 1) > 0)
			;
		ptrace(PTRACE_DETACH, (pid_t)tid, NULL, NULL);
		_exit(0);
	}
	close(told[1]);
	close(wait_go[0]);
	char r = 'f';
	struct pollfd pf = { .fd = told[0], .events = POLLIN };
	if (pid < 0 || poll(&pf, 1, 20000) != 1 || read(told[0], &r, 1) != 1 || r != 's') {
		close(told[0]);
		close(wait_go[1]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return -1;
	}
	close(told[0]);
	*go = wait_go[1];
	return pid;
}

/* Which containers are targets (runtime/probes.c, want): only a serving
 * one (Docker keeps Running true while paused: the state word and the
 * paused flag both count), never a one-off or the agent's own; and at most
 * PROBER_MAX_TARGETS, the rest an entry that says so. */
static void targets(int silent_port)
{
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", silent_port);
	set_timing(add(&l, "serving", probe), "1h", "100ms");
	struct container *paused = add(&l, "paused", probe), *oneoff = add(&l, "oneoff", probe),
			 *self = add(&l, "self", probe);
	paused->paused = true; /* its state word still "running" */
	oneoff->oneoff = true;
	self->agent_self = true;
	while (l.n < PROBER_MAX_TARGETS + 4) /* three of them are not targets */
		set_timing(add(&l, "many", probe), "1h", "100ms");
	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(NULL, NULL, NULL, &p, &err) == 0, "targets: a prober starts (%s)",
		err.msg))
		return;
	ok(probes_sync(p, &l, NULL, false) == 0, "targets: synced");
	ok(l.v[0].probe->probed, "targets: a serving container is probed");
	ok(!l.v[1].probe->probed, "targets: a paused container (state word running) is not probed");
	ok(!l.v[2].probe->probed, "targets: a one-off (compose run) is not probed");
	ok(!l.v[3].probe->probed, "targets: the agent's own container is not probed");
	const struct container_probe *last = l.v[l.n - 1].probe, *kept = l.v[l.n - 2].probe;
	ok(kept->probed && kept->usable, "targets: the %dth probed container is probed",
	   PROBER_MAX_TARGETS);
	ok(!last->probed && !last->usable && strstr(last->why, "more than 1024 probed containers"),
	   "targets: the one after the %dth is an entry that says so (%s)", PROBER_MAX_TARGETS,
	   last->why);
	prober_stop(p);
	container_list_free(&l);
}

/* A record must not outlive the thread that renews it with a probe in
 * flight either (probe/prober.c): the prober's thread stopped while it
 * waits for an answer (as a thread wedged in a handshake step, or starved,
 * would be) gives that probe until twice its timeout and
 * PROBER_STALL_SLACK_MS past its due time, then the record that passed
 * reads "probe stalled", not "healthy"; not sooner, as a record with no
 * probe in flight would (one timeout and the slack). Timeout 4 s: the
 * stall comes 10 s after the probe was due, the early one would come at 6. */
static void stale_in_flight(void)
{
	int port;
	atomic_int asked = 0, hold = 0;
	struct server srv = { .fd = listener(&port), .asked = &asked, .hold = &hold };
	pthread_t th;
	pthread_create(&th, NULL, http_server, &srv);
	struct container_list l = { 0 };
	char probe[64];
	snprintf(probe, sizeof(probe), "http://:%d/", port);
	set_timing(add(&l, "in-flight", probe), "1s", "4s");
	struct prober *p = NULL;
	struct errbuf err = { "" };
	long before[64];
	size_t nb = tasks(before, 64);
	if (!ok(prober_start(NULL, NULL, NULL, &p, &err) == 0, "in flight: a prober starts (%s)",
		err.msg))
		goto out;
	long tid = new_task(before, nb);
	bool healthy = false;
	for (int64_t until = clock_mono_ms() + 20000; !healthy && clock_mono_ms() < until;) {
		usleep(50000);
		probes_sync(p, &l, NULL, false);
		healthy = l.v[0].probe && l.v[0].probe->state.status == PROBE_HEALTHY;
	}
	ok(healthy, "in flight: the probe passed first");
	/* The next probe's request comes and is held unanswered: it is in
	 * flight, and then its thread stops. */
	atomic_store(&hold, 1);
	atomic_store(&asked, 0);
	for (int64_t until = clock_mono_ms() + 10000; !atomic_load(&asked) && clock_mono_ms() < until;)
		usleep(1000);
	int64_t t_asked = clock_mono_ms();
	int go = -1;
	pid_t tracer = atomic_load(&asked) && tid > 0 ? stop_thread(tid, &go) : -1;
	if (tracer < 0) {
		ok(1, "# SKIP in flight: the prober's thread could not be stopped (ptrace)");
		atomic_store(&hold, 0);
		prober_stop(p);
		goto out;
	}
	/* A target new while the thread is stopped: its first probe cannot
	 * start, and its record says nothing of the app but "starting",
	 * however long past its timeout and the slack, never "stalled". */
	set_timing(add(&l, "new", probe), "1s", "500ms");
	int64_t stalled_after = -1;
	bool healthy_while_stopped = true;
	for (int64_t until = t_asked + 25000; stalled_after < 0 && clock_mono_ms() < until;) {
		usleep(100000);
		probes_sync(p, &l, NULL, false);
		if (l.v[0].probe->state.last == PROBE_STALLED)
			stalled_after = clock_mono_ms() - t_asked;
		else if (l.v[0].probe->state.status != PROBE_HEALTHY)
			healthy_while_stopped = false;
	}
	char text[160], new_text[160];
	probe_state_text(&l.v[0].probe->state, text, sizeof(text));
	probe_state_text(&l.v[1].probe->state, new_text, sizeof(new_text));
	struct probe_state new_state = l.v[1].probe->state;
	int64_t new_waited = clock_mono_ms() - t_asked;
	close(go);
	waitpid(tracer, NULL, 0);
	atomic_store(&hold, 0);
	ok(healthy_while_stopped, "in flight: the record stays the probe's own until it stalls");
	ok(stalled_after >= 0 && l.v[0].probe->state.status == PROBE_UNHEALTHY,
	   "in flight, the thread stopped: the record says so (%s, %lld ms after the request)",
	   text, (long long)stalled_after);
	/* Twice the timeout and the slack (10 s) from the probe's due time,
	 * which is at most a loaded machine's delay before the request. */
	ok(stalled_after >= 8500, "in flight: not before twice the timeout and the slack "
	   "(%lld ms after the request; one timeout and the slack would be 6000)",
	   (long long)stalled_after);
	ok(new_state.status == PROBE_STARTING && new_state.last != PROBE_STALLED &&
		   !strcmp(new_text, "probe starting (no probe has run yet)"),
	   "in flight: a target new while the thread is stopped is starting after %lld ms, "
	   "not stalled: it never ran (status %d, last %s; the operator's view shows both)",
	   (long long)new_waited, new_state.status, probe_result_name(new_state.last));
	prober_stop(p);
out:
	container_list_free(&l);
	shutdown(srv.fd, SHUT_RDWR);
	close(srv.fd);
	pthread_join(th, NULL);
}

int main(void)
{
	char dir[] = "/tmp/test_prober.XXXXXX", probe[64];
	int hport, refused, silent_port;
	signal(SIGPIPE, SIG_IGN);
	if (!ok(mkdtemp(dir) != NULL, "scratch folder"))
		return done_testing();
	int hfd = listener(&hport), sfd = listener(&silent_port), rfd = listener(&refused);
	close(rfd); /* nothing listens there any more */
	pthread_t th;
	struct server hs = { .fd = hfd };
	pthread_create(&th, NULL, http_server, &hs);
	struct container_list l = { 0 };
	/* The TLS servers, each behind a container of the same name; "flipped"
	 * ones behind a flip_relay. */
	static const struct {
		const char *name, *key;
		enum tls_offer offer;
		bool flipped;
	} tls_rows[] = {
		{ "https", "rsa2048", TLS_ANY, false },
		{ "dhe-only", "rsa2048", TLS_DHE, false },
		{ "rsa-4096", "rsa4096", TLS_ANY, false },
		{ "rsa-4098", "rsa4098", TLS_ANY, false },
		{ "exponent-65539", "e65539", TLS_ANY, false },
		{ "flipped-2048", "rsa2048", TLS_12, true },
		{ "flipped-4098", "rsa4098", TLS_12, true },
	};
	enum { N_TLS = sizeof(tls_rows) / sizeof(tls_rows[0]) };
	pid_t tls_pids[N_TLS];
	struct flip_relay relays[N_TLS];
	bool have_openssl = system("command -v openssl >/dev/null 2>&1") == 0;
	int64_t keys_ms = clock_mono_ms();
	bool keys = have_openssl && make_keys(dir);
	keys_ms = clock_mono_ms() - keys_ms;
	if (have_openssl)
		ok(keys, "the TLS servers' keys, made in %lld ms", (long long)keys_ms);
	for (size_t i = 0; i < N_TLS; i++) {
		int port = 0;
		tls_pids[i] = keys ? tls_server(dir, tls_rows[i].key, &port, tls_rows[i].offer) : -1;
		relays[i] = (struct flip_relay){ .fd = -1, .upstream = port };
		if (tls_rows[i].flipped && tls_pids[i] > 0) {
			relays[i].fd = listener(&port);
			pthread_create(&relays[i].thread, NULL, flip_relay_run, &relays[i]);
		}
		/* A server that could not start leaves its probe refused: the row
		 * fails. */
		snprintf(probe, sizeof(probe), "https://:%d/", port);
		if (have_openssl)
			add(&l, tls_rows[i].name, probe);
	}
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
	/* An hour's interval: only a first probe at once can have run. */
	snprintf(probe, sizeof(probe), "http://:%d/", hport);
	struct container *hourly = add(&l, "hourly", probe);
	free(hourly->probe_labels.interval);
	hourly->probe_labels.interval = strdup("1h");

	struct prober *p = NULL;
	struct errbuf err = { "" };
	if (!ok(prober_start(kick, NULL, NULL, &p, &err) == 0, "prober starts (%s)", err.msg))
		return done_testing();
	/* Every probe has a result within a few timeouts, however loaded. */
	int64_t until = clock_mono_ms() + 20000;
	bool all = false;
	while (!all && clock_mono_ms() < until) {
		usleep(100000);
		all = probes_sync(p, &l, NULL, false) == 0;
		for (size_t i = 0; i < l.n; i++)
			all = all && l.v[i].probe && l.v[i].probe->probed &&
			      l.v[i].probe->state.runs > 0;
	}
	ok(all, "every probe ran");
	/* detail: the operator's words (probe_last_detail), when checked; the
	 * public ones of a failing TLS probe stay "TLS handshake failed". */
	static const struct {
		const char *name;
		bool tls; /* an openssl server */
		enum probe_status st;
		enum probe_result last;
		const char *detail;
	} want[] = {
		{ "http", false, PROBE_HEALTHY, PROBE_PASS, NULL },
		{ "tcp", false, PROBE_HEALTHY, PROBE_PASS, NULL },
		{ "refused", false, PROBE_UNHEALTHY, PROBE_REFUSED, NULL },
		{ "silent", false, PROBE_UNHEALTHY, PROBE_TIMEOUT, NULL },
		{ "tls-to-plain", false, PROBE_UNHEALTHY, PROBE_TLS, NULL },
		{ "hourly", false, PROBE_HEALTHY, PROBE_PASS, NULL },
		{ "https", true, PROBE_HEALTHY, PROBE_PASS, NULL },
		/* Finite-field DH is the server's to size: never offered. */
		{ "dhe-only", true, PROBE_UNHEALTHY, PROBE_TLS, "TLS handshake failed" },
		/* So is the cost of checking the server's RSA signature: 4096
		 * bits and exponent 65537 at most. */
		{ "rsa-4096", true, PROBE_HEALTHY, PROBE_PASS, "passed (HTTP status 200)" },
		{ "rsa-4098", true, PROBE_UNHEALTHY, PROBE_TLS,
		  "TLS handshake failed, server RSA key of 4098 bits, over 4096" },
		{ "exponent-65539", true, PROBE_UNHEALTHY, PROBE_TLS,
		  "TLS handshake failed, server RSA exponent 65539, over 65537" },
		/* The relay breaks the signature: checked, it fails (the relay
		 * works); a key too large fails before it is checked. */
		{ "flipped-2048", true, PROBE_UNHEALTHY, PROBE_TLS, "TLS handshake failed" },
		{ "flipped-4098", true, PROBE_UNHEALTHY, PROBE_TLS,
		  "TLS handshake failed, server RSA key of 4098 bits, over 4096" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct container_probe *cp = find(&l, want[i].name);
		/* Skipped only when its server could not be made (no openssl):
		 * a record missing for any other reason fails. */
		if (want[i].tls && !have_openssl) {
			ok(1, "# SKIP %s: openssl is not installed", want[i].name);
			continue;
		}
		if (!ok(cp != NULL, "%s: has a record", want[i].name))
			continue;
		is_str(probe_result_name(cp->state.last), probe_result_name(want[i].last),
		       "%s: last result", want[i].name);
		is_int(cp->state.status, want[i].st, "%s: status", want[i].name);
		char words[160];
		if (want[i].detail) {
			probe_last_detail(&cp->state, words, sizeof(words));
			is_str(words, want[i].detail, "%s: the operator's words", want[i].name);
		}
		if (want[i].last == PROBE_TLS) {
			probe_state_text(&cp->state, words, sizeof(words));
			is_str(words, "probe unhealthy (TLS handshake failed)",
			       "%s: the public words", want[i].name);
		}
	}
	const struct container_probe *h = find(&l, "http");
	ok(h && h->state.last_status == 200, "http: the status is kept for the operator");
	ok(atomic_load(&kicks) > 0, "a changed record asks for a refresh (%d kicks)",
	   atomic_load(&kicks));
	uint64_t counts[PROBE_N_RESULTS];
	prober_counts(p, counts);
	ok(counts[PROBE_PASS] >= 2 && counts[PROBE_REFUSED] >= 1 && counts[PROBE_TIMEOUT] >= 1,
	   "counted by result");

	/* Restarted (a new StartedAt, same id): its record starts over at
	 * starting, as Docker resets State.Health at each start. The copy is
	 * taken under the lock that installs the new target, so no probe of it
	 * can have run yet. */
	is_int(l.v[0].probe->state.status, PROBE_HEALTHY, "http: healthy before its restart");
	l.v[0].started_at_ns += 5000000000LL;
	probes_sync(p, &l, NULL, false);
	ok(l.v[0].probe->probed && l.v[0].probe->state.status == PROBE_STARTING &&
		   l.v[0].probe->state.runs == 0,
	   "a restarted container starts over at starting (status %d, %llu runs)",
	   l.v[0].probe->state.status, (unsigned long long)l.v[0].probe->state.runs);

	/* A stopped container is no target: its record goes. */
	free(l.v[0].state);
	l.v[0].state = strdup("exited");
	l.v[0].running = false;
	probes_sync(p, &l, NULL, false);
	ok(!l.v[0].probe->probed, "a container that stopped is not probed");

	int64_t t0 = clock_mono_ms();
	prober_stop(p);
	ok(clock_mono_ms() - t0 < 2000, "stops at once, probes in flight closed");
	container_list_free(&l);
	sockets_bounded(silent_port);
	kick_by_class();
	earliest_due_first(silent_port, hport);
	stalled_record(silent_port, hport);
	targets(silent_port);
	stale_in_flight();
	stall_spares_answers();
	deadline_without_events();
	shutdown(hfd, SHUT_RDWR);
	close(hfd);
	pthread_join(th, NULL);
	close(sfd);
	for (size_t i = 0; i < N_TLS; i++) {
		if (relays[i].fd >= 0) {
			shutdown(relays[i].fd, SHUT_RDWR);
			close(relays[i].fd);
			pthread_join(relays[i].thread, NULL);
		}
		if (tls_pids[i] > 0) {
			kill(tls_pids[i], SIGTERM);
			waitpid(tls_pids[i], NULL, 0);
		}
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return done_testing();
}
