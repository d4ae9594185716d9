/* SPDX-License-Identifier: Apache-2.0 */
/* Which containers the agent probes, and where: a container's labels and
 * addresses into its probe, the running ones into the prober's targets,
 * the prober's records back into them. docs/design/probes.md. */
#include "runtime/probes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_mode(const struct container *c, const char *mode)
{
	return c->network_mode && strcmp(c->network_mode, mode) == 0;
}

/* The same network: by NetworkID when both have one, else by name. */
static bool same_net(const struct container_net *a, const struct container_net *b)
{
	return *a->net_id && *b->net_id ? strcmp(a->net_id, b->net_id) == 0
					: strcmp(a->name, b->name) == 0;
}

static bool on_net(const struct container *self, const struct container_net *n)
{
	for (size_t i = 0; i < self->n_nets; i++)
		if (same_net(&self->nets[i], n))
			return true;
	return false;
}

/* The address to probe c at, from where the agent is (docs/design/verdict.md
 * "Probes"): self NULL or host-networked is the machine's own stack, which
 * reaches loopback and every bridge; a sidecar in a network of its own
 * reaches only the networks it is on (Docker isolates bridges from each
 * other), and its loopback is its own. -ENOENT with why filled. */
static int address(const struct container *c, const struct container *self, const char **ip,
		   char *why, size_t n)
{
	bool machine = !self || is_mode(self, "host");
	/* A sidecar that joined another's stack (container:ID) has no
	 * networks of its own to compare: the first address is tried. */
	bool compare = !machine && !(self->network_mode &&
				     strncmp(self->network_mode, "container:", 10) == 0);
	bool any = false;
	/* network_mode: host shares the machine's stack: its own address is
	 * loopback. Docker's NetworkMode is the app's Compose setting, not a
	 * label a service could forge. */
	if (is_mode(c, "host")) {
		if (machine) {
			*ip = "127.0.0.1";
			return 0;
		}
		snprintf(why, n, "probe: the container has network_mode host and the agent's own "
				 "container does not: loopback there is the agent's own");
		return -ENOENT;
	}
	/* The first by name whose address is valid: a bad one hides none. */
	for (size_t i = 0; i < c->n_nets; i++) {
		if (!c->nets[i].ipv4[0])
			continue;
		any = true;
		if (!compare || on_net(self, &c->nets[i])) {
			*ip = c->nets[i].ipv4;
			return 0;
		}
	}
	if (any) {
		snprintf(why, n, "probe: the container is on no network the agent's own container "
				 "is on");
		return -ENOENT;
	}
	if (c->ipv4_primary[0] && !compare) {
		*ip = c->ipv4_primary;
		return 0;
	}
	snprintf(why, n, "probe: the container has no IPv4 address on its networks");
	return -ENOENT;
}

/* Why the agent does not connect to ip, as the runtime reported it for a
 * container that is not host-networked, or NULL. Loopback and 0/8 would be
 * the agent's own machine (or its sidecar container), link-local is the
 * cloud's metadata service and the like, multicast and broadcast are no
 * one container. */
static const char *refused_address(const char *ip)
{
	struct in_addr a;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return "not an IPv4 address";
	uint32_t v = ntohl(a.s_addr);
	if ((v >> 24) == 0)
		return "in 0.0.0.0/8";
	if ((v >> 24) == 127)
		return "loopback (127.0.0.0/8)";
	if ((v >> 16) == 0xa9fe)
		return "link-local (169.254.0.0/16)";
	if ((v >> 28) == 0xe)
		return "multicast (224.0.0.0/4)";
	if ((v >> 28) == 0xf)
		return "reserved or broadcast (240.0.0.0/4)";
	return NULL;
}

int probe_prepare(struct container *c, const struct container *self, bool remote)
{
	free(c->probe);
	c->probe = NULL;
	if (!c->probe_labels.probe)
		return 0;
	struct container_probe *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	c->probe = p;
	if (probe_spec_parse(&c->probe_labels, &p->spec, p->why, sizeof(p->why)) < 0)
		return 0;
	static const char *const scheme[] = { "http", "https", "tcp", "grpc", "grpcs" };
	const char *ip = NULL, *refused;
	if (remote) {
		snprintf(p->why, sizeof(p->why),
			 "probe: Docker is not on this machine (docker_host is neither a unix "
			 "socket nor loopback): its container addresses are another host's");
		return 0;
	}
	if (address(c, self, &ip, p->why, sizeof(p->why)) < 0)
		return 0;
	/* Host networking's own loopback is the one address chosen here, not
	 * reported by the runtime. */
	if (!is_mode(c, "host") && (refused = refused_address(ip))) {
		snprintf(p->why, sizeof(p->why),
			 "probe: the runtime reports the address %s, %s: not probed", ip, refused);
		return 0;
	}
	snprintf(p->ip, sizeof(p->ip), "%s", ip);
	snprintf(p->target, sizeof(p->target), "%s://%s:%u", scheme[p->spec.kind], ip,
		 p->spec.port);
	p->usable = true;
	return 0;
}

/* Docker keeps Running true while paused or restarting: only "running"
 * serves, and only a serving container is probed. */
static bool serving(const struct container *c)
{
	return c->running && !c->paused && (!c->state || strcmp(c->state, "running") == 0);
}

/* The target c's probe asks for, when it can run now. */
static bool want(const struct container *c, struct prober_target *t)
{
	const struct container_probe *p = c->probe;
	if (!p || !p->usable || !serving(c) || c->oneoff || c->agent_self || !c->id ||
	    strlen(c->id) >= sizeof(t->id))
		return false;
	memset(t, 0, sizeof(*t));
	memcpy(t->id, c->id, strlen(c->id) + 1);
	t->started_ms = c->started_at_ns / 1000000;
	t->spec = p->spec;
	memcpy(t->ip, p->ip, sizeof(t->ip));
	return true;
}

int probes_sync(struct prober *p, struct container_list *l, const struct container *self,
		bool remote)
{
	for (size_t i = 0; i < l->n; i++)
		if (probe_prepare(&l->v[i], self, remote) < 0)
			return -ENOMEM;
	if (!p)
		return 0;
	size_t cap = l->n ? l->n : 1;
	struct prober_target *w = calloc(cap, sizeof(*w));
	struct probe_state *rec = calloc(cap, sizeof(*rec));
	struct container **of = calloc(cap, sizeof(*of));
	int r = w && rec && of ? 0 : -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; r == 0 && i < l->n; i++) {
		struct container *c = &l->v[i];
		struct prober_target t;
		if (!want(c, &t))
			continue;
		if (n >= PROBER_MAX_TARGETS) {
			c->probe->usable = false;
			snprintf(c->probe->why, sizeof(c->probe->why),
				 "probe: more than %d probed containers", PROBER_MAX_TARGETS);
			continue;
		}
		of[n] = c;
		w[n++] = t;
	}
	if (r == 0)
		r = prober_sync(p, w, n, rec);
	/* The records as they are now, into the containers judged. */
	for (size_t k = 0; r == 0 && k < n; k++) {
		of[k]->probe->state = rec[k];
		of[k]->probe->probed = true;
	}
	free(w);
	free(rec);
	free(of);
	return r;
}
