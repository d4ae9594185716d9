/* SPDX-License-Identifier: Apache-2.0 */
/* Runs docker_list once, for the end-to-end tests:
 *   docker_list HOST PROJECT TIMEOUT_MS   one line per container, or
 *                                         "error: ..." and exit status 1
 *   docker_list --check HOST              docker_check_opts only
 * DOCKER_TLS_VERIFY and DOCKER_CERT_PATH are read as the docker CLI does;
 * DOCKER_LIST_INSPECT names ids (space-separated) to inspect whatever the list
 * says, as the agent does for a container the events said is being stopped. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "runtime/docker.h"

static bool named(void *ids, const char *id)
{
	const char *p = ids;
	size_t n = strlen(id);
	while ((p = strstr(p, id)))
		if ((p == ids || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
		else
			p += n;
	return false;
}

int main(int argc, char **argv)
{
	const char *tls = getenv("DOCKER_TLS_VERIFY");
	struct docker_opts o = { .tls_verify = tls && *tls, .cert_path = getenv("DOCKER_CERT_PATH"),
				 .cancel_fd = -1 };
	struct errbuf err = { "" };
	if (argc == 3 && strcmp(argv[1], "--check") == 0) {
		o.host = argv[2];
		if (docker_check_opts(&o, &err) < 0) {
			printf("error: %s\n", err.msg);
			return 1;
		}
		printf("ok\n");
		return 0;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: %s HOST PROJECT TIMEOUT_MS | --check HOST\n", argv[0]);
		return 2;
	}
	o.host = argv[1];
	const char *ids = getenv("DOCKER_LIST_INSPECT");
	if (ids && *ids) {
		o.must_inspect = named;
		o.must_inspect_arg = (void *)ids;
	}
	struct container_list l = { 0 };
	int64_t deadline = clock_mono_ms() + atoll(argv[3]);
	if (docker_list(&o, argv[2], NULL, deadline, &l, &err) < 0) {
		printf("error: %s\n", err.msg);
		container_list_free(&l);
		return 1;
	}
	for (size_t i = 0; i < l.n; i++) {
		const struct container *c = &l.v[i];
		printf("%s state=%s running=%d paused=%d health=%s\n", c->name, c->state,
		       c->running, c->paused, c->health ? c->health : "-");
	}
	container_list_free(&l);
	return 0;
}
