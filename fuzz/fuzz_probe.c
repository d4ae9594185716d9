/* SPDX-License-Identifier: Apache-2.0 */
/* A probe's answer (issue 27): what a container's HTTP server sends back,
 * read in pieces the way the prober's socket delivers them, then judged as
 * the refresh judges a probed container. Byte 0 is the size of each read (0:
 * all at once), byte 1 bit 0 whether the connection then closes; the rest is
 * the answer.
 *
 * Oracle (fuzz/oracle.h's property for probes): the container may be
 * healthy only if the answer, read on its own terms here, begins with an
 * HTTP/1 status line and holds a complete head whose status is 200-399; and
 * the status the parser reports is the one in that line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "probe/probe.h"
#include "runtime/container.h"

/* The status of the last status line before a blank line, read naively:
 * 1xx heads are skipped as HTTP says. 0 when there is no complete head. */
static int oracle_status(const char *s, size_t n)
{
	size_t i = 0;
	while (i + 12 <= n && memcmp(s + i, "HTTP/1.", 7) == 0) {
		int st = 0;
		for (size_t k = 9; k < 12; k++) {
			if (s[i + k] < '0' || s[i + k] > '9')
				return 0;
			st = st * 10 + (s[i + k] - '0');
		}
		const char *end = NULL;
		for (size_t k = i; k + 1 < n; k++) {
			if (s[k] == '\n' && (s[k + 1] == '\n' ||
					     (s[k + 1] == '\r' && k + 2 < n && s[k + 2] == '\n'))) {
				end = s + k + (s[k + 1] == '\n' ? 2 : 3);
				break;
			}
		}
		if (!end)
			return 0;
		if (st >= 200)
			return st;
		i = (size_t)(end - s);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = data[0];
	bool eof = data[1] & 1;
	const char *in = (const char *)data + 2;
	size_t len = size - 2, off = 0;
	struct probe_answer a;
	enum probe_result res = PROBE_NONE;
	int status = 0, done = 0;
	probe_answer_init(&a);
	while (!done && off < len) {
		size_t n = step && len - off > step ? step : len - off;
		done = probe_answer_feed(&a, in + off, n, &res, &status);
		off += n;
	}
	if (!done && eof) {
		probe_answer_eof(&a, &res, &status);
		done = 1;
	}
	probe_answer_free(&a);
	if (!done)
		return 0; /* the prober's timeout decides: a failure */
	if (res <= PROBE_NONE || res >= PROBE_N_RESULTS)
		__builtin_trap();

	/* Judged as the refresh judges it: one probe, retries 1. */
	struct container c = { 0 };
	struct container_probe p = { .usable = true, .probed = true,
				     .spec = { .retries = 1, .success_threshold = 1 } };
	c.name = "web";
	c.state = "running";
	c.running = true;
	c.probe = &p;
	probe_state_init(&p.state, 0);
	probe_state_apply(&p.state, &p.spec, res, status, 0, 0, 0);
	struct container_list l = { .v = &c, .n = 1, .cap = 1 };
	struct verdict v;
	verdict_init(&v);
	if (containers_judge(&l, &v) == 0 && v.healthy) {
		int want = oracle_status(in, len);
		if (want < 200 || want > 399 || status != want)
			__builtin_trap();
	}
	/* The public words are the agent's own: never a byte of the answer
	 * beyond the status number. */
	for (size_t i = 0; i < v.n_entries; i++)
		if (strlen(v.entries[i].status) > 80 || err_has_control(v.entries[i].status))
			__builtin_trap();
	verdict_free(&v);
	return 0;
}
