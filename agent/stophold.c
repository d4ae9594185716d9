/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stophold.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/config.h"
#include "agent/source.h"
#include "agent/vfile.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "rpc/drain.h"
#include "runtime/http.h"
#include "runtime/selfid.h"

/* How often the guest agent is asked, and how long one answer may take. */
#define STOPHOLD_POLL_MS 250
#define STOPHOLD_ASK_MS 1000
/* Its answer is small: {"healthy":...,"unhealthy":[...],"error":...}. */
#define STOPHOLD_MAX_BODY (64u * 1024)

int64_t stophold_bound(int64_t grace_ms)
{
	if (grace_ms < 0)
		return INT64_MAX;
	return grace_ms > STOPHOLD_EXIT_MARGIN_MS ? grace_ms - STOPHOLD_EXIT_MARGIN_MS : 0;
}

int64_t stophold_end(int64_t hold_ms, int64_t seen_ms, int64_t bound_ms)
{
	int64_t end = (seen_ms >= 0 ? seen_ms : STOPHOLD_REREAD_MS) + hold_ms;
	return end < bound_ms ? end : bound_ms;
}

int stophold_endpoint(const char *addr, struct http_endpoint *ep, struct errbuf *err)
{
	char url[4200];
	bool unix_path = strncmp(addr, "unix:", 5) == 0;
	int w = snprintf(url, sizeof(url), "%s%s", unix_path ? "unix://" : "tcp://",
			 unix_path ? addr + 5 : addr);
	if (w < 0 || (size_t)w >= sizeof(url))
		return errbuf_set(err, EINVAL, "address too long");
	/* tcp:// without a port would be Docker's 2375: a guest agent has none.
	 * The parser's own words speak of a Docker host: not said here. */
	if ((!unix_path && !strrchr(addr, ':')) || http_endpoint_parse(url, false, NULL, ep, err) < 0)
		return errbuf_set(err, EINVAL, "'%s': expected HOST:PORT or unix:/PATH", addr);
	return 0;
}

/* The container's stop grace, in ms: its own StopTimeout when the agent
 * found its container, Docker's default in a container that sets none,
 * -1 outside a container (systemd gives a stopping unit 90 s). */
static int64_t grace_ms(void)
{
	int64_t s = 0;
	int r = source_self_stop_timeout(&s);
	if (r == 1)
		return s * 1000;
	char id[SELFID_LEN + 1];
	if (r == 0 || selfid_read(id) != SELFID_NONE)
		return STOPHOLD_DEFAULT_GRACE_MS;
	return -1;
}

/* One Health of the guest agent: 0 and *healthy, or a failure in err. */
static int ask_guest(const struct http_endpoint *ep, bool *healthy, struct errbuf *err)
{
	int64_t deadline = clock_mono_ms() + STOPHOLD_ASK_MS;
	struct http_conn *c = NULL;
	struct http_response resp = { 0 };
	int r = http_connect(ep, deadline, &c, err);
	if (r == 0)
		r = http_get(c, "/prpc/v1/Health?json", deadline, STOPHOLD_MAX_BODY, &resp, err);
	http_close(c);
	if (r == 0 && resp.status != 200)
		r = errbuf_set(err, EPROTO, "HTTP status %d", resp.status);
	struct json j;
	if (r == 0 && (r = json_parse(&j, resp.body ? resp.body : "", resp.body_len, 4096, err)) == 0) {
		if (json_bool(&j, json_get(&j, 0, "healthy"), healthy) < 0)
			r = errbuf_set(err, EPROTO, "no \"healthy\" in its answer");
		json_free(&j);
	}
	http_response_free(&resp);
	return r;
}

/* Waits until end (CLOCK_MONOTONIC ms) or a second stop signal: false
 * when the signal came. The verdict file's asks are answered meanwhile (this
 * thread is its writer); SIGHUP is no reload any more: ignored. */
static bool wait_until(int64_t end, struct vfile *vf, const sigset_t *sigs)
{
	for (;;) {
		int left = clock_left_ms(end);
		if (left == 0)
			return true;
		struct timespec ts = { .tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000L };
		int sig = sigtimedwait(sigs, NULL, &ts);
		if (sig == SIGTERM || sig == SIGINT)
			return false;
		if (sig == VFILE_SIGNAL)
			vfile_run(vf);
	}
}

/* Until the guest agent serves unhealthy: ms after start when it did, -1
 * when it did not within its re-read (and a little more), could not be
 * asked, or a second signal came (*cut). */
static int64_t watch_guest(const struct config *cfg, int64_t start, int64_t bound,
			   struct vfile *vf, const sigset_t *sigs, bool *cut)
{
	struct http_endpoint ep;
	struct errbuf err = { "" };
	if (!*cfg->stop_guest_agent || stophold_endpoint(cfg->stop_guest_agent, &ep, &err) < 0)
		return -1;
	/* bound is INT64_MAX out of a container: compared, never added to. */
	int64_t give_up = start + (bound < STOPHOLD_REREAD_MS + STOPHOLD_ASK_MS
					   ? bound : STOPHOLD_REREAD_MS + STOPHOLD_ASK_MS);
	bool healthy = true;
	while (clock_mono_ms() < give_up) {
		int64_t asked = clock_mono_ms();
		int r = ask_guest(&ep, &healthy, &err);
		if (r < 0) {
			log_msg(LOG_WARNING, "stop: the guest agent at %s cannot be asked (%s); "
					     "holding for its re-read as well", cfg->stop_guest_agent, err.msg);
			return -1;
		}
		if (!healthy)
			return clock_mono_ms() - start;
		if (!wait_until(asked + STOPHOLD_POLL_MS, vf, sigs))
			return *cut = true, -1;
	}
	log_msg(LOG_WARNING, "stop: the guest agent at %s still serves healthy %.3g s after the "
			     "file said unhealthy; is requirements.health_status_file %s?",
		cfg->stop_guest_agent, (double)(clock_mono_ms() - start) / 1000, cfg->verdict_file);
	return -1;
}

void stophold_run(const struct config *cfg, struct drain *d, struct vfile *vf,
		  const sigset_t *sigs)
{
	int64_t grace = grace_ms(), bound = stophold_bound(grace);
	int64_t worst = stophold_end(cfg->stop_hold_ms, -1, INT64_MAX);
	if (drain_hold(d) < 0)
		log_msg(LOG_ERR, "out of memory taking the instance out of rotation");
	/* Written before the hold is counted (this thread is the writer):
	 * the gateways learn from the file, not from the signal. */
	vfile_ask(vf);
	vfile_run(vf);
	int64_t start = clock_mono_ms();
	log_msg(LOG_NOTICE, "stop: the verdict file says unhealthy; holding the stop until the "
			    "gateways can have heard it (at most %.3g s)",
		(double)(worst < bound ? worst : bound) / 1000);
	if (worst > bound)
		log_msg(LOG_WARNING, "stop: holding %.3g s, not %.3g s: the container's stop grace "
				     "is %.3g s (stop_grace_period)",
			(double)bound / 1000, (double)worst / 1000, (double)grace / 1000);
	bool cut = false;
	int64_t seen = watch_guest(cfg, start, bound, vf, sigs, &cut);
	if (seen >= 0)
		log_msg(LOG_INFO, "stop: the guest agent serves unhealthy after %.3g s; one gateway "
				  "poll more", (double)seen / 1000);
	if (!cut)
		cut = !wait_until(start + stophold_end(cfg->stop_hold_ms, seen, bound), vf, sigs);
	log_msg(LOG_NOTICE, "stop: held %.3g s%s; exiting with the verdict file unhealthy",
		(double)(clock_mono_ms() - start) / 1000, cut ? " (cut short by a second signal)" : "");
}
