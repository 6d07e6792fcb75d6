/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest's session internals, shared by the transfer protocol
 * (iwd_xfer.c) and the consumer patterns (iwd_patterns.c); the driver
 * (iwdtest.c) sees only iwdtest.h. */
#ifndef IWD_SESS_H
#define IWD_SESS_H

#include "iwdtest.h"
#include "window.h"

#define QLEN 64				/* control messages received, unprocessed */
#define MAX_REQ (WIN_LIMIT + 32)	/* a window of writes, DONEs, control */
#define PONG_SEED 0x5a5a5a5a00000000ull	/* the server's data: seed ^ PONG_SEED */

enum { R_SRC, R_TGT, R_RING, R_CTL, R_COUNT };

struct iwd_sess {
	struct du d;
	const struct iwd_opts *o;
	struct du_region reg[R_COUNT];
	size_t s_max, slot;
	int ring;
	DAT_RMR_TRIPLET peer;
	unsigned ctl_next;
	long tests, reports;
	/* Requests, counted in posting order.  A completion also retires the
	 * unsignaled requests posted before it (verbs semantics, which DAT
	 * providers follow), so the queue holds req_posted - req_done;
	 * sig_at[] keeps the post number of each signaled one in flight. */
	long req_posted, req_done;
	long sig_at[MAX_REQ];
	unsigned sig_h, sig_t;
	/* Expected data messages (send and ping-pong receivers). */
	long rx_left, rx_idx, rx_last, rx_errs;
	size_t rx_size;
	uint64_t rx_seed;
	/* RDMA reads in flight, checked as they complete into slot
	 * i % rd_slots of the target region. */
	long rd_done, rd_last, rd_errs, rd_slots;
	size_t rd_size;
	uint64_t rd_seed;
	/* Round-trip times of the ping-pong running (client), and the time
	 * its own checks of the answers took (sess_check), which a round
	 * trip leaves out as tcp_baseline's does. */
	uint64_t *lat_ns;
	long lat_cap;
	uint64_t check_ns;
	struct iwd_msg q[QLEN];
	unsigned qh, qt;
};

/* ----- iwd_xfer.c: messages, posts and completions */

int sess_send_msg(struct iwd_sess *s, const struct iwd_msg *m);
/* The next control message, pumping until one came; type 0: any. */
int sess_wait_msg(struct iwd_sess *s, uint32_t type, struct iwd_msg *m);
/* Processes exactly one DTO event (waits for it as -p says). */
int sess_pump(struct iwd_sess *s);
/* Pumps until request number post_no (s->req_posted after it) is done. */
int sess_reap(struct iwd_sess *s, long post_no);

static inline int sess_msg_ready(const struct iwd_sess *s)
{
	return s->qh != s->qt;
}

/* Transfer i: `size` bytes of the source from word offset pat_woff(i),
 * written to dst with completion flags f. */
int sess_post_write(struct iwd_sess *s, long i, size_t size, DAT_RMR_TRIPLET dst,
		    DAT_COMPLETION_FLAGS f);
/* Read i of s->rd_size bytes from `from` into slot i % rd_slots. */
int sess_post_read(struct iwd_sess *s, long i, DAT_RMR_TRIPLET from);
void sess_expect_reads(struct iwd_sess *s, size_t size, long slots, uint64_t seed, long last);

/* The peer's target region from byte off; a triplet a message carries. */
DAT_RMR_TRIPLET sess_peer_at(const struct iwd_sess *s, size_t off, size_t len);
DAT_RMR_TRIPLET sess_msg_triplet(const struct iwd_msg *m);
/* A region's RMR triplet from byte off into a message. */
void sess_offer_region(const struct iwd_sess *s, int region, size_t off, size_t len,
		       struct iwd_msg *m);

/* Checks transfer i of `len` bytes (all, or only i == last with
 * --no-verify); 1 when it is wrong, reported (at most a few times).
 * The time it takes adds to s->check_ns. */
long sess_check(struct iwd_sess *s, const char *what, const void *buf, size_t len,
		size_t want, uint64_t seed, long i, long last);
/* Prints one validation failure unless enough were; counts it. */
void sess_report(struct iwd_sess *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The write and bibw modes' stream: write i into slot i % W of the
 * peer's region, and a DONE after every W/2 (*first: the first write the
 * next DONE covers).  The receiver checks a DONE's writes. */
int sess_stream_write(struct iwd_sess *s, const struct iwd_msg *b, long i, long *first);
long sess_check_writes(struct iwd_sess *s, const struct iwd_msg *b, const struct iwd_msg *done,
		       uint64_t seed);

/* ----- iwd_patterns.c: the consumer patterns (modes M_WPP..M_BIBW) */

/* Both sides, before BEGIN (client) or READY (server). */
void pattern_prepare(struct iwd_sess *s, const struct iwd_msg *b);
/* Client: one test; *errs gets the transfers that failed validation on
 * either side (for the ping-pong patterns, the server's come in the final
 * ACK that iwd_run awaits). */
int pattern_client(struct iwd_sess *s, const struct iwd_msg *b, long *errs);
int pattern_serve(struct iwd_sess *s, const struct iwd_msg *b);
/* The server sends data of its own (seeded seed ^ PONG_SEED). */
int pattern_answers(int mode);

/* A client's round trip from t0: the time since, less its own checks
 * since check0 (s->check_ns at t0). */
static inline uint64_t sess_round_trip_ns(const struct iwd_sess *s, uint64_t t0,
					  uint64_t check0)
{
	return lat_now_ns() - t0 - (s->check_ns - check0);
}

#endif
