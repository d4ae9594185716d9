/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/refuse.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Request bytes read (and dropped) before the answer. */
#define REFUSE_DRAIN (64 * 1024)

static const struct {
	unsigned code;
	const char *reason, *body;
} answers[] = {
	[REFUSE_UNREACHABLE] = { 502, "Bad Gateway",
				 "bad gateway: the guest agent cannot be reached" },
	[REFUSE_FULL] = { 503, "Service Unavailable",
			  "service unavailable: too many relayed connections" },
	/* nginx's statuses for the same cases (a request line, or a head,
	 * past its buffers), so that clients see what they would see there. */
	[REFUSE_LINE_TOO_LONG] = { 414, "URI Too Long", "uri too long: the request line is too long" },
	[REFUSE_HEAD_TOO_LARGE] = { 400, "Bad Request",
				    "bad request: the request head is too large" },
};

/* A HEAD request is answered without the body (RFC 9110 §9.3.2); its
 * Content-Length still says what a GET would have got. */
static bool is_head(const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && (p[i] == '\r' || p[i] == '\n'))
		i++;
	return n - i >= 5 && !memcmp(p + i, "HEAD ", 5);
}

void refuse(int fd, enum refusal why)
{
	char buf[4096];
	size_t drained = 0;
	bool head = false;
	ssize_t n;
	while (drained < REFUSE_DRAIN && (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		if (!drained)
			head = is_head(buf, (size_t)n);
		drained += (size_t)n;
	}
	const char *body = answers[why].body;
	int len = snprintf(buf, sizeof(buf),
			   "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s%s",
			   answers[why].code, answers[why].reason, strlen(body) + 1,
			   head ? "" : body, head ? "" : "\n");
	if (len > 0 && (size_t)len < sizeof(buf) &&
	    send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
		shutdown(fd, SHUT_WR);
	close(fd);
}
