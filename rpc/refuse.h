/* SPDX-License-Identifier: Apache-2.0 */
/* The few answers the front of the agent port gives on its own, in place
 * of the guest agent's (docs/design/front.md): a status, a line of plain
 * text in the agent's words (docs/image-builder.md, "In a dstack guest image"),
 * Connection: close, and no body to a HEAD request. */
#ifndef HEALTHD_REFUSE_H
#define HEALTHD_REFUSE_H

enum refusal {
	REFUSE_UNREACHABLE,    /* 502: the guest agent cannot be reached */
	REFUSE_FULL,           /* 503: no relay slot can be had now */
	REFUSE_LINE_TOO_LONG,  /* 414: the request line is longer than the bound */
	REFUSE_HEAD_TOO_LARGE, /* 400: the request head is larger than the bound */
};

/* Answers the client on fd and closes fd. The request is read first, as
 * much of it as has arrived (at most 64 KiB), so that the close does not
 * reset the connection before the answer is read; the connection is the
 * front's alone (nothing of it was relayed), so reading it is no parsing
 * of relayed bytes. */
void refuse(int fd, enum refusal why);

#endif
