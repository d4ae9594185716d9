/* app-compose.json: the part of it this agent reads (spec, "Opting in"). */
#ifndef HEALTHD_COMPOSE_H
#define HEALTHD_COMPOSE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define COMPOSE_MAX_BYTES (4u << 20)

enum app_runner {
	RUNNER_DOCKER_COMPOSE,
	RUNNER_NERDCTL_COMPOSE,
	RUNNER_OTHER, /* bash and anything else */
};

struct app_compose {
	char *name;            /* may be NULL */
	char *runner;          /* as written */
	enum app_runner kind;
	int manifest_version;  /* from "3" or legacy 2 */
	bool health_check;     /* requirements.health_check */
	char *health_status_file; /* requirements.health_status_file, absolute, or NULL */
	char hash[65];         /* SHA-256 of the file's bytes, lower-case hex */
};

/* Reads and validates path. Any failure is fatal before READY: err names the
 * file and the field ("app-compose.json: requirements.health_status_file: must
 * be an absolute path"). */
int compose_load(const char *path, struct app_compose *out, struct errbuf *err);
/* Pure part: validates buf (the hash is computed here too). */
int compose_parse(const char *buf, size_t len, struct app_compose *out,
		  struct errbuf *err);
void compose_free(struct app_compose *c);

#endif
