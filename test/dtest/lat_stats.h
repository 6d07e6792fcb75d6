/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Latency samples and their summary, shared by iwdtest, bench/tcp_baseline
 * and bench/iwcm: callers record one sample per operation (nanoseconds on
 * CLOCK_MONOTONIC, which every process of the machine shares) and report
 * the median, the 99th percentile and the maximum. */
#ifndef IWDTEST_LAT_STATS_H
#define IWDTEST_LAT_STATS_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Most samples kept per test: beyond it (at most 32 MiB) the summary is
 * over the first LAT_MAX_SAMPLES operations. */
#define LAT_MAX_SAMPLES (1L << 22)

struct lat_stats {
	double median_us, p99_us, max_us;
	long n;			/* samples summarised; 0: no latency figure */
};

static inline uint64_t lat_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline int lat_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0 < p <= 1) of n sorted samples. */
static inline uint64_t lat_rank(const uint64_t *sorted, long n, double p)
{
	long k = (long)(p * (double)n + 0.999999);

	return sorted[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

/* Sorts ns[0..n) in place and summarises it; each sample is multiplied by
 * scale first (0.5 turns a round trip into a one-way latency). */
static inline void lat_summarize(uint64_t *ns, long n, double scale, struct lat_stats *out)
{
	out->n = n;
	if (n < 1) {
		out->median_us = out->p99_us = out->max_us = 0;
		return;
	}
	qsort(ns, (size_t)n, sizeof *ns, lat_cmp);
	out->median_us = (double)lat_rank(ns, n, 0.5) * scale / 1e3;
	out->p99_us = (double)lat_rank(ns, n, 0.99) * scale / 1e3;
	out->max_us = (double)ns[n - 1] * scale / 1e3;
}

#endif
