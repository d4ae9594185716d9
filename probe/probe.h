/* SPDX-License-Identifier: Apache-2.0 */
/* Probes the agent runs itself for images that cannot run a Docker
 * healthcheck (issue 27, docs/design/probes.md): the pure parts. The
 * dstack.healthd.* labels into a spec, the answer of one probe into a
 * result, and a run of results into a status, exactly as Docker judges a
 * healthcheck (moby daemon/health.go, handleProbeResult) with Kubernetes'
 * successThreshold on top. The sockets are probe/prober.c's. */
#ifndef HEALTHD_PROBE_H
#define HEALTHD_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/http_parse.h"

/* The label names are fixed: apps and tools rely on them. */
#define PROBE_LABEL "dstack.healthd.probe"
#define PROBE_LABEL_INTERVAL "dstack.healthd.probe.interval"
#define PROBE_LABEL_TIMEOUT "dstack.healthd.probe.timeout"
#define PROBE_LABEL_START_PERIOD "dstack.healthd.probe.start_period"
#define PROBE_LABEL_RETRIES "dstack.healthd.probe.retries"
#define PROBE_LABEL_SUCCESS_THRESHOLD "dstack.healthd.probe.success_threshold"
#define OPTIONAL_LABEL "dstack.healthd.optional"

/* A request target is at most this long; longer is a label error. */
#define PROBE_PATH_MAX 1024
/* Body bytes read after a 2xx/3xx head before the probe passes
 * (Kubernetes reads 10 KiB: probe/http/http.go maxRespBodyLength). The
 * head is bounded by the parser (HTTP_MAX_HEADER_BYTES). */
#define PROBE_MAX_BODY (10u << 10)

/* The labels as the runtime printed them; NULL when absent. */
struct probe_labels {
	char *probe, *interval, *timeout, *start_period, *retries, *success_threshold;
};
void probe_labels_free(struct probe_labels *l);

enum probe_kind { PROBE_HTTP, PROBE_HTTPS, PROBE_TCP, PROBE_GRPC, PROBE_GRPCS };

struct probe_spec {
	enum probe_kind kind;
	unsigned port;
	/* HTTP: origin-form, "/" when the label gave none. gRPC: the service
	 * asked about, "" (the server as a whole) when the label gave none. */
	char path[PROBE_PATH_MAX + 1];
	int64_t interval_ms, timeout_ms, start_period_ms;
	unsigned retries, success_threshold;
};

/* Pure: the spec the labels declare, or -EINVAL with why (the agent's own
 * words: the label's name and the rule, never its value) filled. The probe
 * label names a scheme and the container's port only: a host, a user, a
 * unix socket or another scheme is refused, so that no label can make the
 * agent connect anywhere but the container's own address. */
int probe_spec_parse(const struct probe_labels *l, struct probe_spec *out, char *why, size_t n);

/* Pure: a duration as Docker reads one (Go's time.ParseDuration: "10s",
 * "1m30s", "1.5s", "500ms", "2us", "+5s", "-5s", "0"), into ns. -EINVAL
 * for what Go refuses, -ERANGE past a day either way. */
int probe_parse_duration(const char *s, int64_t *ns);

/* What one probe ended in. The words (probe_result_text) are the agent's
 * own fixed vocabulary: the public answer may carry them. */
enum probe_result {
	PROBE_NONE = 0,  /* no probe has run yet */
	PROBE_PASS,      /* TCP connected; HTTP 200-399; gRPC SERVING, then status OK */
	PROBE_STATUS,    /* HTTP answered outside 200-399; gRPC's :status not 200 */
	PROBE_REFUSED,
	PROBE_TIMEOUT,   /* the probe's timeout passed first */
	PROBE_UNREACHABLE,
	PROBE_RESET,
	PROBE_CUT,       /* the connection closed before the answer ended */
	PROBE_BAD_ANSWER,
	PROBE_TOO_BIG,   /* a head over the bound */
	PROBE_TLS,       /* the TLS handshake failed */
	PROBE_ERROR,     /* the agent could not run it (no socket left, ...) */
	/* gRPC (probe/grpc.h) */
	PROBE_GRPC_STATUS,     /* a HealthCheckResponse other than SERVING */
	PROBE_GRPC_NO_MESSAGE, /* the call ended OK without one */
	PROBE_GRPC_BAD,        /* not HTTP/2 or gRPC as they are written */
	PROBE_STREAM_RESET,    /* RST_STREAM on the call's stream */
	PROBE_GOAWAY,          /* the server closed the connection first */
	PROBE_BOUNDS,          /* a frame, frames, bytes or a header block over the bounds */
	PROBE_GRPC_CALL_STATUS, /* the call's final status (grpc-status) is not OK */
	PROBE_HTTP1,           /* an HTTP/1 answer where HTTP/2 was spoken */
	/* Not a probe's result: the record handed to the judge is older than
	 * interval + timeout + slack (the prober fell behind), so its last
	 * result no longer speaks for the app (issue 34). */
	PROBE_STALLED,
	PROBE_N_RESULTS
};
const char *probe_result_text(enum probe_result r);
/* Short names for /metrics labels ("pass", "refused", ...). */
const char *probe_result_name(enum probe_result r);

/* One HTTP answer being read: a head bounded by the parser, then at most
 * PROBE_MAX_BODY body bytes. A status outside 200-399 decides at the end
 * of the head; a pass needs the head and then the end of the body or
 * PROBE_MAX_BODY bytes of it (a reset or a cut inside them fails, as it
 * does for Kubernetes). */
struct probe_answer {
	struct http_parser p;
	size_t body;
};
void probe_answer_init(struct probe_answer *a);
/* Bytes read: 0 wants more, 1 decided (*res, *status: the HTTP status or
 * 0). Never fails otherwise: a malformed answer is a result. */
int probe_answer_feed(struct probe_answer *a, const char *buf, size_t len,
		      enum probe_result *res, int *status);
/* The peer closed the connection: always decides. */
void probe_answer_eof(struct probe_answer *a, enum probe_result *res, int *status);
void probe_answer_free(struct probe_answer *a);

enum probe_status { PROBE_STARTING, PROBE_HEALTHY, PROBE_UNHEALTHY };

/* The largest server RSA key a TLS probe uses (issue 34). Without a
 * certificate check the server still signs the handshake, and checking that
 * signature costs what its key costs, on the one probe thread: a key over
 * these bounds fails the probe before it is used (probe/prober.c). */
#define PROBE_RSA_MAX_BITS 4096
#define PROBE_RSA_MAX_EXPONENT 65537

/* Why a TLS probe refused the server's key: for the operator only (the
 * public words stay "TLS handshake failed"). */
enum probe_key_bound { PROBE_KEY_OK, PROBE_KEY_BITS, PROBE_KEY_EXPONENT };
struct probe_key_refusal {
	enum probe_key_bound bound;
	unsigned bits;     /* PROBE_KEY_BITS: the modulus's; PROBE_KEY_EXPONENT: the exponent's */
	uint64_t exponent; /* PROBE_KEY_EXPONENT of 64 bits or fewer: its value */
};

/* The operator's words on a probe's last result, beyond the public ones:
 * the rule a gRPC answer broke, or the server's grpc-message, escaped and
 * cut (probe/grpc.c). Never in a public answer. */
#define PROBE_DETAIL_MAX 160

/* A probe's record, as Docker keeps State.Health. Times are CLOCK_REALTIME
 * ms (start_period is measured from the container's StartedAt, as Docker
 * does). */
struct probe_state {
	enum probe_status status;
	unsigned failing_streak, passing_streak;
	enum probe_result last;
	/* Of the last probe: the HTTP status, the gRPC serving status
	 * (PROBE_GRPC_STATUS), the gRPC status (PROBE_GRPC_CALL_STATUS) or
	 * the HTTP/2 error code (PROBE_STREAM_RESET, PROBE_GOAWAY); 0 when
	 * none. */
	int last_status;
	/* Of a last PROBE_TLS that refused the server's key; zero otherwise. */
	struct probe_key_refusal last_key;
	/* The operator's words on the last result ("" when none); the prober
	 * sets them after probe_state_apply, which clears them. */
	char last_detail[PROBE_DETAIL_MAX];
	int64_t last_ms;  /* when the last probe ended; 0: none yet */
	int64_t since_ms; /* when status last changed (or the target appeared) */
	uint64_t runs;
};
void probe_state_init(struct probe_state *s, int64_t now_ms);
/* Pure: one result of a probe that started at start_ms, on a container
 * that started at started_ms. True when the status changed. A pass resets
 * the failing streak and, after success_threshold in a row, is healthy; a
 * failure counts unless the container is starting and still within
 * start_period of its start; retries in a row are unhealthy. */
bool probe_state_apply(struct probe_state *s, const struct probe_spec *spec,
		       enum probe_result r, int http_status, int64_t start_ms,
		       int64_t started_ms, int64_t now_ms);
/* The public words for a status other than healthy ("probe unhealthy
 * (connection refused)"), into buf. */
void probe_state_text(const struct probe_state *s, char *buf, size_t n);
/* "HTTP status 500", "connection refused", "passed (HTTP status 204)",
 * "gRPC health status NOT_SERVING", "gRPC status UNAVAILABLE": the public
 * words, from the agent's own tables. */
void probe_last_text(const struct probe_state *s, char *buf, size_t n);
/* The same with what only the operator sees (the HTTP/2 error code of a
 * reset or a GOAWAY, the server key a TLS probe refused, last_detail). */
void probe_last_detail(const struct probe_state *s, char *buf, size_t n);

/* What a container's probe is, for the judge and the operator's view:
 * filled from its labels and addresses, then from the prober
 * (runtime/probes.h). */
struct container_probe {
	bool usable;    /* spec parsed and an address found */
	char why[160];  /* when !usable: the public reason */
	struct probe_spec spec;
	char ip[16];     /* the IPv4 address probed */
	char target[96]; /* "http://172.18.0.2:8080" for the operator (path apart) */
	bool probed;     /* the prober holds a state for it */
	struct probe_state state;
};

#endif
