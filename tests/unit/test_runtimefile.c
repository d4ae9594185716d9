/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/runtimefile.c: the runtime file the guest writes
 * before Compose starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtimefile.h"
#include "tests/lib/tap.h"

static void test_parse(void)
{
	static const struct {
		const char *what, *in;
		int want;
		const char *project, *ns, *snap; /* on success */
		const char *msg;                 /* on failure: the whole message */
	} cases[] = {
		{ "all three", "{\"namespace\":\"dstack\",\"project\":\"app\",\"snapshotter\":\"overlayfs\"}",
		  0, "app", "dstack", "overlayfs", NULL },
		{ "project only", "{\"project\":\"app\"}", 0, "app", NULL, NULL, NULL },
		{ "nulls are absent", "{\"project\":\"app\",\"namespace\":null,\"snapshotter\":null}",
		  0, "app", NULL, NULL, NULL },
		{ "empty strings are absent", "{\"project\":\"app\",\"namespace\":\"\",\"snapshotter\":\"\"}",
		  0, "app", NULL, NULL, NULL },
		{ "unknown fields ignored", "{\"v\":2,\"extra\":{\"a\":[1,2]},\"project\":\"p\",\"z\":null}",
		  0, "p", NULL, NULL, NULL },
		{ "escapes", "{\"project\":\"my\\u002dapp\"}", 0, "my-app", NULL, NULL, NULL },
		{ "whitespace around", " \n{ \"project\" : \"app\" }\n", 0, "app", NULL, NULL, NULL },
		{ "missing project", "{\"namespace\":\"n\"}", -EINVAL, NULL, NULL, NULL,
		  "project: missing; the Compose project name is required" },
		{ "empty project", "{\"project\":\"\"}", -EINVAL, NULL, NULL, NULL,
		  "project: must be a non-empty string" },
		{ "null project", "{\"project\":null}", -EINVAL, NULL, NULL, NULL,
		  "project: must be a non-empty string, not null" },
		{ "number project", "{\"project\":3}", -EINVAL, NULL, NULL, NULL,
		  "project: must be a string, not a number" },
		{ "array namespace", "{\"project\":\"p\",\"namespace\":[]}", -EINVAL, NULL, NULL, NULL,
		  "namespace: must be a string, not an array" },
		{ "bool snapshotter", "{\"project\":\"p\",\"snapshotter\":true}", -EINVAL, NULL, NULL,
		  NULL, "snapshotter: must be a string, not a boolean" },
		{ "control char in project", "{\"project\":\"a\\nb\"}", -EINVAL, NULL, NULL, NULL,
		  "project: must not contain control characters" },
		{ "NUL in project", "{\"project\":\"a\\u0000b\"}", -EINVAL, NULL, NULL, NULL,
		  "project: is not a valid string (bad escape or NUL)" },
		{ "namespace starting with -", "{\"project\":\"p\",\"namespace\":\"--help\"}", -EINVAL,
		  NULL, NULL, NULL, "namespace: must not start with '-'" },
		{ "duplicate project", "{\"project\":\"a\",\"project\":\"b\"}", -EINVAL, NULL, NULL,
		  NULL, "project: appears more than once" },
		{ "duplicate namespace after null", "{\"project\":\"a\",\"namespace\":null,\"namespace\":\"x\"}",
		  -EINVAL, NULL, NULL, NULL, "namespace: appears more than once" },
		{ "not an object", "[\"project\"]", -EINVAL, NULL, NULL, NULL,
		  "must be a JSON object, not an array" },
		{ "string document", "\"app\"", -EINVAL, NULL, NULL, NULL,
		  "must be a JSON object, not a string" },
		{ "truncated", "{\"project\":\"a\"", -EINVAL, NULL, NULL, NULL, "truncated JSON" },
		{ "empty", "", -EINVAL, NULL, NULL, NULL, "document is empty" },
		{ "trailing data", "{\"project\":\"a\"} x", -EINVAL, NULL, NULL, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct runtime_info ri;
		struct errbuf e = { "" };
		int r = runtimefile_parse(cases[i].in, strlen(cases[i].in), &ri, &e);
		is_int(r, cases[i].want, "%s: result (%s)", cases[i].what, e.msg);
		if (cases[i].want == 0) {
			is_str(ri.project, cases[i].project, "%s: project", cases[i].what);
			is_str(ri.namespace, cases[i].ns, "%s: namespace", cases[i].what);
			is_str(ri.snapshotter, cases[i].snap, "%s: snapshotter", cases[i].what);
		} else {
			ok(!ri.project && !ri.namespace && !ri.snapshotter,
			   "%s: nothing left allocated", cases[i].what);
			if (cases[i].msg)
				is_str(e.msg, cases[i].msg, "%s: message", cases[i].what);
		}
		runtime_info_free(&ri);
	}
}

static void test_bounds(void)
{
	size_t n = (64u << 10) + 1;
	char *big = malloc(n);
	memset(big, ' ', n);
	memcpy(big, "{\"project\":\"a\"}", 15);
	struct runtime_info ri;
	struct errbuf e = { "" };
	is_int(runtimefile_parse(big, n, &ri, &e), -EFBIG, "over 64 KiB refused");
	is_int(runtimefile_parse(big, n - 1, &ri, &e), 0, "exactly 64 KiB accepted");
	runtime_info_free(&ri);
	/* Many unknown fields: a token bound, not a crash. */
	size_t off = 0;
	off += (size_t)snprintf(big + off, n - off, "{\"project\":\"a\"");
	while (off + 16 < n - 1)
		off += (size_t)snprintf(big + off, n - off, ",\"k\":[1,2,3]");
	big[off++] = '}';
	int r = runtimefile_parse(big, off, &ri, &e);
	ok(r == -E2BIG && strstr(e.msg, "JSON tokens"), "too many tokens refused (%s)", e.msg);
	free(big);
}

static void test_read(void)
{
	char dir[256], p[512], q[512];
	snprintf(dir, sizeof(dir), "%s/runtimefile.XXXXXX", P_tmpdir);
	if (!ok(mkdtemp(dir) != NULL, "mkdtemp"))
		return;
	struct runtime_info ri;
	struct errbuf e = { "" };

	snprintf(p, sizeof(p), "%s/missing.json", dir);
	is_int(runtimefile_read(p, &ri, &e), -ENOENT, "missing file is -ENOENT");
	ok(strstr(e.msg, "missing.json: does not exist") != NULL, "names the file (%s)", e.msg);

	snprintf(p, sizeof(p), "%s/rt.json", dir);
	FILE *f = fopen(p, "w");
	fputs("{\"project\":\"app\",\"namespace\":\"ns\"}\n", f);
	fclose(f);
	is_int(runtimefile_read(p, &ri, &e), 0, "read a good file");
	is_str(ri.project, "app", "project read");
	is_str(ri.namespace, "ns", "namespace read");
	runtime_info_free(&ri);

	snprintf(q, sizeof(q), "%s/bad.json", dir);
	f = fopen(q, "w");
	fputs("{\"project\":7}", f);
	fclose(f);
	is_int(runtimefile_read(q, &ri, &e), -EINVAL, "a bad file is -EINVAL");
	ok(strstr(e.msg, "bad.json: project: must be a string") != NULL,
	   "error names the file and the field (%s)", e.msg);

	is_int(runtimefile_read(dir, &ri, &e), -EINVAL, "a directory is refused");
	ok(strstr(e.msg, "is not a regular file") != NULL, "says why (%s)", e.msg);

	snprintf(q, sizeof(q), "%s/fifo", dir);
	mkfifo(q, 0600);
	is_int(runtimefile_read(q, &ri, &e), -EINVAL, "a FIFO is refused without blocking");

	snprintf(q, sizeof(q), "rm -rf -- '%s'", dir);
	ok(system(q) == 0, "clean up");
}

int main(void)
{
	test_parse();
	test_bounds();
	test_read();
	return done_testing();
}
