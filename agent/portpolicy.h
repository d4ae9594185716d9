/* SPDX-License-Identifier: Apache-2.0 */
/* app-compose.json's port_policy (Dstack-TEE/dstack, dstack-types
 * AppCompose.port_policy, PortPolicy and PortAttrs): the ports the app
 * declared, and for which the gateway sends a PROXY header first ("pp":
 * true; docs/design/front.md, "Who is asking"). Read as the guest reads it:
 *   {"port_policy": {"restrict_mode": false, "ports": [{"port": 8090, "pp": true}]}}
 * every field defaults (ports empty, restrict_mode and pp false) but a
 * port's "port", a u16; a value of another type, a port out of range or a
 * field given twice is an error (serde's), fields it does not know are
 * ignored. A port listed twice is the last entry's, as the gateway builds
 * its map from the list (gateway/src/proxy/port_policy.rs). */
#ifndef HEALTHD_PORTPOLICY_H
#define HEALTHD_PORTPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/json.h"

struct port_policy {
	uint16_t *pp_ports; /* the ports with "pp": true, ascending; NULL when none */
	size_t n_pp;
	bool restrict_mode;
};

/* Token val of j (the value of "port_policy") into *out; err names the
 * field ("port_policy.ports[2].port: ..."). -EINVAL, -ENOMEM. */
int portpolicy_parse(const struct json *j, int val, struct port_policy *out, struct errbuf *err);
/* Whether the gateway sends a PROXY header first on port. */
bool portpolicy_pp(const struct port_policy *p, uint16_t port);
void portpolicy_free(struct port_policy *p);

#endif
