/* SPDX-License-Identifier: Apache-2.0 */
/* app-compose.json: the fields this agent reads (docs/design/verdict.md, after dstack's "Opting in" and
 * "health_status_file"). Rules, after the reference guest's AppCompose:
 * - Other top-level fields are ignored: AppCompose is not deny_unknown_fields.
 * - manifest_version is required (the reference has no default for it); the
 *   string form ("3") and the legacy numbers 1 and 2 are accepted, as the
 *   guest accepts them (get_version).
 * - requirements needs manifest_version 3 or later, and inside it only
 *   health_check (a boolean) and health_status_file (an absolute path) are
 *   judged, in their flat form, the only one any dstack guest accepts
 *   (docs/app-developer.md, "Which requirements forms"); the guest's own
 *   fields beside them
 *   (guest_fields below) are accepted with their types and left to the
 *   guest; anything else is a hard error, as dstack's documentation promises:
 *   that is what keeps a deployment from landing silently on a guest that
 *   would ignore it.
 * - health_status_file must be non-empty, absolute, shorter than PATH_MAX and
 *   free of control characters (a NUL cannot be opened, and the path is shown
 *   in reports).
 * - runner is a required non-empty string. A runner with no containers to
 *   judge that turns health_check on without a status file is refused:
 *   nothing could ever be judged (docs/design/verdict.md).
 * - A known field given twice is an error: which one wins is not defined.
 * - port_policy, the ports the gateway sends a PROXY header to, as the
 *   guest reads it (agent/portpolicy.h).
 * Messages name the field; compose_load prefixes the file's name (never its
 * path: they are served to anonymous callers). */
#include "agent/compose.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/mbedcompat.h"
#include "base/readfile.h"

/* The docker-compose YAML is one string token, so real files have few
 * tokens however large they are; this bounds a hostile one. */
#define COMPOSE_MAX_TOKENS (1 << 16)

static int hash_hex(const char *buf, size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char d[32];
	if (mbedcompat_sha256((const unsigned char *)buf, len, d) != 0)
		return -EIO;
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

/* A string field into *out. */
static int get_string(const struct json *j, int val, const char *field, char **out,
		      struct errbuf *err)
{
	if (!json_is_string(j, val))
		return errbuf_set(err, EINVAL, "%s: must be a string, not %s", field,
				  json_type_name(j, val));
	int r = json_strdup(j, val, out);
	if (r == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	if (r < 0)
		return errbuf_set(err, EINVAL, "%s: is not a valid string (bad escape or "
				  "NUL)", field);
	return 0;
}

/* As the guest reads it (Dstack-TEE/dstack dstack-types,
 * deserialize_manifest_version): a string holding a positive integer in its
 * canonical form (blanks around it trimmed; no sign, no leading zero; at most
 * 2^32 - 1), or a legacy number, 1 or 2 only: the guest refuses a numeric 3,
 * so an app that wrote one does not run, and its verdict must not pass. */
static int get_version(const struct json *j, int val, uint32_t *out, struct errbuf *err)
{
	int64_t v = 0;
	if (json_is_string(j, val)) {
		const char *s = j->s + j->tok[val].start, *e = j->s + j->tok[val].end;
		while (s < e && strchr(" \t\r\n", *s))
			s++;
		while (e > s && strchr(" \t\r\n", e[-1]))
			e--;
		if (e == s || e - s > 10 || *s == '0')
			goto bad;
		for (const char *p = s; p < e; p++) {
			if (*p < '0' || *p > '9')
				goto bad;
			v = v * 10 + (*p - '0');
		}
		if (v > UINT32_MAX)
			goto bad;
	} else if (json_int64(j, val, &v) < 0) {
		goto bad;
	} else if (v != 1 && v != 2) {
		return errbuf_set(err, EINVAL, "manifest_version: a number is accepted only for "
				  "the legacy versions 1 and 2; write the string \"3\"");
	}
	*out = (uint32_t)v;
	return 0;
bad:
	return errbuf_set(err, EINVAL, "manifest_version: must be a positive integer "
			  "string such as \"3\" (or a legacy number, 1 or 2), not %s",
			  json_is_string(j, val) ? "this string" : json_type_name(j, val));
}

static int check_status_file(const char *p, struct errbuf *err)
{
	static const char f[] = "requirements.health_status_file";
	if (p[0] != '/')
		return errbuf_set(err, EINVAL, "%s: must be an absolute path", f);
	if (strlen(p) >= PATH_MAX)
		return errbuf_set(err, EINVAL, "%s: longer than %d bytes", f, PATH_MAX - 1);
	if (err_has_control(p))
		return errbuf_set(err, EINVAL, "%s: must not contain control characters", f);
	return 0;
}

static bool is_bool(const struct json *j, int i)
{
	bool b;
	return json_bool(j, i, &b) == 0;
}

/* The rest of upstream's Requirements (Dstack-TEE/dstack,
 * dstack-types/src/lib.rs, after v0.5.11), which its guest enforces before
 * the app starts (deny_unknown_fields, these types, null for "absent" but for
 * gpu_policy): accepted and not judged here, so that an app that sets one is
 * not held unhealthy here while upstream's guest runs it. */
static const struct {
	const char *name;
	bool (*is)(const struct json *j, int i);
	const char *type;
	bool nullable;
} guest_fields[] = {
	{ "os_version", json_is_string, "a string", true },
	{ "platforms", json_is_array, "an array", true },
	{ "tdx_measure_acpi_tables", is_bool, "true or false", true },
	{ "launch_token_hash", json_is_string, "a string", true },
	{ "gpu_policy", json_is_object, "an object", false },
};

/* k is one of guest_fields: its value's type checked, once. 1 when k is one,
 * 0 when not, or an error. */
static int guest_field(const struct json *j, int k, int v, unsigned *seen, struct errbuf *err)
{
	for (size_t i = 0; i < sizeof(guest_fields) / sizeof(guest_fields[0]); i++) {
		if (!json_str_eq(j, k, guest_fields[i].name))
			continue;
		if (*seen & (1u << i))
			return errbuf_set(err, EINVAL, "requirements.%s: appears more than once",
					  guest_fields[i].name);
		*seen |= 1u << i;
		if (!guest_fields[i].is(j, v) && !(guest_fields[i].nullable && json_is_null(j, v)))
			return errbuf_set(err, EINVAL, "requirements.%s: must be %s, not %s",
					  guest_fields[i].name, guest_fields[i].type,
					  json_type_name(j, v));
		return 1;
	}
	return 0;
}

static int parse_requirements(const struct json *j, int obj, struct app_compose *c,
			      struct errbuf *err)
{
	bool seen_check = false;
	unsigned seen_guest = 0;
	int r;

	if (!json_is_object(j, obj))
		return errbuf_set(err, EINVAL, "requirements: must be an object, not %s",
				  json_type_name(j, obj));
	JSON_OBJECT_FOREACH(j, obj, k, v, cnt) {
		if (json_str_eq(j, k, "health_check")) {
			if (seen_check)
				return errbuf_set(err, EINVAL, "requirements.health_check: "
						  "appears more than once");
			seen_check = true;
			/* An object here ({"enabled": ..., "health_file": ...})
			 * no guest accepts: upstream's field is a boolean. */
			if (json_bool(j, v, &c->health_check) < 0)
				return errbuf_set(err, EINVAL, "requirements.health_check: "
						  "must be true or false, not %s%s",
						  json_type_name(j, v), json_is_object(j, v)
						  ? " (the status file is requirements."
						    "health_status_file, beside it)" : "");
		} else if (json_str_eq(j, k, "health_status_file")) {
			if (c->health_status_file)
				return errbuf_set(err, EINVAL, "requirements.health_status_file: "
						  "appears more than once");
			if ((r = get_string(j, v, "requirements.health_status_file",
					    &c->health_status_file, err)) < 0)
				return r;
			if ((r = check_status_file(c->health_status_file, err)) < 0)
				return r;
		} else if ((r = guest_field(j, k, v, &seen_guest, err)) != 0) {
			if (r < 0)
				return r;
		} else {
			_cleanup_free_ char *key = NULL;
			char shown[65];
			if (json_strdup(j, k, &key) < 0)
				return errbuf_set(err, EINVAL, "requirements: has a field whose "
						  "name is not a valid string");
			err_clean(shown, sizeof(shown), key, 64);
			return errbuf_set(err, EINVAL, "requirements.%s: unknown field; "
					  "requirements only knows health_check, "
					  "health_status_file and the guest's os_version, "
					  "platforms, tdx_measure_acpi_tables, "
					  "launch_token_hash and gpu_policy", shown);
		}
	}
	return 0;
}

/* Index of each known top-level field, -1 when absent. */
struct top {
	int version, name, runner, requirements, port_policy;
};

static int find_top(const struct json *j, struct top *t, struct errbuf *err)
{
	static const char *names[] = { "manifest_version", "name", "runner",
				       "requirements", "port_policy" };
	int *slot[] = { &t->version, &t->name, &t->runner, &t->requirements, &t->port_policy };

	*t = (struct top){ -1, -1, -1, -1, -1 };
	JSON_OBJECT_FOREACH(j, 0, k, v, cnt) {
		for (size_t f = 0; f < ARRAY_SIZE(names); f++) {
			if (!json_str_eq(j, k, names[f]))
				continue;
			if (*slot[f] >= 0)
				return errbuf_set(err, EINVAL, "%s: appears more than once",
						  names[f]);
			*slot[f] = v;
		}
	}
	return 0;
}

static int parse_runner(const struct json *j, int val, struct app_compose *c,
			struct errbuf *err)
{
	int r;
	if (val < 0)
		return errbuf_set(err, EINVAL, "runner: missing");
	if ((r = get_string(j, val, "runner", &c->runner, err)) < 0)
		return r;
	if (!c->runner[0])
		return errbuf_set(err, EINVAL, "runner: must be a non-empty string");
	if (strcmp(c->runner, "docker-compose") == 0)
		c->kind = RUNNER_DOCKER_COMPOSE;
	else if (strcmp(c->runner, "nerdctl-compose") == 0)
		c->kind = RUNNER_NERDCTL_COMPOSE;
	else
		c->kind = RUNNER_OTHER;
	return 0;
}

static int parse_doc(const struct json *j, struct app_compose *c, struct errbuf *err)
{
	struct top t;
	int r;

	if (!json_is_object(j, 0))
		return errbuf_set(err, EINVAL, "must be a JSON object, not %s",
				  json_type_name(j, 0));
	if ((r = find_top(j, &t, err)) < 0)
		return r;
	if (t.version < 0)
		return errbuf_set(err, EINVAL, "manifest_version: missing; write "
				  "\"manifest_version\": \"3\"");
	if ((r = get_version(j, t.version, &c->manifest_version, err)) < 0)
		return r;
	if (t.name >= 0 && (r = get_string(j, t.name, "name", &c->name, err)) < 0)
		return r;
	if ((r = parse_runner(j, t.runner, c, err)) < 0)
		return r;
	if (t.port_policy >= 0 && (r = portpolicy_parse(j, t.port_policy, &c->ports, err)) < 0)
		return r;
	if (t.requirements < 0)
		return 0;
	/* An older guest would drop requirements silently; a current one
	 * refuses them below version 3 (docs/design/verdict.md; dstack's "Opting in"). */
	if (c->manifest_version < 3)
		return errbuf_set(err, EINVAL, "requirements: needs manifest_version \"3\" "
				  "or later, not %u; an older guest would ignore it",
				  c->manifest_version);
	if ((r = parse_requirements(j, t.requirements, c, err)) < 0)
		return r;
	if (c->kind == RUNNER_OTHER && c->health_check && !c->health_status_file) {
		char shown[65];
		err_clean(shown, sizeof(shown), c->runner, 64);
		return errbuf_set(err, EINVAL, "requirements.health_check: runner \"%s\" "
				  "has no Compose containers to judge, so nothing could "
				  "ever be judged; set requirements.health_status_file",
				  shown);
	}
	return 0;
}

int compose_parse(const char *buf, size_t len, struct app_compose *out,
		  struct errbuf *err)
{
	struct json j;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > COMPOSE_MAX_BYTES)
		return errbuf_set(err, EFBIG, "larger than %u bytes", COMPOSE_MAX_BYTES);
	if ((r = hash_hex(buf, len, out->hash)) < 0)
		return errbuf_set(err, -r, "cannot compute its SHA-256");
	if ((r = json_parse(&j, buf, len, COMPOSE_MAX_TOKENS, err)) < 0)
		return r;
	r = parse_doc(&j, out, err);
	json_free(&j);
	if (r < 0)
		compose_free(out);
	return r;
}

int compose_load(const char *path, struct app_compose *out, struct errbuf *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	/* Its errors are served: the file is named, its path is not. */
	int r = readfile_named(path, COMPOSE_NAME, COMPOSE_MAX_BYTES, &buf, &len, err);
	if (r >= 0 && (r = compose_parse(buf, len, out, err)) < 0)
		errbuf_prefix(err, COMPOSE_NAME);
	return errbuf_tag(err, ERR_KIND_COMPOSE, r);
}

bool manifest_try(struct manifest *m, const char *path)
{
	if (m->ok)
		return true;
	compose_free(&m->app);
	m->ok = compose_load(path, &m->app, &m->err) == 0;
	/* The status file is what this agent writes: reading it back would
	 * judge the agent, not the app (issue 21). */
	if (m->ok && m->writes_status_file) {
		free(m->app.health_status_file);
		m->app.health_status_file = NULL;
	}
	if (m->ok && m->on_usable)
		m->on_usable(m);
	return m->ok;
}

void manifest_free(struct manifest *m)
{
	compose_free(&m->app);
	memset(m, 0, sizeof(*m));
}

void compose_free(struct app_compose *c)
{
	if (!c)
		return;
	free(c->name);
	free(c->runner);
	free(c->health_status_file);
	portpolicy_free(&c->ports);
	memset(c, 0, sizeof(*c));
}
