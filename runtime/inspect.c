/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime/inspect.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A Docker inspect object is a few hundred tokens; labels and env add some.
 * 1 Mi tokens (16 MiB of token array) covers thousands of containers. */
#define INSPECT_MAX_TOKENS (1 << 20)

static int type_error(const struct json *j, int i, const char *field,
		      const char *want, struct errbuf *err)
{
	return errbuf_set(err, EINVAL, "%s: expected %s, got %s", field, want,
			  json_type_name(j, i));
}

/* An optional string member: absent or null leaves *out NULL. */
static int opt_string(const struct json *j, int obj, const char *key,
		      const char *field, char **out, struct errbuf *err)
{
	int v = json_get(j, obj, key);
	*out = NULL;
	if (v < 0 || json_is_null(j, v))
		return 0;
	if (!json_is_string(j, v))
		return type_error(j, v, field, "a string", err);
	int r = json_strdup(j, v, out);
	if (r == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	if (r < 0)
		return errbuf_set(err, EINVAL, "%s: bad string escape", field);
	return 0;
}

static int opt_bool(const struct json *j, int obj, const char *key,
		    const char *field, bool *out, struct errbuf *err)
{
	int v = json_get(j, obj, key);
	*out = false;
	if (v < 0)
		return 0;
	if (json_bool(j, v, out) < 0)
		return type_error(j, v, field, "a boolean", err);
	return 0;
}

/* An optional object member: absent or null gives -1. */
static int opt_object(const struct json *j, int obj, const char *key,
		      const char *field, int *out, struct errbuf *err)
{
	int v = json_get(j, obj, key);
	*out = -1;
	if (v < 0 || json_is_null(j, v))
		return 0;
	if (!json_is_object(j, v))
		return type_error(j, v, field, "an object", err);
	*out = v;
	return 0;
}

/* An optional RFC 3339 member; absent, null or "" (nerdctl leaves StartedAt
 * empty for a container that never had a task) give 0. */
static int opt_time(const struct json *j, int obj, const char *key,
		    const char *field, int64_t *ns, struct errbuf *err)
{
	char *s;
	int r = opt_string(j, obj, key, field, &s, err);
	*ns = 0;
	if (r < 0)
		return r;
	if (s && *s && container_parse_time(s, ns) < 0)
		r = errbuf_set(err, EINVAL, "%s: not an RFC 3339 time", field);
	free(s);
	return r;
}

/* The newest entry's End, and for the operator's view its ExitCode and
 * Output. Docker appends (oldest first) and prints UTC; nerdctl 2.x keeps
 * the newest first and prints the machine's local offset (+09:00): the
 * newest is picked by time, whatever the order and the offsets. */
static int probe_detail(const struct json *j, int el, struct container *c)
{
	int64_t code = 0;
	int out = json_get(j, el, "Output");
	free(c->probe_output);
	c->probe_output = NULL;
	c->has_probe = true;
	c->probe_exit_code = json_int64(j, json_get(j, el, "ExitCode"), &code) == 0 ? code : -1;
	if (json_is_string(j, out) && json_strdup(j, out, &c->probe_output) == -ENOMEM)
		return -ENOMEM;
	return 0;
}

static int health_log_end(const struct json *j, int health, struct container *c,
			  struct errbuf *err)
{
	int log = json_get(j, health, "Log");
	int64_t *end = &c->health_log_end_ns;
	*end = 0;
	if (log < 0 || json_is_null(j, log))
		return 0;
	if (!json_is_array(j, log))
		return type_error(j, log, "State.Health.Log", "an array", err);
	JSON_ARRAY_FOREACH(j, log, el, cnt) {
		int64_t t;
		if (!json_is_object(j, el))
			return type_error(j, el, "State.Health.Log[]", "an object", err);
		int r = opt_time(j, el, "End", "State.Health.Log[].End", &t, err);
		if (r < 0)
			return r;
		if ((t >= *end || !c->has_probe) && probe_detail(j, el, c) < 0)
			return errbuf_set(err, ENOMEM, "out of memory");
		if (t > *end)
			*end = t;
	}
	return 0;
}

static int parse_health(const struct json *j, int state, struct container *c,
			struct errbuf *err)
{
	int health, r;
	r = opt_object(j, state, "Health", "State.Health", &health, err);
	if (r < 0 || health < 0)
		return r;
	r = opt_string(j, health, "Status", "State.Health.Status", &c->health, err);
	if (r < 0)
		return r;
	/* A Health object without a status says no more than an absent one;
	 * "" is what the judge skips, like "none". */
	if (!c->health && !(c->health = strdup("")))
		return errbuf_set(err, ENOMEM, "out of memory");
	int64_t streak = 0;
	if (json_int64(j, json_get(j, health, "FailingStreak"), &streak) == 0)
		c->failing_streak = streak;
	return health_log_end(j, health, c, err);
}

static int parse_state(const struct json *j, int obj, struct container *c,
		       struct errbuf *err)
{
	int state = json_get(j, obj, "State"), r;
	if (state < 0)
		return errbuf_set(err, EINVAL, "State: missing");
	if (!json_is_object(j, state))
		return type_error(j, state, "State", "an object", err);
	if ((r = opt_string(j, state, "Status", "State.Status", &c->state, err)) < 0 ||
	    (r = opt_bool(j, state, "Running", "State.Running", &c->running, err)) < 0 ||
	    (r = opt_bool(j, state, "Paused", "State.Paused", &c->paused, err)) < 0 ||
	    (r = opt_time(j, state, "StartedAt", "State.StartedAt", &c->started_at_ns,
			  err)) < 0)
		return r;
	/* nerdctl prints an empty Status for a container that has no task yet,
	 * which its `ps` shows as Created. */
	if (!c->state || !*c->state) {
		free(c->state);
		if (!(c->state = strdup("created")))
			return errbuf_set(err, ENOMEM, "out of memory");
	}
	return parse_health(j, state, c, err);
}

/* Config.Healthcheck.Test: absent, [] or ["NONE"] (healthcheck: {disable:
 * true}) configure no probe; anything else does. The merged config counts,
 * so an image's HEALTHCHECK does too. */
static int parse_healthcheck(const struct json *j, int config, struct container *c,
			     struct errbuf *err)
{
	int hc, r;
	if ((r = opt_object(j, config, "Healthcheck", "Config.Healthcheck", &hc, err)) < 0 ||
	    hc < 0)
		return r;
	int test = json_get(j, hc, "Test");
	if (test < 0 || json_is_null(j, test))
		return 0;
	if (!json_is_array(j, test))
		return type_error(j, test, "Config.Healthcheck.Test", "an array", err);
	c->healthcheck_configured = j->tok[test].size > 0 && !json_str_eq(j, test + 1, "NONE");
	return 0;
}

static int parse_labels(const struct json *j, int obj, struct container *c,
			struct errbuf *err)
{
	int config, labels, r;
	if ((r = opt_object(j, obj, "Config", "Config", &config, err)) < 0 || config < 0)
		return r;
	if ((r = parse_healthcheck(j, config, c, err)) < 0 ||
	    (r = opt_string(j, config, "StopSignal", "Config.StopSignal", &c->stop_signal,
			    err)) < 0)
		return r;
	/* Compose's stop_grace_period, when set; read only of the agent's own
	 * container, to fit its stop hold into it. Not a judged fact: a value
	 * of another type is taken as unset. */
	int64_t stop = 0;
	c->has_stop_timeout =
		json_int64(j, json_get(j, config, "StopTimeout"), &stop) == 0 && stop >= 0;
	c->stop_timeout_s = c->has_stop_timeout ? stop : 0;
	/* Docker prints "Labels": null for a container without labels; nerdctl
	 * omits the member. */
	if ((r = opt_object(j, config, "Labels", "Config.Labels", &labels, err)) < 0 ||
	    labels < 0)
		return r;
	int v = json_get(j, labels, COMPOSE_ONEOFF_LABEL);
	if (v >= 0 && !json_is_string(j, v))
		return type_error(j, v, "Config.Labels[" COMPOSE_ONEOFF_LABEL "]",
				  "a string", err);
	c->oneoff = json_str_eq(j, v, "True");
	/* nerdctl stop and kill set it before they signal, start and run clear
	 * it (nerdctl pkg/containerutil Stop/Start, pkg/cmd/container/kill.go),
	 * and inspect prints every containerd label (dockercompat Config.Labels). */
	c->explicitly_stopped = json_str_eq(j, json_get(j, labels, NERDCTL_STOPPED_LABEL), "true");
	int svc = json_get(j, labels, COMPOSE_SERVICE_LABEL);
	if (json_is_string(j, svc) && json_strdup(j, svc, &c->service) == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	if ((r = inspect_parse_agent_labels(j, labels, c, err)) < 0)
		return r;
	return opt_string(j, labels, COMPOSE_PROJECT_LABEL,
			  "Config.Labels[" COMPOSE_PROJECT_LABEL "]", &c->project, err);
}

/* The dstack.healthd.* labels (issue 27), as strings: what they mean is
 * probe_prepare's to say, so that a bad value is an entry, not a failed
 * refresh. A label that is not a string cannot come from Compose. */
int inspect_parse_agent_labels(const struct json *j, int labels, struct container *c,
			       struct errbuf *err)
{
	struct probe_labels *pl = &c->probe_labels;
	const struct {
		const char *key;
		char **out;
	} want[] = {
		{ PROBE_LABEL, &pl->probe },
		{ PROBE_LABEL_INTERVAL, &pl->interval },
		{ PROBE_LABEL_TIMEOUT, &pl->timeout },
		{ PROBE_LABEL_START_PERIOD, &pl->start_period },
		{ PROBE_LABEL_RETRIES, &pl->retries },
		{ PROBE_LABEL_SUCCESS_THRESHOLD, &pl->success_threshold },
		{ OPTIONAL_LABEL, &c->optional_label },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int r = opt_string(j, labels, want[i].key, "Config.Labels[dstack.healthd.*]",
				   want[i].out, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int net_cmp(const void *a, const void *b)
{
	return strcmp(((const struct container_net *)a)->name, ((const struct container_net *)b)->name);
}

/* A string that is a valid IPv4 address, into out; else out is "". */
static void ipv4_of(const struct json *j, int tok, char out[16])
{
	char *s = NULL;
	struct in_addr a;
	out[0] = '\0';
	if (json_is_string(j, tok) && json_strdup(j, tok, &s) == 0 && strlen(s) < 16 &&
	    inet_pton(AF_INET, s, &a) == 1)
		memcpy(out, s, strlen(s) + 1);
	free(s);
}

int inspect_parse_network(const struct json *j, int obj, struct container *c,
			  struct errbuf *err)
{
	int hc = json_get(j, obj, "HostConfig"), ns = json_get(j, obj, "NetworkSettings");
	int mode = json_get(j, hc, "NetworkMode");
	container_free_networks(c);
	if (json_is_string(j, mode) && json_strdup(j, mode, &c->network_mode) == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	ipv4_of(j, json_get(j, ns, "IPAddress"), c->ipv4_primary);
	int nets = json_get(j, ns, "Networks");
	if (!json_is_object(j, nets) || j->tok[nets].size == 0)
		return 0;
	/* Bounded by the document's token count. */
	if (!(c->nets = calloc((size_t)j->tok[nets].size, sizeof(*c->nets))))
		return errbuf_set(err, ENOMEM, "out of memory");
	JSON_OBJECT_FOREACH(j, nets, key, val, cnt) {
		struct container_net *n = &c->nets[c->n_nets];
		int id = json_get(j, val, "NetworkID");
		if (!json_is_object(j, val))
			continue;
		int r = json_strdup(j, key, &n->name);
		if (r == 0 && json_is_string(j, id))
			r = json_strdup(j, id, &n->net_id);
		if (r == 0 && !n->net_id && !(n->net_id = strdup("")))
			r = -ENOMEM;
		if (r < 0) {
			free(n->name);
			free(n->net_id);
			memset(n, 0, sizeof(*n));
			if (r == -ENOMEM)
				return errbuf_set(err, ENOMEM, "out of memory");
			continue; /* a name that is no string: no network */
		}
		ipv4_of(j, json_get(j, val, "IPAddress"), n->ipv4);
		c->n_nets++;
	}
	qsort(c->nets, c->n_nets, sizeof(*c->nets), net_cmp);
	return 0;
}

static int parse_names(const struct json *j, int obj, struct container *c,
		       struct errbuf *err)
{
	int r = opt_string(j, obj, "Id", "Id", &c->id, err);
	if (r < 0)
		return r;
	if (!c->id || !*c->id)
		return errbuf_set(err, EINVAL, "Id: missing");
	if ((r = opt_string(j, obj, "Name", "Name", &c->name, err)) < 0)
		return r;
	if (c->name && c->name[0] == '/')
		memmove(c->name, c->name + 1, strlen(c->name));
	/* Without a name the container is still judged; show a short id
	 * (12 characters, as docker ps does). */
	if (!c->name || !*c->name) {
		free(c->name);
		if (!(c->name = strndup(c->id, 12)))
			return errbuf_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

int inspect_parse_object(const struct json *j, int obj, struct container *c,
			 struct errbuf *err)
{
	int r;
	memset(c, 0, sizeof(*c));
	if (!json_is_object(j, obj))
		r = type_error(j, obj, "container", "an object", err);
	else if ((r = parse_names(j, obj, c, err)) >= 0 &&
		 (r = parse_state(j, obj, c, err)) >= 0 &&
		 (r = parse_labels(j, obj, c, err)) >= 0)
		r = inspect_parse_network(j, obj, c, err);
	if (r < 0)
		container_free(c);
	return r < 0 ? r : 0;
}

int inspect_parse_array(const char *buf, size_t len, struct container_list *out,
			struct errbuf *err)
{
	struct json j;
	int r = json_parse(&j, buf, len, INSPECT_MAX_TOKENS, err);
	if (r < 0)
		return r;
	size_t n0 = out->n;
	if (!json_is_array(&j, 0)) {
		r = type_error(&j, 0, "inspect output", "an array", err);
		goto out;
	}
	JSON_ARRAY_FOREACH(&j, 0, el, cnt) {
		struct container *c = container_list_add(out);
		if (!c) {
			r = errbuf_set(err, ENOMEM, "out of memory");
			goto out;
		}
		r = inspect_parse_object(&j, el, c, err);
		if (r < 0) {
			errbuf_prefix(err, "container %d", cnt);
			goto out;
		}
	}
out:
	/* All or nothing: a caller falling back to one-by-one inspection must
	 * not find half of the batch already appended. */
	if (r < 0) {
		while (out->n > n0)
			container_free(&out->v[--out->n]);
	}
	json_free(&j);
	return r;
}
