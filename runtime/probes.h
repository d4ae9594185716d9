/* SPDX-License-Identifier: Apache-2.0 */
/* The containers' side of the agent's own probes (issue 27,
 * docs/design/probes.md): which containers are probed, at which of their
 * addresses, and their records back from the prober (probe/prober.h), which
 * knows targets, not containers. */
#ifndef HEALTHD_PROBES_H
#define HEALTHD_PROBES_H

#include "probe/prober.h"
#include "runtime/container.h"

/* Pure: c->probe from c's labels and addresses (c->probe NULL when it has
 * no probe label). The address is the container's own, as the runtime
 * gave it, and one the agent can reach from where it is: self is the
 * agent's own container when it runs in one of this runtime's and the
 * runtime names its networks (Docker), else NULL (the machine's stack).
 * Loopback for host networking, only when the agent has the machine's
 * stack; else the IPv4 address on the first network by name that has a
 * valid one and, from a sidecar, that the sidecar is on too. None is a
 * reason, not a guess. -ENOMEM. */
/* remote: the runtime is not on this machine (docker_host_is_local false):
 * its containers' addresses are another host's networks, and every probe
 * is a reason instead (issue 34). Addresses the agent never connects to
 * are reasons too: 0.0.0.0/8, 127.0.0.0/8 (but host networking's
 * loopback), 169.254.0.0/16, multicast and above (224.0.0.0/3, with the
 * broadcast 255.255.255.255). */
int probe_prepare(struct container *c, const struct container *self, bool remote);

/* The refresh thread, before judging l: prepares each container's probe
 * (probe_prepare, from where self says the agent is), makes the running
 * ones that have a usable probe the prober's targets (a target seen before
 * keeps its record: same id, start, spec and address; a new one is probed
 * at once), and copies each target's record into its container. p NULL:
 * probes are prepared and none runs (each stays "starting"). -ENOMEM. */
int probes_sync(struct prober *p, struct container_list *l, const struct container *self,
		bool remote);

#endif
