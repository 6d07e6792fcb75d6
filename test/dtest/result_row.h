/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* One results row as iwdtest, bench/tcp_baseline and bench/iwcm print it:
 * a table for people, or CSV (--csv) with the columns
 *   mode,size,iters,seconds,MBps,lat_us,valid,window,msgs_per_s,
 *   lat_median_us,lat_p99_us,lat_max_us
 * lat_us is the mean, the lat_* columns the median, 99th percentile and
 * maximum of the per-operation times (one way, half a round trip, for a
 * ping-pong); a figure a test does not have is left empty. */
#ifndef IWDTEST_RESULT_ROW_H
#define IWDTEST_RESULT_ROW_H

#include <stdio.h>
#include "lat_stats.h"

struct result_row {
	const char *mode;
	size_t size;
	long iters, window;
	double secs;
	double mbps, rate;		/* MB/s and operations/s; < 0: none */
	double lat_mean_us;		/* < 0: none */
	const struct lat_stats *lat;	/* NULL: no percentiles */
	int ok;				/* every transfer validated */
};

static inline void row_header(int csv)
{
	if (csv)
		printf("mode,size,iters,seconds,MBps,lat_us,valid,window,msgs_per_s,"
		       "lat_median_us,lat_p99_us,lat_max_us\n");
	else
		printf("%-19s %10s %10s %12s %10s  %-5s %6s %12s %9s %9s\n", "mode", "size",
		       "iters", "MB/s", "lat(us)", "valid", "window", "msgs/s", "median", "p99");
}

/* v with `decimals` decimals into buf, or "" when v < 0. */
static inline const char *row_num(char *buf, size_t len, int decimals, double v)
{
	if (v < 0)
		*buf = '\0';
	else
		snprintf(buf, len, "%.*f", decimals, v);
	return buf;
}

static inline void row_print(int csv, const struct result_row *r)
{
	char f[6][32];
	const struct lat_stats *l = r->lat;
	const char *mbps = row_num(f[0], sizeof f[0], 2, r->mbps);
	const char *rate = row_num(f[1], sizeof f[1], 0, r->rate);
	const char *mean = row_num(f[2], sizeof f[2], 3, r->lat_mean_us);
	const char *med = row_num(f[3], sizeof f[3], 3, l ? l->median_us : -1);
	const char *p99 = row_num(f[4], sizeof f[4], 3, l ? l->p99_us : -1);
	const char *max = row_num(f[5], sizeof f[5], 3, l ? l->max_us : -1);
	const char *valid = r->ok ? "OK" : "FAIL";

	if (csv)
		printf("%s,%zu,%ld,%.6f,%s,%s,%s,%ld,%s,%s,%s,%s\n", r->mode, r->size, r->iters,
		       r->secs, mbps, mean, valid, r->window, rate, med, p99, max);
	else
		printf("%-19s %10zu %10ld %12s %10s  %-5s %6ld %12s %9s %9s\n", r->mode, r->size,
		       r->iters, *mbps ? mbps : "-", *mean ? mean : "-", valid, r->window,
		       *rate ? rate : "-", *med ? med : "-", *p99 ? p99 : "-");
	fflush(stdout);
}

#endif
