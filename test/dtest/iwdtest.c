/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest: RDMA write, read, send and ping-pong over the DAT 2.0 API, and
 * the patterns consumers build from them (iwd_patterns.c), with a size
 * sweep, validation of every transfer and a per-size results table.
 *
 *   server: iwdtest -s [-P iw-lo] [-q qual] [-p | --poll-wait0] [--signal N]
 *   client: iwdtest -h 127.0.0.1 [-P iw-lo] [-q qual] [-m mode] [-S sizes]
 *                   [-n iters | -t seconds] [-p | --poll-wait0] [--window W]
 *                   [--signal N] [--gap US] [--csv] [--no-verify]
 *
 * The client chooses the tests; the server follows them for one client and
 * exits.  Exit status: 0 when every test ran and validated, 1 otherwise,
 * 2 for a usage error. */
#include "iwdtest.h"
#include "result_row.h"
#include "size_arg.h"
#include "window.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_QUAL 62278	/* above the ephemeral port range */
#define DEFAULT_BUDGET 0.25
#define MAX_ITERS (1L << 26)
#define WARMUP_MAX 1000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iwdtest -s [options]             run the server (one client)\n"
		"       iwdtest -h HOST [options]        run the tests against a server\n"
		"  -P IA        interface adapter name (default iw-lo)\n"
		"  -q QUAL      connection qualifier (default %d)\n"
		"  -m MODES     comma-separated: write, read, send, pingpong, all (these\n"
		"               four, the default); the consumer patterns wpp (RDMA Write\n"
		"               ping-pong polling memory; sizes multiples of 8), rdv (Read\n"
		"               rendezvous ping-pong), rdvw (Write rendezvous ping-pong),\n"
		"               rdvstream (W Read rendezvous outstanding), bibw (RDMA\n"
		"               Writes both ways at once; MB/s and iters of both\n"
		"               directions), or patterns (these five)\n"
		"  -S SIZES     comma-separated sizes, K/M suffixes (default 64,4K,64K,1M)\n"
		"  -n ITERS     iterations per size (default: a time budget)\n"
		"  -t SECONDS   time budget per mode and size (default %.2f)\n"
		"  -p           poll: spin on dat_evd_dequeue instead of dat_evd_wait\n"
		"  --poll-wait0 poll: spin on dat_evd_wait with timeout 0\n"
		"  -w SECONDS   bound on any single wait (default 30)\n"
		"  --window W   at most W operations unacknowledged (default %d, at most\n"
		"               %d; fewer for large sizes: %u MiB in flight at most)\n"
		"  --signal N   wpp: every Nth RDMA Write signaled, the others posted\n"
		"               with DAT_COMPLETION_SUPPRESS_FLAG (default %d, at most %d)\n"
		"  --gap US     pingpong: the client pauses US microseconds after each\n"
		"               round trip (a request now and then; default 0, at most\n"
		"               1000000); lat_us then counts the pauses, the median,\n"
		"               p99 and max do not\n"
		"  --csv        machine-readable output: mode,size,iters,seconds,MBps,lat_us,\n"
		"               valid,window,msgs_per_s,lat_median_us,lat_p99_us,lat_max_us\n"
		"               (lat_*: one way, half a round trip; median, 99th percentile\n"
		"               and maximum over the ping-pong's iterations, less the\n"
		"               client's own checks of the answers, as tcp_baseline's;\n"
		"               lat_us: the run's time per iteration, checks included;\n"
		"               pingpong, wpp, rdv and rdvw are ping-pongs)\n"
		"  --no-verify  check only the last transfer of each test\n"
		"  --corrupt    flip a byte of the client's source data (expect FAIL)\n"
		"  --ssp        negotiate over a socket on port QUAL (TCP, or UDP on a\n"
		"               udp IA), then upgrade it with a Socket Service Point /\n"
		"               dat_iw_socket_connect\n",
		DEFAULT_QUAL, DEFAULT_BUDGET, WIN_DEFAULT, WIN_LIMIT, WIN_BYTES >> 20,
		IWD_SIGNAL_DEFAULT, IWD_SIGNAL_MAX);
}

static int parse_sizes(struct iwd_opts *o, char *list)
{
	o->nsizes = size_arg_list(list, o->sizes, IWD_MAX_SIZES);
	return o->nsizes > 0 ? 0 : -1;
}

static int parse_modes(struct iwd_opts *o, char *list)
{
	char *save = NULL, *tok;
	int m;

	o->modes = 0;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcasecmp(tok, "all") || !strcasecmp(tok, "patterns")) {
			o->modes |= strcasecmp(tok, "all") ? IWD_PATTERN_MODES : IWD_CLASSIC_MODES;
			continue;
		}
		for (m = 0; m < M_COUNT && strcasecmp(tok, iwd_mode_name(m)); m++)
			;
		if (m == M_COUNT)
			return -1;
		o->modes |= 1u << m;
	}
	return o->modes ? 0 : -1;
}

static void set_defaults(struct iwd_opts *o)
{
	static const size_t sizes[] = { 64, 4096, 65536, 1048576 };

	memset(o, 0, sizeof *o);
	o->ia = "iw-lo";
	o->qual = DEFAULT_QUAL;
	o->modes = IWD_CLASSIC_MODES;
	memcpy(o->sizes, sizes, sizeof sizes);
	o->nsizes = 4;
	o->budget = DEFAULT_BUDGET;
	o->verify_all = 1;
	o->wait_s = 30;
	o->signal_every = IWD_SIGNAL_DEFAULT;
}

/* wpp's last word is its sequence number: sizes of whole words. */
static int sizes_fit_modes(const struct iwd_opts *o)
{
	int k;

	for (k = 0; k < o->nsizes; k++)
		if ((o->modes & (1u << M_WPP)) && o->sizes[k] % 8) {
			fprintf(stderr, "iwdtest: wpp needs sizes that are multiples of 8 (%zu)\n",
				o->sizes[k]);
			return -1;
		}
	return 0;
}

/* Returns 0 to run, 1 to exit successfully (help), 2 on a usage error. */
static int parse_args(struct iwd_opts *o, int argc, char **argv)
{
	enum { OPT_CSV = 256, OPT_NOVERIFY, OPT_SSP, OPT_HELP, OPT_CORRUPT, OPT_WINDOW,
	       OPT_WAIT0, OPT_SIGNAL, OPT_GAP };
	static const struct option lo[] = {
		{ "csv", no_argument, NULL, OPT_CSV },
		{ "no-verify", no_argument, NULL, OPT_NOVERIFY },
		{ "ssp", no_argument, NULL, OPT_SSP },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "corrupt", no_argument, NULL, OPT_CORRUPT },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "poll-wait0", no_argument, NULL, OPT_WAIT0 },
		{ "signal", required_argument, NULL, OPT_SIGNAL },
		{ "gap", required_argument, NULL, OPT_GAP },
		{ NULL, 0, NULL, 0 }
	};
	int c, bad = 0;

	set_defaults(o);
	while ((c = getopt_long(argc, argv, "sh:P:q:m:S:n:t:pw:", lo, NULL)) != -1) {
		switch (c) {
		case 's': o->server = 1; break;
		case 'h': o->host = optarg; break;
		case 'P': o->ia = optarg; break;
		case 'q': o->qual = strtoull(optarg, NULL, 0); break;
		case 'm': bad |= parse_modes(o, optarg); break;
		case 'S': bad |= parse_sizes(o, optarg); break;
		case 'n': o->iters = strtol(optarg, NULL, 0); bad |= o->iters < 1; break;
		case 't': o->budget = strtod(optarg, NULL); bad |= !(o->budget > 0); break;
		case 'p': o->poll = DU_POLL_DEQUEUE; break;
		case OPT_WAIT0: o->poll = DU_POLL_WAIT0; break;
		case OPT_WINDOW:
			o->window = strtol(optarg, NULL, 0);
			bad |= o->window < 1 || o->window > WIN_LIMIT;
			break;
		case OPT_SIGNAL:
			o->signal_every = strtol(optarg, NULL, 0);
			bad |= o->signal_every < 1 || o->signal_every > IWD_SIGNAL_MAX;
			break;
		case OPT_GAP:
			o->gap_us = strtol(optarg, NULL, 0);
			bad |= o->gap_us < 0 || o->gap_us > 1000000;
			break;
		case 'w': o->wait_s = strtod(optarg, NULL); bad |= !(o->wait_s > 0); break;
		case OPT_CSV: o->csv = 1; break;
		case OPT_NOVERIFY: o->verify_all = 0; break;
		case OPT_CORRUPT: o->corrupt = 1; break;
		case OPT_SSP: o->ssp = 1; break;
		case OPT_HELP: usage(stdout); return 1;
		default: bad = 1;
		}
	}
	if (bad || optind != argc || o->server == !!o->host || sizes_fit_modes(o)) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/* n unmeasured iterations (none when n <= 0); their errors go to *errs. */
static int warm_up(struct iwd_sess *s, int mode, size_t size, long n,
		   struct iwd_result *r, long *errs)
{
	*errs = 0;
	if (n <= 0)
		return 0;
	if (iwd_run(s, mode, size, n, r))
		return -1;
	*errs = r->errors;
	return 0;
}

/* A fixed count: first a tenth of it (at most WARMUP_MAX), and at least
 * a turn of the receive ring, unmeasured, so that page faults, first
 * touches and cold caches do not land in the figures.  The ring: on a VM
 * that shadows page tables the kernel's first access to each page of a
 * slot costs some 5 us, and 100 round trips of 64 KiB measured 64 fresh
 * slots (doc/performance.md). */
static int run_fixed(struct iwd_sess *s, const struct iwd_opts *o, int mode,
		     size_t size, struct iwd_result *r)
{
	long warm = o->iters / 10 < WARMUP_MAX ? o->iters / 10 : WARMUP_MAX, errs;

	if (warm < iwd_ring_slots(s))
		warm = iwd_ring_slots(s);
	if (warm_up(s, mode, size, warm, r, &errs) ||
	    iwd_run(s, mode, size, o->iters, r))
		return -1;
	r->errors += errs;
	return 0;
}

/* With a time budget: after a turn of the receive ring, double the count
 * until a run takes a tenth of the budget, then size the measured run to
 * the budget.  Every run, warm-up included, is validated. */
static int run_budget(struct iwd_sess *s, const struct iwd_opts *o, int mode,
		      size_t size, struct iwd_result *r)
{
	long n = 16, errs;

	if (o->iters)
		return run_fixed(s, o, mode, size, r);
	/* The ring first, as run_fixed's warm-up does: the calibration
	 * below sizes the run by its own runs' times, and fresh
	 * slots' first touches (some 5 us a page here) made 16 Sends of 1 MiB
	 * take 31 ms, so the measured run was sized to 25 -- again on fresh
	 * slots: 0.6 GB/s where a warm ring moves 3.6 (the bench's Send row
	 * at 1 MiB with the CRC off, whose receives are placed straight into
	 * the ring by the kernel). */
	if (warm_up(s, mode, size, iwd_ring_slots(s), r, &errs))
		return -1;
	for (;;) {
		if (iwd_run(s, mode, size, n, r))
			return -1;
		errs += r->errors;
		if (r->secs >= o->budget / 10 || n >= MAX_ITERS)
			break;
		n *= r->secs < o->budget / 100 ? 8 : 2;
	}
	n = (long)((double)n * o->budget / (r->secs > 1e-6 ? r->secs : 1e-6));
	n = n < 1 ? 1 : n > MAX_ITERS ? MAX_ITERS : n;
	if (iwd_run(s, mode, size, n, r))
		return -1;
	r->errors += errs;
	return 0;
}

static void print_row(const struct iwd_opts *o, int mode, size_t size,
		      const struct iwd_result *r)
{
	int pp = iwd_mode_is_pingpong(mode);
	struct result_row row = {
		.mode = iwd_mode_name(mode), .size = size, .iters = r->iters,
		.window = pp ? 1 : r->window, .secs = r->secs,
		.mbps = (double)size * (double)r->iters / r->secs / 1e6,
		.rate = (double)r->iters / r->secs,
		/* one way: half a round trip */
		.lat_mean_us = pp ? r->secs * 1e6 / (double)r->iters / 2 : -1,
		.lat = pp ? &r->lat : NULL, .ok = !r->errors,
	};

	row_print(o->csv, &row);
	if (r->errors)
		fprintf(stderr, "iwdtest: %s size %zu: %ld transfers failed validation\n",
			iwd_mode_name(mode), size, r->errors);
}

static int run_client(struct iwd_sess *s, const struct iwd_opts *o)
{
	int mode, k, fails = 0;

	row_header(o->csv);
	/* The header says "connected, transfers begin" to a script watching. */
	fflush(stdout);
	for (mode = 0; mode < M_COUNT; mode++) {
		if (!(o->modes & (1u << mode)))
			continue;
		for (k = 0; k < o->nsizes; k++) {
			struct iwd_result r = { 0 };
			if (run_budget(s, o, mode, o->sizes[k], &r)) {
				fprintf(stderr, "iwdtest: %s size %zu: transfer failed\n",
					iwd_mode_name(mode), o->sizes[k]);
				return -1;
			}
			print_row(o, mode, o->sizes[k], &r);
			fails += r.errors != 0;
		}
	}
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct iwd_opts o;
	struct iwd_sess *s;
	int rc = parse_args(&o, argc, argv);

	if (rc)
		return rc == 1 ? 0 : 2;
	s = iwd_open(&o);
	if (!s) {
		fprintf(stderr, "iwdtest: %s failed\n", o.server ? "server" : "client");
		return 1;
	}
	rc = o.server ? iwd_serve(s) : run_client(s, &o);
	/* Say goodbye only over a connection that is still in step. */
	if (iwd_close(s, rc >= 0) && rc == 0)
		rc = 1;
	if (o.server)
		printf("iwdtest: server done%s\n", rc ? ", with failures" : "");
	return rc ? 1 : 0;
}
