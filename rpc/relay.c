/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/relay.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "rpc/addr.h"
#include "rpc/keep.h"
#include "rpc/link.h"
#include "rpc/queue.h"
#include "rpc/refuse.h"

_Static_assert(RELAY_PENDING <= QUEUE_MAX, "the queue holds RELAY_PENDING places");

/* Slots first..last (n of them, linked by next) back to the gate, and
 * their clients hold a link less each. */
void relay_give_slots(struct relay *r, struct link *first, struct link *last, unsigned n)
{
	pthread_mutex_lock(&r->lock);
	for (struct link *l = first;; l = l->next) {
		clients_drop(&r->clients, l->client_no);
		l->client_no = CLIENTS_NONE;
		if (l == last)
			break;
	}
	last->next = r->free_list;
	r->free_list = first;
	atomic_fetch_sub(&r->used, n);
	pthread_mutex_unlock(&r->lock);
}

void relay_own_slot_locked(struct relay *r, struct link *l, const struct queue_source *client)
{
	clients_drop(&r->clients, l->client_no);
	l->client = *client;
	l->client_no = clients_add(&r->clients, client);
}

static void relay_free_closed(struct relay *r)
{
	unsigned n = 0;
	struct link *last = NULL;
	for (struct link *l = r->dead; l; l = l->next) {
		last = l;
		n++;
	}
	if (n)
		relay_give_slots(r, r->dead, last, n);
	r->dead = NULL;
}

/* A free slot for client, if the limit allows one; with r->lock held. */
static struct link *relay_take_slot_locked(struct relay *r, const struct queue_source *client)
{
	struct link *l = atomic_load(&r->used) < r->limit ? r->free_list : NULL;
	if (l) {
		r->free_list = l->next;
		atomic_fetch_add(&r->used, 1);
		relay_own_slot_locked(r, l, client);
	}
	return l;
}

/* A newcomer answered 503 by the relay thread, and the line that says so:
 * at most one a LOG_LIMIT_MS per cause (every slot kept, or its client's
 * share used up), naming its client, what kept the slots, and how many
 * more since; a flood costs the journal a line every few seconds. */
static void refuse_full(struct relay *r, int fd, const struct queue_source *client,
			const struct victim_choice *c)
{
	bool own = c->pool == VICTIM_OWN;
	char who[INET6_ADDRSTRLEN + 8], since[80] = "";
	unsigned more;
	if (!own)
		for (int k = 0; k < 4; k++)
			atomic_store(&r->kept[k], c->kept[k]);
	atomic_fetch_add(own ? &r->refused_over_share : &r->refused_full, 1);
	refuse(fd, REFUSE_FULL);
	if (!log_limit_pass(own ? &r->log_over_share : &r->log_full, r->now, &more))
		return;
	queue_source_format(client, who, sizeof(who));
	if (more)
		snprintf(since, sizeof(since), "; %u more since the last such line", more);
	log_msg(LOG_WARNING, "relay: answered 503 to a newcomer of client %s: %s (%u moving bytes, "
			     "%u awaiting an answer, %u streams, %u connecting)%s",
		who, own ? "it holds more than its share of the slots, and none of its own links "
			   "can be taken"
			 : "no slot can be taken",
		c->kept[KEEP_MOVING], c->kept[KEEP_AWAITING], c->kept[KEEP_STREAM], c->kept[KEEP_NONE],
		since);
}

/* Ends what is past its time: connects past their deadline (502) and
 * links past the idle limit (reset both ways). ms to the next such time,
 * or -1. */
static int sweep(struct relay *r)
{
	struct link *l;
	int64_t now = r->now, next = -1;
	while ((l = RING_FIRST(&r->connecting, connecting)) && now >= l->deadline)
		link_unreachable(r, l, ETIMEDOUT);
	if (l)
		next = l->deadline - now;
	while ((l = RING_FIRST(&r->quiet, quiet)) && now - l->keep.last >= r->idle_ms) {
		atomic_fetch_add(&r->idle_closed, 1);
		link_close(r, l, true);
	}
	if (l && (next < 0 || l->keep.last + r->idle_ms - now < next))
		next = l->keep.last + r->idle_ms - now;
	return next < 0 ? -1 : next > INT_MAX ? INT_MAX : (int)next;
}

/* The waiter whose turn it is leaves the queue. */
static void pending_drop(struct relay *r)
{
	pthread_mutex_lock(&r->lock);
	queue_drop_first(&r->waiting);
	pthread_mutex_unlock(&r->lock);
}

/* The waiter whose turn it is waits until at (for a link to settle), and
 * the turn goes to the next source: a newcomer of another client, whose
 * choice may not wait, is not held up behind it. */
static void pending_wait(struct relay *r, int64_t at)
{
	pthread_mutex_lock(&r->lock);
	queue_first_retry(&r->waiting, at);
	queue_pass_turn(&r->waiting);
	pthread_mutex_unlock(&r->lock);
	if (r->retry_at < 0 || at < r->retry_at)
		r->retry_at = at;
}

/* The newcomers the gate queued for want of a free slot, in their turn
 * (rpc/queue.h: the sources in turn, first come first within each): each
 * takes a slot freed since, or a victim's (rpc/victim.h), or is answered
 * 503. One that must wait for a link to settle (victim_wait_until) keeps
 * its place and passes the turn; once every source's first is waiting,
 * the rest wait behind them, and the thread looks again at the earliest
 * of their times (r->retry_at), or when a newcomer of a source not yet
 * waiting comes (relay_take wakes it).
 * Run between batches of events, so that no event of a batch is about an
 * evicted link whose slot is taken again. */
static void take_pending(struct relay *r)
{
	int first_waiting = -1; /* the first waiter passed: the turn has gone round */
	r->retry_at = -1;
	for (;;) {
		struct queue_waiter p;
		struct queue_source client;
		pthread_mutex_lock(&r->lock);
		bool any = queue_first(&r->waiting, &p, &client);
		struct link *l = any ? relay_take_slot_locked(r, &client) : NULL;
		pthread_mutex_unlock(&r->lock);
		if (!any || (!l && p.fd == first_waiting))
			return;
		if (!l && p.retry_at > r->now) {
			if (first_waiting < 0)
				first_waiting = p.fd;
			pending_wait(r, p.retry_at);
			continue;
		}
		if (!l) {
			struct eviction ev;
			evict_choose(r, &client, &ev);
			int64_t at = victim_wait_until(&ev.choice, p.since, RELAY_QUEUE_WAIT_MS, r->now);
			if (at >= 0) {
				if (first_waiting < 0)
					first_waiting = p.fd;
				pending_wait(r, at);
				continue;
			}
			if (!ev.victim) {
				pending_drop(r);
				refuse_full(r, p.fd, &client, &ev.choice);
				continue;
			}
			l = evict_take(r, ev.victim, ev.choice.cut, &client);
		}
		pending_drop(r);
		if (link_hand_over(r, l, p.fd) < 0) {
			relay_give_slots(r, l, l, 1);
			atomic_fetch_add(&r->refused_resources, 1);
			refuse(p.fd, REFUSE_FULL);
		}
	}
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	struct epoll_event ev[64];
	/* Told apart in top -H and /proc/PID/task (its CPU, a test's ptrace). */
	pthread_setname_np(pthread_self(), "healthd-relay");
	for (;;) {
		r->now = clock_mono_ms();
		int wait = sweep(r);
		/* Every slot closed outside a batch (by the sweep) is free
		 * before the wait, and the newcomers waiting take what they
		 * can: none waits for some other event. */
		relay_free_closed(r);
		take_pending(r);
		if (r->retry_at >= 0 && (wait < 0 || r->retry_at - r->now < wait))
			wait = (int)(r->retry_at - r->now);
		int n = epoll_wait(r->ep, ev, ARRAY_SIZE(ev), wait);
		r->now = clock_mono_ms();
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &r->stop_fd)
				return NULL;
			if (p == &r->kick_fd) {
				/* Read only to rearm it: the queue says what waits. */
				uint64_t v;
				if (read(r->kick_fd, &v, sizeof(v)) != sizeof(v)) {
					/* EAGAIN: nothing to read, nothing lost */
				}
				continue;
			}
			struct end *e = p;
			struct link *l = e->l;
			/* Closed earlier in this batch: its slot stays unused
			 * until the batch is done. */
			if (l->fd[e->side] < 0)
				continue;
			switch (l->state) {
			case LINK_NEW:
				link_begin_connect(r, l, ev[i].events);
				break;
			case LINK_CONNECTING:
				/* The client's bytes wait for the connect. */
				if (e->side == 1)
					link_finish_connect(r, l, ev[i].events);
				break;
			case LINK_OPEN:
				link_on_event(r, l, e->side, ev[i].events);
				break;
			case LINK_FREE:
				break;
			}
		}
		relay_free_closed(r);
	}
}

int relay_parse(const char *address, struct errbuf *err)
{
	union rpc_addr a;
	socklen_t alen;
	int r = rpc_addr_parse("relay address", address, &a, &alen, err);
	if (r < 0)
		return r;
	if ((a.sa.sa_family == AF_INET && a.in.sin_port == 0) ||
	    (a.sa.sa_family == AF_INET6 && a.in6.sin6_port == 0))
		return errbuf_set(err, EINVAL, "relay address '%s': port 0 cannot be connected to",
				  address);
	return 0;
}

static void relay_free(struct relay *r)
{
	if (r->links)
		for (unsigned i = 0; i < r->max; i++)
			if (r->links[i].state != LINK_FREE)
				link_close_sockets(r, &r->links[i], true);
	struct queue_waiter w;
	for (; queue_first(&r->waiting, &w, NULL); queue_drop_first(&r->waiting))
		close(w.fd);
	clients_free(&r->clients);
	free(r->held);
	pipes_close(&r->pipes);
	if (r->ep >= 0)
		close(r->ep);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	if (r->kick_fd >= 0)
		close(r->kick_fd);
	pthread_mutex_destroy(&r->lock);
	free(r->links);
	free(r->table);
	free(r->table_links);
	free(r);
}

static int watch_own(struct relay *r, int *fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fd };
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, *fd, &ev);
}

int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err)
{
	int e = relay_parse(o->address, err);
	if (e < 0)
		return e;
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	r->ep = r->stop_fd = r->kick_fd = -1;
	pthread_mutex_init(&r->lock, NULL);
	rpc_addr_parse("relay address", o->address, &r->addr, &r->alen, err);
	snprintf(r->address, sizeof(r->address), "%s", o->address);
	r->max = r->limit = o->slots ? o->slots : RELAY_MAX_CONNECTIONS;
	queue_init(&r->waiting, RELAY_PENDING);
	r->retry_at = -1;
	r->idle_ms = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : RELAY_IDLE_TIMEOUT_MS;
	r->keepalive_s = (int)(o->keepalive_s ? o->keepalive_s : RELAY_KEEPALIVE_S);
	r->connecting.prev = r->connecting.next = &r->connecting;
	r->quiet.prev = r->quiet.next = &r->quiet;
	if (!(r->links = calloc(r->max, sizeof(*r->links))) ||
	    !(r->table = calloc(r->max, sizeof(*r->table))) ||
	    !(r->table_links = calloc(r->max, sizeof(*r->table_links))) ||
	    !(r->held = calloc(r->max, sizeof(*r->held))) ||
	    clients_init(&r->clients, r->max) < 0) {
		relay_free(r);
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	}
	for (unsigned i = r->max; i-- > 0;) {
		struct link *l = &r->links[i];
		l->fd[0] = l->fd[1] = -1;
		l->client_no = CLIENTS_NONE;
		l->quiet.prev = l->quiet.next = &l->quiet;
		l->connecting.prev = l->connecting.next = &l->connecting;
		l->next = r->free_list;
		r->free_list = l;
	}
	if ((e = pipes_init(&r->pipes)) < 0) {
		relay_free(r);
		return errbuf_set(err, -e, "relay: %s", strerror(-e));
	}
	if ((r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (r->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    watch_own(r, &r->stop_fd) < 0 || watch_own(r, &r->kick_fd) < 0) {
		e = errno;
		relay_free(r);
		return errbuf_set(err, e, "relay: %s", strerror(e));
	}
	if ((e = pthread_create(&r->thread, NULL, relay_run, r))) {
		relay_free(r);
		return errbuf_set(err, e, "relay: starting the thread: %s", strerror(e));
	}
	*out = r;
	return 0;
}

void relay_stop(struct relay *r)
{
	if (!r)
		return;
	uint64_t one = 1;
	if (write(r->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(r->thread, NULL);
	/* Links handed over and never seen are closed with the rest. */
	relay_free(r);
}

unsigned relay_fds_wanted(const struct relay *r)
{
	return r->max * RELAY_FDS_PER_CONN + 2 * RELAY_PIPE_POOL + RELAY_PENDING;
}

void relay_budget(unsigned long fds, unsigned max, unsigned *slots, unsigned *queue)
{
	unsigned long left = fds > 2 * RELAY_PIPE_POOL ? fds - 2 * RELAY_PIPE_POOL : 0;
	/* A slot and a place in the queue each, while the queue is short of
	 * RELAY_PENDING; past that, the queue is whole and the rest is slots. */
	unsigned long n = left / (RELAY_FDS_PER_CONN + 1);
	if (n > RELAY_PENDING)
		n = (left - RELAY_PENDING) / RELAY_FDS_PER_CONN;
	if (n > max)
		n = max;
	unsigned long q = left - n * RELAY_FDS_PER_CONN;
	*slots = (unsigned)n;
	*queue = (unsigned)(q < RELAY_PENDING ? q : RELAY_PENDING);
}

void relay_fit(struct relay *r, unsigned long fds)
{
	pthread_mutex_lock(&r->lock);
	unsigned places;
	relay_budget(fds, r->max, &r->limit, &places);
	queue_set_cap(&r->waiting, places);
	pthread_mutex_unlock(&r->lock);
}

int relay_take(struct relay *r, int fd, const struct sockaddr *sa, socklen_t alen)
{
	enum queue_added added = QUEUE_FULL;
	struct queue_waiter pushed, w = { .fd = fd, .since = clock_mono_ms() };
	struct queue_source source;
	queue_source_of(sa, alen, &source);
	pthread_mutex_lock(&r->lock);
	/* A slot freed while others wait is theirs. */
	bool waited = r->waiting.n > 0;
	struct link *l = waited ? NULL : relay_take_slot_locked(r, &source);
	/* A source not waiting yet may be served while the others' first
	 * newcomers wait for links to settle: the relay thread is told. */
	bool new_source = !l && queue_waiting_from(&r->waiting, &source) == 0;
	if (!l)
		added = queue_add(&r->waiting, &source, &w, &pushed);
	pthread_mutex_unlock(&r->lock);
	if (added == QUEUE_PUSHED) {
		atomic_fetch_add(&r->refused_share, 1);
		refuse(pushed.fd, REFUSE_FULL);
	}
	if (added != QUEUE_FULL) {
		uint64_t one = 1;
		/* A wakeup when the queue was empty or the source new to it:
		 * the relay thread looks at the whole queue each turn. */
		if ((!waited || new_source) && write(r->kick_fd, &one, sizeof(one)) != sizeof(one))
			return -errno; /* cannot happen to an eventfd below its maximum */
		return 0;
	}
	if (l && link_hand_over(r, l, fd) == 0)
		return 0;
	if (l)
		relay_give_slots(r, l, l, 1);
	/* Every slot taken and the queue full of newcomers already waiting
	 * for the relay thread to make room, as many from this source as
	 * from any; or no slot at all. */
	atomic_fetch_add(l ? &r->refused_resources : r->limit ? &r->refused_queue : &r->refused_full, 1);
	refuse(fd, REFUSE_FULL);
	return -EBUSY;
}

void relay_count_head(struct relay *r, enum relay_head_end why)
{
	atomic_fetch_add(why == RELAY_HEAD_TIMEOUT   ? &r->head_timeout
			 : why == RELAY_HEAD_EVICTED ? &r->head_evicted
						     : &r->head_too_large,
			 1);
}

void relay_stats(struct relay *r, struct relay_stats *out)
{
	out->open = atomic_load(&r->used);
	out->total = atomic_load(&r->total);
	out->refused_full = atomic_load(&r->refused_full);
	out->refused_queue = atomic_load(&r->refused_queue);
	out->refused_share = atomic_load(&r->refused_share);
	out->refused_over_share = atomic_load(&r->refused_over_share);
	out->refused_resources = atomic_load(&r->refused_resources);
	out->unreachable = atomic_load(&r->unreachable);
	out->evicted = atomic_load(&r->evicted);
	out->evicted_over_share = atomic_load(&r->evicted_over_share);
	out->idle_closed = atomic_load(&r->idle_closed);
	out->head_timeout = atomic_load(&r->head_timeout);
	out->head_evicted = atomic_load(&r->head_evicted);
	out->head_too_large = atomic_load(&r->head_too_large);
	out->reset = atomic_load(&r->reset);
	out->reset_resources = atomic_load(&r->reset_resources);
	out->dead_peer = atomic_load(&r->dead_peer);
	out->abandoned = atomic_load(&r->abandoned);
	out->kept_awaiting = atomic_load(&r->kept[KEEP_AWAITING]);
	out->kept_moving = atomic_load(&r->kept[KEEP_MOVING]);
	out->kept_streams = atomic_load(&r->kept[KEEP_STREAM]);
	out->kept_connecting = atomic_load(&r->kept[KEEP_NONE]);
	pthread_mutex_lock(&r->lock);
	out->slots = r->limit;
	out->queue = r->waiting.cap;
	out->clients = r->clients.held;
	out->n_top = clients_top(&r->clients, out->top, RELAY_TOP_CLIENTS);
	pthread_mutex_unlock(&r->lock);
}

const char *relay_address(const struct relay *r)
{
	return r->address;
}
