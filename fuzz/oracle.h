/* SPDX-License-Identifier: Apache-2.0 */
/* The property every container-runtime target checks: an app is never
 * healthy by accident. If any input container of the app's project (not a
 * one-off) that declares a healthcheck is not running, or its health is
 * anything but "healthy", the outcome must not be healthy:true; a failed
 * refresh is fine. Read from the input JSON here, on its own terms, not
 * from what the agent's parsers made of it; where the input is not what a
 * runtime prints (a field of the wrong type), the container is taken as
 * declaring a healthcheck and not serving, so that only an outcome that
 * fails closed passes. */
#ifndef HEALTHD_FUZZ_ORACLE_H
#define HEALTHD_FUZZ_ORACLE_H

#include <stdbool.h>
#include <stdlib.h>

#include "base/json.h"

#define ORACLE_PROJECT "demo"

static inline int oracle_label(const struct json *j, int obj, const char *key)
{
	return json_get(j, json_get(j, json_get(j, obj, "Config"), "Labels"), key);
}

/* Of the project and not a one-off; project NULL: any project. */
static inline bool oracle_counts(const struct json *j, int obj, const char *project)
{
	if (project && !json_str_eq(j, oracle_label(j, obj, "com.docker.compose.project"), project))
		return false;
	return !json_str_eq(j, oracle_label(j, obj, "com.docker.compose.oneoff"), "True");
}

static inline bool oracle_present(const struct json *j, int v)
{
	return v >= 0 && !json_is_null(j, v);
}

/* A health state the runtime keeps, or a probe in the config. */
static inline bool oracle_declares(const struct json *j, int obj)
{
	int state = json_get(j, obj, "State"), config = json_get(j, obj, "Config");
	int health = json_get(j, state, "Health");
	if (oracle_present(j, state) && !json_is_object(j, state))
		return true;
	if (oracle_present(j, health) && !json_is_object(j, health))
		return true;
	int hs = json_get(j, health, "Status");
	if (oracle_present(j, hs) &&
	    (!json_is_string(j, hs) || !(json_str_eq(j, hs, "") || json_str_eq(j, hs, "none"))))
		return true;
	if (oracle_present(j, config) && !json_is_object(j, config))
		return true;
	int hc = json_get(j, config, "Healthcheck");
	if (oracle_present(j, hc) && !json_is_object(j, hc))
		return true;
	int test = json_get(j, hc, "Test");
	if (!oracle_present(j, test))
		return false;
	return !json_is_array(j, test) ||
	       (j->tok[test].size > 0 && !json_str_eq(j, test + 1, "NONE"));
}

static inline bool oracle_literal(const struct json *j, int v, const char *lit)
{
	size_t n = strlen(lit);
	return v >= 0 && j->tok[v].type == JSMN_PRIMITIVE &&
	       (size_t)(j->tok[v].end - j->tok[v].start) == n &&
	       memcmp(j->s + j->tok[v].start, lit, n) == 0;
}

/* Running, not paused, and healthy. */
static inline bool oracle_serving(const struct json *j, int obj)
{
	int state = json_get(j, obj, "State"), paused = json_get(j, state, "Paused");
	return oracle_literal(j, json_get(j, state, "Running"), "true") &&
	       (paused < 0 || oracle_literal(j, paused, "false")) &&
	       json_str_eq(j, json_get(j, state, "Status"), "running") &&
	       json_str_eq(j, json_get(j, json_get(j, state, "Health"), "Status"), "healthy");
}

/* The inspect object at obj must keep the app from healthy:true. */
static inline bool oracle_bad(const struct json *j, int obj, const char *project)
{
	return json_is_object(j, obj) && oracle_counts(j, obj, project) &&
	       oracle_declares(j, obj) && !oracle_serving(j, obj);
}

/* The verdict: abort() (a crash libFuzzer keeps) on a healthy outcome. */
static inline void oracle_check(bool must_not_be_healthy, bool healthy)
{
	if (must_not_be_healthy && healthy)
		abort();
}

#endif
