/* SPDX-License-Identifier: Apache-2.0 */
/* Docker-shaped container JSON, as Docker's GET /containers/{id}/json,
 * `docker inspect` and `nerdctl inspect` print it, into struct container.
 * Shared by both backends. */
#ifndef HEALTHD_INSPECT_H
#define HEALTHD_INSPECT_H

#include "base/json.h"
#include "runtime/container.h"

/* Fills c from the inspect object at token obj: Id, Name (leading '/'
 * dropped), State.{Status,Running,Paused,StartedAt}, State.Health.{Status,
 * Log[-1].End}, Config.StopSignal, Config.Labels[com.docker.compose.{oneoff,
 * project,service}, NERDCTL_STOPPED_LABEL]. -EINVAL with err
 * naming the field when the shape is wrong; -ENOMEM. */
int inspect_parse_object(const struct json *j, int obj, struct container *c,
			 struct errbuf *err);

/* The container's networks, from the object at token obj (an inspect
 * object, or an item of Docker's container list, which has the same
 * members): HostConfig.NetworkMode, every entry of NetworkSettings.Networks
 * (name, NetworkID, IPv4 address when valid) sorted by name, and
 * NetworkSettings.IPAddress when a valid IPv4. Anything not in that shape
 * is no address, never an error; -ENOMEM. */
int inspect_parse_network(const struct json *j, int obj, struct container *c,
			  struct errbuf *err);

/* The agent's own labels (dstack.healthd.*: the probe's and optional) from
 * the labels object at token labels, as strings; wherever a container is
 * judged, inspected or taken from Docker's list, they are read here. A label
 * that is not a string is an error (Compose writes strings only). */
int inspect_parse_agent_labels(const struct json *j, int labels, struct container *c,
			       struct errbuf *err);

/* A JSON array of inspect objects (nerdctl inspect, docker inspect): appends
 * one container per element to out. */
int inspect_parse_array(const char *buf, size_t len, struct container_list *out,
			struct errbuf *err);

#endif
