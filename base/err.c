#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int errbuf_set(struct errbuf *e, int err, const char *fmt, ...)
{
	if (e) {
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
