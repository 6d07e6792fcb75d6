/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwmem: memory per endpoint of the provider (via libdat2), on loopback.
 *
 *   iwmem [-n eps] [-q qual] [-P ia] [--idle-only] [--csv]
 *
 * idle:      a process of its own opens the IA, creates one EP and frees it (so
 *            that what the first EP sets up once is not counted), then
 *            creates `eps` EPs with the provider's default attributes and
 *            reports how much its resident set (/proc/self/statm) and its
 *            malloc heap (mallinfo2: bytes in use, touched or not) grew,
 *            in total and per EP.
 * connected: a forked server listens on a Public Service Point and accepts
 *            `eps` connections, one EP each; the client connects `eps` EPs
 *            to it, one after the other, and both sides report their growth
 *            once every connection is ESTABLISHED and idle.  If the
 *            provider refuses one, the rows count the EPs reached.
 *
 * Output rows (--csv): what,eps,rss_bytes,heap_bytes,rss_per_ep,heap_per_ep,valid
 * with what = ep_idle | ep_connected_active | ep_connected_passive; valid
 * is OK when all `eps` EPs were made (and connected), else FAIL.
 * Exit status 0 when they all were, 1 otherwise, 2 on usage. */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_io.h"
#include "proc_usage.h"
#include "dtest/dat_util.h"

#define DEFAULT_QUAL 63955	/* above the ephemeral port range */

struct mem_opts {
	const char *ia;
	DAT_CONN_QUAL qual;
	long eps;
	int idle_only, csv;
};

/* What one side reached: EPs made, and its growth. */
struct mem_result {
	long eps;
	struct proc_usage grew;
};

static struct proc_usage usage_since(struct proc_usage before)
{
	return proc_usage_diff(proc_usage_now(), before);
}

/* An EP with the provider's default attributes. */
static int ep_new(struct du *d, DAT_EP_HANDLE *ep)
{
	return du_check(dat_ep_create(d->ia, d->pz, d->dto_evd, d->dto_evd, d->conn_evd,
				      NULL, ep), "dat_ep_create");
}

static void eps_free(DAT_EP_HANDLE *eps, long n)
{
	while (n-- > 0)
		dat_ep_free(eps[n]);
}

static void print_row(const struct mem_opts *o, const char *what, const struct mem_result *r)
{
	long n = r->eps > 0 ? r->eps : 1;
	const char *valid = r->eps == o->eps ? "OK" : "FAIL";

	if (o->csv)
		printf("%s,%ld,%ld,%ld,%ld,%ld,%s\n", what, r->eps, r->grew.rss, r->grew.heap,
		       r->grew.rss / n, r->grew.heap / n, valid);
	else
		printf("%-22s %6ld %12ld %12ld %10ld %10ld  %s\n", what, r->eps, r->grew.rss,
		       r->grew.heap, r->grew.rss / n, r->grew.heap / n, valid);
	fflush(stdout);
}

/* -------------------------------------------------------------- idle */

static int measure_idle(const struct mem_opts *o, DAT_EP_HANDLE *eps)
{
	struct du d = { .tmo_us = 5000000 };
	struct mem_result r = { 0 };
	struct proc_usage before;
	DAT_EP_HANDLE first;

	if (du_open(&d, o->ia, 64) || ep_new(&d, &first)) {
		du_close(&d, NULL, 0);
		return 1;
	}
	dat_ep_free(first);
	before = proc_usage_now();
	while (r.eps < o->eps && !ep_new(&d, &eps[r.eps]))
		r.eps++;
	r.grew = usage_since(before);
	eps_free(eps, r.eps);
	du_close(&d, NULL, 0);
	print_row(o, "ep_idle", &r);
	return r.eps == o->eps ? 0 : 1;
}

/* In a child process: memory the idle EPs freed would otherwise be reused,
 * still resident, by the connected measurement and hide its growth. */
static int measure_idle_apart(const struct mem_opts *o, DAT_EP_HANDLE *eps)
{
	pid_t pid = fork();
	int st;

	if (pid < 0) {
		perror("iwmem: fork");
		return 1;
	}
	if (pid == 0) {
		st = measure_idle(o, eps);
		free(eps);
		_exit(st);
	}
	return reap_child(pid, 0);
}

/* --------------------------------------------------------- connected */

/* One side's setup: the IA with connection EVDs deep enough for every
 * EP's events (all DISCONNECTED events may queue at once). */
static int open_side(struct du *d, const struct mem_opts *o)
{
	d->tmo_us = 10 * 1000000;
	d->conn_qlen = (int)o->eps + 16;
	return du_open(d, o->ia, 64);
}

/* Waits for n DISCONNECTED events (the teardown of every connection). */
static void drain_disconnects(struct du *d, long n)
{
	DAT_EVENT ev;

	while (n-- > 0 && !du_wait(d, d->conn_evd, &ev, "DISCONNECTED"))
		;
}

static int accept_one(struct du *d, DAT_EP_HANDLE *ep)
{
	char pd[64];
	DAT_CR_HANDLE cr;
	int pdlen;

	if (ep_new(d, ep))
		return -1;
	d->ep = *ep;		/* du_accept accepts onto d->ep */
	if (du_wait_cr(d, d->tmo_us, &cr, pd, (int)sizeof pd, &pdlen) || du_accept(d, cr)) {
		d->ep = DAT_HANDLE_NULL;
		dat_ep_free(*ep);
		return -1;
	}
	d->ep = DAT_HANDLE_NULL;
	return 0;
}

/* Accepts up to o->eps connections, reports its growth to out_fd, then
 * waits for the client to tear them down. */
static int server(const struct mem_opts *o, DAT_EP_HANDLE *eps, int ready_fd, int out_fd,
		  int go_fd)
{
	struct du d = { 0 };
	struct mem_result r = { 0 };
	struct proc_usage before;
	char go;

	if (!open_side(&d, o) && !du_listen(&d, o->qual)) {
		before = proc_usage_now();
		io_full(ready_fd, "R", 1, 1);
		while (r.eps < o->eps && !accept_one(&d, &eps[r.eps]))
			r.eps++;
		r.grew = usage_since(before);
	}
	close(ready_fd);
	io_full(out_fd, &r, sizeof r, 1);
	/* The client disconnects once it has our figures. */
	if (io_full(go_fd, &go, 1, 0) == 0)
		drain_disconnects(&d, r.eps);
	eps_free(eps, r.eps);
	du_close(&d, NULL, 0);
	return r.eps == o->eps ? 0 : 1;
}

static int connect_one(struct du *d, const struct mem_opts *o, DAT_EP_HANDLE *ep)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (ep_new(d, ep))
		return -1;
	if (du_check(dat_ep_connect(*ep, (DAT_IA_ADDRESS_PTR)&sin, o->qual, d->tmo_us, 0, NULL,
				    DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		     "dat_ep_connect") || du_wait_established(d)) {
		dat_ep_free(*ep);
		return -1;
	}
	return 0;
}

static int client(const struct mem_opts *o, DAT_EP_HANDLE *eps, int in_fd, int go_fd)
{
	struct du d = { 0 };
	struct mem_result r = { 0 }, srv = { .eps = -1 };
	struct proc_usage before;
	long k;

	if (!open_side(&d, o)) {
		before = proc_usage_now();
		while (r.eps < o->eps && !connect_one(&d, o, &eps[r.eps]))
			r.eps++;
		r.grew = usage_since(before);
	}
	/* A server still accepting would wait for nothing: let it go on. */
	if (r.eps < o->eps)
		fprintf(stderr, "iwmem: connection %ld of %ld failed\n", r.eps + 1, o->eps);
	print_row(o, "ep_connected_active", &r);
	if (io_full(in_fd, &srv, sizeof srv, 0) == 0)
		print_row(o, "ep_connected_passive", &srv);
	io_full(go_fd, "G", 1, 1);
	for (k = 0; k < r.eps; k++)
		dat_ep_disconnect(eps[k], DAT_CLOSE_GRACEFUL_FLAG);
	drain_disconnects(&d, r.eps);
	eps_free(eps, r.eps);
	du_close(&d, NULL, 0);
	return r.eps == o->eps && srv.eps == o->eps ? 0 : 1;
}

static int measure_connected(const struct mem_opts *o, DAT_EP_HANDLE *eps)
{
	int ready[2], res[2], go[2], rc = 1;
	char c;
	pid_t pid;

	if (pipe(ready) || pipe(res) || pipe(go)) {
		perror("iwmem: pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("iwmem: fork");
		return 1;
	}
	if (pid == 0) {
		close(ready[0]);
		close(res[0]);
		close(go[1]);
		rc = server(o, eps, ready[1], res[1], go[0]);
		free(eps);
		_exit(rc);
	}
	close(ready[1]);
	close(res[1]);
	close(go[0]);
	if (io_full(ready[0], &c, 1, 0) == 0)
		rc = client(o, eps, res[0], go[1]);
	else
		fprintf(stderr, "iwmem: the server did not start\n");
	close(go[1]);
	rc |= reap_child(pid, rc);
	close(ready[0]);
	close(res[0]);
	return rc;
}

static int parse(struct mem_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "csv", no_argument, NULL, 'c' },
		{ "idle-only", no_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	*o = (struct mem_opts){ .ia = "iw-lo", .qual = DEFAULT_QUAL, .eps = 1000 };
	while ((c = getopt_long(argc, argv, "n:q:P:", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o->eps = strtol(optarg, NULL, 0); if (o->eps < 1) return -1; break;
		case 'q': o->qual = strtoull(optarg, NULL, 0); break;
		case 'P': o->ia = optarg; break;
		case 'c': o->csv = 1; break;
		case 'i': o->idle_only = 1; break;
		default: return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct mem_opts o;
	DAT_EP_HANDLE *eps;
	int rc;

	if (parse(&o, argc, argv)) {
		fprintf(stderr, "usage: iwmem [-n eps] [-q qual] [-P ia] [--idle-only] [--csv]\n");
		return 2;
	}
	eps = calloc((size_t)o.eps, sizeof *eps);
	if (!eps)
		return 1;
	if (o.csv)
		printf("what,eps,rss_bytes,heap_bytes,rss_per_ep,heap_per_ep,valid\n");
	else
		printf("%-22s %6s %12s %12s %10s %10s  %s\n", "what", "eps", "RSS grew",
		       "heap grew", "RSS/EP", "heap/EP", "valid");
	fflush(stdout);
	rc = measure_idle_apart(&o, eps);
	if (!o.idle_only)
		rc |= measure_connected(&o, eps);
	free(eps);
	return rc;
}
