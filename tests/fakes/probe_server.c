/* SPDX-License-Identifier: Apache-2.0 */
/* A server for the probe tests (tests/e2e/probes.sh) and the example app's
 * distroless service (tests/e2e/example.sh), built static so that it runs
 * alone in an image with no shell: `probe_server PORT [DIR]` or
 * `probe_server --listen=:PORT` listens on 0.0.0.0:PORT and answers each
 * connection as the first word of DIR/mode says at that moment (default
 * "200"; DIR defaults to /ctl, which a test can fill with `docker cp`):
 *   200, 204, 302, 500  that status, with a body and a header the agent must
 *                       never pass on (SECRET-BODY, X-Secret)
 *   refuse     no listener at all (connections are refused)
 *   slow       accept, read, never answer
 *   header     a 200 status line, then header bytes without end
 *   body       a 200 head announcing 1 GiB, then the body as fast as it goes
 *   trickle    a 200 answer one byte every 200 ms
 *   reset      accept, read, then reset the connection (RST)
 *   exit       exit 3 at once (a container that keeps restarting)
 *   grpc-serving, grpc-notserving
 *              a gRPC server's answer to grpc.health.v1.Health/Check over
 *              HTTP/2 (issue 34): SERVING or NOT_SERVING, then trailers
 * Each connection is served by a child process; nothing is kept. SIGTERM
 * ends it with status 0: as a container's PID 1 it has no default action. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *dir = "/ctl";

static void mode(char *buf, size_t n)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/mode", dir);
	FILE *f = fopen(path, "r");
	snprintf(buf, n, "200");
	if (!f)
		return;
	if (fgets(buf, (int)n, f))
		buf[strcspn(buf, " \r\n")] = '\0';
	fclose(f);
}

static void put(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			_exit(0);
		s += w;
		n -= (size_t)w;
	}
}

static void puts_fd(int fd, const char *s)
{
	put(fd, s, strlen(s));
}

static void serve(int fd, const char *m)
{
	char req[4096];
	if (recv(fd, req, sizeof(req), 0) < 0)
		_exit(0);
	if (!strcmp(m, "slow")) {
		pause();
	} else if (!strcmp(m, "header")) {
		puts_fd(fd, "HTTP/1.1 200 OK\r\nX-Endless: ");
		static char a[4096];
		memset(a, 'a', sizeof(a));
		for (;;)
			put(fd, a, sizeof(a));
	} else if (!strcmp(m, "body")) {
		puts_fd(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n");
		static char b[65536];
		memset(b, 'b', sizeof(b));
		for (long i = 0; i < 16384; i++)
			put(fd, b, sizeof(b));
	} else if (!strcmp(m, "trickle")) {
		const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
		for (; *s; s++) {
			put(fd, s, 1);
			usleep(200000);
		}
	} else if (!strncmp(m, "grpc-", 5)) {
		/* SETTINGS; HEADERS (:status 200, static index 8, and
		 * content-type, static name 31, application/grpc); DATA, one
		 * message with the status; trailers (grpc-status 0) ending the
		 * stream. Frames: 3-byte length, type, flags, stream. */
		static const char answer[] =
			"\0\0\0\x04\0\0\0\0\0"
			"\0\0\x14\x01\x04\0\0\0\x01\x88\x0f\x10\x10" "application/grpc"
			"\0\0\x07\0\0\0\0\0\x01\0\0\0\0\x02\x08S"
			"\0\0\x0f\x01\x05\0\0\0\x01\x40\x0bgrpc-status\x01" "0";
		char a[sizeof(answer) - 1];
		memcpy(a, answer, sizeof(a));
		a[9 + 29 + 9 + 6] = strcmp(m, "grpc-serving") ? 2 : 1; /* the 'S' */
		put(fd, a, sizeof(a));
		/* The client closes once it has read the answer. */
		while (recv(fd, req, sizeof(req), 0) > 0)
			;
	} else if (!strcmp(m, "reset")) {
		struct linger l = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	} else {
		char head[256];
		int st = atoi(m);
		snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nX-Secret: SECRET-HEADER\r\nLocation: http://10.9.9.9/\r\n"
			 "Content-Length: 11\r\nConnection: close\r\n\r\nSECRET-BODY",
			 st >= 100 && st <= 599 ? st : 200);
		puts_fd(fd, head);
	}
	close(fd);
	_exit(0);
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void on_term(int sig)
{
	(void)sig;
	_exit(0);
}

int main(int argc, char **argv)
{
	char m[64];
	int port = 8080, lfd = -1;
	if (argc > 1 && !strncmp(argv[1], "--listen=:", 10))
		port = atoi(argv[1] + 10);
	else if (argc > 1)
		port = atoi(argv[1]);
	if (port <= 0 || port > 65535) {
		fprintf(stderr, "usage: probe_server PORT [DIR] | --listen=:PORT [DIR]\n");
		return 2;
	}
	if (argc > 2)
		dir = argv[2];
	signal(SIGTERM, on_term);
	signal(SIGCHLD, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		mode(m, sizeof(m));
		if (!strcmp(m, "exit"))
			return 3;
		if (!strcmp(m, "refuse") && lfd >= 0) {
			close(lfd);
			lfd = -1;
		} else if (strcmp(m, "refuse") && lfd < 0 && (lfd = listen_on(port)) < 0) {
			perror("listen");
			return 1;
		}
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		if (poll(&p, lfd >= 0, 100) <= 0)
			continue;
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			continue;
		mode(m, sizeof(m));
		pid_t pid = fork();
		if (pid == 0) {
			close(lfd);
			serve(c, m);
		}
		close(c);
	}
}
