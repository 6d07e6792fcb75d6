/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: many connections between two processes (bench/iwscale.c says
 * what it measures).  The driver, the phases (scale_*.c) and the report
 * share these definitions. */
#ifndef BENCH_IWSCALE_H
#define BENCH_IWSCALE_H

#include <stddef.h>
#include <stdint.h>

#include "dtest/dat_util.h"
#include "dtest/lat_stats.h"
#include "dtest/pattern.h"
#include "proc_usage.h"

#define SCALE_HOST "127.0.0.1"
/* TCP listeners of the plain TCP baseline: qual + this + j (above the
 * listeners of the DAT connections, which take qual + j). */
#define SCALE_TCP_PORT_OFFSET 32
#define SCALE_MAX_LISTENERS 32
/* The lone connection's listener (scale_lone.c): qual + this, above the
 * TCP baseline's. */
#define SCALE_LONE_QUAL_OFFSET (SCALE_TCP_PORT_OFFSET + SCALE_MAX_LISTENERS)
/* Turns of the lone and the busy connection in the busy phase, each
 * with a share of the ping-pong's round trips and of the seconds. */
#define SCALE_TURNS 3
/* The busy connection's buffers, after the per-connection slots. */
#define SCALE_PP_SIZE 8
#define SCALE_STREAM_SIZE 65536
#define SCALE_STREAM_WINDOW 32

struct scale_opts {
	const char *ia;
	DAT_CONN_QUAL qual;
	long n;			/* connections */
	int ssp;		/* each a TCP connection upgraded, not a PSP's */
	int depth;		/* 0: default EP attributes; else DTOs each way */
	long inflight;		/* connects (and uses) outstanding at most */
	long per_listener;	/* connections one address:port takes at most */
	int listeners;		/* PSPs (or SSP TCP ports), from n */
	size_t size;		/* bytes of each Write, Read and Send of the use */
	long pp_iters;		/* ping-pong round trips a measurement */
	double busy_s;		/* seconds of each busy measurement, at most */
	int no_use;		/* skip the use phase */
	double wait_s;		/* bound on any single wait */
	int watchdog_s;		/* bound on the whole run */
	int csv, corrupt, no_tcp;
	int verbose;		/* phases and progress on stderr */
	uint64_t t0;		/* when the run started (ns) */
};

/* Phases and messages of the control channel (a socketpair). */
enum scale_step {
	STEP_TCP_READY = 1, STEP_TCP_DONE, STEP_TCP_CLOSED,
	STEP_DAT_READY, STEP_LONE_READY, STEP_LONE_UP, STEP_PRIMED, STEP_FIRST_UP, STEP_BUSY, STEP_BUSY_DONE,
	STEP_SETUP_DONE, STEP_USE, STEP_USE_DONE, STEP_TEARDOWN,
	STEP_TEARDOWN_DONE, STEP_LEAK, STEP_STOP
};

/* One message; fields a step does not use are zero.  Both processes run
 * the same binary on the same machine: sent as it is in memory. */
/* How long the connections rest after their use before the memory of
 * used, idle connections is taken (row mem_idle): the provider gives
 * back a connection's queues and buffers after 1-2 s of quiet. */
#define SCALE_REST_MS 2500

struct scale_msg {
	int64_t step;
	int64_t count, errors;		/* connections reached or used; failures */
	uint64_t t_begin, t_end;	/* CLOCK_MONOTONIC ns, common to both */
	uint64_t addr, rmr;		/* DAT_READY: the passive side's region */
	struct proc_usage use[2];	/* USE_DONE: connected, then used and idle;
					 * LEAK: IA open, IA closed */
	char what[160];			/* STOP: why */
};

/* scale_ctl.c */
/* Sends m; 0, or -1 (printed). */
int ctl_send(int fd, const struct scale_msg *m);
/* The next message within wait_s; -1 (printed) unless it is `step`. */
int ctl_recv(int fd, int64_t step, double wait_s, struct scale_msg *m);
/* 1 (said, with what this side was waiting for) when the peer sent
 * something while none was due (STOP) or left. */
int ctl_peer_gone(int fd, const char *waiting_for);
/* Tells the peer this side gave up, and why. */
void ctl_stop(int fd, const char *why);

/* DTO cookies: the connection and what the DTO was. */
enum scale_op { OP_WRITE, OP_READ, OP_SEND, OP_RECV, OP_PP_SEND, OP_PP_RECV,
		OP_STREAM, OP_CTL_SEND, OP_CTL_RECV };
#define SCALE_COOKIE(idx, op) (((uint64_t)(idx) << 4) | (uint64_t)(op))
#define SCALE_COOKIE_IDX(c) ((long)((c) >> 4))
#define SCALE_COOKIE_OP(c) ((int)((c) & 15))

/* A connection's slot in the region: four buffers of the use phase. */
enum scale_buf { BUF_WRITE, BUF_READ, BUF_SEND, BUF_RECV, BUF_COUNT };
/* The busy connection's buffers, at busy_off. */
enum scale_busy_buf { BB_PP_TX, BB_PP_RX, BB_CTL_TX, BB_CTL_RX, BB_COUNT };

/* One process's side: its IA and everything on it. */
struct scale_side {
	const struct scale_opts *o;
	int active;			/* the connecting (parent) process */
	int ctl;			/* control socket to the peer */
	struct du d;			/* ia, pz, async EVD; d.ep and d.cr_evd
					 * are what the SSP helpers use */
	DAT_EVD_HANDLE req_evd, recv_evd, cm_evd;
	DAT_CNO_HANDLE cno;		/* SSP: cm_evd's CNO, whose agent makes */
	int cno_fd;			/* this eventfd readable */
	DAT_PSP_HANDLE psp[SCALE_MAX_LISTENERS];
	int lfd[SCALE_MAX_LISTENERS];	/* SSP: TCP listeners (passive) */
	DAT_EP_HANDLE *ep;		/* by connection index */
	uint64_t *t_start;		/* active: when connection idx started */
	uint64_t *t_up;			/* the k-th ESTABLISHED: when */
	uint64_t *lat;			/* active: connect -> ESTABLISHED, ns;
					 * then the ping-pong's round trips */
	long lat_cap;
	long up;			/* connections ESTABLISHED */
	struct du_region reg;		/* the slots, then the busy buffers */
	size_t buf_size;		/* one buffer of a slot (size, aligned) */
	size_t busy_off;
	DAT_RMR_TRIPLET peer;		/* active: the passive side's region */
	char fail[160];			/* the first failure, for the report */
};

/* scale_side.c: the IA and its EVDs, the region, EPs, waits */
int side_open(struct scale_side *s);
void side_close(struct scale_side *s);
/* SSP: after cno_fd was readable: resets it and sets the CNO's agent
 * again (it is one-shot); the caller then takes every queued event. */
int side_cm_rearm(struct scale_side *s);
/* An EP for connection idx (its consumer context; -1: not known yet)
 * with the test's attributes. */
int side_ep_create(struct scale_side *s, long idx, DAT_EP_HANDLE *ep);
void side_ep_set_index(DAT_EP_HANDLE ep, long idx);
/* The EP's connection index (its consumer context), or -1. */
long side_ep_index(DAT_EP_HANDLE ep);
/* Records (the first) failure and prints it: "connection idx: what". */
void side_fail(struct scale_side *s, long idx, const char *what, DAT_RETURN r);
/* Triplets of buffer b of connection idx, of busy buffer b, and of the
 * passive side's buffer b of connection idx. */
DAT_LMR_TRIPLET side_buf(const struct scale_side *s, long idx, int b, size_t len);
DAT_LMR_TRIPLET side_busy_buf(const struct scale_side *s, int b, size_t len);
void *side_busy_ptr(const struct scale_side *s, int b);
void *side_buf_ptr(const struct scale_side *s, long idx, int b);
DAT_RMR_TRIPLET side_peer_buf(const struct scale_side *s, long idx, int b, size_t len);
/* The stream's area: the active side's source, the passive side's
 * target; and the peer's target slot k. */
void *side_stream_ptr(const struct scale_side *s);
DAT_LMR_TRIPLET side_stream_src(const struct scale_side *s, size_t off);
DAT_RMR_TRIPLET side_peer_stream(const struct scale_side *s, long k);
/* The listener connection idx goes to (qual + this). */
int side_listener_of(const struct scale_side *s, long idx);
/* One event from evd within the test's wait bound (in slices between
 * which a peer that gave up is noticed); 0, or -1 (printed). */
int side_wait(struct scale_side *s, DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *what);
/* A DTO completion event's data, or NULL (printed) when ev is not a
 * successful DTO completion. */
const DAT_DTO_COMPLETION_EVENT_DATA *side_dto(struct scale_side *s, const DAT_EVENT *ev);
/* -v: "[seconds] side: message" on stderr. */
void side_log(const struct scale_side *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* -v: done of total, at each tenth. */
void side_progress(const struct scale_side *s, const char *what, long done, long total);
/* Events the async EVD holds (errors the provider reported). */
long side_async_errors(struct scale_side *s);
/* Request DTOs the busy stream keeps outstanding. */
long side_stream_window(const struct scale_opts *o);

/* scale_tcp.c: plain TCP sockets */
struct epoll_event;
/* A non-blocking socket connecting to SCALE_HOST:port (*connected: at
 * once), or -1 (errno). */
int tcp_start_connect(unsigned port, int *connected);
/* A non-blocking listener on port, or -1 (printed). */
int tcp_listen_nonblocking(unsigned port);
/* epoll_wait for 100 ms: the events (*progress: now), 0 if none, -1
 * (printed) when nothing came for the wait bound or the peer gave up. */
int tcp_wait(struct scale_side *s, int epfd, struct epoll_event *evs, int max,
	     uint64_t *progress, const char *what);
/* Plain TCP connect/accept of count connections, both
 * ends; m: t_begin the first connect, t_end the last connected or
 * accepted, count. */
int tcp_baseline_active(struct scale_side *s, long count, struct scale_msg *m);
int tcp_baseline_passive(struct scale_side *s, long count, struct scale_msg *m);

/* scale_conn.c: connections [from, to) pipelined over PSPs (or, with
 * --ssp, scale_ssp.c's), and the teardown of all; m: times and count. */
int listen_all(struct scale_side *s);
/* The side's IA opened (side_open); the passive side listens and tells
 * the active one where its region is, in a message of `step`. */
int side_ready(struct scale_side *s, int64_t step);
void unlisten_all(struct scale_side *s);
int connect_range(struct scale_side *s, long from, long to, struct scale_msg *m);
int accept_range(struct scale_side *s, long from, long to, struct scale_msg *m);
/* The event of a connection being set up (both kinds): ESTABLISHED
 * counts (timed); anything else is a failure. */
int conn_established(struct scale_side *s, const DAT_EVENT *ev);
/* Passive: takes a connection request (index from its private data)
 * and accepts it onto the CR's EP, or a new one. */
int conn_accept(struct scale_side *s, const DAT_EVENT *ev, long from, long to);
int teardown(struct scale_side *s, struct scale_msg *m);

/* scale_ssp.c */
int ssp_listen(struct scale_side *s);
int ssp_connect_range(struct scale_side *s, long from, long to, struct scale_msg *m);
int ssp_accept_range(struct scale_side *s, long from, long to, struct scale_msg *m);

/* scale_use.c: every connection carries an RDMA Write, a Read back and
 * a Send, and a Send back; m: count used, errors (bytes or completions
 * wrong), times. */
int use_active(struct scale_side *s, struct scale_msg *m);
int use_passive(struct scale_side *s, struct scale_msg *m);

/* scale_busy.c: on connection 0, the 8 B polling ping-pong and the
 * 64 KiB RDMA Write stream. */
struct busy_result {
	long polls;			/* dat_evd_dequeue on the empty receive EVD */
	double poll_secs;
	struct lat_stats lat;		/* one way, half a round trip */
	double lat_mean_us;
	long rtts;
	double rtt_secs;
	long writes;
	double stream_secs;
	long errors;
};
/* What the active side measures: pp_iters round trips (or secs of
 * them, whichever ends first), then secs of the stream. */
struct busy_plan {
	long pp_iters;
	double secs;
};
int busy_active(struct scale_side *s, const struct busy_plan *p, struct busy_result *r);
int busy_passive(struct scale_side *s);
/* Turns of one kind summed up: their round trips pooled (at most cap),
 * the polls, Writes and seconds added. */
struct busy_pool {
	struct busy_result sum;
	uint64_t *lat;
	long n, cap;
};
int busy_pool_init(struct busy_pool *bp, long cap);
/* A turn on s, whose round trips are still in s->lat. */
void busy_pool_add(struct busy_pool *bp, const struct scale_side *s, const struct busy_result *r);
/* The pooled result; frees the pool. */
void busy_pool_result(struct busy_pool *bp, struct busy_result *r);

/* scale_lone.c: the lone connection, on an IA of its own beside the
 * others' (both sides; steps LONE_READY and, from the passive side,
 * LONE_UP) */
int lone_open(struct scale_side *lone, struct scale_opts *lo, const struct scale_side *s);
/* Its teardown (the active side disconnects), before the snapshot of
 * what the torn-down connections left: it was used in the turns. */
int lone_teardown(struct scale_side *lone);
/* Its IA closed (and the passive side's listener). */
void lone_close(struct scale_side *lone);
/* Both sides: SCALE_TURNS turns of the lone and the busy connection,
 * lone first; the active side's results pooled by kind. */
int turns_active(struct scale_side *lone, struct scale_side *s, struct busy_result *lone_r,
		 struct busy_result *busy_r);
int turns_passive(struct scale_side *lone, struct scale_side *s);

/* scale_run.c: each process's whole run; the exit status. */
int active_run(const struct scale_opts *o, int ctl);
int passive_run(const struct scale_opts *o, int ctl);

/* scale_sys.c: what the system gives */
/* Raises RLIMIT_NOFILE to `need` descriptors (the hard limit too, as
 * root), saying so; -1 if it could not. */
int nofile_raise(long need);
/* The kernel's memory for sockets: TCP's in /proc/net/sockstat (pages,
 * buffers of all TCP sockets), and /proc/meminfo's Slab (kB, all kernel
 * objects: the sockets themselves, files, epoll items), machine-wide. */
struct kernel_usage {
	long sock_bytes, slab_bytes;
};
struct kernel_usage kernel_usage_now(void);
/* The connections one address:port can take: the ephemeral port range. */
long ephemeral_ports(void);

#endif
