/* SPDX-License-Identifier: Apache-2.0 */
/* The kills Docker's event stream reported, until the refresh has used them
 * (runtime/stops.h; docs/design/verdict.md, "Stopping"). */
#include "runtime/stops.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct kill_fact {
	char id[65];
	uint64_t signals; /* bit n-1: signal n was sent (1..64) */
	bool unknown;     /* a kill whose signal could not be read */
	/* Each signal's last kill (timeNano, 0 when unknown), so that a later
	 * kill with another signal (a SIGHUP after a start the stream missed)
	 * never makes an old stop look new. */
	int64_t at_ns[64];
	int64_t unknown_at_ns;
	uint64_t seq; /* when it was noted (stops_mark's count) */
};

struct stops {
	pthread_mutex_t lock;
	struct kill_fact v[STOPS_MAX];
	size_t n;
	uint64_t seq;
};

int stops_new(struct stops **out)
{
	struct stops *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void stops_free(struct stops *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct kill_fact *find(struct stops *t, const char *id)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].id, id) == 0)
			return &t->v[i];
	return NULL;
}

static void forget(struct stops *t, struct kill_fact *f)
{
	*f = t->v[--t->n];
}

/* A slot for id: its own, a free one, or the oldest one's. */
static struct kill_fact *slot(struct stops *t, const char *id)
{
	struct kill_fact *f = find(t, id);
	if (f)
		return f;
	if (t->n == STOPS_MAX) {
		f = &t->v[0];
		for (size_t i = 1; i < t->n; i++)
			if (t->v[i].seq < f->seq)
				f = &t->v[i];
	} else {
		f = &t->v[t->n++];
	}
	memset(f, 0, sizeof(*f));
	memcpy(f->id, id, strlen(id) + 1);
	return f;
}

enum stops_noted stops_note(struct stops *t, const struct event *ev)
{
	bool kill = strcmp(ev->action, "kill") == 0;
	bool gone = strcmp(ev->action, "start") == 0 || strcmp(ev->action, "destroy") == 0;
	if (!ev->id[0] || (!kill && !gone))
		return STOPS_UNCHANGED;
	enum stops_noted changed = STOPS_UNCHANGED;
	pthread_mutex_lock(&t->lock);
	struct kill_fact *f = find(t, ev->id);
	if (kill) {
		f = slot(t, ev->id);
		bool known = ev->signal >= 1 && ev->signal <= 64;
		uint64_t bit = known ? 1ull << (ev->signal - 1) : 0;
		changed = (known ? !(f->signals & bit) : !f->unknown) ? STOPS_NEW_SIGNAL
								      : STOPS_CHANGED;
		f->signals |= bit;
		f->unknown = f->unknown || !known;
		if (known)
			f->at_ns[ev->signal - 1] = ev->time_ns;
		else
			f->unknown_at_ns = ev->time_ns;
		f->seq = ++t->seq;
	} else if (f) {
		forget(t, f);
		changed = STOPS_CHANGED;
	}
	pthread_mutex_unlock(&t->lock);
	return changed;
}

uint64_t stops_mark(struct stops *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t s = t->seq;
	pthread_mutex_unlock(&t->lock);
	return s;
}

bool stops_has(struct stops *t, const char *id)
{
	pthread_mutex_lock(&t->lock);
	bool has = id && find(t, id) != NULL;
	pthread_mutex_unlock(&t->lock);
	return has;
}

/* moby's pkg/signal SignalMap for Linux (v20.10.24 signal_linux.go; master
 * moves it to moby/sys/signal): the names without "SIG". */
static const struct {
	const char *name;
	int sig;
} signal_names[] = {
	{ "ABRT", SIGABRT }, { "ALRM", SIGALRM }, { "BUS", SIGBUS },	   { "CHLD", SIGCHLD },
	{ "CLD", SIGCHLD },  { "CONT", SIGCONT }, { "FPE", SIGFPE },	   { "HUP", SIGHUP },
	{ "ILL", SIGILL },   { "INT", SIGINT },	  { "IO", SIGIO },	   { "IOT", SIGIOT },
	{ "KILL", SIGKILL }, { "PIPE", SIGPIPE }, { "POLL", SIGPOLL },	   { "PROF", SIGPROF },
	{ "PWR", SIGPWR },   { "QUIT", SIGQUIT }, { "SEGV", SIGSEGV },	   { "STKFLT", SIGSTKFLT },
	{ "STOP", SIGSTOP }, { "SYS", SIGSYS },	  { "TERM", SIGTERM },	   { "TRAP", SIGTRAP },
	{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },	   { "URG", SIGURG },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "VTALRM", SIGVTALRM }, { "WINCH", SIGWINCH },
	{ "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
};

/* moby's own numbers for the real-time signals (sigrtmin 34, sigrtmax 64),
 * not glibc's SIGRTMIN, which reserves some for itself. */
#define MOBY_RTMIN 34
#define MOBY_RTMAX 64

/* "RTMIN", "RTMIN+n" (n 1..15), "RTMAX", "RTMAX-n" (n 1..14). */
static int rt_signal(const char *s)
{
	int base, sign;
	if (strncmp(s, "RTMIN", 5) == 0) {
		base = MOBY_RTMIN;
		sign = 1;
	} else if (strncmp(s, "RTMAX", 5) == 0) {
		base = MOBY_RTMAX;
		sign = -1;
	} else {
		return -1;
	}
	s += 5;
	if (!*s)
		return base;
	if (*s != (sign > 0 ? '+' : '-') || !s[1] || strspn(s + 1, "0123456789") != strlen(s + 1) ||
	    strlen(s + 1) > 2)
		return -1;
	int n = atoi(s + 1);
	return n >= 1 && n <= (sign > 0 ? 15 : 14) ? base + sign * n : -1;
}

int stops_parse_signal(const char *s)
{
	if (!s || !*s)
		return SIGTERM;
	size_t n = strlen(s);
	if (strspn(s, "0123456789") == n) {
		if (n > 3)
			return -1;
		int v = atoi(s);
		return v >= 1 && v <= 64 ? v : -1;
	}
	char up[16];
	if (n >= sizeof(up))
		return -1;
	for (size_t i = 0; i <= n; i++)
		up[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 'a' + 'A') : s[i];
	const char *name = strncmp(up, "SIG", 3) == 0 ? up + 3 : up;
	for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (strcmp(name, signal_names[i].name) == 0)
			return signal_names[i].sig;
	return rt_signal(name);
}

static struct container *listed(struct container_list *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].id && strcmp(l->v[i].id, id) == 0)
			return &l->v[i];
	return NULL;
}

/* Running as Docker means it: Running is also true while paused or
 * restarting, and those states speak for themselves. */
static bool running(const struct container *c)
{
	return c->running && !c->paused && c->state && strcmp(c->state, "running") == 0;
}

/* The latest of *at and a kill at kill_ns, unless the container started
 * after that kill (a start the stream missed): 0 is a kill of unknown time,
 * -1 none. */
static void latest_kill(int64_t *at, int64_t kill_ns, const struct container *c)
{
	if (kill_ns > 0 && c->started_at_ns > kill_ns)
		return;
	if (kill_ns > *at)
		*at = kill_ns;
}

/* Whether the kills noted in f stop c at now_ns; false also when f is to be
 * forgotten. A stop lasts at most the container's stop timeout and
 * STOPS_SLACK_S after its kill: by then Docker sent a `docker stop` its
 * SIGKILL, so a container still running was sent the signal some other way
 * (a `docker kill -s TERM` its app ignored) and is judged again. */
static bool stops_container(const struct kill_fact *f, const struct container *c, int64_t now_ns)
{
	if (!running(c))
		return false;
	int sig = stops_parse_signal(c->stop_signal);
	bool any = f->unknown || sig < 1 || sig > 64;
	int64_t at = -1;
	for (int s = 1; s <= 64; s++)
		if ((f->signals & (1ull << (s - 1))) && (any || s == sig || s == SIGKILL))
			latest_kill(&at, f->at_ns[s - 1], c);
	if (f->unknown)
		latest_kill(&at, f->unknown_at_ns, c);
	if (at < 0)
		return false;
	int64_t timeout_s = c->has_stop_timeout ? c->stop_timeout_s : STOPS_DEFAULT_TIMEOUT_S;
	return at == 0 || now_ns <= 0 || now_ns - at <= (timeout_s + STOPS_SLACK_S) * 1000000000LL;
}

void stops_apply(struct stops *t, struct container_list *l, uint64_t mark, int64_t now_ns)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n;) {
		struct kill_fact *f = &t->v[i];
		struct container *c = listed(l, f->id);
		bool stop = c && stops_container(f, c, now_ns);
		if (stop)
			c->stopping = true;
		/* What the refresh listed may predate a kill noted since: that
		 * one is for the next refresh to judge. */
		if (stop || f->seq > mark)
			i++;
		else
			forget(t, f);
	}
	pthread_mutex_unlock(&t->lock);
}
