/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/portpolicy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Which ports say "pp": true, a bit each, so that the last entry for a
 * port wins in one pass. */
#define PORTS 65536

static int get_bool(const struct json *j, int v, const char *field, int index, bool *out,
		    struct errbuf *err)
{
	if (json_bool(j, v, out) == 0)
		return 0;
	if (index < 0)
		return errbuf_set(err, EINVAL, "port_policy.%s: must be true or false, not %s", field,
				  json_type_name(j, v));
	return errbuf_set(err, EINVAL, "port_policy.ports[%d].%s: must be true or false, not %s",
			  index, field, json_type_name(j, v));
}

/* One of ports[]: its port, and its pp into the bits. */
static int parse_entry(const struct json *j, int e, int index, unsigned char *pp,
		       struct errbuf *err)
{
	int port_at = -1, pp_at = -1;
	if (!json_is_object(j, e))
		return errbuf_set(err, EINVAL, "port_policy.ports[%d]: must be an object, not %s",
				  index, json_type_name(j, e));
	JSON_OBJECT_FOREACH(j, e, k, v, cnt) {
		int *at = json_str_eq(j, k, "port") ? &port_at : json_str_eq(j, k, "pp") ? &pp_at : NULL;
		if (!at)
			continue;
		if (*at >= 0)
			return errbuf_set(err, EINVAL, "port_policy.ports[%d].%s: appears more than once",
					  index, at == &port_at ? "port" : "pp");
		*at = v;
	}
	int64_t port;
	bool on = false;
	if (port_at < 0)
		return errbuf_set(err, EINVAL, "port_policy.ports[%d].port: missing", index);
	if (json_int64(j, port_at, &port) < 0 || port < 0 || port > 65535)
		return errbuf_set(err, EINVAL, "port_policy.ports[%d].port: must be an integer "
				  "from 0 to 65535", index);
	int r = pp_at >= 0 ? get_bool(j, pp_at, "pp", index, &on, err) : 0;
	if (r < 0)
		return r;
	if (on)
		pp[port / 8] |= (unsigned char)(1u << (port % 8));
	else
		pp[port / 8] &= (unsigned char)~(1u << (port % 8));
	return 0;
}

static int parse_ports(const struct json *j, int arr, struct port_policy *out, struct errbuf *err)
{
	if (!json_is_array(j, arr))
		return errbuf_set(err, EINVAL, "port_policy.ports: must be an array, not %s",
				  json_type_name(j, arr));
	unsigned char *pp = calloc(PORTS / 8, 1);
	if (!pp)
		return errbuf_set(err, ENOMEM, "out of memory");
	int r = 0;
	JSON_ARRAY_FOREACH(j, arr, e, cnt) {
		if ((r = parse_entry(j, e, cnt, pp, err)) < 0)
			break;
	}
	size_t n = 0;
	for (unsigned p = 0; r == 0 && p < PORTS; p++)
		n += (pp[p / 8] >> (p % 8)) & 1;
	if (r == 0 && n && !(out->pp_ports = calloc(n, sizeof(*out->pp_ports))))
		r = errbuf_set(err, ENOMEM, "out of memory");
	for (unsigned p = 0; r == 0 && p < PORTS; p++)
		if ((pp[p / 8] >> (p % 8)) & 1)
			out->pp_ports[out->n_pp++] = (uint16_t)p;
	free(pp);
	return r;
}

int portpolicy_parse(const struct json *j, int val, struct port_policy *out, struct errbuf *err)
{
	int ports_at = -1, restrict_at = -1;
	*out = (struct port_policy){ 0 };
	if (!json_is_object(j, val))
		return errbuf_set(err, EINVAL, "port_policy: must be an object, not %s",
				  json_type_name(j, val));
	JSON_OBJECT_FOREACH(j, val, k, v, cnt) {
		int *at = json_str_eq(j, k, "ports")	       ? &ports_at
			  : json_str_eq(j, k, "restrict_mode") ? &restrict_at
							       : NULL;
		if (!at)
			continue;
		if (*at >= 0)
			return errbuf_set(err, EINVAL, "port_policy.%s: appears more than once",
					  at == &ports_at ? "ports" : "restrict_mode");
		*at = v;
	}
	int r = 0;
	if (restrict_at >= 0)
		r = get_bool(j, restrict_at, "restrict_mode", -1, &out->restrict_mode, err);
	if (r == 0 && ports_at >= 0)
		r = parse_ports(j, ports_at, out, err);
	if (r < 0)
		portpolicy_free(out);
	return r;
}

bool portpolicy_pp(const struct port_policy *p, uint16_t port)
{
	for (size_t i = 0; i < p->n_pp; i++)
		if (p->pp_ports[i] == port)
			return true;
	return false;
}

void portpolicy_free(struct port_policy *p)
{
	free(p->pp_ports);
	*p = (struct port_policy){ 0 };
}
