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
 */
#ifndef HEALTHD_ERR_H
#define HEALTHD_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define ERRBUF_SIZE 512

struct errbuf {
	char msg[ERRBUF_SIZE];
};

/* Sets the message; a message longer than the buffer is cut with "...". Returns
 * -err (err is a positive errno) so that callers can write
 * `return errbuf_set(e, EINVAL, "...")`. e may be NULL. */
int errbuf_set(struct errbuf *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to the message already in e. */
void errbuf_prefix(struct errbuf *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Copies s into dst (size n) replacing control bytes and non-ASCII bytes with
 * '?', cut at max_bytes (marking the cut with "..."). For showing paths and
 * names that came from configuration or a runtime to an anonymous caller. */
void err_clean(char *dst, size_t n, const char *s, size_t max_bytes);

/* True when s holds a control byte (below 0x20, or DEL). */
bool err_has_control(const char *s);

#endif
