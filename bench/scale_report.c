/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale's output: one row per figure, CSV (--csv) or a line for people.
 * Every row has the same columns (doc/testing.md, "Connection scale"):
 *   what,mode,depth,side,eps,size,count,seconds,per_s,MBps,lat_mean_us,
 *   lat_median_us,lat_p99_us,lat_max_us,rss_bytes,anon_bytes,heap_bytes,
 *   sock_bytes,slab_bytes,fds,threads,valid
 * a figure a row does not have is left empty. */
#include <stdio.h>

#include "scale_report.h"

void scale_row_header(const struct scale_opts *o)
{
	if (o->csv)
		printf("what,mode,depth,side,eps,size,count,seconds,per_s,MBps,lat_mean_us,"
		       "lat_median_us,lat_p99_us,lat_max_us,rss_bytes,anon_bytes,heap_bytes,sock_bytes,"
		       "slab_bytes,fds,threads,valid\n");
	fflush(stdout);
}

void scale_row_rate(struct scale_row *r, long count, double secs)
{
	r->count = count;
	r->secs = secs;
	r->per_s = secs > 0 ? (double)count / secs : 0;
}

/* v into buf with `dec` decimals, or "" when v < 0 (not measured). */
static const char *num(char *buf, size_t len, int dec, double v)
{
	if (v < 0)
		buf[0] = '\0';
	else
		snprintf(buf, len, "%.*f", dec, v);
	return buf;
}

static void scale_row_csv(const struct scale_opts *o, const struct scale_row *r)
{
	char f[8][32];
	const struct lat_stats *l = r->lat;
	const struct proc_usage *u = r->use;
	const struct kernel_usage *k = r->kern;

	printf("%s,%s,%d,%s,%ld,%zu,%ld,%s,%s,%s,%s,%s,%s,%s,", r->what, o->ssp ? "ssp" : "psp",
	       o->depth, r->side, o->n, r->size, r->count, num(f[0], 32, 6, r->secs),
	       num(f[1], 32, 1, r->per_s), num(f[2], 32, 2, r->mbps),
	       num(f[3], 32, 3, r->lat_mean_us), num(f[4], 32, 3, l ? l->median_us : -1),
	       num(f[5], 32, 3, l ? l->p99_us : -1), num(f[6], 32, 3, l ? l->max_us : -1));
	if (u)
		printf("%ld,%ld,%ld,", u->rss, u->anon, u->heap);
	else
		printf(",,,");
	if (k)
		printf("%ld,%ld,", k->sock_bytes, k->slab_bytes);
	else
		printf(",,");
	if (u && r->with_counts)
		printf("%ld,%ld,", u->fds, u->threads);
	else
		printf(",,");
	printf("%s\n", r->ok ? "OK" : "FAIL");
}

/* Bytes per connection, in KiB. */
static double kib_each(long bytes, long n)
{
	return (double)bytes / 1024.0 / (double)(n > 0 ? n : 1);
}

static void scale_row_human(const struct scale_opts *o, const struct scale_row *r)
{
	printf("%-15s %-8s %6ld", r->what, r->side, r->count);
	if (r->secs >= 0)
		printf("  %.3f s", r->secs);
	if (r->per_s >= 0)
		printf("  %.0f/s", r->per_s);
	if (r->mbps >= 0)
		printf("  %.0f MB/s", r->mbps);
	if (r->lat)
		printf("  one way mean %.2f median %.2f p99 %.2f max %.1f us", r->lat_mean_us,
		       r->lat->median_us, r->lat->p99_us, r->lat->max_us);
	else if (r->lat_mean_us >= 0)
		printf("  mean %.1f us", r->lat_mean_us);
	if (r->use && r->with_counts)
		printf("  RSS %+ld KiB (anon %+ld), heap %+ld KiB, fds %+ld, threads %+ld",
		       r->use->rss / 1024, r->use->anon / 1024, r->use->heap / 1024, r->use->fds,
		       r->use->threads);
	else if (r->use)
		printf("  RSS %.1f (anon %.1f) KiB/EP, heap %.1f KiB/EP",
		       kib_each(r->use->rss, r->count), kib_each(r->use->anon, r->count),
		       kib_each(r->use->heap, r->count));
	if (r->kern)
		printf("  TCP buffers %.2f KiB/conn, slab %.2f KiB/conn",
		       kib_each(r->kern->sock_bytes, r->count), kib_each(r->kern->slab_bytes, r->count));
	printf("  %s\n", r->ok ? "OK" : "FAIL");
	(void)o;
}

void scale_row_out(const struct scale_opts *o, const struct scale_row *r)
{
	if (o->csv)
		scale_row_csv(o, r);
	else
		scale_row_human(o, r);
	fflush(stdout);
}

void scale_row_ratio(const struct scale_opts *o, const char *what, const char *unit, double a,
		     double b)
{
	if (o->csv)
		return;
	printf("  (%s: %.2f vs %.2f %s: %.2f x)\n", what, a, b, unit, b > 0 ? a / b : 0.0);
	fflush(stdout);
}
