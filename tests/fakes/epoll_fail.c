// SPDX-License-Identifier: Apache-2.0
/* An LD_PRELOAD shim for tests/e2e/front_faults.sh: while the file named by
 * HEALTHD_EPOLL_FAIL exists, libmicrohttpd's epoll_ctl(EPOLL_CTL_ADD) for a
 * new connection fails with ENOSPC, as it does when root's
 * fs.epoll.max_user_watches is used up. libmicrohttpd's is told from the
 * agent's own by its event mask (EPOLLIN|EPOLLPRI|EPOLLOUT|EPOLLET, which
 * no epoll set of the agent uses). Each failure adds a line to the file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	static int (*real)(int, int, int, struct epoll_event *);
	const char *flag = getenv("HEALTHD_EPOLL_FAIL");
	if (!real)
		real = (int (*)(int, int, int, struct epoll_event *))dlsym(RTLD_NEXT, "epoll_ctl");
	if (flag && op == EPOLL_CTL_ADD && ev &&
	    ev->events == (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLET) && access(flag, F_OK) == 0) {
		int f = open(flag, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (f >= 0) {
			if (write(f, "failed\n", 7) != 7) {
				/* the count is a diagnostic only */
			}
			close(f);
		}
		errno = ENOSPC;
		return -1;
	}
	return real(epfd, op, fd, ev);
}
