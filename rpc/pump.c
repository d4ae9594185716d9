/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/pump.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* Asked of one splice from a socket: a default pipe's whole size. */
#define SPLICE_CHUNK (64 * 1024)

void pump_flow_init(struct flow *f)
{
	*f = (struct flow){ .phase = FLOW_OPEN, .pipe = { -1, -1 }, .urgent = URGENT_NONE };
}

bool pump_unsent(const struct flow *f)
{
	return f->in_pipe || f->urgent == URGENT_READ;
}

enum pump_step pump_next_step(const struct flow *f, bool read_ahead)
{
	if (f->phase == FLOW_ENDED)
		return PUMP_STOP;
	/* The pipe is emptied before more is read, unless the end is there
	 * to be read first; once it has been, what is left goes out. */
	if (f->in_pipe && (!read_ahead || f->phase == FLOW_ENDING))
		return PUMP_WRITE;
	if (!f->in_pipe && f->urgent == URGENT_READ)
		return PUMP_SEND_URGENT;
	if (f->phase == FLOW_ENDING)
		return PUMP_PASS_END;
	return PUMP_READ;
}

/* splice found nothing to read: when that is because the socket's next
 * byte is urgent (splice stops at the mark), it is read now, to be sent on
 * as urgent. Whether it found one. */
static bool at_urgent_mark(int fd, struct flow *f)
{
	int at = 0;
	if (f->urgent != URGENT_SEEN || ioctl(fd, SIOCATMARK, &at) < 0 || !at)
		return false;
	if (recv(fd, &f->urgent_byte, 1, MSG_DONTWAIT) != 1)
		return false;
	f->urgent = URGENT_READ;
	f->moved = true;
	f->read_in++;
	return true;
}

/* EAGAIN or EINTR: the other side is not ready, 0; else -errno. */
static int not_ready_or_error(void)
{
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

/* A read with the end in sight (the only read that leaves bytes in the
 * pipe) has met a reset: the bytes read ahead are written to the other
 * side, which sends at once what its window takes; the reset that follows
 * discards the rest. */
static void write_before_reset(int to, struct flow *f)
{
	ssize_t n;
	while (f->in_pipe &&
	       (n = splice(f->pipe[0], NULL, to, NULL, f->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)) > 0)
		f->in_pipe -= (size_t)n;
}

/* fin: read ahead to the end before writing, and the last bytes written
 * with SPLICE_F_MORE, for the shutdown that follows, which sends them and
 * the FIN in one segment instead of two (an HTTP answer and its close: one
 * wakeup fewer for the client). A read that finds the pipe full (EAGAIN,
 * where the end's arrival says bytes or the end are there) ends the read
 * ahead until the next write. */
int pump_move(const int fd[2], struct flow flows[2], int d, bool fin, struct pipe_pool *pool)
{
	struct flow *f = &flows[d];
	int from = fd[d], to = fd[!d], e = 0;
	bool read_ahead = fin;
	for (;;) {
		ssize_t n;
		switch (pump_next_step(f, read_ahead)) {
		case PUMP_WRITE:
			n = splice(f->pipe[0], NULL, to, NULL, f->in_pipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK |
					   (f->phase == FLOW_ENDING ? SPLICE_F_MORE : 0));
			if (n < 0) {
				e = not_ready_or_error();
				goto out;
			}
			f->in_pipe -= (size_t)n;
			f->moved = true;
			read_ahead = fin;
			break;
		case PUMP_SEND_URGENT:
			if (send(to, &f->urgent_byte, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				e = not_ready_or_error();
				goto out;
			}
			f->urgent = URGENT_NONE;
			f->moved = true;
			break;
		case PUMP_PASS_END:
			/* A half-close is passed on: the other side may still
			 * answer (a request body ended by the client's FIN).
			 * When the other way has ended too, the link closes
			 * now and the close ends the stream. */
			if (flows[!d].phase != FLOW_ENDED && shutdown(to, SHUT_WR) < 0 && errno != ENOTCONN)
				e = -errno;
			f->phase = FLOW_ENDED;
			break;
		case PUMP_READ:
			if (f->pipe[0] < 0 && (e = pipes_take(pool, f->pipe)) < 0)
				goto out;
			n = splice(from, NULL, f->pipe[1], NULL, SPLICE_CHUNK,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				f->in_pipe += (size_t)n;
				f->read_in += (uint64_t)n;
				f->moved = true;
			} else if (n == 0) {
				f->phase = FLOW_ENDING;
			} else if (errno == EAGAIN && !f->in_pipe && at_urgent_mark(from, f)) {
				/* the urgent byte read: it goes next */
			} else if (errno == EAGAIN && f->in_pipe) {
				read_ahead = false; /* the pipe is full */
			} else if (errno != EAGAIN && errno != EINTR && f->in_pipe) {
				e = -errno;
				write_before_reset(to, f);
				goto out;
			} else {
				e = not_ready_or_error();
				goto out;
			}
			break;
		case PUMP_STOP:
			goto out;
		}
	}
out:
	if (!f->in_pipe)
		pipes_give(pool, f->pipe, true);
	return e;
}
