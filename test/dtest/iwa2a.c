/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwa2a: one rank of an all-to-all job over the DAT 2.0 API (iwa2a.h says
 * what it does, doc/cluster.md how scripts/cluster.sh runs a job).
 *
 *   iwa2a -r RANK (-f HOSTS | -H ADDR,ADDR,...) [-P IA] [-q BASE]
 *         [-S SIZES] [-n ROUNDS] [-w CONNECT_S] [--stall S] [-t LIMIT_S]
 *         [--free-lost] [--sigkill-halfway]
 *
 * One thread drives everything: the CR and connection EVDs are drained,
 * then the DTO EVD (shared by every EP) is waited on for at most 20 ms, so
 * a connection event is seen within 20 ms of its arrival.  Lines on stdout:
 * progress and the summary, a RESULT line and a LOST line per lost peer
 * (key=value, for scripts). */
#include "iwa2a.h"
#include "size_arg.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_BASE 61100	/* above Linux's ephemeral ports (32768-60999) */
#define DEFAULT_SIZES "8,1500,4K,65537,1M"
#define MAX_RANKS 1024
#define PUMP_WAIT_MS 20
#define PUMP_BATCH 64		/* DTO events per pump, so connection events are not starved */
#define TEARDOWN_MS 10000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iwa2a -r RANK (-f HOSTS | -H ADDR,ADDR,...) [options]\n"
		"  -r, --rank N          this process's rank (0-based)\n"
		"  -f, --hosts FILE      rank r's IPv4 address on line r+1 (# comments)\n"
		"  -H, --host-list LIST  the same, comma-separated\n"
		"  -P, --ia NAME         the IA to open (default iw-tcp)\n"
		"  -q, --base Q          rank r listens on qualifier Q + r (default %d)\n"
		"  -S, --sizes LIST      transfer sizes (default %s)\n"
		"  -n, --rounds N        each operation and size N times per pair (default 2)\n"
		"  -w, --connect S       every pair connected within S seconds (default 60)\n"
		"      --stall S         fail after S seconds without any event (default 30)\n"
		"  -t, --limit S         fail after S seconds in all (default 600)\n"
		"      --free-lost       free a lost peer's EP as soon as its requests\n"
		"                        flushed (default: at the end, with the others)\n"
		"      --sigkill-halfway test aid: SIGKILL this process halfway through its\n"
		"                        stages with every peer (a KILLED line says when)\n"
		"Exit status: 0 every pair finished and validated, 2 finished but a peer\n"
		"was lost (its connection ended before its DONE), 1 failure, 64 usage.\n",
		DEFAULT_BASE, DEFAULT_SIZES);
}

double a2a_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int64_t a2a_real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ------------------------------------------------------------ options */

static int add_host(struct a2a_opts *o, const char *addr)
{
	if (o->nranks == MAX_RANKS)
		return -1;
	o->addr[o->nranks] = strdup(addr);
	return o->addr[o->nranks++] ? 0 : -1;
}

static int read_hosts(struct a2a_opts *o, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int rc = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	while (!rc && fgets(line, sizeof line, f)) {
		char *word;

		line[strcspn(line, "#")] = 0;
		word = strtok(line, " \t\r\n");
		if (word)
			rc = add_host(o, word);
	}
	fclose(f);
	return rc;
}

static int host_list(struct a2a_opts *o, char *list)
{
	char *save = NULL, *tok;

	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (add_host(o, tok))
			return -1;
	return 0;
}

static int parse_args(struct a2a_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "hosts", required_argument, NULL, 'f' },
		{ "host-list", required_argument, NULL, 'H' },
		{ "ia", required_argument, NULL, 'P' },
		{ "base", required_argument, NULL, 'q' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "rounds", required_argument, NULL, 'n' },
		{ "connect", required_argument, NULL, 'w' },
		{ "stall", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 't' },
		{ "free-lost", no_argument, NULL, 'F' },
		{ "sigkill-halfway", no_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char sizes[] = DEFAULT_SIZES;
	int c, bad = 0, k;

	o->ia = "iw-tcp";
	o->rank = -1;
	o->base = DEFAULT_BASE;
	o->rounds = 2;
	o->connect_s = 60;
	o->stall_s = 30;
	o->limit_s = 600;
	o->nsizes = size_arg_list(sizes, o->sizes, A2A_MAX_SIZES);
	while ((c = getopt_long(argc, argv, "r:f:H:P:q:S:n:w:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'r': o->rank = atoi(optarg); break;
		case 'f': bad |= read_hosts(o, optarg); break;
		case 'H': bad |= host_list(o, optarg); break;
		case 'P': o->ia = optarg; break;
		case 'q': o->base = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'S':
			o->nsizes = size_arg_list(optarg, o->sizes, A2A_MAX_SIZES);
			bad |= o->nsizes < 1;
			break;
		case 'n': o->rounds = atoi(optarg); break;
		case 'w': o->connect_s = atof(optarg); break;
		case 's': o->stall_s = atof(optarg); break;
		case 't': o->limit_s = atof(optarg); break;
		case 'F': o->free_lost = 1; break;
		case 'K': o->sigkill_halfway = 1; break;
		case 'h': usage(stdout); exit(A2A_OK);
		default: bad = 1;
		}
	}
	for (k = 0, o->max = 0; k < o->nsizes; k++)
		if (o->sizes[k] > o->max)
			o->max = o->sizes[k];
	if (bad || optind != argc || o->nranks < 2 || o->rank < 0 || o->rank >= o->nranks ||
	    o->rounds < 1 || o->connect_s <= 0 || o->stall_s <= 0 || o->limit_s <= 0 ||
	    o->base + (unsigned)o->nranks > 65536) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/* --------------------------------------------------------------- loop */

static void async_event(struct a2a_job *j, const DAT_EVENT *ev)
{
	printf("iwa2a: rank %d: asynchronous event %s (0x%x)\n", j->o->rank,
	       du_event_name(ev->event_number), (unsigned)ev->event_number);
	/* An overflowing EVD lost events: nothing after it can be judged. */
	if (ev->event_number == DAT_ASYNC_ERROR_EVD_OVERFLOW)
		j->failed = 1;
}

/* Takes what the EVDs hold, waiting up to wait_ms for a completion when
 * nothing else came; the number of events taken. */
static int pump(struct a2a_job *j, int wait_ms)
{
	DAT_EVENT ev;
	DAT_COUNT more;
	DAT_RETURN r;
	int n = 0, k;

	for (; dat_evd_dequeue(j->d.cr_evd, &ev) == DAT_SUCCESS; n++)
		a2a_cr_event(j, &ev);
	for (; dat_evd_dequeue(j->d.conn_evd, &ev) == DAT_SUCCESS; n++)
		a2a_conn_event(j, &ev);
	for (; dat_evd_dequeue(j->d.async_evd, &ev) == DAT_SUCCESS; n++)
		async_event(j, &ev);
	r = dat_evd_wait(j->d.dto_evd, n ? 0 : (DAT_TIMEOUT)wait_ms * 1000, 1, &ev, &more);
	if (r == DAT_SUCCESS) {
		a2a_dto_event(j, &ev);
		n++;
		for (k = 1; k < PUMP_BATCH && dat_evd_dequeue(j->d.dto_evd, &ev) == DAT_SUCCESS; k++, n++)
			a2a_dto_event(j, &ev);
	} else if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED && du_check(r, "dat_evd_wait")) {
		j->failed = 1;
	}
	return n;
}

/* Prints the end of each pair that has settled since the last call. */
static void report_ends(struct a2a_job *j, int64_t start_real_ns)
{
	int i;

	for (i = 0; i < j->npeers; i++) {
		struct a2a_pair *p = &j->pairs[i];

		if (p->reported || !a2a_pair_settled(p))
			continue;
		p->reported = 1;
		if (!a2a_pair_lost(j, p))
			continue;
		if (j->o->free_lost)
			a2a_free_ep(p);
		printf("iwa2a: rank %d: lost rank %d: %s at stage %d of %d, %.3f s into the job; "
		       "%ld requests and receives flushed\n",
		       j->o->rank, p->rank, p->end_event, p->end_stage, j->stages - 1,
		       (double)(p->end_real_ns - start_real_ns) / 1e9, p->flushed);
		printf("LOST rank=%d peer=%d event=%s stage=%d stages=%d at_ns=%lld flushed=%ld "
		       "errors=%ld\n", j->o->rank, p->rank, p->end_event, p->end_stage,
		       j->stages - 1, (long long)p->end_real_ns, p->flushed, p->errors);
	}
}

static int all_pairs(const struct a2a_job *j, int (*pred)(const struct a2a_job *,
							   const struct a2a_pair *))
{
	int i;

	for (i = 0; i < j->npeers; i++)
		if (!pred(j, &j->pairs[i]))
			return 0;
	return 1;
}

static int connected_or_gone(const struct a2a_job *j, const struct a2a_pair *p)
{
	(void)j;
	return p->st == PS_UP || p->st == PS_ENDED || p->unreached;
}

/* Half the stages done with every peer still connected.  --sigkill-halfway
 * dies there, with work left and requests in flight however fast the
 * machine; a script that sent the signal on seeing the line could come
 * after the end of a short job. */
static int halfway(const struct a2a_job *j, const struct a2a_pair *p)
{
	return p->st == PS_ENDED || p->unreached || (p->st == PS_UP && p->stage >= j->stages / 2);
}

static int at_barrier(const struct a2a_job *j, const struct a2a_pair *p)
{
	return a2a_pair_finished(j, p) || a2a_pair_settled(p) || p->unreached;
}

/* Nothing more to wait for at teardown: ended and settled, or never
 * connected (a job that failed may stop while some pairs still dial). */
static int settled_or_never_up(const struct a2a_job *j, const struct a2a_pair *p)
{
	(void)j;
	return a2a_pair_settled(p) || p->unreached || p->st < PS_UP;
}

/* Prints why the job failed and each pair for which done() is false. */
static void report_stall(struct a2a_job *j, const char *why,
			 int (*done)(const struct a2a_job *, const struct a2a_pair *))
{
	char desc[256];
	int i;

	printf("iwa2a: rank %d: FAILED: %s; the pairs not done:\n", j->o->rank, why);
	for (i = 0; i < j->npeers; i++) {
		struct a2a_pair *p = &j->pairs[i];

		if (done(j, p))
			continue;
		a2a_pair_describe(j, p, desc, sizeof desc);
		printf("iwa2a: rank %d:   rank %d: %s\n", j->o->rank, p->rank, desc);
	}
	j->failed = 1;
}

/* connect, steps, barrier: when each phase ended, in ms since the stages
 * began (0: it did not); teardown: how long it took. */
struct phase_ms { double connect, steps, barrier, teardown; };

static double mark(double now, double t0)
{
	return now > t0 ? now - t0 : 1e-3;	/* never 0, which means "not yet" */
}

static double phase_s(double end, double start)
{
	return end > 0 ? (end - start) / 1e3 : 0;
}

/* Connect, run the stages and the barrier: 0, or -1 on failure. */
static int run_stages(struct a2a_job *j, struct phase_ms *t, int64_t start_real_ns)
{
	double t0 = a2a_now_ms(), last = t0;
	double connect_by = t0 + j->o->connect_s * 1e3, limit = t0 + j->o->limit_s * 1e3;
	int i, half = 0;

	for (;;) {
		double now = a2a_now_ms();

		a2a_dial_due(j, now, connect_by);
		j->steps_done = all_pairs(j, a2a_pair_past_steps);
		for (i = 0; i < j->npeers; i++)
			a2a_advance(j, &j->pairs[i]);
		report_ends(j, start_real_ns);
		if (!t->connect && all_pairs(j, connected_or_gone)) {
			t->connect = mark(now, t0);
			printf("iwa2a: rank %d: connected to all %d peers in %.3f s\n", j->o->rank,
			       j->npeers, t->connect / 1e3);
		}
		if (!half && all_pairs(j, halfway)) {
			half = 1;
			printf("iwa2a: rank %d: halfway: stage %d of %d reached with every peer\n",
			       j->o->rank, j->stages / 2, j->stages - 1);
			if (j->o->sigkill_halfway) {
				printf("KILLED rank=%d at_ns=%lld\n", j->o->rank,
				       (long long)a2a_real_ns());
				fflush(stdout);
				raise(SIGKILL);
			}
		}
		if (!t->steps && j->steps_done)
			t->steps = mark(now, t0);
		if (all_pairs(j, at_barrier)) {
			t->barrier = mark(now, t0);
			return 0;
		}
		if (j->failed) {
			report_stall(j, "an error stopped the job", at_barrier);
			return -1;
		}
		if (now - last > j->o->stall_s * 1e3 || now > limit) {
			report_stall(j, now > limit ? "the time limit passed"
						    : "no event for the stall time", at_barrier);
			return -1;
		}
		if (pump(j, PUMP_WAIT_MS))
			last = a2a_now_ms();
	}
}

/* Disconnects every pair still up and waits until each has ended and
 * every request and receive posted has completed. */
static void teardown(struct a2a_job *j, int64_t start_real_ns)
{
	double end = a2a_now_ms() + TEARDOWN_MS;

	a2a_disconnect_all(j);
	while (!all_pairs(j, settled_or_never_up) && a2a_now_ms() < end)
		pump(j, PUMP_WAIT_MS);
	report_ends(j, start_real_ns);
	if (!all_pairs(j, settled_or_never_up))
		report_stall(j, "connections not ended 10 s after the disconnect",
			     settled_or_never_up);
}

/* ------------------------------------------------------------ summary */

static int summarize(struct a2a_job *j, const struct phase_ms *t, double total_ms)
{
	long checked[OP_COUNT] = { 0 }, flushed = 0, bad = 0, errors = 0, all;
	int finished = 0, lost = 0, failed = 0, i, k;
	uint64_t bytes = 0;
	char lost_ranks[256] = "-";
	size_t used = 0;
	const char *status;

	for (i = 0; i < j->npeers; i++) {
		struct a2a_pair *p = &j->pairs[i];
		int is_lost = a2a_pair_lost(j, p);

		for (k = 0; k < OP_COUNT; k++)
			checked[k] += p->checked[k];
		bytes += p->bytes;
		flushed += p->flushed;
		bad += p->bad;
		/* A lost peer's failed requests are the loss, not a fault. */
		errors += is_lost ? 0 : p->errors;
		if (is_lost) {
			lost++;
			used += (size_t)snprintf(lost_ranks + used, sizeof lost_ranks - used,
						 "%s%d", used ? "," : "", p->rank);
			if (used >= sizeof lost_ranks)
				used = sizeof lost_ranks - 1;
		} else if (p->peer_msgs == j->stages && p->stage == j->stages - 1 && !p->bad) {
			finished++;
		} else {
			failed++;
		}
	}
	if (bad || errors)
		j->failed = 1;
	all = checked[OP_SEND] + checked[OP_WRITE] + checked[OP_READ];
	status = j->failed || failed ? "failed" : lost ? "lost" : "ok";
	printf("iwa2a: rank %d of %d on %s: %d peers finished, %d lost, %d failed; %ld transfers "
	       "checked (%ld Sends, %ld RDMA Writes, %ld RDMA Reads), %.1f MB; connect %.2f s, "
	       "steps %.2f s, barrier %.2f s, teardown %.2f s\n",
	       j->o->rank, j->o->nranks, j->o->ia, finished, lost, failed, all,
	       checked[OP_SEND], checked[OP_WRITE], checked[OP_READ], (double)bytes / 1e6,
	       phase_s(t->connect, 0), phase_s(t->steps, t->connect),
	       phase_s(t->barrier, t->steps), t->teardown / 1e3);
	printf("RESULT rank=%d status=%s finished=%d lost=%d lost_ranks=%s failed=%d checked=%ld "
	       "expected=%ld bytes=%llu flushed=%ld bad=%ld errors=%ld seconds=%.3f\n",
	       j->o->rank, status, finished, lost, lost_ranks, failed, all,
	       (long)j->npeers * j->steps, (unsigned long long)bytes, flushed, bad, errors,
	       total_ms / 1e3);
	if (j->failed || failed)
		return A2A_FAILED;
	return lost ? A2A_LOST : A2A_OK;
}

int main(int argc, char **argv)
{
	static char *addrs[MAX_RANKS];
	struct a2a_opts o = { .addr = addrs };
	struct a2a_job j = { .o = &o };
	struct phase_ms t = { 0 };
	double t0 = a2a_now_ms();
	int64_t start_real_ns = a2a_real_ns();
	int rc = A2A_FAILED, i;

	du_prog = "iwa2a";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(&o, argc, argv))
		return A2A_USAGE;
	j.npeers = o.nranks - 1;
	j.pairs = calloc((size_t)j.npeers, sizeof *j.pairs);
	j.regs = calloc((size_t)j.npeers + 2, sizeof *j.regs);
	if (!j.pairs || !j.regs) {
		fprintf(stderr, "iwa2a: out of memory\n");
		return A2A_FAILED;
	}
	j.d.tmo_us = 5 * 1000 * 1000;
	j.d.conn_qlen = 4 * o.nranks + 8;
	if (du_open(&j.d, o.ia, j.npeers * (A2A_RECV_SLOTS + 2 * A2A_MAX_REQ) + 16) ||
	    a2a_xfer_setup(&j))
		goto out;
	for (i = 0; i < j.npeers; i++) {
		struct a2a_pair *p = &j.pairs[i];

		p->rank = i < o.rank ? i : i + 1;
		p->active = p->rank < o.rank;
		p->stage = -1;
		p->mem = &j.regs[2 + i];
		if (a2a_pair_mem(&j, p))
			goto out;
	}
	if (a2a_listen(&j))
		goto out;
	printf("iwa2a: rank %d of %d on %s (%s), qualifier %u: %d stages per pair\n", o.rank,
	       o.nranks, o.ia, o.addr[o.rank], o.base + (unsigned)o.rank, j.stages - 1);
	if (run_stages(&j, &t, start_real_ns) == 0)
		printf("iwa2a: rank %d: barrier passed after %.3f s\n", o.rank, t.barrier / 1e3);
	t.teardown = a2a_now_ms();
	teardown(&j, start_real_ns);
	t.teardown = a2a_now_ms() - t.teardown;
	rc = summarize(&j, &t, a2a_now_ms() - t0);
out:
	a2a_free_eps(&j);
	du_close(&j.d, j.regs, j.npeers + 2);
	free(j.pairs);
	free(j.regs);
	for (i = 0; i < o.nranks; i++)
		free(o.addr[i]);
	return rc;
}
