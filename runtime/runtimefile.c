/* SPDX-License-Identifier: Apache-2.0 */
/* /run/dstack/app-compose-runtime.json (docs/design/verdict.md).
 *
 * The guest writes it, so it is read forward-compatibly: unknown fields are
 * ignored. Known fields are checked strictly, because their values go into a
 * label filter and onto nerdctl's command line:
 * - project: required, a non-empty string without control characters.
 * - namespace, snapshotter: optional; null or "" mean absent (serde writes
 *   None as null); otherwise a string without control characters that does
 *   not start with '-' (it becomes a command-line argument).
 * - A known field given twice is an error: which one wins is not defined. */
#include "runtime/runtimefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/readfile.h"

#define RUNTIMEFILE_MAX_BYTES (64u << 10)
#define RUNTIMEFILE_MAX_TOKENS 4096

/* Reads an optional or required string field at token val into *out. */
static int string_field(const struct json *j, int val, const char *field,
			bool required, char **out, struct errbuf *err)
{
	if (json_is_null(j, val)) {
		if (required)
			return errbuf_set(err, EINVAL, "%s: must be a non-empty string, "
					  "not null", field);
		return 0;
	}
	if (!json_is_string(j, val))
		return errbuf_set(err, EINVAL, "%s: must be a string, not %s", field,
				  json_type_name(j, val));
	_cleanup_free_ char *s = NULL;
	int r = json_strdup(j, val, &s);
	if (r == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	if (r < 0)
		return errbuf_set(err, EINVAL, "%s: is not a valid string (bad escape "
				  "or NUL)", field);
	if (!s[0]) {
		if (required)
			return errbuf_set(err, EINVAL, "%s: must be a non-empty string", field);
		return 0;
	}
	if (err_has_control(s))
		return errbuf_set(err, EINVAL, "%s: must not contain control characters",
				  field);
	if (!required && s[0] == '-')
		return errbuf_set(err, EINVAL, "%s: must not start with '-'", field);
	*out = TAKE_PTR(s);
	return 0;
}

int runtimefile_parse(const char *buf, size_t len, struct runtime_info *out,
		      struct errbuf *err)
{
	struct json j;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > RUNTIMEFILE_MAX_BYTES)
		return errbuf_set(err, EFBIG, "larger than %u bytes", RUNTIMEFILE_MAX_BYTES);
	if ((r = json_parse(&j, buf, len, RUNTIMEFILE_MAX_TOKENS, err)) < 0)
		return r;
	if (!json_is_object(&j, 0)) {
		r = errbuf_set(err, EINVAL, "must be a JSON object, not %s",
			       json_type_name(&j, 0));
		goto out;
	}
	struct {
		const char *name;
		bool required, seen;
		char **dst;
	} fields[] = {
		{ "project", true, false, &out->project },
		{ "namespace", false, false, &out->namespace },
		{ "snapshotter", false, false, &out->snapshotter },
	};
	JSON_OBJECT_FOREACH(&j, 0, k, v, cnt) {
		for (size_t f = 0; f < ARRAY_SIZE(fields); f++) {
			if (!json_str_eq(&j, k, fields[f].name))
				continue;
			if (fields[f].seen) {
				r = errbuf_set(err, EINVAL, "%s: appears more than once",
					       fields[f].name);
				goto out;
			}
			fields[f].seen = true;
			r = string_field(&j, v, fields[f].name, fields[f].required,
					 fields[f].dst, err);
			if (r < 0)
				goto out;
		}
	}
	if (!out->project)
		r = errbuf_set(err, EINVAL, "project: missing; the Compose project name "
			       "is required");
out:
	json_free(&j);
	if (r < 0)
		runtime_info_free(out);
	return r;
}

int runtimefile_read(const char *path, struct runtime_info *out, struct errbuf *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	int r = readfile(path, RUNTIMEFILE_MAX_BYTES, &buf, &len, err);
	if (r < 0)
		return errbuf_tag(err, ERR_KIND_RUNTIME_FILE_UNREADABLE, r);
	r = runtimefile_parse(buf, len, out, err);
	if (r < 0)
		readfile_prefix_error(err, path);
	return errbuf_tag(err, ERR_KIND_RUNTIME_FILE_INVALID, r);
}

int runtimefile_mtime(const char *path, int64_t *sec)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	*sec = (int64_t)st.st_mtim.tv_sec;
	return 0;
}

void runtime_info_free(struct runtime_info *ri)
{
	if (!ri)
		return;
	free(ri->project);
	free(ri->namespace);
	free(ri->snapshotter);
	memset(ri, 0, sizeof(*ri));
}
