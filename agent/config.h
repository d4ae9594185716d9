/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's own configuration: defaults, then the JSON config file, then
 * DSTACK_HEALTHD_<NAME> environment variables, then command-line flags; each
 * later source beats the earlier ones. */
#ifndef HEALTHD_CONFIG_H
#define HEALTHD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

#define CONFIG_DEFAULT_FILE "/etc/dstack/healthd.json"
#define CONFIG_DEFAULT_CONTROL_SOCKET "/run/dstack-healthd/control.sock"
#define CONFIG_MAX_OPTS 32
/* Room for config_where: a config file path and a key. */
#define CONFIG_WHERE_MAX 4200

enum { CONFIG_FROM_DEFAULT, CONFIG_FROM_FILE, CONFIG_FROM_ENV, CONFIG_FROM_FLAG,
       CONFIG_FROM_DOCKER_ENV };

struct config {
	char *config_file; /* the file read, or NULL */
	char *listen;
	int64_t header_timeout_ms; /* a whole request, from accept or the last one */
	char *compose_file;
	char *runtime_file;
	int64_t interval_ms;
	int64_t refresh_timeout_ms;
	int64_t min_refresh_spacing_ms; /* between refreshes started by events */
	int64_t drain_window_ms; /* drain --wait: pollers seen this recently must be told */
	int64_t service_gap_ms;  /* a service without a container stays unhealthy this long */
	char *docker_host;
	bool docker_tls_verify;
	char *docker_cert_path;
	char *nerdctl;
	char *containerd_address; /* NULL: nerdctl's default */
	int log_priority;         /* LOG_ERR .. LOG_DEBUG */
	char *control_socket;     /* the local view's unix socket; "" disables it */
	char *metrics_listen;     /* TCP address serving /metrics alone; "" none */
	char *relay;              /* the guest agent, for all but Health; "" none */
	int64_t relay_idle_timeout_ms; /* a relayed connection with no byte either way */
	int64_t relay_keepalive_ms;    /* TCP keepalive of relayed connections */
	char *verdict_file;       /* the served verdict as a status file; "" none */
	int64_t stop_hold_ms;     /* a sidecar's stop: a gateway's poll after the guest agent */
	char *stop_guest_agent;   /* the guest agent's Health, asked on a sidecar's stop; "" none */

	/* Where each option's value came from (CONFIG_FROM_*), by its index in
	 * the options table. */
	unsigned char origin[CONFIG_MAX_OPTS];

	/* Actions, command line only. */
	bool once;
	bool help;
	bool version;
};

/* Builds the configuration from argv and environ. On a usage or config error
 * returns a negative errno with err naming the flag, variable or file and
 * field. */
int config_load(int argc, char *const argv[], struct config *out, struct errbuf *err);
void config_free(struct config *c);
/* The checks that need more than the value's type, each error behind where
 * the value came from: the listen addresses parse, the control socket is an
 * absolute path that fits a socket address. */
int config_check(const struct config *c, struct errbuf *err);
/* The Docker host parses and, with TLS, its certificates can be read: only
 * when Docker is the source. */
int config_check_docker(const struct config *c, struct errbuf *err);
/* Where the value of file key `key` came from, as the user wrote it:
 * "FILE: key", "DSTACK_HEALTHD_KEY", "--key", "DOCKER_HOST", or "key (the
 * default)". For messages about the value. */
void config_where(const struct config *c, const char *key, char *buf, size_t n);
/* Pure part of reading the config file: applies the JSON text buf[0..len)
 * over c (path names it in messages). For config_load and fuzzing. */
int config_parse_json(struct config *c, const char *path, const char *buf, size_t len,
		      struct errbuf *err);
void config_usage(FILE *f);

struct json_buf;
/* The effective configuration for the operator's view: {"name": {"value":
 * ..., "from": "default" | "file PATH" | "environment NAME" | "flag
 * --name"}, ...}, the config file first. -ENOMEM. */
int config_json(const struct config *c, struct json_buf *out);
/* One line per option whose value differs, "name: old -> new", into out
 * (cut at n); returns how many differ. */
int config_diff(const struct config *a, const struct config *b, char *out, size_t n);

#endif
