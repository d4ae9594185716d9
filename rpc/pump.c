/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "rpc/link.h"

/* Asked of one splice from a socket: a default pipe's whole size. */
#define SPLICE_CHUNK (64 * 1024)

/* splice found nothing to read: when that is because fd[d]'s next byte is
 * urgent (splice stops at the mark), it is read now and held to be sent on
 * as urgent. Whether it found one. */
static bool at_urgent_mark(struct link *l, int d)
{
	int at = 0;
	if (l->urgent[d] != URGENT_SEEN || ioctl(l->fd[d], SIOCATMARK, &at) < 0 || !at)
		return false;
	if (recv(l->fd[d], &l->urgent_byte[d], 1, MSG_DONTWAIT) != 1)
		return false;
	l->urgent[d] = URGENT_READ;
	l->moved[d] = true;
	return true;
}

/* Moves what can move now from fd[d] to fd[!d]: 0, or -errno when the
 * link is broken. The pipe is emptied before more is read, so EAGAIN from
 * either splice means that side is not ready; the next edge on either
 * socket brings us back (edge-triggered: a read stops only at EAGAIN or the
 * end of stream).
 * fin: fd[d]'s end of stream has already arrived (EPOLLRDHUP), so a read
 * from it returns bytes or the end, never EAGAIN for want of them. Then the
 * pipe is filled first and its EAGAIN means full: the rest of the stream is
 * read before it is written, and the last bytes are held (SPLICE_F_MORE)
 * for the shutdown that follows, which sends them and the FIN in one
 * segment instead of two (an HTTP answer and its close: one wakeup fewer
 * for the client). */
int pump(struct relay *r, struct link *l, int d, bool fin)
{
	int e = 0;
	bool full = false;
	for (;;) {
		ssize_t n;
		if (l->in_pipe[d] && (!fin || full || l->eof[d])) {
			n = splice(l->pipe[d][0], NULL, l->fd[!d], NULL, l->in_pipe[d],
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (l->eof[d] ? SPLICE_F_MORE : 0));
			if (n < 0) {
				e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
				break;
			}
			l->in_pipe[d] -= (size_t)n;
			l->moved[d] = true;
			full = false;
			continue;
		}
		if (!l->in_pipe[d] && l->urgent[d] == URGENT_READ) {
			/* Every byte before it has gone: the urgent byte now. */
			if (send(l->fd[!d], &l->urgent_byte[d], 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
				break;
			}
			l->urgent[d] = URGENT_NONE;
			l->moved[d] = true;
			continue;
		}
		if (l->eof[d]) {
			/* A half-close is passed on: the other side may still
			 * answer (a request body ended by the client's FIN).
			 * When the other way has ended too, the link closes
			 * now and the close ends the stream. */
			if (!l->shut[d] && !l->shut[!d] && shutdown(l->fd[!d], SHUT_WR) < 0 &&
			    errno != ENOTCONN)
				e = -errno;
			l->shut[d] = true;
			break;
		}
		if (l->pipe[d][0] < 0 && (e = pipes_take(r, l->pipe[d])) < 0)
			break;
		n = splice(l->fd[d], NULL, l->pipe[d][1], NULL, SPLICE_CHUNK,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n == 0) {
			l->eof[d] = true;
		} else if (n < 0 && errno == EAGAIN && !l->in_pipe[d] && at_urgent_mark(l, d)) {
			continue;
		} else if (n < 0 && errno == EAGAIN && fin && l->in_pipe[d]) {
			full = true;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR && l->in_pipe[d]) {
			/* A reset after bytes read ahead (only a read with the
			 * end in sight holds bytes): they are written to the
			 * other side, which sends at once what its window takes;
			 * the reset that follows discards the rest. */
			e = -errno;
			while (l->in_pipe[d] && (n = splice(l->pipe[d][0], NULL, l->fd[!d], NULL, l->in_pipe[d],
							 SPLICE_F_MOVE | SPLICE_F_NONBLOCK)) > 0)
				l->in_pipe[d] -= (size_t)n;
			break;
		} else if (n < 0) {
			e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
			break;
		} else {
			l->in_pipe[d] += (size_t)n;
			l->moved[d] = true;
		}
	}
	if (!l->in_pipe[d])
		pipes_give(r, l->pipe[d], true);
	return e;
}
