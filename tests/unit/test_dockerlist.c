/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for docker_parse_list (runtime/docker.c): which list items are
 * taken from the list as they are and which are queued for an inspect. The
 * agent's own container (a sidecar) is never judged, so it is taken from the
 * list whatever its state or API version: a refresh never inspects it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/docker.h"
#include "tests/lib/tap.h"

#define ID_WEB "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_ME "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* One list item of project p, Docker's shape; health NULL leaves out the
 * Health object (API < 1.52). */
static void item(char *out, size_t n, const char *id, const char *name, const char *state,
		 const char *health)
{
	char h[96] = "";
	if (health)
		snprintf(h, sizeof(h), ",\"Health\":{\"Status\":\"%s\",\"FailingStreak\":0}", health);
	snprintf(out, n,
		 "{\"Id\":\"%s\",\"Names\":[\"/%s\"],\"State\":\"%s\"%s,"
		 "\"Labels\":{\"com.docker.compose.project\":\"p\","
		 "\"com.docker.compose.service\":\"%s\"}}",
		 id, name, state, h, name);
}

int main(void)
{
	static const struct {
		const char *what;
		int version;
		const char *self_id;
		const char *id, *state, *health;
		int listed; /* taken from the list; else queued */
		const char *want_health;
	} cases[] = {
		{ "1.41, unhealthy, not the agent", 141, ID_ME, ID_WEB, "running", NULL, 0, NULL },
		{ "1.41, the agent itself", 141, ID_ME, ID_ME, "running", NULL, 1, NULL },
		{ "1.41, the agent, no self id given", 141, NULL, ID_ME, "running", NULL, 0, NULL },
		{ "1.52, the agent, unhealthy", 152, ID_ME, ID_ME, "running", "unhealthy", 1,
		  "unhealthy" },
		{ "1.52, healthy and running", 152, NULL, ID_WEB, "running", "healthy", 1, "healthy" },
		{ "1.52, unhealthy: inspected for its log", 152, ID_ME, ID_WEB, "running",
		  "unhealthy", 0, NULL },
		{ "1.52, exited: inspected", 152, ID_ME, ID_WEB, "exited", "none", 0, NULL },
		{ "an id that only begins like the agent's", 141, "bbbbbbbbbbbb", ID_ME, "running",
		  NULL, 0, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char it[512], body[600];
		item(it, sizeof(it), cases[i].id, "svc", cases[i].state, cases[i].health);
		snprintf(body, sizeof(body), "[%s]", it);
		struct container_list l = { 0 };
		struct docker_ids todo = { 0 };
		struct errbuf e = { 0 };
		int r = docker_parse_list(body, strlen(body), "p", cases[i].self_id, cases[i].version,
					  &l, &todo, &e);
		is_int(r, 0, "%s: parsed (%s)", cases[i].what, e.msg);
		is_int(l.n, cases[i].listed, "%s: taken from the list", cases[i].what);
		is_int(todo.n, !cases[i].listed, "%s: queued for an inspect", cases[i].what);
		if (l.n == 1) {
			is_str(l.v[0].id, cases[i].id, "%s: id", cases[i].what);
			is_str(l.v[0].name, "svc", "%s: name without its slash", cases[i].what);
			is_str(l.v[0].health, cases[i].want_health, "%s: health", cases[i].what);
			ok(l.v[0].running, "%s: running", cases[i].what);
		}
		container_list_free(&l);
		free(todo.v);
	}

	/* The agent's own labels are read from a list item as from an inspect
	 * (issue 34): at API 1.52 a healthy optional service taken from the
	 * list is skipped as optional, not judged, and a bad value is an
	 * entry even while the container is healthy. */
	static const struct {
		const char *value;
		const char *want_skip; /* container_skip_reason */
		const char *want_entry; /* containers_judge's entry, NULL: none */
	} opt[] = {
		{ "true", "optional (" OPTIONAL_LABEL ")", NULL },
		{ "false", NULL, NULL },
		{ "maybe", NULL, "label " OPTIONAL_LABEL ": must be true or false" },
	};
	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		char body[700];
		snprintf(body, sizeof(body),
			 "[{\"Id\":\"%s\",\"Names\":[\"/exporter\"],\"State\":\"running\","
			 "\"Health\":{\"Status\":\"healthy\"},\"Labels\":{"
			 "\"com.docker.compose.project\":\"p\",\"com.docker.compose.service\":"
			 "\"exporter\",\"" OPTIONAL_LABEL "\":\"%s\"}}]",
			 ID_WEB, opt[i].value);
		struct container_list l = { 0 };
		struct docker_ids todo = { 0 };
		struct errbuf e = { 0 };
		struct verdict v;
		verdict_init(&v);
		is_int(docker_parse_list(body, strlen(body), "p", NULL, 152, &l, &todo, &e), 0,
		       "optional=%s: parsed (%s)", opt[i].value, e.msg);
		ok(l.n == 1 && todo.n == 0, "optional=%s: taken from the 1.52 list", opt[i].value);
		if (l.n == 1) {
			is_str(container_skip_reason(&l.v[0]), opt[i].want_skip,
			       "optional=%s: skipped as the label says", opt[i].value);
			is_int(containers_judge(&l, &v), 0, "optional=%s: judged", opt[i].value);
			const char *entry = NULL;
			for (size_t k = 0; k < v.n_entries; k++)
				if (strcmp(v.entries[k].name, "exporter") == 0)
					entry = v.entries[k].status;
			is_str(entry, opt[i].want_entry, "optional=%s: its entry", opt[i].value);
		}
		verdict_free(&v);
		container_list_free(&l);
		free(todo.v);
	}

	/* Where the Docker host is (issue 34): only this machine's may have
	 * its containers probed. */
	static const struct {
		const char *host;
		bool local;
	} hosts[] = {
		{ "unix:///var/run/docker.sock", true }, { "tcp://127.0.0.1:2375", true },
		{ "tcp://127.1.2.3:2376", true },	 { "tcp://[::1]:2375", true },
		{ "tcp://localhost:2375", true },	 { "tcp://10.0.0.5:2375", false },
		{ "tcp://docker.example:2376", false },	 { "tcp://[fe80::1]:2375", false },
		{ "tcp://128.0.0.1:2375", false },	 { "npipe:////./pipe/docker", false },
	};
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		is_int(docker_host_is_local(hosts[i].host), hosts[i].local, "%s: %s", hosts[i].host,
		       hosts[i].local ? "this machine" : "another");

	/* Two items: the agent's from the list, the app's queued, in one body. */
	char a[512], b[512], body[1100];
	item(a, sizeof(a), ID_ME, "healthd", "running", NULL);
	item(b, sizeof(b), ID_WEB, "web", "running", NULL);
	snprintf(body, sizeof(body), "[%s,%s]", a, b);
	struct container_list l = { 0 };
	struct docker_ids todo = { 0 };
	struct errbuf e = { 0 };
	is_int(docker_parse_list(body, strlen(body), "p", ID_ME, 141, &l, &todo, &e), 0,
	       "agent and app: parsed");
	ok(l.n == 1 && strcmp(l.v[0].name, "healthd") == 0, "agent and app: the agent listed");
	ok(todo.n == 1 && strcmp(todo.v[0], ID_WEB) == 0, "agent and app: the app queued");
	container_list_free(&l);
	free(todo.v);
	return done_testing();
}
