/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwcm: connection setup through the provider (via libdat2), on loopback.
 *
 *   iwcm [-m psp|ssp|tcp] [-n cycles] [-q qual] [-P ia] [-w secs] [--csv]
 *
 * Forks a server and runs `cycles` connect-accept-disconnect cycles in a
 * row, after a tenth as many (at most 100) unmeasured warm-up cycles.  One
 * cycle, on the client: create an EP, connect, ESTABLISHED, graceful
 * disconnect, DISCONNECTED, free the EP; on the server: create an EP, the
 * connection request, accept, ESTABLISHED, the peer's DISCONNECTED, free.
 *   psp: dat_ep_connect to a Public Service Point (qualifier qual);
 *   ssp: the client TCP-connects to port qual; the server hands the
 *        accepted socket to dat_iw_ssp_create, whose final streaming
 *        message offers the upgrade; the client reads it and calls
 *        dat_iw_socket_connect on the same socket;
 *   tcp: plain TCP, the yardstick, through no IA: the client connects,
 *        shuts its side down and reads to the server's close; the server
 *        accepts and reads to the client's end of stream, then closes.
 * Reports setups per second and the cycle time (median, 99th percentile,
 * max); with ssp also the upgrade time: from the first upgrade call of
 * either side (dat_iw_ssp_create / dat_iw_socket_connect) to the later
 * ESTABLISHED of the two, CLOCK_MONOTONIC being common to both processes;
 * and each side's own call-to-ESTABLISHED time.
 *
 * Output rows (--csv), in iwdtest's columns: mode,size,iters,seconds,MBps,
 * lat_us,valid,window,msgs_per_s,lat_median_us,lat_p99_us,lat_max_us with
 * mode connect_psp | connect_ssp | connect_tcp (msgs_per_s: setups per second, lat_*:
 * cycle time) and ssp_upgrade, ssp_upgrade_active, ssp_upgrade_passive.
 * Exit status 0 when every cycle connected, 1 otherwise, 2 on usage. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "proc_io.h"
#include "dtest/dat_util.h"
#include "dtest/result_row.h"

#define DEFAULT_QUAL 63950	/* above the ephemeral port range */
#define WARMUP_MAX 100
#define HOST "127.0.0.1"

struct cm_opts {
	const char *ia;
	DAT_CONN_QUAL qual;
	long cycles;
	int ssp, tcp, csv;
	double wait_s;
};

/* Per cycle: when each side called for the upgrade and saw ESTABLISHED. */
struct cm_times {
	uint64_t call, est;
};

static const struct du_ep_sizes ep_sizes = { .max_recv = 16, .max_req = 16, .rdma_read = 4 };

static int wait_disconnected(struct du *d)
{
	DAT_EVENT ev;

	if (du_wait(d, d->conn_evd, &ev, "DISCONNECTED"))
		return -1;
	d->connected = 0;
	if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED) {
		fprintf(stderr, "iwcm: expected DISCONNECTED, got event 0x%x\n",
			(unsigned)ev.event_number);
		return -1;
	}
	return 0;
}

static void ep_drop(struct du *d)
{
	if (d->ep != DAT_HANDLE_NULL)
		dat_ep_free(d->ep);
	d->ep = DAT_HANDLE_NULL;
	d->connected = 0;
}

/* ------------------------------------------------------------ server */

static int serve_one(struct du *d, const struct cm_opts *o, int lfd, struct cm_times *t)
{
	char pd[64];
	DAT_CR_HANDLE cr;
	int pdlen, rc;

	if (du_ep_create(d, &ep_sizes))
		return -1;
	if (o->ssp) {
		int fd = du_tcp_accept(lfd, (int)(o->wait_s * 1000));

		if (fd < 0) {
			fprintf(stderr, "iwcm: no TCP connection to upgrade\n");
			return -1;
		}
		t->call = lat_now_ns();
		rc = du_ssp_wait_cr(d, fd, d->tmo_us, &cr, pd, (int)sizeof pd, &pdlen);
	} else {
		t->call = lat_now_ns();
		rc = du_wait_cr(d, d->tmo_us, &cr, pd, (int)sizeof pd, &pdlen);
	}
	if (rc || du_accept(d, cr))
		return -1;
	t->est = lat_now_ns();
	rc = wait_disconnected(d);
	ep_drop(d);
	return rc;
}

/* Plain TCP: a cycle ends when each side has read the other's end of
 * stream. */
static int drain_to_eof(int fd)
{
	char b[64];
	ssize_t k;

	while ((k = read(fd, b, sizeof b)) > 0)
		;
	return k == 0 ? 0 : -1;
}

static int serve_one_tcp(int lfd, struct cm_times *t)
{
	int fd, rc;

	t->call = lat_now_ns();
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return -1;
	t->est = lat_now_ns();
	rc = drain_to_eof(fd);
	close(fd);
	return rc;
}

static int connect_one_tcp(struct cm_times *t, unsigned port)
{
	int fd, rc;

	t->call = lat_now_ns();
	fd = du_tcp_dial(HOST, port, 0);
	if (fd < 0)
		return -1;
	t->est = lat_now_ns();
	rc = shutdown(fd, SHUT_WR) || drain_to_eof(fd) ? -1 : 0;
	close(fd);
	return rc;
}

/* Serves `total` cycles, then writes how many succeeded and their times
 * to out_fd.  Returns the exit status. */
static int server(const struct cm_opts *o, long total, int ready_fd, int out_fd)
{
	struct du d = { .tmo_us = (DAT_TIMEOUT)(o->wait_s * 1e6) };
	struct cm_times *t = calloc((size_t)total, sizeof *t);
	long done = 0;
	int lfd = -1;

	if (t && o->tcp) {
		lfd = du_tcp_listen((unsigned)o->qual, 128);
		if (lfd >= 0) {
			io_full(ready_fd, "R", 1, 1);
			while (done < total && !serve_one_tcp(lfd, &t[done]))
				done++;
		}
	} else if (t && !du_open(&d, o->ia, 64)) {
		if (o->ssp)
			lfd = du_tcp_listen((unsigned)o->qual, 128);
		if (o->ssp ? lfd >= 0 : !du_listen(&d, o->qual)) {
			io_full(ready_fd, "R", 1, 1);
			while (done < total && !serve_one(&d, o, lfd, &t[done]))
				done++;
		}
	}
	close(ready_fd);
	if (io_full(out_fd, &done, sizeof done, 1) ||
	    io_full(out_fd, t, (size_t)done * sizeof *t, 1))
		done = -1;
	if (!o->tcp) {
		ep_drop(&d);
		du_close(&d, NULL, 0);
	}
	if (lfd >= 0)
		close(lfd);
	free(t);
	return done == total ? 0 : 1;
}

/* ------------------------------------------------------------ client */

static int connect_one(struct du *d, const struct cm_opts *o, struct cm_times *t)
{
	static const char pd[] = "iwcm";

	if (du_ep_create(d, &ep_sizes))
		return -1;
	if (o->ssp) {
		int fd = du_tcp_dial(HOST, (unsigned)o->qual, 0);

		if (fd < 0 || du_ssp_await_offer(d, fd))
			return -1;
		t->call = lat_now_ns();
		if (du_ssp_upgrade(d, fd, pd, (int)sizeof pd))
			return -1;
	} else {
		t->call = lat_now_ns();
		if (du_connect(d, HOST, o->qual, pd, (int)sizeof pd, 0))
			return -1;
	}
	t->est = lat_now_ns();
	du_disconnect(d);
	ep_drop(d);
	return 0;
}

/* Summarises samples[0..n) (nanoseconds) as one output row; rate < 0:
 * none. */
static void report(const struct cm_opts *o, const char *what, uint64_t *samples, long n,
		   double rate, int ok)
{
	struct lat_stats l;
	struct result_row row = { .mode = what, .iters = n, .window = 1, .mbps = -1,
				  .rate = rate, .lat = &l, .ok = ok };
	double sum = 0;
	long k;

	for (k = 0; k < n; k++)
		sum += (double)samples[k];
	lat_summarize(samples, n, 1.0, &l);
	row.secs = sum / 1e9;
	row.lat_mean_us = n ? sum / (double)n / 1e3 : 0;
	row_print(o->csv, &row);
}

/* The upgrade rows from both sides' times of the measured cycles. */
static void report_upgrades(const struct cm_opts *o, const struct cm_times *c,
			    const struct cm_times *s, long n, int ok)
{
	uint64_t *span = malloc((size_t)(n ? n : 1) * 3 * sizeof *span);
	uint64_t *act = span + n, *pas = span + 2 * n;
	long k;

	if (!span)
		return;
	for (k = 0; k < n; k++) {
		uint64_t first = c[k].call < s[k].call ? c[k].call : s[k].call;
		uint64_t last = c[k].est > s[k].est ? c[k].est : s[k].est;
		span[k] = last - first;
		act[k] = c[k].est - c[k].call;
		pas[k] = s[k].est - s[k].call;
	}
	report(o, "ssp_upgrade", span, n, -1, ok);
	report(o, "ssp_upgrade_active", act, n, -1, ok);
	report(o, "ssp_upgrade_passive", pas, n, -1, ok);
	free(span);
}

/* Runs the cycles against the server; reads the server's times from
 * in_fd.  Returns the exit status. */
static int client(const struct cm_opts *o, long warm, int in_fd)
{
	long total = warm + o->cycles, done = 0, sdone = -1;
	struct du d = { .tmo_us = (DAT_TIMEOUT)(o->wait_s * 1e6) };
	struct cm_times *c = calloc((size_t)total, sizeof *c), *s = calloc((size_t)total, sizeof *s);
	uint64_t *cycle = calloc((size_t)total, sizeof *cycle), t0 = 0, t1 = 0;
	int ok;

	if (c && s && cycle && (o->tcp || !du_open(&d, o->ia, 64))) {
		for (; done < total; done++) {
			uint64_t start = lat_now_ns();
			if (done == warm)
				t0 = start;
			if (o->tcp ? connect_one_tcp(&c[done], (unsigned)o->qual) :
				     connect_one(&d, o, &c[done]))
				break;
			t1 = lat_now_ns();
			cycle[done] = t1 - start;
		}
	}
	if (!o->tcp) {
		ep_drop(&d);
		du_close(&d, NULL, 0);
	}
	if (done < total)
		fprintf(stderr, "iwcm: cycle %ld of %ld failed\n", done + 1, total);
	if (io_full(in_fd, &sdone, sizeof sdone, 0) || sdone < 0 || sdone > total ||
	    io_full(in_fd, s, (size_t)sdone * sizeof *s, 0))
		sdone = -1;
	ok = done == total && sdone == total;
	if (done > warm) {
		long n = done - warm;
		double secs = (double)(t1 - t0) / 1e9;

		report(o, o->tcp ? "connect_tcp" : o->ssp ? "connect_ssp" : "connect_psp", cycle + warm, n,
		       (double)n / secs, ok);
		if (o->ssp && sdone >= done)
			report_upgrades(o, c + warm, s + warm, n, ok);
	}
	free(c);
	free(s);
	free(cycle);
	return ok ? 0 : 1;
}

/* ------------------------------------------------------------- main */

static int parse(struct cm_opts *o, int argc, char **argv)
{
	static const struct option lo[] = { { "csv", no_argument, NULL, 'c' }, { NULL, 0, NULL, 0 } };
	int c;

	*o = (struct cm_opts){ .ia = "iw-lo", .qual = DEFAULT_QUAL, .cycles = 1000, .wait_s = 10 };
	while ((c = getopt_long(argc, argv, "m:n:q:P:w:", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			o->ssp = !strcmp(optarg, "ssp");
			o->tcp = !strcmp(optarg, "tcp");
			if (!o->ssp && !o->tcp && strcmp(optarg, "psp"))
				return -1;
			break;
		case 'n': o->cycles = strtol(optarg, NULL, 0); if (o->cycles < 1) return -1; break;
		case 'q': o->qual = strtoull(optarg, NULL, 0); break;
		case 'P': o->ia = optarg; break;
		case 'w': o->wait_s = strtod(optarg, NULL); if (!(o->wait_s > 0)) return -1; break;
		case 'c': o->csv = 1; break;
		default: return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct cm_opts o;
	int ready[2], res[2], rc;
	long warm;
	char r;
	pid_t pid;

	if (parse(&o, argc, argv)) {
		fprintf(stderr, "usage: iwcm [-m psp|ssp|tcp] [-n cycles] [-q qual] [-P ia] [-w secs] [--csv]\n");
		return 2;
	}
	warm = o.cycles / 10 < WARMUP_MAX ? o.cycles / 10 : WARMUP_MAX;
	if (pipe(ready) || pipe(res)) {
		perror("iwcm: pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("iwcm: fork");
		return 1;
	}
	if (pid == 0) {
		close(ready[0]);
		close(res[0]);
		_exit(server(&o, warm + o.cycles, ready[1], res[1]));
	}
	close(ready[1]);
	close(res[1]);
	/* The server listens before the first connect: no retries needed. */
	if (io_full(ready[0], &r, 1, 0)) {
		fprintf(stderr, "iwcm: the server did not start\n");
		rc = 1;
	} else {
		row_header(o.csv);
		rc = client(&o, warm, res[0]);
	}
	rc |= reap_child(pid, rc);
	close(ready[0]);
	close(res[0]);
	return rc;
}
