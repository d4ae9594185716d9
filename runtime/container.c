/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime/container.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* Bounded so that a runtime listing absurd numbers of containers fails with
 * ENOMEM-like clarity instead of exhausting memory. */
#define CONTAINER_LIST_MAX 100000

struct container *container_list_add(struct container_list *l)
{
	if (l->n >= CONTAINER_LIST_MAX)
		return NULL;
	struct container *v = grow(l->v, &l->cap, l->n + 1, sizeof(*v), 8, CONTAINER_LIST_MAX);
	if (!v)
		return NULL;
	l->v = v;
	struct container *c = &l->v[l->n++];
	memset(c, 0, sizeof(*c));
	return c;
}

void container_free(struct container *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->name);
	free(c->state);
	free(c->health);
	free(c->probe_output);
	free(c->service);
	free(c->project);
	probe_labels_free(&c->probe_labels);
	free(c->optional_label);
	container_free_networks(c);
	free(c->probe);
	free(c->stop_signal);
	memset(c, 0, sizeof(*c));
}

void container_free_networks(struct container *c)
{
	for (size_t i = 0; i < c->n_nets; i++) {
		free(c->nets[i].name);
		free(c->nets[i].net_id);
	}
	free(c->nets);
	free(c->network_mode);
	c->nets = NULL;
	c->n_nets = 0;
	c->network_mode = NULL;
	c->ipv4_primary[0] = '\0';
}

int container_copy_networks(struct container *dst, const struct container *src)
{
	container_free_networks(dst);
	memcpy(dst->ipv4_primary, src->ipv4_primary, sizeof(dst->ipv4_primary));
	if (src->network_mode && !(dst->network_mode = strdup(src->network_mode)))
		return -ENOMEM;
	if (src->n_nets && !(dst->nets = calloc(src->n_nets, sizeof(*dst->nets))))
		return -ENOMEM;
	for (size_t i = 0; i < src->n_nets; i++, dst->n_nets++) {
		struct container_net *d = &dst->nets[i];
		*d = src->nets[i];
		d->name = strdup(src->nets[i].name);
		d->net_id = strdup(src->nets[i].net_id);
		if (!d->name || !d->net_id) {
			dst->n_nets++;
			container_free_networks(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

void container_list_free(struct container_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		container_free(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* Reads exactly n decimal digits at *p. */
static int digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return -EINVAL;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int expect(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int y, int m)
{
	static const int d[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	return m == 2 && leap(y) ? 29 : d[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil): no timegm, no TZ environment. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

struct civil {
	int year, mon, day, hour, min, sec;
	int64_t frac_ns;
	int off_s;
};

static int parse_fraction(const char **p, int64_t *ns)
{
	*ns = 0;
	if (**p != '.')
		return 0;
	(*p)++;
	int n = 0;
	int64_t scale = 100000000;
	while (**p >= '0' && **p <= '9') {
		if (++n > 9)
			return -EINVAL;
		*ns += (**p - '0') * scale;
		scale /= 10;
		(*p)++;
	}
	return n ? 0 : -EINVAL;
}

static int parse_offset(const char **p, int *off_s)
{
	int h, m, sign;
	*off_s = 0;
	if (**p == 'Z') {
		(*p)++;
		return 0;
	}
	if (**p != '+' && **p != '-')
		return -EINVAL;
	sign = **p == '-' ? -1 : 1;
	(*p)++;
	if (digits(p, 2, &h) < 0 || expect(p, ':') < 0 || digits(p, 2, &m) < 0 ||
	    h > 23 || m > 59)
		return -EINVAL;
	*off_s = sign * (h * 3600 + m * 60);
	return 0;
}

static int parse_civil(const char *s, struct civil *c)
{
	const char *p = s;
	if (digits(&p, 4, &c->year) < 0 || expect(&p, '-') < 0 ||
	    digits(&p, 2, &c->mon) < 0 || expect(&p, '-') < 0 ||
	    digits(&p, 2, &c->day) < 0 || expect(&p, 'T') < 0 ||
	    digits(&p, 2, &c->hour) < 0 || expect(&p, ':') < 0 ||
	    digits(&p, 2, &c->min) < 0 || expect(&p, ':') < 0 ||
	    digits(&p, 2, &c->sec) < 0 || parse_fraction(&p, &c->frac_ns) < 0 ||
	    parse_offset(&p, &c->off_s) < 0 || *p != '\0')
		return -EINVAL;
	/* Go's time.Parse refuses second 60 too, so no runtime prints it. */
	if (c->year < 1 || c->mon < 1 || c->mon > 12 || c->day < 1 ||
	    c->day > month_days(c->year, c->mon) || c->hour > 23 || c->min > 59 ||
	    c->sec > 59)
		return -EINVAL;
	return 0;
}

int container_parse_time(const char *s, int64_t *ns)
{
	struct civil c;
	if (!s || parse_civil(s, &c) < 0)
		return -EINVAL;
	int64_t secs = days_from_civil(c.year, c.mon, c.day) * 86400 +
		       c.hour * 3600 + c.min * 60 + c.sec - c.off_s;
	/* Go's zero time.Time ("never"), however it is spelt. */
	if (secs == days_from_civil(1, 1, 1) * 86400 && c.frac_ns == 0) {
		*ns = 0;
		return 0;
	}
	/* int64 nanoseconds span 1677..2262; anything outside is not a time a
	 * runtime printed for a live container. */
	if (secs > INT64_MAX / 1000000000 - 1 || secs < INT64_MIN / 1000000000 + 1)
		return -EINVAL;
	*ns = secs * 1000000000 + c.frac_ns;
	return 0;
}
