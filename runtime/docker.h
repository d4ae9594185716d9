/* SPDX-License-Identifier: Apache-2.0 */
/* Docker Engine API client: HTTP/1.1 over a unix socket or TCP (optionally TLS
 * with mbedtls), every connect, write and read bounded by a deadline. */
#ifndef HEALTHD_DOCKER_H
#define HEALTHD_DOCKER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "runtime/container.h"

/* Largest response body accepted; a refresh that would need more fails with
 * a clear error rather than truncating. */
#define DOCKER_MAX_BODY (16u << 20)
/* Newest API version this client speaks; min(this, daemon's) is used. */
#define DOCKER_API_MAX "1.52"

struct docker_opts {
	const char *host;    /* "unix:///var/run/docker.sock" or "tcp://HOST:PORT" */
	bool tls_verify;     /* DOCKER_TLS_VERIFY */
	const char *cert_path; /* DOCKER_CERT_PATH: ca.pem, cert.pem, key.pem */
	int cancel_fd;       /* readable: give up at once (-ECANCELED); -1 for none */
	/* NULL, or true for a container to inspect even when the list could
	 * vouch for it (API >= 1.52): one the events said is being stopped
	 * needs its stop signal and start time (runtime/stops.h). */
	bool (*must_inspect)(void *arg, const char *id);
	void *must_inspect_arg;
};

/* Validates opts->host (scheme, path length, port) before start-up so that a
 * bad --docker-host stops the agent before READY. */
int docker_check_opts(const struct docker_opts *o, struct errbuf *err);
/* Pure: the Docker host (DOCKER_HOST's syntax) is on this machine: a unix
 * socket, or TCP to a loopback address (127.0.0.0/8, ::1, "localhost").
 * Container addresses are then this machine's networks; any other host's
 * are that host's, which the agent must not probe from here (issue 34). An
 * unparsable host is not local. */
bool docker_host_is_local(const char *host);

/* Lists the containers labelled com.docker.compose.project=project (all
 * states), with their health, into out. deadline is CLOCK_MONOTONIC ms.
 * A failure to reach or understand the daemon is an error (err says what
 * failed, tagged with its kind, base/err.h, except a parse error); containers that vanish between list and inspect are skipped.
 * self_id (or NULL): the agent's own container, never judged, so taken
 * from the list and never inspected. */
int docker_list(const struct docker_opts *o, const char *project, const char *self_id,
		int64_t deadline, struct container_list *out, struct errbuf *err);

/* The container whose id begins with short_id (the agent's own, from its
 * mountinfo, or its hostname: Docker's default is the id's first 12 digits),
 * inspected into
 * *self (free with container_free): 1. 0 when there is none: Docker
 * answered 404, or the name matched a container whose id does not begin
 * with it. A one-off container is never found (the inspect skips it). */
int docker_find_self(const struct docker_opts *o, const char *short_id, int64_t deadline,
		     struct container *self, struct errbuf *err);

struct http_endpoint;
struct http_response;
struct json_buf;

/* The path of a request filtered on project's Compose label, at API version
 * (major * 100 + minor), appended to out: "/vX.Y/" what "filters=" and,
 * URL-encoded, before, the JSON string "com.docker.compose.project=project",
 * after (before and after complete the filters object around the label's
 * value list). -ENOMEM. Shared by the container list and the events stream. */
int docker_label_target(int version, const char *what, const char *before,
			const char *project, const char *after, struct json_buf *out);

/* GET /_ping: the API version to speak, min(DOCKER_API_MAX, the daemon's),
 * as major * 100 + minor. Shared with the events stream. */
int docker_ping(const struct http_endpoint *ep, int64_t deadline, int *version,
		struct errbuf *err);
/* "GET shown: HTTP 500: <the daemon's message, cleaned and cut>", tagged
 * ERR_KIND_RUNTIME_STATUS. */
int docker_status_error(const char *shown, const struct http_response *resp,
			struct errbuf *err);

/* Exposed for fuzzing: the body of GET /containers/json for project at API
 * version (major * 100 + minor, e.g. 141). Running containers whose list item
 * carries their health (API >= 1.52), and the agent's own (self_id, or
 * NULL) whatever its state, are appended to out; the ids of the others, to
 * inspect, to todo (free todo->v). -EPROTO with err naming the
 * item and field, -EINVAL for malformed JSON, -ENOMEM. */
struct docker_ids {
	char (*v)[65];
	size_t n;
};
int docker_parse_list(const char *body, size_t len, const char *project, const char *self_id,
		      int version, struct container_list *out, struct docker_ids *todo,
		      struct errbuf *err);

#endif
