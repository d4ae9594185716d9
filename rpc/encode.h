/* SPDX-License-Identifier: Apache-2.0 */
/* HealthResponse and VersionResponse as bytes: compact JSON with every field
 * (docs/design/prpc.md), and protobuf through protoc-c's generated code; and those
 * bytes as ready libmicrohttpd responses, built once by the refresh thread so
 * that answering a request is queueing a reference. */
#ifndef HEALTHD_ENCODE_H
#define HEALTHD_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/verdict.h"

/* Every response carries this header (docs/design/prpc.md). */
#define RPC_APP_VERSION_HEADER "X-App-Version"
/* Its value, "v<version> (<rev>)", as compiled into this module (the
 * Version method answers the same two strings). */
const char *rpc_app_version(void);

/* {"healthy":true,"unhealthy":[],"error":""}, every field, defaults included,
 * never null. -ENOMEM. */
int encode_health_json(const struct verdict *v, struct json_buf *out);
/* Protobuf HealthResponse; *out is malloc'd (never NULL on success, even
 * when *len is 0: the all-defaults message packs to nothing). Strings that
 * are not valid UTF-8 are repaired with U+FFFD, since proto3 decoders refuse
 * them. -ENOMEM. */
int encode_health_pb(const struct verdict *v, uint8_t **out, size_t *len);

/* {"version":"0.1.0","rev":"git:..."} and the VersionResponse message. */
int encode_version_json(struct json_buf *out);
int encode_version_pb(uint8_t **out, size_t *len);

/* A pRPC error body: {"error":"<msg>"} in JSON mode, the prpc.PrpcError
 * message in protobuf mode. */
int encode_error_json(const char *msg, struct json_buf *out);
int encode_error_pb(const char *msg, uint8_t **out, size_t *len);

struct MHD_Response;

/* A response owning a copy of body, with Content-Type (application/json or
 * application/octet-stream) and X-App-Version set. NULL on ENOMEM. */
struct MHD_Response *rpc_response_new(bool json, const void *body, size_t len);
/* The pRPC error for msg in the given mode, as a response. NULL on ENOMEM. */
struct MHD_Response *rpc_response_error(bool json, const char *msg);
/* The HealthResponse for v in the given mode, as a response. */
struct MHD_Response *rpc_response_health(bool json, const struct verdict *v);
/* The VersionResponse in the given mode, as a response. NULL on ENOMEM. */
struct MHD_Response *rpc_response_version(bool json);

/* The verdict as ready responses; built by the refresh thread (rpc_snapshot_new),
 * queued by the HTTP thread. MHD responses are reference counted under their
 * own lock: queueing one on any number of connections and dropping ours from
 * another thread is safe. */
struct rpc_encoded {
	struct MHD_Response *health_json;
	struct MHD_Response *health_pb;
};

/* NULL on ENOMEM. */
struct rpc_encoded *rpc_encode(const struct verdict *v);
/* Drops this object's references; responses still queued live on. */
void rpc_encoded_free(struct rpc_encoded *e);
DEFINE_PTR_CLEANUP(struct rpc_encoded, rpc_encoded_free)

/* A cache snapshot of *v (taken over, as snapshot_new does) with its
 * responses built: what the publisher hands the cache, and what the HTTP
 * thread finds in snapshot->enc. NULL on ENOMEM, *v then still the caller's. */
struct snapshot *rpc_snapshot_new(struct verdict *v, int64_t mono_ms);

#endif
