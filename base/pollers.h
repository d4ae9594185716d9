/* SPDX-License-Identifier: Apache-2.0 */
/* Who polls Health, and what each was last told: the table the public HTTP
 * thread writes on every Health answer and the local view reads. It is a
 * fixed array (POLLERS_MAX entries, the least recently seen replaced first),
 * so no caller can grow it, and a note costs a lock held for a scan of it,
 * no allocation. Per address it keeps enough to answer later "has every
 * poller seen in the last N seconds been served verdict X since T": the
 * sequence number and time of the last answer and what it said. */
#ifndef HEALTHD_POLLERS_H
#define HEALTHD_POLLERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define POLLERS_MAX 256
/* Shown as pollers: those seen this recently (ms). */
#define POLLERS_RECENT_MS (10 * 60 * 1000)

/* An address without its port: the gateway polls on a fresh connection
 * each time. family 0 is "unknown"; AF_UNIX has no address. */
struct poller_addr {
	uint8_t family;
	uint8_t a[16];
};

struct poller {
	struct poller_addr addr;
	int64_t first_seen_ms, last_seen_ms; /* CLOCK_REALTIME ms */
	uint64_t count;
	uint64_t last_seq; /* pollers_table.seq when it was last answered */
	bool last_healthy; /* what it was last told */
	uint64_t drain_seq; /* last_seq of its last answer that was the drain's, or 0 */
};

/* The HTTP status codes Health answers are counted by; anything else is
 * counted as the last. */
#define POLLERS_CODES { 200, 400, 404, 405, 413, 0 }
#define POLLERS_N_CODES 6

struct pollers_table {
	struct poller v[POLLERS_MAX];
	size_t n;
	uint64_t seq; /* Health answers so far, numbering them */
	uint64_t requests[POLLERS_N_CODES];
};

struct pollers {
	pthread_mutex_t lock;
	struct pollers_table t;
};

/* p must be zeroed storage (static, or calloc'd). */
void pollers_init(struct pollers *p);
void pollers_destroy(struct pollers *p);

/* Pure: notes one Health answer to addr at now_ms (realtime), and whether
 * it was the drain's verdict. */
void pollers_table_note(struct pollers_table *t, const struct poller_addr *addr, bool healthy,
			bool draining, int64_t now_ms);
/* Pure: counts one Health request answered with code. */
void pollers_table_count(struct pollers_table *t, unsigned code);
/* Pure: how many were seen at or after since_ms. */
size_t pollers_table_recent(const struct pollers_table *t, int64_t since_ms);

/* The same under the lock, in one hold: a Health answer (200) to sa (NULL:
 * unknown) is noted and counted. */
void pollers_note(struct pollers *p, const struct sockaddr *sa, bool healthy, bool draining,
		  int64_t now_ms);
/* The answers' sequence number so far (pollers_table.seq). */
uint64_t pollers_seq(struct pollers *p);
void pollers_count(struct pollers *p, unsigned code);
/* A copy of the table, taken under the lock: v[n] and after are left as
 * they were. */
void pollers_copy(struct pollers *p, struct pollers_table *out);

void poller_addr_from(const struct sockaddr *sa, struct poller_addr *out);
/* "192.0.2.1", "2001:db8::1", "unix" or "unknown". */
void poller_addr_str(const struct poller_addr *a, char *buf, size_t n);
/* The code counted at index i of POLLERS_CODES (0: any other). */
unsigned pollers_code(size_t i);

#endif
