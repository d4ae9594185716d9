/* HealthResponse and VersionResponse as bytes: compact JSON with every field
 * (DESIGN.md §3), and protobuf through protoc-c's generated code. */
#ifndef HEALTHD_ENCODE_H
#define HEALTHD_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "../agent/json.h"
#include "../agent/verdict.h"

/* {"healthy":true,"unhealthy":[],"error":""}, every field, defaults included,
 * never null. -ENOMEM. */
int encode_health_json(const struct verdict *v, struct json_buf *out);
/* Protobuf HealthResponse; *out is malloc'd. -ENOMEM. */
int encode_health_pb(const struct verdict *v, uint8_t **out, size_t *len);

/* The verdict as ready responses; built by the refresh thread (snapshot_new),
 * read by the HTTP thread. */
struct rpc_encoded *rpc_encode(const struct verdict *v);
void rpc_encoded_free(struct rpc_encoded *e);

#endif
