/* SPDX-License-Identifier: Apache-2.0 */
/* pRPC request routing as the gateway and curl speak it (docs/design/prpc.md), pure:
 * HTTP method, path, query, headers and body in; which call, which mode and
 * which error out. The server turns a route into ready responses; the rules
 * live here so that a table can test every one of them. */
#ifndef HEALTHD_PRPC_H
#define HEALTHD_PRPC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* Only this mount serves (docs/design/prpc.md: /prpc/Health and /prpc/v0/Health
 * must not answer 200). */
#define PRPC_MOUNT "/prpc/v1/"
/* A request body larger than this is refused with 413. HealthRequest and
 * VersionRequest are empty messages: the gateway sends "{}"; 64 KiB leaves
 * room for any client's padding or unknown fields and bounds the memory a
 * connection can pin. */
#define PRPC_MAX_BODY (64 * 1024)
/* A JSON request body with more tokens than this is refused with 400. */
#define PRPC_MAX_JSON_TOKENS 1024

enum prpc_call {
	PRPC_CALL_NONE,
	PRPC_CALL_HEALTH,
	PRPC_CALL_VERSION,
};

enum prpc_outcome {
	PRPC_OK,          /* 200: answer the call */
	PRPC_PENDING,     /* routed; the body decides (prpc_route_body) */
	PRPC_BAD_METHOD,  /* 405: neither GET nor POST */
	PRPC_NOT_MOUNTED, /* 404 outside /prpc/v1/<Method>; never says "Service not found" */
	PRPC_NO_SERVICE,  /* 404 "Service not found: <Method>" */
	PRPC_BAD_REQUEST, /* 400: the body does not decode */
	PRPC_TOO_LARGE,   /* 413: "payload too large" */
};

struct prpc_request {
	const char *method;         /* HTTP method */
	const char *path;           /* URL path, without the query string */
	const char *json_arg;       /* the first `json` query parameter's value:
				     * "" when bare (?json), NULL when absent */
	const char *content_type;   /* NULL when absent */
	const char *content_length; /* the header's value, NULL when absent */
};

struct prpc_route {
	enum prpc_outcome outcome;
	enum prpc_call call;
	bool json;        /* answer (and read the body) in JSON, else protobuf */
	bool get;         /* a GET: the payload is the query string, never a body */
	int status;       /* HTTP status; 0 while PENDING */
	char error[ERRBUF_SIZE + 64]; /* the text of any outcome but OK/PENDING */
};

/* Routes on the request line and headers. The outcome is final unless it is
 * PENDING (a POST to a known method, whose body is still to come). */
void prpc_route_head(const struct prpc_request *rq, struct prpc_route *rt);

/* Finishes a PENDING route with the whole body (len bytes; body may be NULL
 * when len exceeds PRPC_MAX_BODY, which is all the answer needs). An empty
 * body is the default request in both modes. */
void prpc_route_body(struct prpc_route *rt, const void *body, size_t len);

/* The fixed texts, for responses built ahead of time. */
#define PRPC_TEXT_BAD_METHOD "method not allowed: pRPC answers GET and POST"
#define PRPC_TEXT_NOT_MOUNTED "not found: pRPC methods are served under " PRPC_MOUNT
#define PRPC_TEXT_TOO_LARGE "payload too large"

#endif
