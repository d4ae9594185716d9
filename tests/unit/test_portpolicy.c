/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for app-compose.json's port_policy (agent/portpolicy.c),
 * read through compose_parse as the agent reads the file: the ports the
 * gateway sends a PROXY header to, and the errors the guest's serde would
 * give (dstack-types PortPolicy, PortAttrs). */
#include <stdio.h>
#include <string.h>

#include "agent/compose.h"
#include "tests/lib/tap.h"

#define HEAD "{\"manifest_version\":\"3\",\"runner\":\"docker-compose\""

static const struct {
	const char *name;
	const char *doc;
	const char *want; /* "pp: P P ..." (empty list: "pp:"), or the error */
} cases[] = {
	{ "no port_policy: no port", HEAD "}", "pp:" },
	{ "the issue's example", HEAD ",\"port_policy\":{\"restrict_mode\":false,\"ports\":[{\"port\":8090,\"pp\":true}]}}",
	  "pp: 8090" },
	{ "pp defaults to false", HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090}]}}", "pp:" },
	{ "ports default to none", HEAD ",\"port_policy\":{\"restrict_mode\":true}}", "pp:" },
	{ "an empty object", HEAD ",\"port_policy\":{}}", "pp:" },
	{ "several, sorted", HEAD ",\"port_policy\":{\"ports\":[{\"port\":443,\"pp\":true},{\"port\":80,\"pp\":true},{\"port\":22,\"pp\":false}]}}",
	  "pp: 80 443" },
	{ "a port listed twice: the last entry wins (off)",
	  HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090,\"pp\":true},{\"port\":8090,\"pp\":false}]}}", "pp:" },
	{ "a port listed twice: the last entry wins (on)",
	  HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090,\"pp\":false},{\"port\":8090,\"pp\":true}]}}", "pp: 8090" },
	{ "ports 0 and 65535", HEAD ",\"port_policy\":{\"ports\":[{\"port\":0,\"pp\":true},{\"port\":65535,\"pp\":true}]}}",
	  "pp: 0 65535" },
	{ "fields it does not know are ignored",
	  HEAD ",\"port_policy\":{\"x\":1,\"ports\":[{\"port\":8090,\"pp\":true,\"y\":[]}]}}", "pp: 8090" },
	{ "port_policy null", HEAD ",\"port_policy\":null}", "port_policy: must be an object, not null" },
	{ "port_policy an array", HEAD ",\"port_policy\":[]}", "port_policy: must be an object, not an array" },
	{ "ports not an array", HEAD ",\"port_policy\":{\"ports\":{}}}",
	  "port_policy.ports: must be an array, not an object" },
	{ "ports null", HEAD ",\"port_policy\":{\"ports\":null}}", "port_policy.ports: must be an array, not null" },
	{ "an entry not an object", HEAD ",\"port_policy\":{\"ports\":[8090]}}",
	  "port_policy.ports[0]: must be an object, not a number" },
	{ "an entry without its port", HEAD ",\"port_policy\":{\"ports\":[{\"pp\":true}]}}",
	  "port_policy.ports[0].port: missing" },
	{ "a port out of range", HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090},{\"port\":65536,\"pp\":true}]}}",
	  "port_policy.ports[1].port: must be an integer from 0 to 65535" },
	{ "a negative port", HEAD ",\"port_policy\":{\"ports\":[{\"port\":-1}]}}",
	  "port_policy.ports[0].port: must be an integer from 0 to 65535" },
	{ "a port with a fraction", HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090.5}]}}",
	  "port_policy.ports[0].port: must be an integer from 0 to 65535" },
	{ "a port as a string", HEAD ",\"port_policy\":{\"ports\":[{\"port\":\"8090\"}]}}",
	  "port_policy.ports[0].port: must be an integer from 0 to 65535" },
	{ "pp as a string", HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090,\"pp\":\"true\"}]}}",
	  "port_policy.ports[0].pp: must be true or false, not a string" },
	{ "pp null", HEAD ",\"port_policy\":{\"ports\":[{\"port\":8090,\"pp\":null}]}}",
	  "port_policy.ports[0].pp: must be true or false, not null" },
	{ "restrict_mode a number", HEAD ",\"port_policy\":{\"restrict_mode\":1}}",
	  "port_policy.restrict_mode: must be true or false, not a number" },
	{ "port given twice in an entry", HEAD ",\"port_policy\":{\"ports\":[{\"port\":1,\"port\":2}]}}",
	  "port_policy.ports[0].port: appears more than once" },
	{ "pp given twice in an entry", HEAD ",\"port_policy\":{\"ports\":[{\"port\":1,\"pp\":true,\"pp\":false}]}}",
	  "port_policy.ports[0].pp: appears more than once" },
	{ "ports given twice", HEAD ",\"port_policy\":{\"ports\":[],\"ports\":[]}}",
	  "port_policy.ports: appears more than once" },
	{ "restrict_mode given twice", HEAD ",\"port_policy\":{\"restrict_mode\":true,\"restrict_mode\":true}}",
	  "port_policy.restrict_mode: appears more than once" },
	{ "port_policy given twice", HEAD ",\"port_policy\":{},\"port_policy\":{}}",
	  "port_policy: appears more than once" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct app_compose c;
		struct errbuf err = { "" };
		char got[512];
		if (compose_parse(cases[i].doc, strlen(cases[i].doc), &c, &err) < 0) {
			snprintf(got, sizeof(got), "%s", err.msg);
		} else {
			size_t used = (size_t)snprintf(got, sizeof(got), "pp:");
			for (size_t p = 0; p < c.ports.n_pp; p++)
				used += (size_t)snprintf(got + used, sizeof(got) - used, " %u",
							 c.ports.pp_ports[p]);
			compose_free(&c);
		}
		is_str(got, cases[i].want, "%s", cases[i].name);
	}
	struct app_compose c;
	struct errbuf err = { "" };
	const char *doc = HEAD ",\"port_policy\":{\"ports\":[{\"port\":80,\"pp\":true},{\"port\":8090,\"pp\":true}]}}";
	compose_parse(doc, strlen(doc), &c, &err);
	ok(portpolicy_pp(&c.ports, 8090) && portpolicy_pp(&c.ports, 80) && !portpolicy_pp(&c.ports, 81),
	   "portpolicy_pp: the declared ports, and no other");
	compose_free(&c);
	return done_testing();
}
