/* SPDX-License-Identifier: Apache-2.0 */
/* A small HTTP/1.1 client for the Docker Engine API: one GET per connection
 * (Connection: close) over a unix socket, TCP or TLS, every step bounded by a
 * CLOCK_MONOTONIC deadline; responses are read with the parser of
 * base/http_parse.h. */
#ifndef HEALTHD_HTTP_H
#define HEALTHD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "base/err.h"
#include "base/http_parse.h"

/* Where the daemon listens, parsed from "unix:///path" or "tcp://host:port"
 * (host may be [v6]; a missing port is Docker's default, 2375 or 2376 with
 * TLS). */
enum http_transport { HTTP_UNIX, HTTP_TCP };
struct http_endpoint {
	enum http_transport transport;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char host[256]; /* without brackets */
	char port[6];
	bool tls;
	char cert_path[4096];
	char url[ERR_SHOWN_BYTES + 1]; /* as given, cleaned and cut, for error messages */
	/* Readable when the caller gives up (the agent is stopping): every
	 * wait ends with -ECANCELED. -1 for none; http_endpoint_parse sets -1. */
	int cancel_fd;
};

/* Appends s percent-encoded for a query string (all but RFC 3986's
 * unreserved characters). -ENOMEM. */
struct json_buf;
int http_urlencode(struct json_buf *out, const char *s);

int http_endpoint_parse(const char *url, bool tls, const char *cert_path,
			struct http_endpoint *ep, struct errbuf *err);

/* Loads ca.pem, cert.pem and key.pem from ep->cert_path, to check them before
 * start-up. 0 without TLS. */
int http_tls_check(const struct http_endpoint *ep, struct errbuf *err);

struct http_conn;

/* Connects (and does the TLS handshake) before deadline. Errors read
 * "cannot connect to URL: reason"; -ETIMEDOUT when the deadline passed. */
int http_connect(const struct http_endpoint *ep, int64_t deadline, struct http_conn **out,
		 struct errbuf *err);
/* Sends "GET target" and reads the whole response, at most max_body bytes of
 * body, before deadline. -ETIMEDOUT when the deadline passed. */
int http_get(struct http_conn *c, const char *target, int64_t deadline, size_t max_body,
	     struct http_response *out, struct errbuf *err);
/* The same with another method (an empty body): "POST" for the agent's own
 * control socket. */
int http_request(struct http_conn *c, const char *method, const char *target, int64_t deadline,
		 size_t max_body, struct http_response *out, struct errbuf *err);
void http_close(struct http_conn *c);

/* A response read piece by piece as it arrives, on a connection of the
 * caller's, which must outlive it. */
struct http_stream;

/* Sends "GET target" and reads the response's head before deadline; head gets
 * the status and headers. A 2xx response's body is then read with
 * http_stream_read through *out. Any other response is read whole before
 * deadline (at most max_error_body bytes of body, into head->body) and *out is
 * NULL. */
int http_stream_open(struct http_conn *c, const char *target, int64_t deadline,
		     size_t max_error_body, struct http_stream **out,
		     struct http_response *head, struct errbuf *err);
/* The next run of body bytes, waiting for it until deadline: 1 with *piece
 * and *len set (valid until the next call), 0 when the response ended (the
 * peer finished it or closed the connection where that ends it), -ETIMEDOUT
 * when nothing came before deadline (the stream stays usable), -ECANCELED,
 * or another negative errno (the stream is broken). */
int http_stream_read(struct http_stream *s, int64_t deadline, const char **piece, size_t *len,
		     struct errbuf *err);
/* NULL is fine. Does not close the connection. */
void http_stream_free(struct http_stream *s);

#endif
