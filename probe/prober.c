/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's own probes (issue 27): one thread, one epoll set, every
 * socket non-blocking with a deadline. Answers are judged by
 * probe/probe.c (over base/http_parse.c's parser) and probe/grpc.c; TLS is
 * mbedtls with no certificate check (Kubernetes' rule for HTTPS probes). */
#include "probe/prober.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/rsa.h>
#include <mbedtls/ssl.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mbedcompat.h"
#include "probe/grpc.h"

#define WAKE_SLOT UINT32_MAX
/* Bytes read per call: the head bound (16 KiB) and the body bound (10 KiB)
 * are the parser's and the answer's. */
#define READ_CHUNK 4096

struct target {
	char id[65];
	int64_t started_ms; /* CLOCK_REALTIME */
	struct probe_spec spec;
	struct sockaddr_in addr;
	uint64_t gen; /* names it to the connection probing it */
	struct probe_state st;
	char text[160]; /* the public words last told: a change kicks */
	bool told_healthy; /* the class last told: a change kicks soon */
	uint32_t logged; /* a hash of the operator's words last logged */
	int64_t due;    /* CLOCK_MONOTONIC ms */
	bool in_flight;
};

enum phase { P_CONNECT, P_TLS, P_SEND, P_READ };

/* A probe in flight: the prober thread's alone. */
struct conn {
	bool used;
	uint64_t gen;
	int fd;
	enum phase phase;
	enum probe_kind kind;
	int64_t start_real, deadline;
	char req[GRPC_MAX_REQUEST];
	size_t req_len, req_off;
	struct probe_answer ans;
	/* A gRPC probe's reader, its own while in flight (about 9 KiB):
	 * the other probes need none. */
	struct grpc_answer *grpc;
	/* A TLS write of the replies the server is owed that must be tried
	 * again with the same length (mbedtls_ssl_write's rule); 0: none. */
	size_t owed_try;
	mbedtls_ssl_context *ssl;
	bool key_judged; /* the server's key was looked at (handshake) */
	struct probe_key_refusal key; /* why it was refused; zero if it was not */
	int io_errno;
	uint32_t events; /* watched for (watch) */
	bool late; /* its deadline passed with bytes ready: had its one more step */
};

struct prober {
	pthread_t thread;
	pthread_mutex_t lock; /* targets, counts, stop: held for a copy */
	struct target *t;
	size_t n;
	uint64_t next_gen;
	uint64_t counts[PROBE_N_RESULTS];
	bool stop;
	void (*kick)(void *);
	void (*kick_soon)(void *);
	void *kick_arg;
	int epfd, wake_fd;
	struct conn c[PROBER_MAX_SOCKETS];
	struct target *ready[PROBER_MAX_TARGETS]; /* start_due's, the thread's alone */
	/* TLS, set up at the first HTTPS or gRPC-over-TLS probe: one config
	 * for each (gRPC's offers ALPN h2). */
	bool tls_ready, tls_failed;
	mbedtls_ssl_config conf, conf_h2;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
};

/* ---- Targets (the refresh thread's side) ---- */

static bool same_target(const struct target *a, const struct target *b)
{
	return strcmp(a->id, b->id) == 0 && a->started_ms == b->started_ms &&
	       memcmp(&a->spec, &b->spec, sizeof(a->spec)) == 0 &&
	       a->addr.sin_addr.s_addr == b->addr.sin_addr.s_addr &&
	       a->addr.sin_port == b->addr.sin_port;
}

static void wake(struct prober *p)
{
	uint64_t one = 1;
	if (write(p->wake_fd, &one, sizeof(one)) < 0) {
		/* An eventfd this far from overflow does not fail; without the
		 * wake the new targets wait for the next deadline. */
	}
}

static void stalled(struct probe_state *s)
{
	s->status = PROBE_UNHEALTHY;
	s->last = PROBE_STALLED;
	s->last_status = 0;
}

int prober_sync(struct prober *p, const struct prober_target *want, size_t n,
		struct probe_state *records)
{
	if (n > PROBER_MAX_TARGETS)
		return -E2BIG;
	struct target *w = calloc(n ? n : 1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		if (strlen(want[k].id) >= sizeof(w[k].id) ||
		    inet_pton(AF_INET, want[k].ip, &w[k].addr.sin_addr) != 1) {
			free(w);
			return -EINVAL;
		}
		memcpy(w[k].id, want[k].id, strlen(want[k].id) + 1);
		w[k].started_ms = want[k].started_ms;
		w[k].spec = want[k].spec;
		w[k].addr.sin_family = AF_INET;
		w[k].addr.sin_port = htons((uint16_t)want[k].spec.port);
	}
	int64_t now = clock_mono_ms(), real = clock_real_ms();
	pthread_mutex_lock(&p->lock);
	for (size_t k = 0; k < n; k++) {
		bool found = false;
		for (size_t o = 0; o < p->n && !found; o++) {
			if (!same_target(&w[k], &p->t[o]))
				continue;
			w[k] = p->t[o];
			found = true;
		}
		if (!found) {
			w[k].gen = ++p->next_gen;
			probe_state_init(&w[k].st, real);
			probe_state_text(&w[k].st, w[k].text, sizeof(w[k].text));
			/* At once, not an interval later as Docker does. */
			w[k].due = now;
		}
		/* The record as it is now, for the judge; one the prober has
		 * not renewed within interval + timeout + slack is no longer
		 * the app's word (a starved or wedged prober), and says so. */
		records[k] = w[k].st;
		if (w[k].st.runs > 0 && !w[k].in_flight &&
		    now > w[k].due + w[k].spec.timeout_ms + PROBER_STALL_SLACK_MS)
			stalled(&records[k]);
		else if (w[k].st.runs > 0 && w[k].in_flight &&
			 now > w[k].due + 2 * w[k].spec.timeout_ms + PROBER_STALL_SLACK_MS)
			stalled(&records[k]);
	}
	free(p->t);
	p->t = w;
	p->n = n;
	pthread_mutex_unlock(&p->lock);
	wake(p);
	return 0;
}

void prober_counts(struct prober *p, uint64_t out[PROBE_N_RESULTS])
{
	memset(out, 0, sizeof(uint64_t) * PROBE_N_RESULTS);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	memcpy(out, p->counts, sizeof(p->counts));
	pthread_mutex_unlock(&p->lock);
}

/* ---- TLS ---- */

static int client_conf(struct prober *p, mbedtls_ssl_config *conf)
{
	int r = mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_CLIENT,
					    MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
	if (r != 0)
		return r;
	/* Kubernetes' HTTPS probes skip verification: the container's
	 * certificate names a public host, not the address probed. (Its gRPC
	 * probes speak no TLS at all; grpcs:// is the agent's own, and
	 * follows the HTTPS rule.) */
	mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_NONE);
	mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &p->drbg);
	mbedcompat_conf_min_tls12(conf);
	/* A handshake step runs to its end on this thread, so its cost must
	 * not be the server's choice: no finite-field Diffie-Hellman, whose
	 * prime a hostile server sizes to stall every other probe. */
	mbedcompat_conf_ecdhe_only(conf);
	return 0;
}

static int tls_setup(struct prober *p)
{
	/* HTTP/2 over TLS is chosen by ALPN (RFC 9113 §3.2). */
	static const char *h2[] = { "h2", NULL };
	if (p->tls_ready)
		return 0;
	if (p->tls_failed)
		return -EIO;
	mbedtls_ssl_config_init(&p->conf);
	mbedtls_ssl_config_init(&p->conf_h2);
	mbedtls_entropy_init(&p->entropy);
	mbedtls_ctr_drbg_init(&p->drbg);
	int r = mbedcompat_init();
	if (r == 0)
		r = mbedtls_ctr_drbg_seed(&p->drbg, mbedtls_entropy_func, &p->entropy,
					  (const unsigned char *)"dstack-healthd probe", 20);
	if (r == 0)
		r = client_conf(p, &p->conf);
	if (r == 0)
		r = client_conf(p, &p->conf_h2);
	if (r == 0)
		r = mbedtls_ssl_conf_alpn_protocols(&p->conf_h2, h2);
	if (r != 0) {
		mbedtls_ssl_config_free(&p->conf);
		mbedtls_ssl_config_free(&p->conf_h2);
		mbedtls_ctr_drbg_free(&p->drbg);
		mbedtls_entropy_free(&p->entropy);
		p->tls_failed = true;
		return -EIO;
	}
	p->tls_ready = true;
	return 0;
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
	struct conn *c = ctx;
	ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	c->io_errno = errno;
	return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
	struct conn *c = ctx;
	ssize_t n = recv(c->fd, buf, len, 0);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_READ;
	c->io_errno = errno;
	return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

/* ---- Connections (the prober thread's side) ---- */

static void conn_close(struct prober *p, struct conn *c)
{
	if (c->ssl) {
		mbedtls_ssl_free(c->ssl);
		free(c->ssl);
	}
	if (c->fd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	probe_answer_free(&c->ans);
	free(c->grpc);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* FNV-1a: enough to tell the words last logged from new ones. */
static uint32_t words_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Records c's result in its target, if the target is still wanted, and
 * closes c. A gRPC probe's outcome also says, for the operator, what
 * decided it. */
static void finish(struct prober *p, struct conn *c, enum probe_result r, int status)
{
	bool kick = false, soon = false;
	int64_t now = clock_mono_ms(), real = clock_real_ms();
	uint64_t gen = c->gen;
	int64_t start = c->start_real;
	struct probe_key_refusal key = c->key;
	char detail[PROBE_DETAIL_MAX] = "", told[64 + 96 + PROBE_DETAIL_MAX] = "", id[13] = "";
	/* Where a gRPC answer stopped, for one that timed out. */
	if (c->grpc && (c->grpc->state == GRPC_DONE || r == PROBE_TIMEOUT))
		grpc_answer_detail(c->grpc, detail, sizeof(detail));
	conn_close(p, c);
	pthread_mutex_lock(&p->lock);
	if (r > PROBE_NONE && r < PROBE_N_RESULTS)
		p->counts[r]++;
	for (size_t k = 0; k < p->n; k++) {
		struct target *t = &p->t[k];
		if (t->gen != gen)
			continue;
		char text[sizeof(t->text)];
		probe_state_apply(&t->st, &t->spec, r, status, start, t->started_ms, real);
		t->st.last_key = key;
		memcpy(t->st.last_detail, detail, sizeof(detail));
		probe_state_text(&t->st, text, sizeof(text));
		/* A change in the public words (status, or the reason of a
		 * failing probe) is what a refresh would publish: ask for one,
		 * as Docker's health_status event does. Only a change of class
		 * (healthy or not) is worth skipping min_refresh_spacing: a
		 * reason that moves (500, 503, refused, timed out) waits for
		 * it like any event (issue 34). */
		bool healthy = t->st.status == PROBE_HEALTHY;
		kick = strcmp(text, t->text) != 0;
		soon = healthy != t->told_healthy;
		/* The journal has each change of the last result, in the
		 * operator's words (the server's grpc-message among them),
		 * once. */
		probe_last_detail(&t->st, told, sizeof(told));
		if (words_hash(told) != t->logged) {
			t->logged = words_hash(told);
			snprintf(id, sizeof(id), "%.12s", t->id);
		} else {
			told[0] = '\0';
		}
		memcpy(t->text, text, sizeof(text));
		t->told_healthy = healthy;
		t->in_flight = false;
		/* Docker: the interval runs from the end of one probe. */
		t->due = now + t->spec.interval_ms;
		break;
	}
	/* Called under the lock, so that prober_set_kick, once it returns,
	 * leaves no call to the old one under way (the callee only sets a
	 * flag). */
	void (*k)(void *) = soon && p->kick_soon ? p->kick_soon : p->kick;
	if (kick && k)
		k(p->kick_arg);
	pthread_mutex_unlock(&p->lock);
	if (told[0])
		log_msg(LOG_INFO, "probe of container %s: last probe %s", id, told);
}

void prober_set_kick(struct prober *p, void (*kick)(void *), void (*kick_soon)(void *),
		     void *arg)
{
	pthread_mutex_lock(&p->lock);
	p->kick = kick;
	p->kick_soon = kick_soon;
	p->kick_arg = arg;
	pthread_mutex_unlock(&p->lock);
}

static enum probe_result errno_result(int e)
{
	switch (e) {
	case ECONNREFUSED:
		return PROBE_REFUSED;
	case ECONNRESET:
	case EPIPE:
		return PROBE_RESET;
	case ETIMEDOUT:
		return PROBE_TIMEOUT;
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
		return PROBE_UNREACHABLE;
	default:
		return PROBE_ERROR;
	}
}

/* The events c's socket is watched for; a call that changes nothing
 * costs no system call (a gRPC probe asks at every read). */
static void watch(struct prober *p, struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u32 = (uint32_t)(c - p->c) };
	if (c->events == events)
		return;
	c->events = events;
	epoll_ctl(p->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static bool is_grpc(const struct conn *c)
{
	return c->kind == PROBE_GRPC || c->kind == PROBE_GRPCS;
}

static void begin(struct prober *p, const struct target *t)
{
	struct conn *c = NULL;
	for (size_t i = 0; i < PROBER_MAX_SOCKETS && !c; i++)
		if (!p->c[i].used)
			c = &p->c[i];
	if (!c)
		return;
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->gen = t->gen;
	c->kind = t->spec.kind;
	c->start_real = clock_real_ms();
	c->deadline = clock_mono_ms() + t->spec.timeout_ms;
	probe_answer_init(&c->ans);
	char host[INET_ADDRSTRLEN], authority[INET_ADDRSTRLEN + 8];
	inet_ntop(AF_INET, &t->addr.sin_addr, host, sizeof(host));
	snprintf(authority, sizeof(authority), "%s:%u", host, t->spec.port);
	int r = 0;
	if (is_grpc(c)) {
		c->grpc = malloc(sizeof(*c->grpc));
		r = c->grpc ? 0 : -ENOMEM;
		if (c->grpc)
			grpc_answer_init(c->grpc);
		if (r == 0)
			r = grpc_request(authority, t->spec.path, c->kind == PROBE_GRPCS,
					 t->spec.timeout_ms, c->req, sizeof(c->req), &c->req_len);
	} else {
		/* Host names the address probed (as Kubernetes' does); no
		 * header of the app's is ever read back beyond the status
		 * line. */
		int n = snprintf(c->req, sizeof(c->req),
				 "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: dstack-healthd-probe/%s\r\n"
				 "Accept: */*\r\nConnection: close\r\n\r\n",
				 t->spec.path, authority, HEALTHD_VERSION);
		c->req_len = n > 0 && (size_t)n < sizeof(c->req) ? (size_t)n : 0;
	}
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || r < 0) {
		finish(p, c, PROBE_ERROR, 0);
		return;
	}
	struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = (uint32_t)(c - p->c) };
	c->events = ev.events;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
		finish(p, c, PROBE_ERROR, 0);
		return;
	}
	c->phase = P_CONNECT;
	if (connect(c->fd, (const struct sockaddr *)&t->addr, sizeof(t->addr)) < 0 &&
	    errno != EINPROGRESS)
		finish(p, c, errno_result(errno), 0);
}

static void start_tls(struct prober *p, struct conn *c)
{
	c->ssl = calloc(1, sizeof(*c->ssl));
	if (!c->ssl || tls_setup(p) < 0) {
		finish(p, c, PROBE_ERROR, 0);
		return;
	}
	mbedtls_ssl_init(c->ssl);
	/* No name: SNI takes no IP literal (RFC 6066 §3); NULL set explicitly
	 * for mbedtls 3.6.3 and later. */
	if (mbedtls_ssl_setup(c->ssl, c->kind == PROBE_GRPCS ? &p->conf_h2 : &p->conf) != 0 ||
	    mbedtls_ssl_set_hostname(c->ssl, NULL) != 0) {
		finish(p, c, PROBE_ERROR, 0);
		return;
	}
	mbedtls_ssl_set_bio(c->ssl, c, bio_send, bio_recv, NULL);
	c->phase = P_TLS;
}

/* Whether checking a signature made with the server's key costs what the
 * probe thread can give (docs/design/probes.md): an RSA key over
 * PROBE_RSA_MAX_BITS, or whose public exponent is over
 * PROBE_RSA_MAX_EXPONENT, is refused, with why in *why. An elliptic-curve
 * key costs what the library's own curves cost. */
static bool key_affordable(const mbedtls_pk_context *pk, struct probe_key_refusal *why)
{
	if (mbedtls_pk_get_type(pk) != MBEDTLS_PK_RSA)
		return true;
	mbedtls_mpi n, e;
	mbedtls_mpi_init(&n);
	mbedtls_mpi_init(&e);
	bool affordable = false;
	if (mbedtls_rsa_export(mbedtls_pk_rsa(*pk), &n, NULL, NULL, NULL, &e) != 0) {
		/* A key mbedtls parsed but cannot give back: refused, with no why. */
	} else if (mbedtls_mpi_bitlen(&n) > PROBE_RSA_MAX_BITS) {
		why->bound = PROBE_KEY_BITS;
		why->bits = (unsigned)mbedtls_mpi_bitlen(&n);
	} else if (mbedtls_mpi_cmp_int(&e, PROBE_RSA_MAX_EXPONENT) > 0) {
		unsigned char be[8];
		why->bound = PROBE_KEY_EXPONENT;
		why->bits = (unsigned)mbedtls_mpi_bitlen(&e);
		if (why->bits <= 64 && mbedtls_mpi_write_binary(&e, be, sizeof(be)) == 0)
			for (size_t i = 0; i < sizeof(be); i++)
				why->exponent = why->exponent << 8 | be[i];
	} else {
		affordable = true;
	}
	mbedtls_mpi_free(&n);
	mbedtls_mpi_free(&e);
	return affordable;
}

/* handshake()'s result for a refused key: above every mbedtls error, which
 * are negative. */
#define KEY_REFUSED 1

/* Runs the handshake as far as it can go now, one step at a time, so that
 * the server's key is judged as soon as its Certificate is parsed and
 * before any signature made with it is checked (ServerKeyExchange in TLS
 * 1.2, CertificateVerify in 1.3). With VERIFY_NONE mbedtls calls no verify
 * callback, and mbedtls_ssl_handshake would run on into the signature.
 * 0 once it is over, KEY_REFUSED (c->key says why), or an mbedtls error. */
static int handshake(struct conn *c)
{
	while (!mbedcompat_handshake_over(c->ssl)) {
		int r = mbedtls_ssl_handshake_step(c->ssl);
		if (r != 0)
			return r;
		const mbedtls_x509_crt *chain = mbedcompat_handshake_peer_cert(c->ssl);
		if (!c->key_judged && chain) {
			c->key_judged = true;
			if (!key_affordable(&chain->pk, &c->key))
				return KEY_REFUSED;
		}
	}
	return 0;
}

/* Waits as mbedtls asked; false when r is a failure. */
static bool tls_again(struct prober *p, struct conn *c, int r)
{
	if (r == MBEDTLS_ERR_SSL_WANT_READ)
		watch(p, c, EPOLLIN);
	else if (r == MBEDTLS_ERR_SSL_WANT_WRITE)
		watch(p, c, EPOLLOUT);
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
	/* mbedtls 3.6's TLS 1.3 reports a ticket it was sent: read on. */
	else if (r == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
		watch(p, c, EPOLLIN);
#endif
	else
		return false;
	return true;
}

/* A read or a write that failed: the peer's doing or ours. */
static enum probe_result io_result(const struct conn *c, bool eof_ok)
{
	if (c->io_errno)
		return errno_result(c->io_errno);
	return eof_ok ? PROBE_CUT : PROBE_ERROR;
}

/* Writes the replies the server is owed (SETTINGS and PING ACKs) as far
 * as the socket takes them, and watches for it to take the rest: a server
 * may hold its answer until its PING is acknowledged (RFC 9113 §6.7). A
 * TLS write that must wait is tried again with the same length, as
 * mbedtls_ssl_write asks. */
static void send_owed(struct prober *p, struct conn *c)
{
	size_t len;
	const uint8_t *b = grpc_answer_owed(c->grpc, &len);
	bool want_read = false;
	while (len > 0) {
		ssize_t n;
		if (c->ssl) {
			size_t try = c->owed_try ? c->owed_try : len;
			int r = mbedtls_ssl_write(c->ssl, b, try);
			c->owed_try = r == MBEDTLS_ERR_SSL_WANT_WRITE || r == MBEDTLS_ERR_SSL_WANT_READ ?
					      try : 0;
			want_read = r == MBEDTLS_ERR_SSL_WANT_READ;
			n = r;
		} else {
			n = send(c->fd, b, len, MSG_NOSIGNAL);
		}
		/* A failed write is left to the read that follows, which sees
		 * the reset or the end. */
		if (n <= 0)
			break;
		grpc_answer_sent(c->grpc, (size_t)n);
		b = grpc_answer_owed(c->grpc, &len);
	}
	/* What is left waits for the socket to take it (not for a TLS write
	 * that waits for a read: the socket's room would wake the loop for
	 * nothing). */
	watch(p, c, len > 0 && !want_read ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

/* Reads what is there and feeds the answer; returns true while the probe
 * goes on. */
static bool read_some(struct prober *p, struct conn *c)
{
	char buf[READ_CHUNK];
	/* Level-triggered: what is left is read at the next turn. mbedtls may
	 * hold decrypted bytes the socket no longer signals, so a TLS probe
	 * reads on while some are pending, up to 64 reads a turn; past that
	 * (a peer that always has bytes) it is left to its timeout. */
	for (int rounds = 0; rounds < 8 || (c->ssl && rounds < 64 &&
					    mbedtls_ssl_check_pending(c->ssl)); rounds++) {
		ssize_t n;
		if (c->ssl) {
			int r = mbedtls_ssl_read(c->ssl, (unsigned char *)buf, sizeof(buf));
			if (r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || r == MBEDTLS_ERR_SSL_CONN_EOF ||
			    r == 0) {
				n = 0;
			} else if (r < 0) {
				if (tls_again(p, c, r))
					return true;
				finish(p, c, io_result(c, true), 0);
				return false;
			} else {
				n = r;
			}
		} else {
			n = recv(c->fd, buf, sizeof(buf), 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return true;
			if (n < 0) {
				finish(p, c, errno_result(errno), 0);
				return false;
			}
		}
		enum probe_result res;
		int status;
		if (is_grpc(c)) {
			if (n == 0)
				grpc_answer_eof(c->grpc);
			if (n == 0 || grpc_answer_feed(c->grpc, buf, (size_t)n) == GRPC_DECIDED) {
				finish(p, c, c->grpc->outcome.result, c->grpc->outcome.code);
				return false;
			}
			send_owed(p, c);
			continue;
		}
		if (n == 0) {
			probe_answer_eof(&c->ans, &res, &status);
			finish(p, c, res, status);
			return false;
		}
		if (probe_answer_feed(&c->ans, buf, (size_t)n, &res, &status)) {
			finish(p, c, res, status);
			return false;
		}
	}
	return true;
}

/* Reads, and keeps the socket watched for the replies still owed, which
 * a TLS read waiting for more would have dropped. */
static void read_answer(struct prober *p, struct conn *c)
{
	size_t owed = 0;
	if (!read_some(p, c) || !is_grpc(c))
		return;
	grpc_answer_owed(c->grpc, &owed);
	if (owed > 0)
		watch(p, c, EPOLLIN | EPOLLOUT);
}

static void send_some(struct prober *p, struct conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t n;
		if (c->ssl) {
			int r = mbedtls_ssl_write(c->ssl, (const unsigned char *)c->req + c->req_off,
						  c->req_len - c->req_off);
			if (r < 0) {
				if (!tls_again(p, c, r))
					finish(p, c, io_result(c, false), 0);
				return;
			}
			n = r;
		} else {
			n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				watch(p, c, EPOLLOUT);
				return;
			}
			if (n < 0) {
				finish(p, c, errno_result(errno), 0);
				return;
			}
		}
		c->req_off += (size_t)n;
	}
	c->phase = P_READ;
	watch(p, c, EPOLLIN);
	read_answer(p, c);
}

/* One readiness event of c: moves it on as far as it can go now. */
static void step(struct prober *p, struct conn *c)
{
	if (c->phase == P_CONNECT) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr) {
			finish(p, c, errno_result(soerr), 0);
			return;
		}
		/* A TCP probe passes once the connect completes. */
		if (c->kind == PROBE_TCP) {
			finish(p, c, PROBE_PASS, 0);
			return;
		}
		if (c->kind == PROBE_HTTPS || c->kind == PROBE_GRPCS) {
			start_tls(p, c);
			if (!c->used)
				return;
		} else {
			c->phase = P_SEND;
		}
	}
	if (c->phase == P_TLS) {
		int r = handshake(c);
		if (r == KEY_REFUSED) {
			finish(p, c, PROBE_TLS, 0);
			return;
		}
		if (r != 0) {
			if (!tls_again(p, c, r))
				finish(p, c, c->io_errno ? errno_result(c->io_errno) : PROBE_TLS, 0);
			return;
		}
		/* A server that did not choose h2 does not speak it here. */
		const char *alpn = mbedtls_ssl_get_alpn_protocol(c->ssl);
		if (c->kind == PROBE_GRPCS && (!alpn || strcmp(alpn, "h2") != 0)) {
			finish(p, c, PROBE_TLS, 0);
			return;
		}
		c->phase = P_SEND;
	}
	if (c->phase == P_SEND) {
		send_some(p, c);
		return;
	}
	/* Reading, and for gRPC writing what the server is owed whenever
	 * the socket takes it. */
	if (is_grpc(c))
		send_owed(p, c);
	read_answer(p, c);
}

/* ---- The loop ---- */

static bool stopping(struct prober *p)
{
	pthread_mutex_lock(&p->lock);
	bool s = p->stop;
	pthread_mutex_unlock(&p->lock);
	return s;
}

static int by_due(const void *a, const void *b)
{
	int64_t x = (*(const struct target *const *)a)->due, y = (*(const struct target *const *)b)->due;
	return x < y ? -1 : x > y;
}

/* Starts the probes that are due, as far as sockets allow, the longest
 * overdue first (in list order, a target behind 64 that are always due
 * would never be probed); returns when the next one not yet due is due
 * (INT64_MAX for none). Due ones left without a socket need no wake of
 * their own: a socket frees only when a probe ends, on this thread, which
 * then comes here again. */
static int64_t start_due(struct prober *p, int64_t now)
{
	struct target **ready = p->ready, due[PROBER_MAX_SOCKETS];
	size_t free_slots = 0, n = 0, nready = 0;
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < PROBER_MAX_SOCKETS; i++)
		free_slots += !p->c[i].used;
	pthread_mutex_lock(&p->lock);
	for (size_t k = 0; k < p->n; k++) {
		struct target *t = &p->t[k];
		if (t->in_flight)
			continue;
		if (t->due <= now)
			ready[nready++] = t;
		else if (t->due < next)
			next = t->due;
	}
	if (nready > free_slots)
		qsort(ready, nready, sizeof(ready[0]), by_due);
	for (size_t k = 0; k < nready && n < free_slots; k++) {
		ready[k]->in_flight = true;
		due[n++] = *ready[k];
	}
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < n; i++)
		begin(p, &due[i]);
	return next;
}

static int64_t nearest_deadline(const struct prober *p)
{
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < PROBER_MAX_SOCKETS; i++)
		if (p->c[i].used && p->c[i].deadline < next)
			next = p->c[i].deadline;
	return next;
}

/* Closes the probes whose timeout passed, as timed out, but only those with
 * nothing ready: the thread may have been busy past a deadline (a handshake
 * step runs to its end), and an answer that came meanwhile came in time,
 * so what is ready now is read first. That is one more step for each late
 * probe, never two, so that a peer that always has bytes ready (an endless
 * header trickled) still times out. */
static void expire(struct prober *p, struct epoll_event *ev)
{
	int64_t now = clock_mono_ms();
	if (nearest_deadline(p) > now)
		return;
	bool spared[PROBER_MAX_SOCKETS] = { false };
	int n = epoll_wait(p->epfd, ev, PROBER_MAX_SOCKETS + 1, 0);
	for (int i = 0; i < n; i++) {
		uint32_t k = ev[i].data.u32;
		if (k == WAKE_SLOT || !p->c[k].used || p->c[k].deadline > now || p->c[k].late)
			continue;
		p->c[k].late = spared[k] = true;
		step(p, &p->c[k]);
	}
	for (size_t i = 0; i < PROBER_MAX_SOCKETS; i++)
		if (p->c[i].used && p->c[i].deadline <= now && !spared[i])
			finish(p, &p->c[i], PROBE_TIMEOUT, 0);
}

static void *loop(void *arg)
{
	struct prober *p = arg;
	struct epoll_event ev[PROBER_MAX_SOCKETS + 1];
	while (!stopping(p)) {
		/* Probes begun now have deadlines too: the wait ends at the
		 * first of all of them, even when no event comes (a peer that
		 * drops the SYN). */
		int64_t next = start_due(p, clock_mono_ms()), deadline = nearest_deadline(p);
		if (deadline < next)
			next = deadline;
		int64_t wait = next == INT64_MAX ? 60000 : next - clock_mono_ms();
		if (wait < 0)
			wait = 0;
		int n = epoll_wait(p->epfd, ev, PROBER_MAX_SOCKETS + 1, (int)(wait > 60000 ? 60000 : wait));
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u32 == WAKE_SLOT) {
				uint64_t v;
				if (read(p->wake_fd, &v, sizeof(v)) < 0) {
					/* EAGAIN: another wake read it. */
				}
				continue;
			}
			struct conn *c = &p->c[ev[i].data.u32];
			if (c->used)
				step(p, c);
		}
		/* After the events, not before: a deadline passes only for a
		 * probe that had nothing ready. */
		expire(p, ev);
	}
	for (size_t i = 0; i < PROBER_MAX_SOCKETS; i++)
		if (p->c[i].used)
			conn_close(p, &p->c[i]);
	return NULL;
}

int prober_start(void (*kick)(void *), void (*kick_soon)(void *), void *arg,
		 struct prober **out, struct errbuf *err)
{
	struct prober *p = calloc(1, sizeof(*p));
	if (!p)
		return errbuf_set(err, ENOMEM, "out of memory");
	p->kick = kick;
	p->kick_soon = kick_soon;
	p->kick_arg = arg;
	for (size_t i = 0; i < PROBER_MAX_SOCKETS; i++)
		p->c[i].fd = -1;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int r = p->epfd < 0 || p->wake_fd < 0 ? errno : 0;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = WAKE_SLOT };
	if (!r && epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wake_fd, &ev) < 0)
		r = errno;
	pthread_mutex_init(&p->lock, NULL);
	if (!r)
		r = pthread_create(&p->thread, NULL, loop, p);
	if (r) {
		if (p->epfd >= 0)
			close(p->epfd);
		if (p->wake_fd >= 0)
			close(p->wake_fd);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return errbuf_set(err, r, "cannot start the probe thread: %s", strerror(r));
	}
	*out = p;
	return 0;
}

void prober_stop(struct prober *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	wake(p);
	pthread_join(p->thread, NULL);
	close(p->epfd);
	close(p->wake_fd);
	pthread_mutex_destroy(&p->lock);
	if (p->tls_ready) {
		mbedtls_ssl_config_free(&p->conf);
		mbedtls_ssl_config_free(&p->conf_h2);
		mbedtls_ctr_drbg_free(&p->drbg);
		mbedtls_entropy_free(&p->entropy);
	}
	free(p->t);
	free(p);
}
