/* SPDX-License-Identifier: Apache-2.0 */
#include "base/verdict.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

void verdict_init(struct verdict *v)
{
	memset(v, 0, sizeof(*v));
}

void verdict_free(struct verdict *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n_entries; i++) {
		free(v->entries[i].name);
		free(v->entries[i].status);
	}
	free(v->entries);
	free(v->error);
	free(v->detail);
	verdict_init(v);
}

static int add_owned(struct verdict *v, char *name, char *status, const char *cause)
{
	if (!name || !status)
		goto nomem;
	struct health_entry *e = grow(v->entries, &v->cap, v->n_entries + 1, sizeof(*e), 4, 0);
	if (!e)
		goto nomem;
	v->entries = e;
	v->entries[v->n_entries].name = name;
	v->entries[v->n_entries].status = status;
	v->entries[v->n_entries].cause = cause;
	v->n_entries++;
	return 0;
nomem:
	free(name);
	free(status);
	return -ENOMEM;
}

int verdict_add(struct verdict *v, const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *status = vformat(fmt, ap);
	va_end(ap);
	return add_owned(v, strdup(name), status, NULL);
}

int verdict_add_cause(struct verdict *v, const char *name, const char *cause,
		      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *status = vformat(fmt, ap);
	va_end(ap);
	return add_owned(v, strdup(name), status, cause);
}

int verdict_set_error(struct verdict *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *e = vformat(fmt, ap);
	va_end(ap);
	if (!e)
		return -ENOMEM;
	free(v->error);
	v->error = e;
	return 0;
}

int verdict_set_failure(struct verdict *v, const struct errbuf *e)
{
	char *pub = strdup(errbuf_public(e)), *detail = strdup(e->msg);
	if (!pub || !detail) {
		free(pub);
		free(detail);
		return -ENOMEM;
	}
	free(v->error);
	free(v->detail);
	v->error = pub;
	v->detail = detail;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct health_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->status, y->status);
}

void verdict_sort(struct verdict *v)
{
	if (v->n_entries > 1)
		qsort(v->entries, v->n_entries, sizeof(*v->entries), entry_cmp);
}

int verdict_copy(struct verdict *dst, const struct verdict *src)
{
	verdict_init(dst);
	dst->healthy = src->healthy;
	for (size_t i = 0; i < src->n_entries; i++)
		if (add_owned(dst, strdup(src->entries[i].name),
			      strdup(src->entries[i].status), src->entries[i].cause) < 0)
			goto nomem;
	if (src->error && !(dst->error = strdup(src->error)))
		goto nomem;
	if (src->detail && !(dst->detail = strdup(src->detail)))
		goto nomem;
	return 0;
nomem:
	verdict_free(dst);
	return -ENOMEM;
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

bool verdict_same_cause(const struct verdict *a, const struct verdict *b)
{
	if (a->healthy != b->healthy || a->n_entries != b->n_entries ||
	    strcmp(str_or_empty(a->error), str_or_empty(b->error)) != 0)
		return false;
	for (size_t i = 0; i < a->n_entries; i++) {
		const struct health_entry *x = &a->entries[i], *y = &b->entries[i];
		if (strcmp(x->name, y->name))
			return false;
		if (x->cause && y->cause ? strcmp(x->cause, y->cause) : strcmp(x->status, y->status))
			return false;
	}
	return true;
}

void verdict_summary(const struct verdict *v, char *buf, size_t n)
{
	size_t off = 0;
	int w;
#define APPEND(...)                                                         \
	do {                                                                \
		w = snprintf(buf + off, n - off, __VA_ARGS__);              \
		if (w < 0 || (size_t)w >= n - off)                          \
			return;                                             \
		off += (size_t)w;                                           \
	} while (0)
	if (n == 0)
		return;
	buf[0] = '\0';
	APPEND("%s", v->healthy ? "healthy" : "unhealthy");
	if (v->error && *v->error)
		APPEND(": %s", v->error);
	size_t shown = v->n_entries < 3 ? v->n_entries : 3;
	for (size_t i = 0; i < shown; i++)
		APPEND("%s%s: %s", i || (v->error && *v->error) ? "; " : ": ",
		       v->entries[i].name, v->entries[i].status);
	if (v->n_entries > shown)
		APPEND(" (+%zu more)", v->n_entries - shown);
#undef APPEND
}
