/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale's output rows (scale_report.c). */
#ifndef BENCH_SCALE_REPORT_H
#define BENCH_SCALE_REPORT_H

#include "iwscale.h"

/* One figure; a double < 0 or a NULL pointer: not measured. */
struct scale_row {
	const char *what, *side;
	long count;			/* connections, round trips, Writes */
	size_t size;			/* bytes of a message */
	double secs, per_s, mbps, lat_mean_us;
	const struct lat_stats *lat;
	const struct proc_usage *use;	/* growth */
	const struct kernel_usage *kern;
	int with_counts;		/* use's descriptors and threads count */
	int ok;
};

/* A row with nothing measured yet. */
#define SCALE_ROW(w, sd) { .what = (w), .side = (sd), .secs = -1, .per_s = -1, .mbps = -1, \
			   .lat_mean_us = -1 }

void scale_row_header(const struct scale_opts *o);
/* count things in secs: the row's count, seconds and rate. */
void scale_row_rate(struct scale_row *r, long count, double secs);
void scale_row_out(const struct scale_opts *o, const struct scale_row *r);
/* For people only: "(what: a vs b unit: a/b x)". */
void scale_row_ratio(const struct scale_opts *o, const char *what, const char *unit, double a,
		     double b);

#endif
