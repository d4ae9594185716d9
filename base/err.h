/* SPDX-License-Identifier: Apache-2.0 */
/* Error convention for all of dstack-healthd.
 *
 * - A function that can fail returns 0 (or a non-negative count) on success and
 *   a negative errno on failure.
 * - It either logs the failure or returns it, never both: the caller that decides
 *   what to do about an error is the one that logs it, once.
 * - Human-readable detail travels in a caller-supplied struct errbuf, never in a
 *   static buffer a second thread could overwrite. A function that returns an
 *   error and takes an errbuf fills it; the text names the file, field or peer.
 * - Text that came from outside (file bytes, runtime answers, request bytes) is
 *   never copied into an errbuf at length: name the rule that failed instead.
 * - The message is for the journal and the local operator: it may quote the
 *   runtime and name paths. Anonymous callers are told only the kind, in the
 *   agent's own words (err_kind_text): whoever knows which step failed tags
 *   the errbuf on the way up (errbuf_tag); a new errbuf_set clears the tag.
 */
#ifndef HEALTHD_ERR_H
#define HEALTHD_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define ERRBUF_SIZE 512

/* Paths, names and runtime words shown in a message are cleaned and cut here
 * (err_clean): one limit for every source and every message. */
#define ERR_SHOWN_BYTES 256

/* Which source failed, and how: the whole public error vocabulary (docs/operator.md,
 * "Errors"), one text each in err.c. */
enum err_kind {
	ERR_KIND_NONE = 0, /* not tagged (yet) */
	ERR_KIND_NOMEM,
	/* The message itself is the public text: "app-compose.json: " and a
	 * field name and a fixed rule (the manifest is measured, not secret). */
	ERR_KIND_COMPOSE,
	ERR_KIND_RUNTIME_FILE_UNREADABLE,
	ERR_KIND_RUNTIME_FILE_INVALID,
	ERR_KIND_RUNTIME_UNREACHABLE,
	ERR_KIND_RUNTIME_STATUS,
	ERR_KIND_RUNTIME_ANSWER,
	ERR_KIND_RUNTIME_TIMEOUT,
	ERR_KIND_RUNTIME_TOO_OLD,
	/* A refresh that asked no runtime (a status file) and overran. */
	ERR_KIND_REFRESH_TIMEOUT,
	ERR_KIND_COUNT
};

struct errbuf {
	char msg[ERRBUF_SIZE];
	enum err_kind kind;
};

/* Sets the message (and clears the kind: this is a new error); a message
 * longer than the buffer is cut with "...". Returns -err (err is a positive
 * errno) so that callers can write `return errbuf_set(e, EINVAL, "...")`. e
 * may be NULL. */
int errbuf_set(struct errbuf *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Tags the error in e with kind k when r is an error and e has no kind yet
 * (the step nearest the failure knows best). Returns r, so that callers can
 * write `return errbuf_tag(e, ERR_KIND_..., step(...))`. e may be NULL. */
int errbuf_tag(struct errbuf *e, enum err_kind k, int r);

/* The public text of an error: the kind's fixed text, or for
 * ERR_KIND_COMPOSE the message. Never NULL. */
const char *errbuf_public(const struct errbuf *e);

/* The fixed text of a kind (ERR_KIND_COMPOSE: a generic one). */
const char *err_kind_text(enum err_kind k);

/* Prepends "prefix: " to the message already in e (the kind is kept). */
void errbuf_prefix(struct errbuf *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Copies s into dst (size n) replacing control bytes and non-ASCII bytes with
 * '?', cut at max_bytes (marking the cut with "..."). For showing paths and
 * names that came from configuration or a runtime to an anonymous caller. */
void err_clean(char *dst, size_t n, const char *s, size_t max_bytes);

/* True when s holds a control byte (below 0x20, or DEL). */
bool err_has_control(const char *s);

#endif
