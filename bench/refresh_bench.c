/* SPDX-License-Identifier: Apache-2.0 */
/* Times the refresh thread's work, one refresh at a time: what refresh_one()
 * does between two sleeps (source_refresh, then sorting and encoding the
 * verdict into ready responses), with the agent's own configuration code, so
 * the flags are the agent's.
 *   refresh_bench K [dstack-healthd options...]
 * prints one line of key=value: the thread CPU time and wall time of each of
 * the K refreshes (median, mean, max, in microseconds), the number of
 * unhealthy entries and the error, if any. Under callgrind, collect only
 * bench_refresh (--toggle-collect=bench_refresh) and divide by K. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "agent/source.h"
#include "base/clock.h"
#include "rpc/encode.h"

static int64_t ns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) int bench_refresh(const struct config *cfg,
					    struct manifest *app, struct verdict *v,
					    struct errbuf *err);

__attribute__((noinline)) int bench_refresh(const struct config *cfg,
					    struct manifest *app, struct verdict *v,
					    struct errbuf *err)
{
	verdict_init(v);
	int r = source_refresh(cfg, app, clock_mono_ms() + cfg->refresh_timeout_ms, -1, v, err);
	if (r < 0)
		return r;
	verdict_sort(v);
	struct rpc_encoded *e = rpc_encode(v);
	if (!e)
		return -1;
	rpc_encoded_free(e);
	return 0;
}

static void stats(const char *name, int64_t *v, int k)
{
	int64_t sum = 0;
	for (int i = 0; i < k; i++)
		sum += v[i];
	qsort(v, (size_t)k, sizeof(*v), cmp);
	printf(" %s_us_median=%.1f %s_us_mean=%.1f %s_us_max=%.1f", name, v[k / 2] / 1e3, name,
	       (double)sum / k / 1e3, name, v[k - 1] / 1e3);
}

int main(int argc, char **argv)
{
	if (argc < 2 || atoi(argv[1]) < 1) {
		fprintf(stderr, "usage: %s K [dstack-healthd options...]\n", argv[0]);
		return 2;
	}
	int k = atoi(argv[1]);
	argv[1] = argv[0];
	struct config cfg;
	struct manifest app = { 0 };
	struct errbuf err = { "" };
	if (config_load(argc - 1, argv + 1, &cfg, &err) < 0) {
		fprintf(stderr, "refresh_bench: %s\n", err.msg);
		return 2;
	}
	if (!manifest_try(&app, cfg.compose_file)) {
		fprintf(stderr, "refresh_bench: %s\n", app.err.msg);
		return 2;
	}
	int64_t *cpu = calloc((size_t)k, sizeof(*cpu)), *wall = calloc((size_t)k, sizeof(*wall));
	if (!cpu || !wall)
		return 1;
	size_t unhealthy = 0;
	int failed = 0;
	for (int i = 0; i < k; i++) {
		struct verdict v;
		int64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
		if (bench_refresh(&cfg, &app, &v, &err) < 0)
			failed++;
		cpu[i] = ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		wall[i] = ns(CLOCK_MONOTONIC) - w0;
		unhealthy = v.n_entries;
		verdict_free(&v);
	}
	printf("refreshes=%d failed=%d unhealthy=%zu", k, failed, unhealthy);
	stats("cpu", cpu, k);
	stats("wall", wall, k);
	printf(" error=\"%s\"\n", failed ? err.msg : "");
	free(cpu);
	free(wall);
	config_free(&cfg);
	manifest_free(&app);
	return failed ? 1 : 0;
}
