/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale's two sides, phase by phase (the order bench/iwscale.c gives),
 * stepped together over the control channel.  The passive side sends its
 * figures; the active side reports them with its own.  On a failure the
 * side that failed tells the other (STOP, with why) and both end: the
 * rows printed so far and the failure, with how far the run got, are the
 * report. */
#include <dirent.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iwscale.h"
#include "scale_report.h"

/* What "flat" allows after everything is freed: no descriptor and no
 * thread more than before; the heap in use (mallinfo2) back within a
 * fixed slack (allocator and library state that stays after its first
 * use) and the tables sized to the peak, which the next connections
 * reuse: a 40-byte handle slot per DAT handle live at once (an EP, and
 * a CR on the passive side; never freed, so that a stale handle stays
 * detectably stale: dapl/common/dapl_handle.h) and the progress
 * thread's 16-byte slot per socket watched at once (its generation
 * tells a stale event).  A real per-connection leak is far above it (an
 * EP's state is KiBs, a socket buffer more). */
#define FLAT_HEAP_FIXED (512L << 10)
#define FLAT_HEAP_PER_EP 112L

/* Sockets this process holds: /proc/self/fd entries "socket:[...]". */
static long count_sockets(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char link[64];
		ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);

		n += len > 7 && strncmp(link, "socket:", 7) == 0;
	}
	closedir(d);
	return n;
}

/* The provider closes a torn-down connection's socket on its own thread,
 * some time after the EP is freed (the passive side's was still open
 * 200 ms later): waits, 5 s at most, until this process holds no more
 * than `target` sockets, so that a snapshot counts what stays. */
static void sockets_down_to(long target)
{
	for (int k = 0; k < 250 && count_sockets() > target; k++)
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
}

/* A snapshot once at most `sockets` sockets are left (LONG_MAX: at
 * once); *held gets the sockets held then. */
static struct proc_usage usage_trimmed(long sockets, long *held)
{
	sockets_down_to(sockets);
	*held = count_sockets();
	/* Freed memory goes back to the kernel first, so the resident set
	 * shows what is still in use. */
	malloc_trim(0);
	return proc_usage_now();
}

/* No leak: descriptors, threads and the heap in use.  The resident set
 * is not judged: glibc keeps memory freed into a thread's arena resident
 * past malloc_trim (MALLOC_ARENA_MAX=1 makes it flat), which is the
 * allocator's choice, not a leak; the report's target line shows it. */
static int flat(const struct scale_opts *o, const struct proc_usage *g)
{
	return g->fds <= 0 && g->threads <= 0 && g->heap <= FLAT_HEAP_FIXED + FLAT_HEAP_PER_EP * o->n;
}

/* The IA opened and an EP made and freed once, so that what the provider
 * and libdat2 set up on first use (the library loaded, dat.conf read) is
 * in every snapshot. */
static void warm_up(const struct scale_opts *o)
{
	struct du d = { .tmo_us = 1000000 };
	static const struct du_ep_sizes z = { .max_recv = 4, .max_req = 4, .rdma_read = 1 };

	if (du_open(&d, o->ia, 8) == 0 && du_ep_create(&d, &z) == 0) {
		dat_ep_free(d.ep);
		d.ep = DAT_HANDLE_NULL;
	}
	du_close(&d, NULL, 0);
}

/* One connection made and torn down on the IA before its snapshot: the
 * provider starts what serves every connection (its progress thread and
 * that thread's descriptors) at the first, and keeps it while the IA is
 * open; the snapshot then sees what connections add, and the leak check
 * what they leave. */
static int prime(struct scale_side *s)
{
	struct scale_msg m = { 0 }, peer;
	long sockets = count_sockets();

	if ((s->active ? connect_range(s, 0, 1, &m) : accept_range(s, 0, 1, &m)) ||
	    teardown(s, &m))
		return -1;
	sockets_down_to(sockets);
	if (s->active)
		return ctl_recv(s->ctl, STEP_PRIMED, s->o->wait_s, &peer);
	return ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_PRIMED });
}

static double secs_between(uint64_t a, uint64_t b)
{
	return b > a ? (double)(b - a) / 1e9 : 0;
}

static uint64_t later(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* ------------------------------------------------------------ active */

/* The figures of the active side's run, gathered as it goes. */
struct active_run {
	struct scale_side s, lone;
	struct scale_opts lone_o;
	struct proc_usage u0, u1;
	long sockets0, sockets1;	/* held at u0, u1 */
	struct kernel_usage k1;
	double tcp_rate;
	int ok;
};

static void report_tcp(struct active_run *a, const struct scale_msg *m, int rc)
{
	struct scale_row r = SCALE_ROW("tcp_setup", "both");
	double secs = secs_between(m->t_begin, m->t_end);

	scale_row_rate(&r, m->count, secs);
	r.ok = rc == 0;
	a->tcp_rate = r.per_s;
	a->ok &= r.ok;
	scale_row_out(a->s.o, &r);
}

/* The setup of [1, n): the rate over both sides' ESTABLISHED, each
 * connect's time to ESTABLISHED, and the rate in each tenth (a cost that
 * grows with the connections shows as tenths slowing down). */
static void report_setup(struct active_run *a, const struct scale_msg *mine,
			 const struct scale_msg *peer, int ok)
{
	struct scale_side *s = &a->s;
	long n = s->up - 1, tenth = n / 10;
	struct scale_row r = SCALE_ROW("setup", "both");
	struct lat_stats l;
	/* A setup cut short has no end of its own: its last ESTABLISHED. */
	uint64_t sum = 0, end = later(mine->t_end ? mine->t_end : s->t_up[s->up - 1], peer->t_end);

	for (long k = 1; k < s->up; k++)
		sum += s->lat[k];
	lat_summarize(s->lat + 1, n, 1.0, &l);
	scale_row_rate(&r, n, secs_between(mine->t_begin, end));
	r.lat = &l;
	r.lat_mean_us = n > 0 ? (double)sum / (double)n / 1e3 : 0;
	r.ok = ok;
	a->ok &= ok;
	scale_row_out(s->o, &r);
	scale_row_ratio(s->o, "setup rate vs plain TCP", "per s", r.per_s, a->tcp_rate);
	for (long k = 0; tenth > 0 && k < 10; k++) {
		struct scale_row t = SCALE_ROW("setup_tenth", "active");
		uint64_t from = k ? s->t_up[k * tenth] : mine->t_begin;

		scale_row_rate(&t, tenth, secs_between(from, s->t_up[(k + 1) * tenth]));
		t.ok = ok;
		scale_row_out(s->o, &t);
	}
}

static void report_mem(struct active_run *a, const char *what, const struct proc_usage *mine,
		       const struct proc_usage *peer, const struct kernel_usage *k)
{
	struct scale_row r = SCALE_ROW(what, "active");
	struct proc_usage u = proc_usage_diff(*mine, a->u1);
	struct kernel_usage kg = { k->sock_bytes - a->k1.sock_bytes, k->slab_bytes - a->k1.slab_bytes };

	r.count = a->s.o->n;
	r.ok = 1;
	r.use = &u;
	scale_row_out(a->s.o, &r);
	r.side = "passive";
	r.use = peer;
	scale_row_out(a->s.o, &r);
	r.side = "kernel";
	r.use = NULL;
	r.kern = &kg;
	scale_row_out(a->s.o, &r);
}

static void report_busy(struct active_run *a, const char *poll, const char *pp, const char *wr,
			const struct busy_result *b, int ok)
{
	struct scale_row r = SCALE_ROW(poll, "active");

	ok = ok && b->errors == 0;
	a->ok &= ok;
	scale_row_rate(&r, b->polls, b->poll_secs);
	r.lat_mean_us = b->polls ? b->poll_secs * 1e6 / (double)b->polls : 0;
	r.ok = ok;
	scale_row_out(a->s.o, &r);
	r = (struct scale_row)SCALE_ROW(pp, "active");
	r.size = SCALE_PP_SIZE;
	scale_row_rate(&r, b->rtts, b->rtt_secs);
	r.lat_mean_us = b->lat_mean_us;
	r.lat = &b->lat;
	r.ok = ok;
	scale_row_out(a->s.o, &r);
	r = (struct scale_row)SCALE_ROW(wr, "active");
	r.size = SCALE_STREAM_SIZE;
	scale_row_rate(&r, b->writes, b->stream_secs);
	r.mbps = r.per_s * SCALE_STREAM_SIZE / 1e6;
	r.ok = ok;
	scale_row_out(a->s.o, &r);
}

static void report_leak(struct active_run *a, const char *what, const struct proc_usage *mine,
			const struct proc_usage *peer)
{
	struct scale_row r = SCALE_ROW(what, "active");

	r.count = a->s.o->n;
	r.with_counts = 1;
	r.use = mine;
	r.ok = flat(a->s.o, mine);
	a->ok &= r.ok;
	scale_row_out(a->s.o, &r);
	r.side = "passive";
	r.use = peer;
	r.ok = flat(a->s.o, peer);
	a->ok &= r.ok;
	scale_row_out(a->s.o, &r);
}

/* Connection 0, measured before the others connect. */
static int first_phase(struct active_run *a, struct busy_result *first)
{
	struct scale_msg m = { 0 }, peer;
	struct busy_plan p = { .pp_iters = a->s.o->pp_iters, .secs = a->s.o->busy_s };

	side_log(&a->s, "connection 0 before the others");
	return connect_range(&a->s, 0, 1, &m) ||
	       ctl_recv(a->s.ctl, STEP_FIRST_UP, a->s.o->wait_s, &peer) ||
	       busy_active(&a->s, &p, first);
}

/* peer: the passive side's SETUP_DONE (its usage when connected). */
static int setup_phase(struct active_run *a, struct scale_msg *peer)
{
	struct scale_msg m = { 0 };
	int rc;

	side_log(&a->s, "setup");
	rc = connect_range(&a->s, 1, a->s.o->n, &m);
	if (rc == 0)
		rc = ctl_recv(a->s.ctl, STEP_SETUP_DONE, a->s.o->wait_s, peer);
	if (a->s.up > 1)
		report_setup(a, &m, peer, rc == 0 && peer->errors == 0);
	return rc;
}

static int use_phase(struct active_run *a, const struct scale_msg *setup)
{
	struct scale_msg m = { 0 }, peer = { 0 };
	struct proc_usage conn = proc_usage_now(), idle;
	struct kernel_usage kconn = kernel_usage_now(), kidle;
	struct scale_row r = SCALE_ROW("use", "both");
	int rc;

	side_log(&a->s, "use");
	rc = a->s.o->no_use ? 0 : use_active(&a->s, &m);
	/* The passive side rests SCALE_REST_MS before it answers, so this
	 * side's connections too have been quiet that long. */
	if (rc == 0)
		rc = ctl_recv(a->s.ctl, STEP_USE_DONE, a->s.o->wait_s + SCALE_REST_MS / 1000.0, &peer);
	malloc_trim(0);
	idle = proc_usage_now();
	kidle = kernel_usage_now();
	r.size = a->s.o->size;
	scale_row_rate(&r, m.count, secs_between(m.t_begin, m.t_end));
	r.ok = rc == 0 && m.errors == 0 && peer.errors == 0 && m.count == a->s.o->n;
	a->ok &= r.ok || a->s.o->no_use;
	if (!a->s.o->no_use)
		scale_row_out(a->s.o, &r);
	report_mem(a, "mem_connected", &conn, &setup->use[0], &kconn);
	if (rc == 0 && !a->s.o->no_use)
		report_mem(a, "mem_idle", &idle, &peer.use[1], &kidle);
	return rc;
}

static int teardown_phase(struct active_run *a)
{
	struct scale_msg m = { 0 }, peer = { 0 };
	struct scale_row r = SCALE_ROW("teardown", "both");
	int rc;

	side_log(&a->s, "teardown");
	rc = ctl_send(a->s.ctl, &(struct scale_msg){ .step = STEP_TEARDOWN });
	if (rc == 0)
		rc = teardown(&a->s, &m);
	if (rc == 0)
		rc = ctl_recv(a->s.ctl, STEP_TEARDOWN_DONE, a->s.o->wait_s, &peer);
	scale_row_rate(&r, m.count, secs_between(m.t_begin, later(m.t_end, peer.t_end)));
	r.ok = rc == 0 && m.count == a->s.o->n && peer.count == a->s.o->n;
	a->ok &= r.ok;
	scale_row_out(a->s.o, &r);
	return rc;
}

int active_run(const struct scale_opts *o, int ctl)
{
	static struct active_run a;
	struct scale_msg m = { 0 }, peer = { 0 };
	struct busy_result first, lone, busy;
	struct proc_usage u2, u3;
	long held;
	int rc;

	a.s = (struct scale_side){ .o = o, .active = 1, .ctl = ctl };
	a.ok = 1;
	warm_up(o);
	a.u0 = usage_trimmed(LONG_MAX, &a.sockets0);
	if (!o->no_tcp && o->n > 1) {
		side_log(&a.s, "plain TCP");
		rc = tcp_baseline_active(&a.s, o->n - 1, &m);
		report_tcp(&a, &m, rc);
		if (rc)
			goto fail;
	}
	side_log(&a.s, "the IA");
	if (side_ready(&a.s, STEP_DAT_READY) || lone_open(&a.lone, &a.lone_o, &a.s) ||
	    prime(&a.s))
		goto fail;
	a.u1 = usage_trimmed(LONG_MAX, &a.sockets1);
	a.k1 = kernel_usage_now();
	if (first_phase(&a, &first))
		goto fail;
	memset(&peer, 0, sizeof peer);
	if (o->n > 1 && setup_phase(&a, &peer))
		goto fail;
	if (use_phase(&a, &peer))
		goto fail;
	side_log(&a.s, "one busy connection among %ld idle, in turns with the lone one", o->n - 1);
	if (turns_active(&a.lone, &a.s, &lone, &busy))
		goto fail;
	report_busy(&a, "poll_first", "pingpong_first", "write_first", &first, 1);
	report_busy(&a, "poll_lone", "pingpong_lone", "write_lone", &lone, 1);
	report_busy(&a, "poll_busy", "pingpong_busy", "write_busy", &busy, 1);
	scale_row_ratio(o, "8 B ping-pong mean, busy among idle vs lone", "us", busy.lat_mean_us,
			lone.lat_mean_us);
	if (teardown_phase(&a) || lone_teardown(&a.lone))
		goto fail;
	/* The lone connection's socket was held at the snapshot. */
	u2 = proc_usage_diff(usage_trimmed(a.sockets1 - 1, &held), a.u1);
	if (side_async_errors(&a.s) || side_async_errors(&a.lone))
		a.ok = 0;
	lone_close(&a.lone);
	side_close(&a.s);
	u3 = proc_usage_diff(usage_trimmed(a.sockets0, &held), a.u0);
	if (ctl_recv(ctl, STEP_LEAK, o->wait_s, &peer))
		goto fail;
	if (peer.errors)
		a.ok = 0;
	report_leak(&a, "leak_freed", &u2, &peer.use[0]);
	report_leak(&a, "leak_closed", &u3, &peer.use[1]);
	return a.ok ? 0 : 1;
fail:
	ctl_stop(ctl, a.s.fail[0] ? a.s.fail : "the active side failed");
	fprintf(stderr, "iwscale: stopped with %ld of %ld connections up%s%s\n", a.s.up, o->n,
		a.s.fail[0] ? "; first failure: " : "", a.s.fail);
	return 1;
}

/* ----------------------------------------------------------- passive */

static int passive_phases(struct scale_side *s, struct scale_side *lone, struct proc_usage u1)
{
	struct scale_msg m = { .step = STEP_SETUP_DONE }, go;
	long n = s->o->n;

	if (accept_range(s, 0, 1, &(struct scale_msg){ 0 }) ||
	    ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_FIRST_UP }) || busy_passive(s))
		return -1;
	if (n > 1 && accept_range(s, 1, n, &m))
		return -1;
	m.use[0] = proc_usage_diff(proc_usage_now(), u1);
	if (n > 1 && ctl_send(s->ctl, &m))
		return -1;
	memset(&m, 0, sizeof m);
	if (!s->o->no_use && use_passive(s, &m))
		return -1;
	/* Quiet before the snapshot: the provider gives back what a used
	 * connection allocated once it has been idle a while (1-2 s). */
	nanosleep(&(struct timespec){ .tv_sec = SCALE_REST_MS / 1000,
				      .tv_nsec = SCALE_REST_MS % 1000 * 1000000L }, NULL);
	m.step = STEP_USE_DONE;
	malloc_trim(0);		/* the freed pages back, as for the leak rows */
	m.use[1] = proc_usage_diff(proc_usage_now(), u1);
	if (ctl_send(s->ctl, &m) || turns_passive(lone, s) ||
	    ctl_recv(s->ctl, STEP_TEARDOWN, s->o->wait_s, &go))
		return -1;
	memset(&m, 0, sizeof m);
	if (teardown(s, &m))
		return -1;
	m.step = STEP_TEARDOWN_DONE;
	return ctl_send(s->ctl, &m) || lone_teardown(lone);
}

int passive_run(const struct scale_opts *o, int ctl)
{
	static struct scale_side s, lone;
	static struct scale_opts lone_o;
	struct scale_msg m = { 0 };
	struct proc_usage u0, u1;
	long sockets0, sockets1, held;

	s = (struct scale_side){ .o = o, .ctl = ctl };
	warm_up(o);
	u0 = usage_trimmed(LONG_MAX, &sockets0);
	if (!o->no_tcp && o->n > 1 && tcp_baseline_passive(&s, o->n - 1, &m))
		goto fail;
	if (side_ready(&s, STEP_DAT_READY) || lone_open(&lone, &lone_o, &s) || prime(&s))
		goto fail;
	u1 = usage_trimmed(LONG_MAX, &sockets1);
	if (passive_phases(&s, &lone, u1))
		goto fail;
	m = (struct scale_msg){ .step = STEP_LEAK };
	m.use[0] = proc_usage_diff(usage_trimmed(sockets1 - 1, &held), u1);
	if (side_async_errors(&s) || side_async_errors(&lone))
		m.errors++;
	lone_close(&lone);
	unlisten_all(&s);
	side_close(&s);
	m.use[1] = proc_usage_diff(usage_trimmed(sockets0, &held), u0);
	return ctl_send(ctl, &m) || m.errors ? 1 : 0;
fail:
	ctl_stop(ctl, s.fail[0] ? s.fail : "the passive side failed");
	return 1;
}
