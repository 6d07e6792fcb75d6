/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: every connection used once, every byte checked.  Connection i
 * carries, from the active side: an RDMA Write of `size` bytes into the
 * passive side's slot i, an RDMA Read of that slot back, and a Send; the
 * passive side, when the Send arrives (the Write is placed by then: RDMAP
 * delivers in order), checks the Send's and the Write's bytes and Sends
 * an answer back.  The active side checks the Read and the answer.  Each
 * connection and direction has patterns of its own (seeded by the index),
 * so a byte delivered to the wrong connection or slot does not pass.  Up
 * to `inflight` connections are in use at once. */
#include <stdio.h>
#include <string.h>

#include "iwscale.h"

enum { SEED_WRITE, SEED_SEND, SEED_ANSWER };

static uint64_t seed_of(long idx, int what)
{
	return 0x1f3c5a7900000000ull ^ ((uint64_t)idx << 2 | (uint64_t)what);
}

static DAT_DTO_COOKIE cookie(long idx, int op)
{
	DAT_DTO_COOKIE c;

	c.as_64 = SCALE_COOKIE(idx, op);
	return c;
}

/* 0 when `len` bytes of buffer b of connection idx carry pattern `what`
 * (and `got` bytes came); else counts and reports the error. */
static int check(struct scale_side *s, long idx, int b, int what, DAT_COUNT got,
		 struct scale_msg *m)
{
	size_t len = s->o->size;
	long bad = pat_check(side_buf_ptr(s, idx, b), len, seed_of(idx, what), 0);
	char msg[96];

	if (bad < 0 && (size_t)got == len)
		return 0;
	if (bad >= 0)
		snprintf(msg, sizeof msg, "byte %ld of %zu wrong (buffer %d)", bad, len, b);
	else
		snprintf(msg, sizeof msg, "%d bytes came, %zu were sent (buffer %d)", (int)got, len, b);
	side_fail(s, idx, msg, DAT_SUCCESS);
	m->errors++;
	return -1;
}

static int posted(struct scale_side *s, long idx, DAT_RETURN r, const char *call)
{
	if (r == DAT_SUCCESS)
		return 0;
	side_fail(s, idx, call, r);
	return -1;
}

static int post_recv(struct scale_side *s, long idx)
{
	DAT_LMR_TRIPLET t = side_buf(s, idx, BUF_RECV, s->o->size);

	return posted(s, idx, dat_ep_post_recv(s->ep[idx], 1, &t, cookie(idx, OP_RECV),
					       DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

static int post_send(struct scale_side *s, long idx, int what)
{
	DAT_LMR_TRIPLET t = side_buf(s, idx, BUF_SEND, s->o->size);

	pat_fill(side_buf_ptr(s, idx, BUF_SEND), s->o->size, seed_of(idx, what), 0);
	return posted(s, idx, dat_ep_post_send(s->ep[idx], 1, &t, cookie(idx, OP_SEND),
					       DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
}

/* Active: the answer's receive, the Write, the Read back and the Send. */
static int start_use(struct scale_side *s, long idx)
{
	size_t len = s->o->size;
	DAT_LMR_TRIPLET w = side_buf(s, idx, BUF_WRITE, len), r = side_buf(s, idx, BUF_READ, len);
	DAT_RMR_TRIPLET slot = side_peer_buf(s, idx, BUF_WRITE, len);

	pat_fill(side_buf_ptr(s, idx, BUF_WRITE), len, seed_of(idx, SEED_WRITE), 0);
	/* --corrupt: one byte of one Write wrong, which both checks see. */
	if (s->o->corrupt && idx == s->o->n / 2)
		((unsigned char *)side_buf_ptr(s, idx, BUF_WRITE))[len / 2] ^= 0x40;
	return post_recv(s, idx) ||
	       posted(s, idx, dat_ep_post_rdma_write(s->ep[idx], 1, &w, cookie(idx, OP_WRITE),
						     &slot, DAT_COMPLETION_DEFAULT_FLAG),
		      "dat_ep_post_rdma_write") ||
	       posted(s, idx, dat_ep_post_rdma_read(s->ep[idx], 1, &r, cookie(idx, OP_READ),
						    &slot, DAT_COMPLETION_DEFAULT_FLAG),
		      "dat_ep_post_rdma_read") ||
	       post_send(s, idx, SEED_SEND);
}

/* Request completions: Reads are checked as they come; *done counts
 * them all.  Blocks for one when `block`, then takes what is queued. */
static int reap_requests(struct scale_side *s, int block, long *done, struct scale_msg *m)
{
	DAT_EVENT ev;

	if (block && side_wait(s, s->req_evd, &ev, "a request completion"))
		return -1;
	while (block || dat_evd_dequeue(s->req_evd, &ev) == DAT_SUCCESS) {
		const DAT_DTO_COMPLETION_EVENT_DATA *c = side_dto(s, &ev);
		long idx;

		block = 0;
		if (!c)
			return -1;
		idx = SCALE_COOKIE_IDX(c->user_cookie.as_64);
		if (SCALE_COOKIE_OP(c->user_cookie.as_64) == OP_READ)
			check(s, idx, BUF_READ, SEED_WRITE, (DAT_COUNT)c->transfered_length, m);
		(*done)++;
	}
	return 0;
}

int use_active(struct scale_side *s, struct scale_msg *m)
{
	long n = s->o->n, next = 0, answered = 0, reqs = 0;
	struct scale_msg peer;

	if (ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_USE }) ||
	    ctl_recv(s->ctl, STEP_USE, s->o->wait_s, &peer))
		return -1;
	m->t_begin = lat_now_ns();
	while (answered < n) {
		DAT_EVENT ev;
		const DAT_DTO_COMPLETION_EVENT_DATA *c;

		while (next < n && next - answered < s->o->inflight)
			if (start_use(s, next++))
				return -1;
		if (side_wait(s, s->recv_evd, &ev, "an answer") || !(c = side_dto(s, &ev)))
			return -1;
		check(s, SCALE_COOKIE_IDX(c->user_cookie.as_64), BUF_RECV, SEED_ANSWER,
		      (DAT_COUNT)c->transfered_length, m);
		answered++;
		side_progress(s, "answers", answered, n);
		if (reap_requests(s, 0, &reqs, m))
			return -1;
	}
	while (reqs < 3 * n)
		if (reap_requests(s, 1, &reqs, m))
			return -1;
	m->t_end = lat_now_ns();
	m->count = answered;
	return 0;
}

int use_passive(struct scale_side *s, struct scale_msg *m)
{
	long n = s->o->n, got = 0, sent = 0;
	struct scale_msg peer;

	if (ctl_recv(s->ctl, STEP_USE, s->o->wait_s, &peer))
		return -1;
	for (long k = 0; k < n; k++)
		if (post_recv(s, k))
			return -1;
	if (ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_USE }))
		return -1;
	m->t_begin = lat_now_ns();
	while (got < n) {
		DAT_EVENT ev;
		const DAT_DTO_COMPLETION_EVENT_DATA *c;
		long idx;

		if (side_wait(s, s->recv_evd, &ev, "a Send") || !(c = side_dto(s, &ev)))
			return -1;
		idx = SCALE_COOKIE_IDX(c->user_cookie.as_64);
		check(s, idx, BUF_RECV, SEED_SEND, (DAT_COUNT)c->transfered_length, m);
		check(s, idx, BUF_WRITE, SEED_WRITE, (DAT_COUNT)s->o->size, m);
		got++;
		side_progress(s, "Sends checked", got, n);
		if (post_send(s, idx, SEED_ANSWER) || reap_requests(s, 0, &sent, m))
			return -1;
	}
	while (sent < n)
		if (reap_requests(s, 1, &sent, m))
			return -1;
	m->t_end = lat_now_ns();
	m->count = got;
	return 0;
}
