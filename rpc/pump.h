/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's byte mover (docs/design/front.md, "Moving, never parsing"):
 * a link's two directions, each the bytes of one socket on their way to
 * the other through a pipe (splice(2)), never copied or read by the agent.
 * A direction goes through three phases, and pump_move() asks one function,
 * pump_next_step(), what to do next until it says stop:
 *
 *   FLOW_OPEN    its socket's end of stream not read yet: bytes are read
 *                into the pipe and written out of it, the pipe emptied
 *                before more is read (but for reading ahead, below);
 *   FLOW_ENDING  the end of stream read: what the pipe holds goes out,
 *                then the end is passed on (shutdown(SHUT_WR) of the
 *                other socket);
 *   FLOW_ENDED   the end passed on (or left to the close, when the other
 *                direction had ended first): nothing more to do.
 *
 * TCP urgent data rides beside the phases: splice stops at the urgent mark,
 * so the urgent byte is read by hand at the mark (SO_OOBINLINE keeps it in
 * the stream) and sent on with MSG_OOB once every byte before it has gone. */
#ifndef HEALTHD_PUMP_H
#define HEALTHD_PUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/pipes.h"

enum flow_phase {
	FLOW_OPEN,
	FLOW_ENDING,
	FLOW_ENDED,
};

enum urgent {
	URGENT_NONE,
	URGENT_SEEN, /* announced (EPOLLPRI); its mark not reached yet */
	URGENT_READ, /* read, waiting for room to be sent on */
};

/* One direction: the bytes of from on their way to to. */
struct flow {
	enum flow_phase phase;
	int pipe[2];    /* held only while in_pipe > 0; else -1 */
	size_t in_pipe; /* bytes in the pipe */
	enum urgent urgent;
	unsigned char urgent_byte;
	bool moved;        /* a byte moved during this event */
	uint64_t read_in;  /* bytes read from the socket during this event */
};

/* What a direction does next. */
enum pump_step {
	PUMP_WRITE,       /* the pipe's bytes out to the other socket */
	PUMP_SEND_URGENT, /* the urgent byte, every byte before it gone */
	PUMP_PASS_END,    /* the end of stream on to the other socket */
	PUMP_READ,        /* the socket's bytes into the pipe */
	PUMP_STOP,        /* nothing more can be done now */
};

void pump_flow_init(struct flow *f);
/* Pure: the next step of f. read_ahead: the socket's end of stream has
 * arrived (EPOLLRDHUP) and the pipe is not full, so bytes are read to the
 * end before any is written (the last are then written with the FIN in one
 * segment). */
enum pump_step pump_next_step(const struct flow *f, bool read_ahead);
/* Bytes that wait to be sent on: in the pipe, or an urgent byte read. */
bool pump_unsent(const struct flow *f);
/* Moves what can move now from fd[d] to fd[!d] (flows[d]): 0, or -errno
 * when the link is broken. fin: fd[d]'s end of stream has arrived. The
 * next edge on either socket brings the caller back (edge-triggered: a
 * read stops only at EAGAIN or the end of stream). */
int pump_move(const int fd[2], struct flow flows[2], int d, bool fin, struct pipe_pool *pool);

#endif
