/* SPDX-License-Identifier: Apache-2.0 */
/* app-compose.json: the part of it this agent reads (docs/design/verdict.md). */
#ifndef HEALTHD_COMPOSE_H
#define HEALTHD_COMPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/portpolicy.h"
#include "base/err.h"

#define COMPOSE_MAX_BYTES (4u << 20)
/* How its errors name the file, whatever its path. */
#define COMPOSE_NAME "app-compose.json"

enum app_runner {
	RUNNER_DOCKER_COMPOSE,
	RUNNER_NERDCTL_COMPOSE,
	RUNNER_OTHER, /* bash and anything else */
};

struct app_compose {
	char *name;            /* may be NULL */
	char *runner;          /* as written */
	enum app_runner kind;
	uint32_t manifest_version; /* from "3", or a legacy 1 or 2 */
	bool health_check;     /* requirements.health_check */
	char *health_status_file; /* requirements.health_status_file, absolute, or NULL */
	char hash[65];         /* SHA-256 of the file's bytes, lower-case hex */
	struct port_policy ports; /* port_policy (agent/portpolicy.h) */
};

/* Reads and validates path. On failure err (tagged ERR_KIND_COMPOSE) names
 * the file, never its path, and the field ("app-compose.json:
 * requirements.health_status_file: must be an absolute path"). */
int compose_load(const char *path, struct app_compose *out, struct errbuf *err);
/* Pure part: validates buf (the hash is computed here too). */
int compose_parse(const char *buf, size_t len, struct app_compose *out,
		  struct errbuf *err);
void compose_free(struct app_compose *c);

/* app-compose.json as the agent holds it. A problem with it does not stop the
 * agent: it is served (healthy:false, err's public text) and the file is read
 * again on every refresh until it is usable; then it is kept (it is measured
 * and does not change during a boot) until a reload. */
struct manifest {
	struct app_compose app; /* valid when ok */
	bool ok;
	struct errbuf err; /* why not, when !ok */
	/* Set before the first manifest_try when the agent writes a verdict
	 * file (a sidecar): requirements.health_status_file names that file,
	 * so it is dropped and the Compose containers are judged. */
	bool writes_status_file;
	/* Called (on the thread that read it) when the file becomes usable
	 * after it was not; NULL for none. */
	void (*on_usable)(const struct manifest *m);
};

/* Reads path into m unless m is usable already; true when it is. */
bool manifest_try(struct manifest *m, const char *path);
void manifest_free(struct manifest *m);

#endif
