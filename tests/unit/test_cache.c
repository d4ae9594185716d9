/* SPDX-License-Identifier: Apache-2.0 */
/* base/cache.c: snapshots are freed exactly once, readers never see a freed
 * or half-built one. Run under ASan (build-asan) this is a use-after-free and
 * leak detector for a publish storm racing an acquire storm. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/cache.h"
#include "base/clock.h"
#include "rpc/encode.h"
#include "tests/lib/tap.h"

static struct snapshot *make(int gen)
{
	struct verdict v;
	verdict_init(&v);
	v.healthy = gen % 2 == 0;
	if (!v.healthy)
		verdict_add(&v, "web", "generation %d", gen);
	struct snapshot *s = rpc_snapshot_new(&v, gen);
	verdict_free(&v);
	return s;
}

static void test_basics(void)
{
	struct verdict v;
	verdict_init(&v);
	verdict_add(&v, "<health>", "health has not been determined yet");
	struct snapshot *s = rpc_snapshot_new(&v, 1234);
	ok(s != NULL, "snapshot_new");
	is_int(v.n_entries, 0, "the verdict moved into the snapshot");
	is_int(s->verdict.n_entries, 1, "snapshot holds the entry");
	is_int(s->mono_ms, 1234, "snapshot keeps its time");
	ok(s->enc && ((struct rpc_encoded *)s->enc)->health_json && ((struct rpc_encoded *)s->enc)->health_pb, "snapshot is encoded");
	is_int(s->refs, 1, "one reference to start");

	struct cache *c = cache_new(s);
	struct snapshot *a = cache_acquire(c);
	ok(a == s, "acquire returns the initial snapshot");
	is_int(s->refs, 2, "acquire took a reference");
	struct snapshot *n = make(2);
	cache_publish(c, n);
	is_int(s->refs, 1, "publish dropped the cache's reference to the old one");
	ok(a->verdict.n_entries == 1, "a held snapshot stays readable after publish");
	snapshot_unref(a);
	struct snapshot *b = cache_acquire(c);
	ok(b == n && b->verdict.healthy, "acquire returns the published snapshot");
	snapshot_unref(b);
	cache_free(c);
	snapshot_unref(NULL);
	cache_free(NULL);
}

enum { READERS = 4, ROUNDS = 20000, PUBLISHES = 20000 };

struct storm {
	struct cache *c;
	int stop;
	long bad, reads;
};

static void *reader(void *arg)
{
	struct storm *st = arg;
	long bad = 0, reads = 0;
	for (int i = 0; i < ROUNDS || !__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE); i++) {
		struct snapshot *s = cache_acquire(st->c);
		/* Each snapshot is consistent: healthy generations have no
		 * entries, unhealthy ones name their own generation. */
		char want[32];
		snprintf(want, sizeof(want), "generation %lld", (long long)s->mono_ms);
		if (s->verdict.healthy ? s->verdict.n_entries != 0
				       : (s->verdict.n_entries != 1 ||
					  strcmp(s->verdict.entries[0].status, want)))
			bad++;
		if (!s->enc || !((struct rpc_encoded *)s->enc)->health_json || !((struct rpc_encoded *)s->enc)->health_pb)
			bad++;
		snapshot_unref(s);
		reads++;
	}
	__atomic_fetch_add(&st->bad, bad, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st->reads, reads, __ATOMIC_RELAXED);
	return NULL;
}

static void test_storm(void)
{
	struct storm st = { .c = cache_new(make(0)) };
	pthread_t t[READERS];
	for (int i = 0; i < READERS; i++)
		pthread_create(&t[i], NULL, reader, &st);
	int published = 0;
	for (int g = 1; g <= PUBLISHES; g++) {
		struct snapshot *s = make(g);
		if (s) {
			cache_publish(st.c, s);
			published++;
		}
	}
	__atomic_store_n(&st.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	is_int(published, PUBLISHES, "every publish built a snapshot");
	is_int(st.bad, 0, "readers saw only whole snapshots (%ld reads)", st.reads);
	struct snapshot *last = cache_acquire(st.c);
	is_int(last->mono_ms, PUBLISHES, "the last publish wins");
	is_int(last->refs, 2, "only the cache and we hold the last one");
	snapshot_unref(last);
	cache_free(st.c);
}

int main(void)
{
	test_basics();
	test_storm();
	return done_testing();
}
