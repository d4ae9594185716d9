/* SPDX-License-Identifier: Apache-2.0 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int errbuf_set(struct errbuf *e, int err, const char *fmt, ...)
{
	if (e) {
		e->kind = ERR_KIND_NONE;
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		if (n >= (int)sizeof(e->msg))
			memcpy(e->msg + sizeof(e->msg) - 4, "...", 4);
	}
	return -err;
}

void errbuf_prefix(struct errbuf *e, const char *fmt, ...)
{
	if (!e)
		return;
	char prefix[ERRBUF_SIZE], old[ERRBUF_SIZE];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	int n = snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	if (n >= (int)sizeof(e->msg))
		memcpy(e->msg + sizeof(e->msg) - 4, "...", 4);
}

void err_clean(char *dst, size_t n, const char *s, size_t max_bytes)
{
	if (n == 0)
		return;
	size_t len = strlen(s), keep = len;
	if (max_bytes > n - 1)
		max_bytes = n - 1;
	int cut = len > max_bytes;
	if (cut)
		keep = max_bytes >= 3 ? max_bytes - 3 : 0;
	size_t i;
	for (i = 0; i < keep; i++) {
		unsigned char c = (unsigned char)s[i];
		dst[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	if (cut && max_bytes >= 3) {
		memcpy(dst + i, "...", 3);
		i += 3;
	}
	dst[i] = '\0';
}

bool err_has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int errbuf_tag(struct errbuf *e, enum err_kind k, int r)
{
	if (r < 0 && e && e->kind == ERR_KIND_NONE)
		e->kind = k;
	return r;
}

/* Served to anonymous callers: the agent's own words only. */
static const char *const kind_text[ERR_KIND_COUNT] = {
	[ERR_KIND_NONE] = "the health source could not be read",
	[ERR_KIND_NOMEM] = "the agent ran out of memory",
	[ERR_KIND_COMPOSE] = "app-compose.json cannot be used",
	[ERR_KIND_RUNTIME_FILE_UNREADABLE] = "app-compose-runtime.json cannot be read",
	[ERR_KIND_RUNTIME_FILE_INVALID] = "app-compose-runtime.json is not valid",
	[ERR_KIND_RUNTIME_UNREACHABLE] = "cannot reach the container runtime",
	[ERR_KIND_RUNTIME_STATUS] = "the container runtime answered with an error status",
	[ERR_KIND_RUNTIME_ANSWER] = "the container runtime's answer could not be read",
	[ERR_KIND_RUNTIME_TIMEOUT] =
		"the container runtime took longer than the refresh timeout",
	[ERR_KIND_RUNTIME_TOO_OLD] =
		"the container runtime is too old (Docker API before 1.24)",
	[ERR_KIND_REFRESH_TIMEOUT] = "the refresh took longer than the refresh timeout",
};

const char *err_kind_text(enum err_kind k)
{
	if ((unsigned)k >= ERR_KIND_COUNT || !kind_text[k])
		return kind_text[ERR_KIND_NONE];
	return kind_text[k];
}

const char *errbuf_public(const struct errbuf *e)
{
	if (e->kind == ERR_KIND_COMPOSE && e->msg[0])
		return e->msg;
	return err_kind_text(e->kind);
}
