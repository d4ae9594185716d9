/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for agent/compose.c: app-compose.json, valid and invalid. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/compose.h"
#include "tests/lib/tap.h"

#define V3 "\"manifest_version\":\"3\",\"name\":\"app\","
#define KNOWS "requirements only knows health_check, health_status_file and the " \
	"guest's os_version, platforms, tdx_measure_acpi_tables, launch_token_hash and gpu_policy"
#define DC "\"runner\":\"docker-compose\""

struct want {
	uint32_t version;
	enum app_runner kind;
	bool check;
	const char *file;
};

static void test_valid(void)
{
	static const struct {
		const char *what, *in;
		struct want w;
	} cases[] = {
		{ "minimal v3", "{" V3 DC "}", { 3, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "legacy number 2", "{\"manifest_version\":2,\"name\":\"a\"," DC "}",
		  { 2, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "legacy number 1", "{\"manifest_version\":1,\"name\":\"a\"," DC "}",
		  { 1, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "string with blanks around it, trimmed as the guest does",
		  "{\"manifest_version\":\" 3 \"," DC ",\"requirements\":{\"health_check\":true}}",
		  { 3, RUNNER_DOCKER_COMPOSE, true, NULL } },
		{ "the largest version a guest reads", "{\"manifest_version\":\"4294967295\"," DC "}",
		  { 4294967295u, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "string 2 without requirements", "{\"manifest_version\":\"2\"," DC "}",
		  { 2, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "future version 4", "{\"manifest_version\":\"4\"," DC
		  ",\"requirements\":{\"health_check\":true}}", { 4, RUNNER_DOCKER_COMPOSE, true, NULL } },
		{ "health_check on", "{" V3 DC ",\"requirements\":{\"health_check\":true}}",
		  { 3, RUNNER_DOCKER_COMPOSE, true, NULL } },
		{ "health_check off", "{" V3 DC ",\"requirements\":{\"health_check\":false}}",
		  { 3, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "empty requirements", "{" V3 DC ",\"requirements\":{}}",
		  { 3, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "status file", "{" V3 DC ",\"requirements\":{\"health_check\":true,"
		  "\"health_status_file\":\"/dstack/health\"}}",
		  { 3, RUNNER_DOCKER_COMPOSE, true, "/dstack/health" } },
		{ "status file with escapes", "{" V3 DC ",\"requirements\":{"
		  "\"health_status_file\":\"\\/d\\u00e9\\/h\"}}",
		  { 3, RUNNER_DOCKER_COMPOSE, false, "/d\xc3\xa9/h" } },
		{ "nerdctl", "{" V3 "\"runner\":\"nerdctl-compose\",\"requirements\":"
		  "{\"health_check\":true}}", { 3, RUNNER_NERDCTL_COMPOSE, true, NULL } },
		{ "bash with status file", "{" V3 "\"runner\":\"bash\",\"requirements\":"
		  "{\"health_check\":true,\"health_status_file\":\"/run/h\"}}",
		  { 3, RUNNER_OTHER, true, "/run/h" } },
		{ "bash without gating", "{" V3 "\"runner\":\"bash\"}", { 3, RUNNER_OTHER, false, NULL } },
		{ "bash, gating off, no file", "{" V3 "\"runner\":\"bash\",\"requirements\":"
		  "{\"health_check\":false}}", { 3, RUNNER_OTHER, false, NULL } },
		{ "unknown top-level fields ignored", "{" V3 DC ",\"docker_compose_file\":"
		  "\"services:\\n  web:\\n    image: x\\n\",\"kms_enabled\":true,\"features\":[\"a\"],"
		  "\"port_policy\":{\"ports\":[{\"port\":80}]},\"x\":null}",
		  { 3, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "no name", "{\"manifest_version\":\"3\"," DC "}", { 3, RUNNER_DOCKER_COMPOSE, false, NULL } },
		{ "requirements before version", "{\"requirements\":{\"health_check\":true},"
		  DC ",\"manifest_version\":\"3\"}", { 3, RUNNER_DOCKER_COMPOSE, true, NULL } },
		/* Upstream's guest fields beside health_check: the guest's to
		 * enforce, accepted here (null is their "absent"). */
		{ "the guest's requirements too", "{" V3 DC ",\"requirements\":{"
		  "\"os_version\":\">=0.6.1\",\"platforms\":[\"tdx\"],"
		  "\"tdx_measure_acpi_tables\":true,\"launch_token_hash\":\"ab\","
		  "\"gpu_policy\":{},\"health_check\":true,\"health_status_file\":\"/h\"}}",
		  { 3, RUNNER_DOCKER_COMPOSE, true, "/h" } },
		{ "the guest's requirements null", "{" V3 DC ",\"requirements\":{"
		  "\"os_version\":null,\"platforms\":null,\"tdx_measure_acpi_tables\":null,"
		  "\"launch_token_hash\":null,\"health_check\":true}}",
		  { 3, RUNNER_DOCKER_COMPOSE, true, NULL } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct app_compose c;
		struct errbuf e = { "" };
		int r = compose_parse(cases[i].in, strlen(cases[i].in), &c, &e);
		is_int(r, 0, "%s: accepted (%s)", cases[i].what, e.msg);
		if (r == 0) {
			is_int(c.manifest_version, cases[i].w.version, "%s: version", cases[i].what);
			is_int(c.kind, cases[i].w.kind, "%s: runner kind", cases[i].what);
			is_int(c.health_check, cases[i].w.check, "%s: health_check", cases[i].what);
			is_str(c.health_status_file, cases[i].w.file, "%s: status file",
			       cases[i].what);
			is_int(strlen(c.hash), 64, "%s: hash computed", cases[i].what);
		}
		compose_free(&c);
	}
}

static void test_invalid(void)
{
	static const struct {
		const char *what, *in, *msg; /* msg: the whole error */
	} cases[] = {
		{ "missing version", "{" DC "}",
		  "manifest_version: missing; write \"manifest_version\": \"3\"" },
		{ "version zero", "{\"manifest_version\":0," DC "}", NULL },
		{ "version negative", "{\"manifest_version\":-3," DC "}", NULL },
		{ "version fraction", "{\"manifest_version\":3.0," DC "}",
		  "manifest_version: must be a positive integer string such as \"3\" (or a "
		  "legacy number, 1 or 2), not a number" },
		{ "version text", "{\"manifest_version\":\"three\"," DC "}",
		  "manifest_version: must be a positive integer string such as \"3\" (or a "
		  "legacy number, 1 or 2), not this string" },
		{ "a numeric 3, which the guest refuses", "{\"manifest_version\":3," DC
		  ",\"requirements\":{\"health_check\":true}}",
		  "manifest_version: a number is accepted only for the legacy versions 1 and 2; "
		  "write the string \"3\"" },
		{ "a numeric 4", "{\"manifest_version\":4," DC "}", NULL },
		{ "version with a leading zero, not canonical", "{\"manifest_version\":\"03\"," DC "}",
		  NULL },
		{ "version with a sign", "{\"manifest_version\":\"+3\"," DC "}", NULL },
		{ "version past 32 bits", "{\"manifest_version\":\"4294967296\"," DC "}", NULL },
		{ "version of blanks only", "{\"manifest_version\":\"  \"," DC "}", NULL },
		{ "version empty string", "{\"manifest_version\":\"\"," DC "}", NULL },
		{ "version bool", "{\"manifest_version\":true," DC "}", NULL },
		{ "version null", "{\"manifest_version\":null," DC "}", NULL },
		{ "version huge", "{\"manifest_version\":99999999999," DC "}", NULL },
		{ "version twice", "{\"manifest_version\":\"3\",\"manifest_version\":\"2\"," DC "}",
		  "manifest_version: appears more than once" },
		{ "missing runner", "{" V3 "\"x\":1}", "runner: missing" },
		{ "runner number", "{" V3 "\"runner\":1}", "runner: must be a string, not a number" },
		{ "runner empty", "{" V3 "\"runner\":\"\"}", "runner: must be a non-empty string" },
		{ "runner NUL", "{" V3 "\"runner\":\"a\\u0000b\"}",
		  "runner: is not a valid string (bad escape or NUL)" },
		{ "name number", "{\"manifest_version\":\"3\",\"name\":5," DC "}",
		  "name: must be a string, not a number" },
		{ "requirements with number 2",
		  "{\"manifest_version\":2," DC ",\"requirements\":{\"health_check\":true}}",
		  "requirements: needs manifest_version \"3\" or later, not 2; an older guest "
		  "would ignore it" },
		{ "requirements with string 2",
		  "{\"manifest_version\":\"2\"," DC ",\"requirements\":{}}",
		  "requirements: needs manifest_version \"3\" or later, not 2; an older guest "
		  "would ignore it" },
		{ "requirements not an object", "{" V3 DC ",\"requirements\":[]}",
		  "requirements: must be an object, not an array" },
		{ "requirements null", "{" V3 DC ",\"requirements\":null}",
		  "requirements: must be an object, not null" },
		{ "requirements twice", "{" V3 DC ",\"requirements\":{},\"requirements\":{}}",
		  "requirements: appears more than once" },
		{ "unknown requirement", "{" V3 DC ",\"requirements\":{\"gpu\":true}}",
		  "requirements.gpu: unknown field; " KNOWS },
		{ "misspelt requirement", "{" V3 DC ",\"requirements\":{\"healthcheck\":true}}",
		  "requirements.healthcheck: unknown field; " KNOWS },
		{ "unknown requirement name cleaned", "{" V3 DC ",\"requirements\":{\"a\\nb\":1}}",
		  "requirements.a?b: unknown field; " KNOWS },
		/* The draft object form, which no dstack guest accepted. */
		{ "health_check as an object",
		  "{" V3 DC ",\"requirements\":{\"health_check\":{\"enabled\":true,"
		  "\"health_file\":\"/dstack/health\"}}}",
		  "requirements.health_check: must be true or false, not an object (the status "
		  "file is requirements.health_status_file, beside it)" },
		/* The guest's own fields: their types, once each. */
		{ "os_version a number", "{" V3 DC ",\"requirements\":{\"os_version\":6}}",
		  "requirements.os_version: must be a string, not a number" },
		{ "platforms a string", "{" V3 DC ",\"requirements\":{\"platforms\":\"tdx\"}}",
		  "requirements.platforms: must be an array, not a string" },
		{ "tdx_measure_acpi_tables a string",
		  "{" V3 DC ",\"requirements\":{\"tdx_measure_acpi_tables\":\"yes\"}}",
		  "requirements.tdx_measure_acpi_tables: must be true or false, not a string" },
		{ "gpu_policy null", "{" V3 DC ",\"requirements\":{\"gpu_policy\":null}}",
		  "requirements.gpu_policy: must be an object, not null" },
		{ "os_version twice",
		  "{" V3 DC ",\"requirements\":{\"os_version\":\"1\",\"os_version\":\"2\"}}",
		  "requirements.os_version: appears more than once" },
		{ "health_check string", "{" V3 DC ",\"requirements\":{\"health_check\":\"true\"}}",
		  "requirements.health_check: must be true or false, not a string" },
		{ "health_check number", "{" V3 DC ",\"requirements\":{\"health_check\":1}}",
		  "requirements.health_check: must be true or false, not a number" },
		{ "health_check null", "{" V3 DC ",\"requirements\":{\"health_check\":null}}",
		  "requirements.health_check: must be true or false, not null" },
		{ "health_check twice", "{" V3 DC ",\"requirements\":{\"health_check\":true,"
		  "\"health_check\":false}}", "requirements.health_check: appears more than once" },
		{ "relative status file", "{" V3 DC ",\"requirements\":{"
		  "\"health_status_file\":\"dstack/health\"}}",
		  "requirements.health_status_file: must be an absolute path" },
		{ "dot-relative status file", "{" V3 DC ",\"requirements\":{"
		  "\"health_status_file\":\"./health\"}}",
		  "requirements.health_status_file: must be an absolute path" },
		{ "empty status file", "{" V3 DC ",\"requirements\":{\"health_status_file\":\"\"}}",
		  "requirements.health_status_file: must be an absolute path" },
		{ "status file number", "{" V3 DC ",\"requirements\":{\"health_status_file\":1}}",
		  "requirements.health_status_file: must be a string, not a number" },
		{ "status file null", "{" V3 DC ",\"requirements\":{\"health_status_file\":null}}",
		  "requirements.health_status_file: must be a string, not null" },
		{ "status file with NUL", "{" V3 DC ",\"requirements\":{"
		  "\"health_status_file\":\"/a\\u0000b\"}}",
		  "requirements.health_status_file: is not a valid string (bad escape or NUL)" },
		{ "status file with newline", "{" V3 DC ",\"requirements\":{"
		  "\"health_status_file\":\"/a\\nb\"}}",
		  "requirements.health_status_file: must not contain control characters" },
		{ "status file twice", "{" V3 DC ",\"requirements\":{\"health_status_file\":\"/a\","
		  "\"health_status_file\":\"/b\"}}",
		  "requirements.health_status_file: appears more than once" },
		{ "bash with gating, no status file", "{" V3 "\"runner\":\"bash\",\"requirements\":"
		  "{\"health_check\":true}}",
		  "requirements.health_check: runner \"bash\" has no Compose containers to "
		  "judge, so nothing could ever be judged; set requirements.health_status_file" },
		{ "not an object", "[1]", "must be a JSON object, not an array" },
		{ "malformed", "{\"manifest_version\":\"3\",}", NULL },
		{ "empty", "", "document is empty" },
		{ "trailing garbage", "{" V3 DC "}x", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct app_compose c;
		struct errbuf e = { "" };
		int r = compose_parse(cases[i].in, strlen(cases[i].in), &c, &e);
		is_int(r, -EINVAL, "%s: refused (%s)", cases[i].what, e.msg);
		if (cases[i].msg)
			is_str(e.msg, cases[i].msg, "%s: message", cases[i].what);
		else
			ok(e.msg[0] != '\0', "%s: has a message", cases[i].what);
		ok(!c.runner && !c.name && !c.health_status_file, "%s: nothing left allocated",
		   cases[i].what);
		compose_free(&c);
	}
}

static void test_long_path(void)
{
	size_t n = 5000;
	char *doc = malloc(n + 200);
	int off = snprintf(doc, 200, "{" V3 DC ",\"requirements\":{\"health_status_file\":\"/");
	memset(doc + off, 'a', n);
	snprintf(doc + off + n, 200, "\"}}");
	struct app_compose c;
	struct errbuf e = { "" };
	is_int(compose_parse(doc, strlen(doc), &c, &e), -EINVAL, "a path over PATH_MAX refused");
	is_str(e.msg, "requirements.health_status_file: longer than 4095 bytes", "message");
	free(doc);
}

/* The hash is SHA-256 of the exact bytes, whitespace included. */
static void test_hash(void)
{
	const char *doc = "{" V3 DC "}\n";
	struct app_compose c;
	compose_parse(doc, strlen(doc), &c, NULL);
	char cmd[512], want[80] = "";
	snprintf(cmd, sizeof(cmd), "printf '%%s\\n' '%.*s' | sha256sum", (int)strlen(doc) - 1, doc);
	FILE *p = popen(cmd, "r");
	if (p) {
		if (!fgets(want, 65, p))
			want[0] = '\0';
		pclose(p);
	}
	is_str(c.hash, want, "hash matches sha256sum");
	/* Recorded with `printf '%s\n' DOC | sha256sum`. */
	is_str(c.hash, "b21ac334cdfd46d87c0263b67a1c11aae0e6170de502dca357b27650885e4383",
	       "hash matches the recorded value");
	compose_free(&c);
	const char *doc2 = "{" V3 DC "} \n";
	compose_parse(doc2, strlen(doc2), &c, NULL);
	ok(strcmp(c.hash, want) != 0, "one more byte changes the hash");
	compose_free(&c);
}

static void test_load(void)
{
	char dir[256], p[512];
	snprintf(dir, sizeof(dir), "%s/compose.XXXXXX", P_tmpdir);
	if (!ok(mkdtemp(dir) != NULL, "mkdtemp"))
		return;
	struct app_compose c;
	struct errbuf e = { "" };

	snprintf(p, sizeof(p), "%s/app-compose.json", dir);
	FILE *f = fopen(p, "w");
	fputs("{" V3 DC ",\"requirements\":{\"health_status_file\":\"rel\"}}", f);
	fclose(f);
	is_int(compose_load(p, &c, &e), -EINVAL, "load refuses a bad file");
	is_str(e.msg, "app-compose.json: requirements.health_status_file: must be an "
		      "absolute path", "names the file (not its path) and the field");
	is_str(errbuf_public(&e), e.msg, "the message is its public text");

	f = fopen(p, "w");
	fputs("{" V3 DC ",\"requirements\":{\"health_check\":true}}", f);
	fclose(f);
	is_int(compose_load(p, &c, &e), 0, "load reads a good file");
	ok(c.health_check && c.kind == RUNNER_DOCKER_COMPOSE, "fields read");
	compose_free(&c);

	snprintf(p, sizeof(p), "%s/missing.json", dir);
	is_int(compose_load(p, &c, &e), -ENOENT, "missing file");
	is_str(e.msg, "app-compose.json: does not exist", "names the file, not its path");
	snprintf(p, sizeof(p), "%s/fifo", dir);
	mkfifo(p, 0600);
	is_int(compose_load(p, &c, &e), -EINVAL, "a FIFO is refused without blocking");
	is_str(e.msg, "app-compose.json: is not a regular file", "says why");

	snprintf(p, sizeof(p), "%s/big.json", dir);
	f = fopen(p, "w");
	for (unsigned i = 0; i <= COMPOSE_MAX_BYTES / 64; i++)
		fputs("                                                               \n", f);
	fclose(f);
	is_int(compose_load(p, &c, &e), -EFBIG, "a file over 4 MiB is refused");

	snprintf(p, sizeof(p), "rm -rf -- '%s'", dir);
	ok(system(p) == 0, "clean up");
}

int main(void)
{
	test_valid();
	test_invalid();
	test_long_path();
	test_hash();
	test_load();
	return done_testing();
}
