/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 for the Docker Engine API client: endpoints, then the transport
 * (unix, TCP, TLS with mbedtls), every wait bounded by a deadline and the
 * caller's cancel fd, and the requests and responses on it. The responses
 * are framed by the pure parser of base/http_parse.c. */
#include "runtime/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/mbedcompat.h"

/* ---- Endpoints ---- */

static int bad_host(struct http_endpoint *ep, struct errbuf *err, const char *why)
{
	return errbuf_set(err, EINVAL, "invalid Docker host \"%s\": %s", ep->url, why);
}

static bool host_chars_ok(const char *s, size_t n, bool bracketed)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '-' || c == '_' || (bracketed && (c == ':' || c == '%')))
			continue;
		return false;
	}
	return n > 0;
}

static int parse_tcp(const char *a, struct http_endpoint *ep, struct errbuf *err)
{
	const char *h = a, *hend, *port = NULL;
	bool br = *a == '[';
	if (br) {
		h = a + 1;
		hend = strchr(h, ']');
		if (!hend)
			return bad_host(ep, err, "unclosed '['");
		if (hend[1] == ':')
			port = hend + 2;
		else if (hend[1] != '\0')
			return bad_host(ep, err, "a tcp:// host takes no path");
	} else {
		hend = a + strcspn(a, ":/");
		if (*hend == '/')
			return bad_host(ep, err, "a tcp:// host takes no path");
		if (*hend == ':')
			port = hend + 1;
	}
	size_t hl = (size_t)(hend - h);
	if (hl >= sizeof(ep->host) || !host_chars_ok(h, hl, br))
		return bad_host(ep, err, "missing or malformed host name");
	memcpy(ep->host, h, hl);
	ep->host[hl] = '\0';
	if (!port) {
		/* Docker's defaults for a host without a port. */
		memcpy(ep->port, ep->tls ? "2376" : "2375", 5);
		return 0;
	}
	size_t pl = strlen(port);
	unsigned long v = 0;
	for (size_t i = 0; i < pl; i++) {
		if (port[i] == '/')
			return bad_host(ep, err, "a tcp:// host takes no path");
		if (port[i] < '0' || port[i] > '9' || i >= 5)
			return bad_host(ep, err, "port must be a number from 1 to 65535");
		v = v * 10 + (unsigned long)(port[i] - '0');
	}
	if (pl == 0 || v < 1 || v > 65535)
		return bad_host(ep, err, "port must be a number from 1 to 65535");
	snprintf(ep->port, sizeof(ep->port), "%lu", v);
	return 0;
}

int http_urlencode(struct json_buf *out, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char e[3] = { '%', hex[c >> 4], hex[c & 15] };
		bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     (c >= '0' && c <= '9') || strchr("-._~", c);
		int r = plain ? json_buf_put(out, s, 1) : json_buf_put(out, e, 3);
		if (r < 0)
			return r;
	}
	return 0;
}

int http_endpoint_parse(const char *url, bool tls, const char *cert_path,
			struct http_endpoint *ep, struct errbuf *err)
{
	memset(ep, 0, sizeof(*ep));
	ep->cancel_fd = -1;
	err_clean(ep->url, sizeof(ep->url), url ? url : "", ERR_SHOWN_BYTES);
	ep->tls = tls;
	if (!url)
		return bad_host(ep, err, "no host given");
	if (strncmp(url, "unix://", 7) == 0) {
		const char *path = url + 7;
		size_t n = strlen(path);
		if (path[0] != '/')
			return bad_host(ep, err, "a unix:// socket path must be absolute");
		if (n >= sizeof(ep->path))
			return errbuf_set(err, ENAMETOOLONG,
					  "invalid Docker host \"%s\": socket path longer than %zu bytes",
					  ep->url, sizeof(ep->path) - 1);
		if (tls)
			return bad_host(ep, err, "TLS needs a tcp:// host");
		ep->transport = HTTP_UNIX;
		memcpy(ep->path, path, n + 1);
		return 0;
	}
	if (strncmp(url, "tcp://", 6) != 0)
		return bad_host(ep, err, "the scheme must be unix:// or tcp://");
	ep->transport = HTTP_TCP;
	int r = parse_tcp(url + 6, ep, err);
	if (r < 0 || !tls)
		return r;
	if (!cert_path || !*cert_path)
		return errbuf_set(err, EINVAL, "DOCKER_TLS_VERIFY needs DOCKER_CERT_PATH");
	if (strlen(cert_path) >= sizeof(ep->cert_path) - 16)
		return errbuf_set(err, ENAMETOOLONG, "DOCKER_CERT_PATH is too long");
	memcpy(ep->cert_path, cert_path, strlen(cert_path) + 1);
	return 0;
}

/* ---- Transport ---- */

struct tls {
	mbedtls_ssl_context ssl;
	mbedtls_ssl_config conf;
	mbedtls_x509_crt ca, crt;
	mbedtls_pk_context key;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	bool have_cert;
	bool ip_host;           /* the host is an IP literal: match ip, not names */
	unsigned char ip[16];   /* IPv6, or IPv4-mapped IPv6 */
};

struct http_conn {
	int fd;
	int cancel_fd;
	int io_errno; /* errno behind a failed TLS send/recv */
	char host_header[sizeof(((struct http_endpoint *)0)->host) + 8];
	struct tls *tls;
};

/* Waits for events on fd until deadline. 0 when ready (an error condition
 * counts: the next call reports it), -ETIMEDOUT, -ECANCELED when cancel_fd
 * became readable, or -errno. fd -1 waits for the deadline or a cancel. */
static int wait_fd(int fd, short events, int64_t deadline, int cancel_fd)
{
	for (;;) {
		int left = clock_left_ms(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		struct pollfd pfd[2] = { { .fd = fd, .events = events },
					 { .fd = cancel_fd, .events = POLLIN } };
		int r = poll(pfd, 2, left);
		if (r > 0 && pfd[1].revents)
			return -ECANCELED;
		if (r > 0 && fd < 0)
			continue;
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* A non-blocking connect bounded by deadline; returns the fd or -errno. */
static int connect_addr(int family, const struct sockaddr *sa, socklen_t len, int64_t deadline,
			int cancel_fd)
{
	_cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (connect(fd, sa, len) == 0)
			return TAKE_FD(fd);
		if (errno == EAGAIN && family == AF_UNIX) {
			/* The listener's backlog is full: a unix socket cannot
			 * complete later, so retry until the deadline. */
			int64_t soon = clock_mono_ms() + 10;
			if (wait_fd(-1, 0, soon < deadline ? soon : deadline, cancel_fd) ==
			    -ECANCELED)
				return -ECANCELED;
			if (clock_left_ms(deadline) == 0)
				return -ETIMEDOUT;
			continue;
		}
		if (errno != EINPROGRESS && errno != EINTR)
			return -errno;
		break;
	}
	int r = wait_fd(fd, POLLOUT, deadline, cancel_fd), soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (r < 0)
		return r;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -errno;
	if (soerr)
		return -soerr;
	return TAKE_FD(fd);
}

/* A name lookup runs in a thread of its own: getaddrinfo takes no deadline
 * and cannot be cancelled (glibc's resolver waits out its own timeouts, an
 * NSS module may wait forever), and a refresh must end at its deadline and a
 * stop within a second. The caller waits for the answer, the deadline or a
 * cancel; when it gives up, the thread finishes alone, and whichever of the
 * two lets go last frees the lookup. */
struct lookup {
	atomic_int refs;
	atomic_bool answered;
	int done_fd; /* an eventfd, written once the answer is in */
	char host[sizeof(((struct http_endpoint *)0)->host)];
	char port[sizeof(((struct http_endpoint *)0)->port)];
	int gai, gai_errno;
	struct addrinfo *res;
};

/* Lookups given up on and still running. A resolver that never answers
 * would otherwise leave one more thread behind at every refresh. */
#define LOOKUPS_MAX 4
static atomic_int lookups_running;

static void lookup_unref(struct lookup *l)
{
	if (atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	close(l->done_fd);
	if (l->res)
		freeaddrinfo(l->res);
	free(l);
}

static void *lookup_run(void *arg)
{
	struct lookup *l = arg;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG };
	uint64_t one = 1;
	l->gai = getaddrinfo(l->host, l->port, &hints, &l->res);
	l->gai_errno = errno;
	atomic_store(&l->answered, true);
	if (write(l->done_fd, &one, sizeof(one)) < 0) {
		/* Cannot fail for a fresh eventfd; the waiter then times out. */
	}
	atomic_fetch_sub(&lookups_running, 1);
	lookup_unref(l);
	return NULL;
}

/* Starts the lookup thread with every signal blocked: signals belong to the
 * thread that sigwait()s for them. */
static int lookup_start(struct lookup *l)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&t, &attr, lookup_run, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -r;
}

/* getaddrinfo of a name, bounded by deadline and ep->cancel_fd: 0 with *res,
 * a positive EAI_* code, or -ETIMEDOUT, -ECANCELED, -EAGAIN (too many
 * lookups still running), -errno. */
static int lookup(const struct http_endpoint *ep, int64_t deadline, struct addrinfo **res,
		  int *gai_errno)
{
	if (atomic_fetch_add(&lookups_running, 1) >= LOOKUPS_MAX) {
		atomic_fetch_sub(&lookups_running, 1);
		return -EAGAIN;
	}
	struct lookup *l = calloc(1, sizeof(*l));
	int r = l ? 0 : -ENOMEM;
	if (l && (l->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		r = -errno;
	if (r < 0) {
		free(l);
		atomic_fetch_sub(&lookups_running, 1);
		return r;
	}
	memcpy(l->host, ep->host, sizeof(l->host));
	memcpy(l->port, ep->port, sizeof(l->port));
	atomic_init(&l->refs, 2);
	if ((r = lookup_start(l)) < 0) {
		atomic_fetch_sub(&lookups_running, 1);
		close(l->done_fd);
		free(l);
		return r;
	}
	r = wait_fd(l->done_fd, POLLIN, deadline, ep->cancel_fd);
	if (r == 0 && atomic_load(&l->answered)) {
		r = l->gai;
		*gai_errno = l->gai_errno;
		*res = TAKE_PTR(l->res);
	} else if (r == 0) {
		r = -EIO;
	}
	lookup_unref(l);
	return r;
}

static int connect_tcp(const struct http_endpoint *ep, int64_t deadline, struct errbuf *err)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int gai_errno = 0;
	/* A literal address never blocks; a name is looked up aside. */
	int g = getaddrinfo(ep->host, ep->port, &hints, &res);
	if (g == EAI_NONAME)
		g = lookup(ep, deadline, &res, &gai_errno);
	if (g == -EAGAIN)
		return errbuf_set(err, EHOSTUNREACH, "cannot connect to %s: name lookup: "
				  "%d earlier lookups still unanswered", ep->url, LOOKUPS_MAX);
	if (g < 0)
		return errbuf_set(err, -g, "cannot connect to %s: %s", ep->url,
				  g == -ETIMEDOUT ? "timed out" : g == -ECANCELED ? "cancelled" : strerror(-g));
	if (g != 0)
		return errbuf_set(err, EHOSTUNREACH, "cannot connect to %s: %s", ep->url,
				  g == EAI_SYSTEM ? strerror(gai_errno) : gai_strerror(g));
	int fd = -EHOSTUNREACH;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		fd = connect_addr(a->ai_family, a->ai_addr, a->ai_addrlen, deadline,
				  ep->cancel_fd);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return errbuf_set(err, -fd, "cannot connect to %s: %s", ep->url,
				  fd == -ETIMEDOUT ? "timed out" : fd == -ECANCELED ? "cancelled" : strerror(-fd));
	return fd;
}

static int connect_unix(const struct http_endpoint *ep, int64_t deadline, struct errbuf *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, ep->path, sizeof(sa.sun_path));
	int fd = connect_addr(AF_UNIX, (struct sockaddr *)&sa, sizeof(sa), deadline,
				  ep->cancel_fd);
	if (fd < 0)
		return errbuf_set(err, -fd, "cannot connect to %s: %s", ep->url,
				  fd == -ETIMEDOUT ? "timed out" : fd == -ECANCELED ? "cancelled" : strerror(-fd));
	return fd;
}

/* ---- TLS (DOCKER_TLS_VERIFY), as the docker CLI does it: the daemon's
 * certificate must chain to ca.pem and name the host; cert.pem and key.pem,
 * when present, authenticate us. ---- */

static int tls_error(struct errbuf *err, int e, const char *what, int mbed)
{
	char buf[160];
	mbedtls_strerror(mbed, buf, sizeof(buf));
	return errbuf_set(err, e, "%s: %s", what, buf);
}

static void tls_free(struct tls *t)
{
	if (!t)
		return;
	mbedtls_ssl_free(&t->ssl);
	mbedtls_ssl_config_free(&t->conf);
	mbedtls_x509_crt_free(&t->ca);
	mbedtls_x509_crt_free(&t->crt);
	mbedtls_pk_free(&t->key);
	mbedtls_ctr_drbg_free(&t->drbg);
	mbedtls_entropy_free(&t->entropy);
	free(t);
}

/* Loads one PEM file of dir into crt or key. -ENOENT when it is absent. */
static int tls_load_file(const char *dir, const char *name, mbedtls_x509_crt *crt,
			 mbedtls_pk_context *key, mbedtls_ctr_drbg_context *drbg,
			 struct errbuf *err)
{
	char path[4200], shown[ERR_SHOWN_BYTES + 1];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	err_clean(shown, sizeof(shown), path, ERR_SHOWN_BYTES);
	if (access(path, R_OK) < 0) {
		int e = errno;
		return errbuf_set(err, e, "cannot read %s: %s", shown, strerror(e));
	}
	int r = crt ? mbedtls_x509_crt_parse_file(crt, path) :
		      mbedcompat_pk_parse_keyfile(key, path, mbedtls_ctr_drbg_random, drbg);
	if (r > 0)
		return errbuf_set(err, EINVAL, "%s: %d certificates could not be parsed", shown, r);
	if (r < 0)
		return tls_error(err, EINVAL, shown, r);
	return 0;
}

static int tls_load(const struct http_endpoint *ep, struct tls **out, struct errbuf *err)
{
	struct tls *t = calloc(1, sizeof(*t));
	if (!t)
		return errbuf_set(err, ENOMEM, "out of memory");
	mbedtls_ssl_init(&t->ssl);
	mbedtls_ssl_config_init(&t->conf);
	mbedtls_x509_crt_init(&t->ca);
	mbedtls_x509_crt_init(&t->crt);
	mbedtls_pk_init(&t->key);
	mbedtls_ctr_drbg_init(&t->drbg);
	mbedtls_entropy_init(&t->entropy);
	/* Seeded before the key is parsed: mbedtls 3 wants an RNG for it. */
	int r = mbedcompat_init();
	if (r == 0)
		r = mbedtls_ctr_drbg_seed(&t->drbg, mbedtls_entropy_func, &t->entropy,
					  (const unsigned char *)"dstack-healthd", 14);
	if (r != 0) {
		r = tls_error(err, EIO, "TLS set-up", r);
		tls_free(t);
		return r;
	}
	r = tls_load_file(ep->cert_path, "ca.pem", &t->ca, NULL, NULL, err);
	if (r == 0) {
		/* Like the docker CLI: no client certificate is fine; half of
		 * one is not. */
		r = tls_load_file(ep->cert_path, "cert.pem", &t->crt, NULL, NULL, err);
		t->have_cert = r == 0;
		if (r == -ENOENT)
			r = 0;
		else if (r == 0)
			r = tls_load_file(ep->cert_path, "key.pem", NULL, &t->key, &t->drbg, err);
	}
	if (r < 0) {
		tls_free(t);
		return r;
	}
	*out = t;
	return 0;
}

int http_tls_check(const struct http_endpoint *ep, struct errbuf *err)
{
	struct tls *t = NULL;
	if (!ep->tls)
		return 0;
	int r = tls_load(ep, &t, err);
	tls_free(t);
	return r;
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
	struct http_conn *c = ctx;
	ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	c->io_errno = errno;
	return MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
	struct http_conn *c = ctx;
	ssize_t n = recv(c->fd, buf, len, 0);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_READ;
	c->io_errno = errno;
	return MBEDTLS_ERR_NET_RECV_FAILED;
}

/* Waits as mbedtls asked (r is WANT_READ or WANT_WRITE); 1 when r was
 * neither, so the caller handles it. */
static int tls_wait(struct http_conn *c, int r, int64_t deadline)
{
	if (r == MBEDTLS_ERR_SSL_WANT_READ)
		return wait_fd(c->fd, POLLIN, deadline, c->cancel_fd);
	if (r == MBEDTLS_ERR_SSL_WANT_WRITE)
		return wait_fd(c->fd, POLLOUT, deadline, c->cancel_fd);
	return 1;
}

/* Turns an mbedtls failure into an errno and a message. */
static int tls_fail(struct http_conn *c, int r, const char *what, struct errbuf *err)
{
	if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
		char info[256];
		int n = mbedtls_x509_crt_verify_info(info, sizeof(info), "",
						     mbedtls_ssl_get_verify_result(&c->tls->ssl));
		while (n > 0 && info[n - 1] == '\n')
			info[--n] = '\0';
		for (char *p = info; *p; p++)
			if (*p == '\n')
				*p = ';';
		return errbuf_set(err, EPERM, "%s: server certificate not trusted: %s", what,
				  n > 0 ? info : "verification failed");
	}
	if ((r == MBEDTLS_ERR_NET_SEND_FAILED || r == MBEDTLS_ERR_NET_RECV_FAILED) && c->io_errno)
		return errbuf_set(err, c->io_errno, "%s: %s", what, strerror(c->io_errno));
	return tls_error(err, EPROTO, what, r);
}

/* An IP literal as 16 bytes, an IPv4 address mapped into IPv6, so that the
 * two spellings of one IPv4 address compare equal (as Go's net.IP.Equal). */
static bool ip16(const unsigned char *b, size_t n, unsigned char out[16])
{
	static const unsigned char v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	if (n == 16) {
		memcpy(out, b, 16);
		return true;
	}
	if (n != 4)
		return false;
	memcpy(out, v4mapped, 12);
	memcpy(out + 12, b, 4);
	return true;
}

static bool host_ip(const char *host, unsigned char out[16])
{
	unsigned char b[16];
	if (inet_pton(AF_INET, host, b) == 1)
		return ip16(b, 4, out);
	return inet_pton(AF_INET6, host, b) == 1 && ip16(b, 16, out);
}

/* mbedtls 2.28 matches a host only against dNSName SANs (or the CN), so a
 * daemon addressed by IP, whose certificate carries that IP as an iPAddress
 * SAN as dockerd's TLS guides make it, would be refused. For an IP host the
 * docker CLI (Go's crypto/x509) wants an iPAddress SAN equal to it and never
 * looks at DNS names or the CN; so do we. Called for each certificate of the
 * chain; depth 0 is the daemon's own. */
static int verify_ip_san(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
	const struct tls *t = ctx;
	if (depth != 0)
		return 0;
	*flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
	for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s; s = s->next) {
		unsigned char ip[16];
		if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
		    ip16(s->buf.p, s->buf.len, ip) && memcmp(ip, t->ip, 16) == 0) {
			*flags &= ~(uint32_t)MBEDTLS_X509_BADCERT_CN_MISMATCH;
			break;
		}
	}
	return 0;
}

static int tls_handshake(struct http_conn *c, const struct http_endpoint *ep,
			 int64_t deadline, struct errbuf *err)
{
	struct tls *t = c->tls;
	int r = mbedtls_ssl_config_defaults(&t->conf, MBEDTLS_SSL_IS_CLIENT,
						MBEDTLS_SSL_TRANSPORT_STREAM,
						MBEDTLS_SSL_PRESET_DEFAULT);
	if (r != 0)
		return tls_error(err, EIO, "TLS set-up", r);
	mbedtls_ssl_conf_authmode(&t->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_ca_chain(&t->conf, &t->ca, NULL);
	mbedtls_ssl_conf_rng(&t->conf, mbedtls_ctr_drbg_random, &t->drbg);
	mbedcompat_conf_min_tls12(&t->conf);
	if (t->have_cert)
		r = mbedtls_ssl_conf_own_cert(&t->conf, &t->crt, &t->key);
	/* No name (so no SNI, which takes no IP literal: RFC 6066 §3) for an
	 * IP host: verify_ip_san does the matching. mbedtls 3.6.3 and later
	 * refuse a handshake whose name was never set, even to NULL. */
	t->ip_host = host_ip(ep->host, t->ip);
	if (t->ip_host)
		mbedtls_ssl_conf_verify(&t->conf, verify_ip_san, t);
	if (r == 0)
		r = mbedtls_ssl_setup(&t->ssl, &t->conf);
	if (r == 0)
		r = mbedtls_ssl_set_hostname(&t->ssl, t->ip_host ? NULL : ep->host);
	if (r != 0)
		return tls_error(err, EIO, "TLS set-up", r);
	mbedtls_ssl_set_bio(&t->ssl, c, bio_send, bio_recv, NULL);
	while ((r = mbedtls_ssl_handshake(&t->ssl)) != 0) {
		int w = tls_wait(c, r, deadline);
		if (w == -ETIMEDOUT)
			return errbuf_set(err, ETIMEDOUT, "TLS handshake: timed out");
		if (w < 0)
			return errbuf_set(err, -w, "TLS handshake: %s", strerror(-w));
		if (w == 1)
			return tls_fail(c, r, "TLS handshake", err);
	}
	return 0;
}

/* ---- Connections ---- */

void http_close(struct http_conn *c)
{
	if (!c)
		return;
	tls_free(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

int http_connect(const struct http_endpoint *ep, int64_t deadline, struct http_conn **out,
		 struct errbuf *err)
{
	struct http_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return errbuf_set(err, ENOMEM, "out of memory");
	c->fd = -1;
	c->cancel_fd = ep->cancel_fd;
	if (ep->transport == HTTP_UNIX)
		/* What Docker's own client sends for a socket (RFC 6761 name). */
		snprintf(c->host_header, sizeof(c->host_header), "api.moby.localhost");
	else
		snprintf(c->host_header, sizeof(c->host_header),
			 strchr(ep->host, ':') ? "[%s]:%s" : "%s:%s", ep->host, ep->port);
	int r = ep->tls ? tls_load(ep, &c->tls, err) : 0;
	if (r == 0) {
		c->fd = ep->transport == HTTP_UNIX ? connect_unix(ep, deadline, err) :
						     connect_tcp(ep, deadline, err);
		r = c->fd < 0 ? c->fd : 0;
	}
	if (r == 0 && c->tls) {
		r = tls_handshake(c, ep, deadline, err);
		if (r < 0)
			errbuf_prefix(err, "cannot connect to %s", ep->url);
	}
	if (r < 0) {
		http_close(c);
		return r;
	}
	*out = c;
	return 0;
}

static int conn_write(struct http_conn *c, const char *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n;
		int w;
		if (c->tls) {
			n = mbedtls_ssl_write(&c->tls->ssl, (const unsigned char *)buf, len);
			w = n >= 0 ? 0 : tls_wait(c, (int)n, deadline);
			if (w == 1)
				return c->io_errno ? -c->io_errno : -EPIPE;
		} else {
			n = send(c->fd, buf, len, MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -errno;
			w = n >= 0 ? 0 : wait_fd(c->fd, POLLOUT, deadline, c->cancel_fd);
		}
		if (w < 0)
			return w;
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

/* Reads some bytes: > 0, 0 at the end of the stream, or -errno. */
static ssize_t conn_read(struct http_conn *c, char *buf, size_t len, int64_t deadline,
			 struct errbuf *err)
{
	for (;;) {
		ssize_t n;
		int w;
		if (c->tls) {
			n = mbedtls_ssl_read(&c->tls->ssl, (unsigned char *)buf, len);
			if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF)
				return 0;
			if (n >= 0)
				return n;
			w = tls_wait(c, (int)n, deadline);
			if (w == 1)
				return tls_fail(c, (int)n, "reading the response", err);
		} else {
			n = recv(c->fd, buf, len, 0);
			if (n >= 0)
				return n;
			if (errno != EAGAIN && errno != EINTR)
				return errbuf_set(err, errno, "reading the response: %s",
						  strerror(errno));
			w = wait_fd(c->fd, POLLIN, deadline, c->cancel_fd);
		}
		if (w == -ETIMEDOUT)
			return errbuf_set(err, ETIMEDOUT, "timed out");
		if (w < 0)
			return errbuf_set(err, -w, "reading the response: %s", strerror(-w));
	}
}

static int send_request(struct http_conn *c, const char *method, const char *target,
			int64_t deadline, struct errbuf *err)
{
	for (const char *t = target; *t; t++)
		if (*t <= ' ' || *t >= 0x7f)
			return errbuf_set(err, EINVAL, "request target is not escaped");
	char req[4096];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: dstack-healthd/%s\r\n"
			 "Accept: application/json\r\nConnection: close\r\n%s\r\n",
			 method, target, c->host_header, HEALTHD_VERSION,
			 strcmp(method, "GET") ? "Content-Length: 0\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req))
		return errbuf_set(err, E2BIG, "request target too long");
	int r = conn_write(c, req, (size_t)n, deadline);
	if (r == -ETIMEDOUT)
		return errbuf_set(err, ETIMEDOUT, "timed out");
	if (r < 0)
		return errbuf_set(err, -r, "sending the request: %s", strerror(-r));
	return 0;
}

int http_get(struct http_conn *c, const char *target, int64_t deadline, size_t max_body,
	     struct http_response *out, struct errbuf *err)
{
	return http_request(c, "GET", target, deadline, max_body, out, err);
}

int http_request(struct http_conn *c, const char *method, const char *target, int64_t deadline,
		 size_t max_body, struct http_response *out, struct errbuf *err)
{
	int r = send_request(c, method, target, deadline, err);
	if (r < 0)
		return r;
	struct http_parser p;
	http_parser_init(&p, max_body);
	char buf[16384];
	do {
		ssize_t n = conn_read(c, buf, sizeof(buf), deadline, err);
		size_t used;
		if (n < 0)
			r = (int)n;
		else if (n == 0)
			r = http_parser_eof(&p, err);
		else
			r = http_parser_feed(&p, buf, (size_t)n, &used, err);
	} while (r == 0);
	if (r == 1)
		http_parser_take(&p, out);
	http_parser_free(&p);
	return r < 0 ? r : 0;
}

/* ---- Streams ---- */

struct http_stream {
	struct http_conn *c;
	struct http_parser p;
	char buf[16384];
	size_t off, len; /* bytes read and not yet fed */
	bool done;
};

void http_stream_free(struct http_stream *s)
{
	if (!s)
		return;
	http_parser_free(&s->p);
	free(s);
}

/* Feeds what is buffered, else reads more: 1 with a piece, 0 when the
 * parser wants more and nothing is buffered, 2 at the end, or -errno. */
static int stream_step(struct http_stream *s, int64_t deadline, const char **piece,
		       size_t *n, struct errbuf *err)
{
	if (s->off < s->len) {
		size_t used;
		int r = http_parser_feed_piece(&s->p, s->buf + s->off, s->len - s->off, &used,
					       piece, n, err);
		s->off += used;
		if (r < 0)
			return r;
		s->done = r == 1;
		return *n > 0 ? 1 : s->done ? 2 : 0;
	}
	ssize_t got = conn_read(s->c, s->buf, sizeof(s->buf), deadline, err);
	if (got < 0)
		return (int)got;
	if (got > 0) {
		s->off = 0;
		s->len = (size_t)got;
		return 0;
	}
	int r = http_parser_eof(&s->p, err);
	if (r < 0)
		return r;
	s->done = true;
	return 2;
}

int http_stream_read(struct http_stream *s, int64_t deadline, const char **piece, size_t *len,
		     struct errbuf *err)
{
	*piece = NULL;
	*len = 0;
	for (;;) {
		if (s->done)
			return 0;
		int r = stream_step(s, deadline, piece, len, err);
		if (r != 0)
			return r == 2 ? 0 : r;
	}
}

/* The rest of a response that is not streamed, collected as http_get does. */
static int stream_collect(struct http_stream *s, int64_t deadline, size_t max_body,
			  struct http_response *out, struct errbuf *err)
{
	size_t used;
	int r = 0;
	s->p.stream = false;
	s->p.max_body = max_body;
	if (s->off < s->len)
		r = http_parser_feed(&s->p, s->buf + s->off, s->len - s->off, &used, err);
	while (r == 0) {
		ssize_t n = conn_read(s->c, s->buf, sizeof(s->buf), deadline, err);
		if (n < 0)
			r = (int)n;
		else if (n == 0)
			r = http_parser_eof(&s->p, err);
		else
			r = http_parser_feed(&s->p, s->buf, (size_t)n, &used, err);
	}
	if (r == 1)
		http_parser_take(&s->p, out);
	return r < 0 ? r : 0;
}

int http_stream_open(struct http_conn *c, const char *target, int64_t deadline,
		     size_t max_error_body, struct http_stream **out,
		     struct http_response *head, struct errbuf *err)
{
	*out = NULL;
	int r = send_request(c, "GET", target, deadline, err);
	if (r < 0)
		return r;
	struct http_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return errbuf_set(err, ENOMEM, "out of memory");
	s->c = c;
	http_parser_init_stream(&s->p);
	while (!http_parser_head_done(&s->p)) {
		const char *piece;
		size_t n;
		r = stream_step(s, deadline, &piece, &n, err);
		if (r < 0)
			break;
		if (r == 2) {
			r = errbuf_set(err, EPROTO, "response ended before its headers");
			break;
		}
	}
	if (r >= 0 && s->p.resp.status / 100 != 2) {
		r = stream_collect(s, deadline, max_error_body, head, err);
	} else if (r >= 0) {
		http_parser_take(&s->p, head);
		*out = TAKE_PTR(s);
		return 0;
	}
	http_stream_free(s);
	return r;
}
