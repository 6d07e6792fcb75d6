/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: one busy connection (index 0).  Measured once alone, before
 * the others connect ("first"), and among all the others, connected and
 * idle, in turns with a lone connection on an IA of its own
 * (scale_lone.c): a cost per message that grows with the connections an
 * IA holds shows as the difference.
 *   empty polls: dat_evd_dequeue on the receive EVD with nothing to come
 *     (the active side alone, before the ping-pong; as many unmeasured first);
 *   ping-pong: 8 B Sends back and forth, both sides spinning on
 *     dat_evd_dequeue (the receive EVD for the message, the request EVD
 *     for its Send's completion), pp_iters round trips after a tenth as
 *     many warm-up ones, or busy_s seconds of them if that ends first;
 *   stream: 64 KiB RDMA Writes for busy_s seconds, a window of them
 *     outstanding (blocking in dat_evd_wait), then a Send that the
 *     passive side answers once it checked the last window's bytes; the
 *     time runs to the answer.
 * Both EVDs are the ones every connection shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iwscale.h"

#define SEED_PING 0x70696e6700000000ull
#define SEED_PONG 0x706f6e6700000000ull
#define SEED_STREAM 0x7374726d00000000ull
#define SEED_STOP 0x73746f7000000000ull

static DAT_DTO_COOKIE cookie(int op)
{
	DAT_DTO_COOKIE c;

	c.as_64 = SCALE_COOKIE(0, op);
	return c;
}

static int post(struct scale_side *s, int send, int b, size_t len, int op)
{
	DAT_LMR_TRIPLET t = side_busy_buf(s, b, len);
	DAT_RETURN r = send ? dat_ep_post_send(s->ep[0], 1, &t, cookie(op), DAT_COMPLETION_DEFAULT_FLAG)
			    : dat_ep_post_recv(s->ep[0], 1, &t, cookie(op), DAT_COMPLETION_DEFAULT_FLAG);

	if (r == DAT_SUCCESS)
		return 0;
	side_fail(s, 0, send ? "dat_ep_post_send" : "dat_ep_post_recv", r);
	return -1;
}

/* Spins on dat_evd_dequeue for one completion of `op` (checking the
 * clock now and then against the wait bound). */
static int spin(struct scale_side *s, DAT_EVD_HANDLE evd, int op)
{
	uint64_t end = lat_now_ns() + (uint64_t)(s->o->wait_s * 1e9);
	unsigned spins = 0;
	DAT_EVENT ev;
	DAT_RETURN r;

	while ((r = dat_evd_dequeue(evd, &ev)) != DAT_SUCCESS) {
		if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY)
			return du_check(r, "dat_evd_dequeue");
		if (++spins % 4096 == 0 && lat_now_ns() > end) {
			fprintf(stderr, "iwscale: no completion within %.1f s (ping-pong)\n",
				s->o->wait_s);
			return -1;
		}
	}
	if (!side_dto(s, &ev))
		return -1;
	if (SCALE_COOKIE_OP(ev.event_data.dto_completion_event_data.user_cookie.as_64) != op) {
		side_fail(s, 0, "a completion of another operation", DAT_SUCCESS);
		return -1;
	}
	return 0;
}

/* Blocks for one completion of op on evd. */
static int wait_op(struct scale_side *s, DAT_EVD_HANDLE evd, int op)
{
	DAT_EVENT ev;

	if (side_wait(s, evd, &ev, "a busy connection's completion") || !side_dto(s, &ev))
		return -1;
	if (SCALE_COOKIE_OP(ev.event_data.dto_completion_event_data.user_cookie.as_64) == op)
		return 0;
	side_fail(s, 0, "a completion of another operation", DAT_SUCCESS);
	return -1;
}

/* Message i of the ping-pong at `b`: 1 when it is word i of `seed`. */
static int ping_is(struct scale_side *s, int b, uint64_t seed, long i)
{
	return pat_check(side_busy_ptr(s, b), SCALE_PP_SIZE, seed, (uint64_t)i) < 0;
}

static int send_word(struct scale_side *s, uint64_t seed, long i)
{
	pat_fill(side_busy_ptr(s, BB_PP_TX), SCALE_PP_SIZE, seed, (uint64_t)i);
	return post(s, 1, BB_PP_TX, SCALE_PP_SIZE, OP_PP_SEND) || spin(s, s->req_evd, OP_PP_SEND);
}

/* Active: round trips, a tenth as many for warming up first, then
 * pp_iters or busy_s seconds of them, whichever ends first (so that a
 * slow provider does not stretch the run); their times go to s->lat.
 * A STOP word instead of a ping ends the passive side's loop. */
static int ping_active(struct scale_side *s, const struct busy_plan *p, long *kept,
		       long *errors)
{
	long warm = p->pp_iters / 10, n = warm + p->pp_iters, i;
	uint64_t end = UINT64_MAX;
	int more = 1;

	*kept = 0;
	if (post(s, 0, BB_PP_RX, SCALE_PP_SIZE, OP_PP_RECV) ||
	    ctl_recv(s->ctl, STEP_BUSY, s->o->wait_s, &(struct scale_msg){ 0 }))
		return -1;
	for (i = 0; more; i++) {
		uint64_t t0 = lat_now_ns(), rtt;

		if (i == warm)
			end = t0 + (uint64_t)(p->secs * 1e9);
		pat_fill(side_busy_ptr(s, BB_PP_TX), SCALE_PP_SIZE, SEED_PING, (uint64_t)i);
		if (post(s, 1, BB_PP_TX, SCALE_PP_SIZE, OP_PP_SEND) ||
		    spin(s, s->recv_evd, OP_PP_RECV))
			return -1;
		rtt = lat_now_ns() - t0;
		*errors += !ping_is(s, BB_PP_RX, SEED_PONG, i);
		/* The next pong's receive goes first: the peer may answer at
		 * once.  None after the last: a receive left posted would take
		 * the stream's answer. */
		more = i + 1 < n && lat_now_ns() < end;
		if ((more && post(s, 0, BB_PP_RX, SCALE_PP_SIZE, OP_PP_RECV)) ||
		    spin(s, s->req_evd, OP_PP_SEND))
			return -1;
		if (i >= warm && *kept < s->lat_cap)
			s->lat[(*kept)++] = rtt;
	}
	return send_word(s, SEED_STOP, i);
}

/* Passive: answers pings until the STOP word comes. */
static int ping_passive(struct scale_side *s, long *errors)
{
	if (post(s, 0, BB_PP_RX, SCALE_PP_SIZE, OP_PP_RECV) ||
	    ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_BUSY }))
		return -1;
	for (long i = 0;; i++) {
		if (spin(s, s->recv_evd, OP_PP_RECV))
			return -1;
		if (ping_is(s, BB_PP_RX, SEED_STOP, i))
			return 0;
		*errors += !ping_is(s, BB_PP_RX, SEED_PING, i);
		if (post(s, 0, BB_PP_RX, SCALE_PP_SIZE, OP_PP_RECV) || send_word(s, SEED_PONG, i))
			return -1;
	}
}

/* Active: Writes for p->secs seconds, then the count in a Send; the
 * answer carries the passive side's errors. */
static int stream_active(struct scale_side *s, const struct busy_plan *p, struct busy_result *r)
{
	long w = side_stream_window(s->o), i = 0, out = 0;
	uint64_t t0, end, count, errs;

	side_log(s, "stream: %.2f s of 64 KiB Writes", p->secs);
	pat_fill(side_stream_ptr(s), SCALE_STREAM_SIZE + PAT_SLACK, SEED_STREAM, 0);
	if (post(s, 0, BB_CTL_RX, 8, OP_CTL_RECV))
		return -1;
	t0 = lat_now_ns();
	end = t0 + (uint64_t)(p->secs * 1e9);
	while (lat_now_ns() < end || out > 0) {
		while (out < w && lat_now_ns() < end) {
			DAT_LMR_TRIPLET src = side_stream_src(s, pat_woff((uint64_t)i) * 8);
			DAT_RMR_TRIPLET dst = side_peer_stream(s, i % w);
			DAT_RETURN rc = dat_ep_post_rdma_write(s->ep[0], 1, &src, cookie(OP_STREAM),
							       &dst, DAT_COMPLETION_DEFAULT_FLAG);
			if (rc != DAT_SUCCESS) {
				side_fail(s, 0, "dat_ep_post_rdma_write", rc);
				return -1;
			}
			i++;
			out++;
		}
		if (out > 0 && wait_op(s, s->req_evd, OP_STREAM))
			return -1;
		out -= out > 0;
	}
	count = (uint64_t)i;
	memcpy(side_busy_ptr(s, BB_CTL_TX), &count, 8);
	if (post(s, 1, BB_CTL_TX, 8, OP_CTL_SEND) || wait_op(s, s->recv_evd, OP_CTL_RECV))
		return -1;
	r->stream_secs = (double)(lat_now_ns() - t0) / 1e9;
	r->writes = i;
	memcpy(&errs, side_busy_ptr(s, BB_CTL_RX), 8);
	r->errors += (long)errs;
	return wait_op(s, s->req_evd, OP_CTL_SEND);
}

/* Passive: the count comes once every Write is placed; the last window's
 * slots are checked and the errors sent back. */
static int stream_passive(struct scale_side *s, long *errors)
{
	long w = side_stream_window(s->o);
	uint64_t count, errs = 0;

	if (wait_op(s, s->recv_evd, OP_CTL_RECV))
		return -1;
	memcpy(&count, side_busy_ptr(s, BB_CTL_RX), 8);
	for (uint64_t k = count > (uint64_t)w ? count - (uint64_t)w : 0; k < count; k++) {
		const char *slot = (const char *)side_stream_ptr(s) + (k % (uint64_t)w) * SCALE_STREAM_SIZE;

		errs += pat_check(slot, SCALE_STREAM_SIZE, SEED_STREAM, pat_woff(k)) >= 0;
	}
	if (errs)
		side_fail(s, 0, "the stream's bytes are wrong", DAT_SUCCESS);
	memcpy(side_busy_ptr(s, BB_CTL_TX), &errs, 8);
	*errors += (long)errs;
	return post(s, 1, BB_CTL_TX, 8, OP_CTL_SEND) || wait_op(s, s->req_evd, OP_CTL_SEND);
}

/* Calls of dat_evd_dequeue on the receive EVD, empty (every connection
 * idle): what any poll costs before a completion is there.  At most this
 * many, and at most busy_s seconds of them, after as many unmeasured:
 * right after the seconds of quiet before the busy phase, the first
 * milliseconds of any loop ran 2-3 times slower on the test VM (2,000
 * polls averaged 2.1-3.8 us there, 400,000 averaged 1.5). */
#define EMPTY_POLLS 2000

/* Up to n empty polls within secs; how many, or -1 on a failure. */
static long poll_empty(struct scale_side *s, long n, double secs)
{
	uint64_t end = lat_now_ns() + (uint64_t)(secs * 1e9);
	DAT_EVENT ev;
	long k;

	for (k = 0; k < n && (k % 16 || lat_now_ns() < end); k++) {
		DAT_RETURN rc = dat_evd_dequeue(s->recv_evd, &ev);

		if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY) {
			side_fail(s, 0, "dat_evd_dequeue on an idle EVD", rc);
			return -1;
		}
	}
	return k;
}

static int empty_polls(struct scale_side *s, double secs, struct busy_result *r)
{
	uint64_t t0;
	long k;

	if (poll_empty(s, EMPTY_POLLS, secs) < 0)
		return -1;
	t0 = lat_now_ns();
	k = poll_empty(s, EMPTY_POLLS, secs);
	if (k < 0)
		return -1;
	r->poll_secs = (double)(lat_now_ns() - t0) / 1e9;
	r->polls = k;
	return 0;
}

/* The round trips' times kept in lat[0, n): their sum and summary. */
static void rtts_summarize(struct busy_result *r, uint64_t *lat, long n)
{
	uint64_t sum = 0;

	for (long k = 0; k < n; k++)
		sum += lat[k];
	r->rtts = n;
	r->rtt_secs = (double)sum / 1e9;
	r->lat_mean_us = n ? (double)sum / (double)n / 2e3 : 0;
	lat_summarize(lat, n, 0.5, &r->lat);
}

/* The steps are paced over the control channel, so that each side's
 * receives are posted before the peer sends. */
int busy_active(struct scale_side *s, const struct busy_plan *p, struct busy_result *r)
{
	struct scale_msg peer;
	long kept;

	memset(r, 0, sizeof *r);
	if (empty_polls(s, p->secs, r) ||
	    ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_BUSY }) ||
	    ping_active(s, p, &kept, &r->errors))
		return -1;
	rtts_summarize(r, s->lat, kept);
	/* The passive side's receive for the stream's count is posted. */
	if (ctl_recv(s->ctl, STEP_BUSY, s->o->wait_s, &peer) || stream_active(s, p, r) ||
	    ctl_recv(s->ctl, STEP_BUSY_DONE, s->o->wait_s, &peer))
		return -1;
	r->errors += peer.errors;
	return 0;
}

int busy_passive(struct scale_side *s)
{
	struct scale_msg m;
	long errors = 0;

	if (ctl_recv(s->ctl, STEP_BUSY, s->o->wait_s, &m) || ping_passive(s, &errors) ||
	    post(s, 0, BB_CTL_RX, 8, OP_CTL_RECV) ||
	    ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_BUSY }) || stream_passive(s, &errors))
		return -1;
	return ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_BUSY_DONE, .errors = errors });
}

int busy_pool_init(struct busy_pool *bp, long cap)
{
	*bp = (struct busy_pool){ .cap = cap, .lat = calloc((size_t)cap, sizeof *bp->lat) };
	if (!bp->lat)
		fprintf(stderr, "iwscale: out of memory for %ld round trips\n", cap);
	return bp->lat ? 0 : -1;
}

void busy_pool_add(struct busy_pool *bp, const struct scale_side *s, const struct busy_result *r)
{
	long n = r->rtts < bp->cap - bp->n ? r->rtts : bp->cap - bp->n;

	memcpy(bp->lat + bp->n, s->lat, (size_t)n * sizeof *bp->lat);
	bp->n += n;
	bp->sum.polls += r->polls;
	bp->sum.poll_secs += r->poll_secs;
	bp->sum.writes += r->writes;
	bp->sum.stream_secs += r->stream_secs;
	bp->sum.errors += r->errors;
}

void busy_pool_result(struct busy_pool *bp, struct busy_result *r)
{
	*r = bp->sum;
	rtts_summarize(r, bp->lat, bp->n);
	free(bp->lat);
	bp->lat = NULL;
}
