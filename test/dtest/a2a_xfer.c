/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwa2a's stages (see iwa2a.h): what each stage posts, and how each
 * completion is checked.
 *
 * Data: every rank fills two regions once, its source (seed src_seed(rank))
 * and its Read source (rsrc_seed(rank)).  The transfer of stage m from rank
 * a to rank b starts at word woff(m, b) of a's region, so each stage and
 * each destination carries other bytes (misdirected data fails its check:
 * woff differs for every b below PAT_ROT ranks).  Sends and RDMA Writes
 * come from the source; RDMA Reads take the Read source of the peer. */
#include "iwa2a.h"
#include "pattern.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

#define CTL_MAGIC 0x69613261u		/* "ia2a" */
#define MAX_REPORTS 3			/* validation failures printed per pair */

enum ctl_type { CTL_HELLO = 1, CTL_NOTE, CTL_DONE };
enum ck_kind { CK_RECV = 1, CK_REQ, CK_READ };

/* A control message: HELLO carries the triplets and the job's plan (both
 * sides must run the same stages); NOTE and DONE name their stage. */
struct ctl {
	uint32_t magic, type, stage, from;
	uint64_t plan;
	uint64_t tgt_addr, tgt_len, src_addr, src_len;
	uint32_t tgt_rmr, src_rmr;
};

static uint64_t src_seed(int rank)
{
	return 0x5352430000000000ull + (uint64_t)rank;
}

static uint64_t rsrc_seed(int rank)
{
	return 0x5253524300000000ull + (uint64_t)rank;
}

static uint64_t woff(int stage, int to)
{
	return ((uint64_t)stage + 17u * (uint64_t)to) % PAT_ROT;
}

/* One target half, the landing area and each receive slot: the largest
 * transfer, or a control message, rounded to a cache line. */
static size_t room(const struct a2a_job *j)
{
	size_t r = j->o->max > A2A_CTL_LEN ? j->o->max : A2A_CTL_LEN;

	return (r + 63) & ~(size_t)63;
}

/* The pair region: target halves 0 and 1, landing, receive slots, and our
 * outgoing control message. */
static size_t tgt_off(const struct a2a_job *j, int half) { return (size_t)half * room(j); }
static size_t land_off(const struct a2a_job *j) { return 2 * room(j); }
static size_t slot_off(const struct a2a_job *j, unsigned k) { return (3 + k) * room(j); }
static size_t ctl_off(const struct a2a_job *j) { return slot_off(j, A2A_RECV_SLOTS); }

static int step_op(int stage) { return (stage - 1) % OP_COUNT; }

static size_t step_size(const struct a2a_job *j, int stage)
{
	return j->o->sizes[((stage - 1) / OP_COUNT) % j->o->nsizes];
}

static const char *const op_names[OP_COUNT] = { "Send", "RDMA Write", "RDMA Read" };

/* FNV-1a over what decides the stages: sizes, rounds, ranks. */
static uint64_t plan_hash(const struct a2a_opts *o)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint64_t v[A2A_MAX_SIZES + 2];
	int n = 0, k;

	for (k = 0; k < o->nsizes; k++)
		v[n++] = o->sizes[k];
	v[n++] = (uint64_t)o->rounds;
	v[n++] = (uint64_t)o->nranks;
	for (k = 0; k < n; k++)
		h = (h ^ v[k]) * 0x100000001b3ull;
	return h;
}

static void ctl_encode(const struct ctl *c, unsigned char *p)
{
	uint32_t w32[4] = { htobe32(c->magic), htobe32(c->type), htobe32(c->stage),
			    htobe32(c->from) };
	uint64_t w64[5] = { htobe64(c->plan), htobe64(c->tgt_addr), htobe64(c->tgt_len),
			    htobe64(c->src_addr), htobe64(c->src_len) };
	uint32_t rmr[2] = { htobe32(c->tgt_rmr), htobe32(c->src_rmr) };

	memset(p, 0, A2A_CTL_LEN);
	memcpy(p, w32, sizeof w32);
	memcpy(p + sizeof w32, w64, sizeof w64);
	memcpy(p + sizeof w32 + sizeof w64, rmr, sizeof rmr);
}

static void ctl_decode(const unsigned char *p, struct ctl *c)
{
	uint32_t w32[4], rmr[2];
	uint64_t w64[5];

	memcpy(w32, p, sizeof w32);
	memcpy(w64, p + sizeof w32, sizeof w64);
	memcpy(rmr, p + sizeof w32 + sizeof w64, sizeof rmr);
	c->magic = be32toh(w32[0]);
	c->type = be32toh(w32[1]);
	c->stage = be32toh(w32[2]);
	c->from = be32toh(w32[3]);
	c->plan = be64toh(w64[0]);
	c->tgt_addr = be64toh(w64[1]);
	c->tgt_len = be64toh(w64[2]);
	c->src_addr = be64toh(w64[3]);
	c->src_len = be64toh(w64[4]);
	c->tgt_rmr = be32toh(rmr[0]);
	c->src_rmr = be32toh(rmr[1]);
}

/* ------------------------------------------------------------- memory */

int a2a_xfer_setup(struct a2a_job *j)
{
	size_t len = j->o->max + PAT_SLACK;

	if (du_reg(&j->d, &j->regs[0], len) || du_reg(&j->d, &j->regs[1], len))
		return -1;
	pat_fill(j->regs[0].buf, len, src_seed(j->o->rank), 0);
	pat_fill(j->regs[1].buf, len, rsrc_seed(j->o->rank), 0);
	j->steps = OP_COUNT * j->o->nsizes * j->o->rounds;
	j->stages = j->steps + 2;
	return 0;
}

int a2a_pair_mem(struct a2a_job *j, struct a2a_pair *p)
{
	return du_reg(&j->d, p->mem, ctl_off(j) + A2A_CTL_LEN);
}

/* -------------------------------------------------------------- posts */

static DAT_LMR_TRIPLET lmr_at(const struct du_region *g, size_t off, size_t len)
{
	DAT_LMR_TRIPLET t = {
		.lmr_context = g->lctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)((char *)g->buf + off),
		.segment_length = (DAT_SEG_LENGTH)len,
	};
	return t;
}

static DAT_DTO_COOKIE cookie(const struct a2a_job *j, const struct a2a_pair *p,
			     enum ck_kind kind, unsigned slot)
{
	DAT_DTO_COOKIE c;

	c.as_64 = (uint64_t)(p - j->pairs) << 40 | (uint64_t)(p->gen & 0xffff) << 24 |
		  (uint64_t)kind << 16 | slot;
	return c;
}

/* Counts a post.  One refused because the EP is no longer connected (the
 * peer is gone and we have not dequeued the event yet) stops the pair's
 * stages and leaves the verdict to the connection's end; any other
 * refusal fails the job. */
static int posted(struct a2a_job *j, struct a2a_pair *p, DAT_RETURN r, const char *what)
{
	if (r == DAT_SUCCESS) {
		p->posted++;
		return 0;
	}
	p->stuck = 1;
	if (DAT_GET_TYPE(r) == DAT_INVALID_STATE) {
		printf("iwa2a: rank %d: %s to rank %d refused (%s): its connection is ending\n",
		       j->o->rank, what, p->rank, du_err(r));
		return -1;
	}
	du_check(r, what);
	j->failed = 1;
	return -1;
}

static int post_req(struct a2a_job *j, struct a2a_pair *p, DAT_RETURN r, const char *what)
{
	if (posted(j, p, r, what))
		return -1;
	p->pending++;
	return 0;
}

static int post_recv(struct a2a_job *j, struct a2a_pair *p, unsigned slot)
{
	DAT_LMR_TRIPLET t = lmr_at(p->mem, slot_off(j, slot), room(j));

	if (posted(j, p, dat_ep_post_recv(p->ep, 1, &t, cookie(j, p, CK_RECV, slot),
					  DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv"))
		return -1;
	p->recvs_out++;
	return 0;
}

int a2a_post_recvs(struct a2a_job *j, struct a2a_pair *p)
{
	unsigned k;

	for (k = 0; k < A2A_RECV_SLOTS; k++)
		if (post_recv(j, p, k))
			return -1;
	return 0;
}

static int send_ctl(struct a2a_job *j, struct a2a_pair *p, enum ctl_type type, int stage)
{
	struct ctl c = { .magic = CTL_MAGIC, .type = type, .stage = (uint32_t)stage,
			 .from = (uint32_t)j->o->rank, .plan = plan_hash(j->o) };
	DAT_LMR_TRIPLET t = lmr_at(p->mem, ctl_off(j), A2A_CTL_LEN);

	if (type == CTL_HELLO) {
		c.tgt_addr = (uint64_t)(uintptr_t)p->mem->buf;
		c.tgt_len = land_off(j);
		c.tgt_rmr = p->mem->rctx;
		c.src_addr = (uint64_t)(uintptr_t)j->regs[1].buf;
		c.src_len = j->regs[1].len;
		c.src_rmr = j->regs[1].rctx;
	}
	/* Free to rewrite: our previous stage's requests all completed. */
	ctl_encode(&c, (unsigned char *)p->mem->buf + ctl_off(j));
	return post_req(j, p, dat_ep_post_send(p->ep, 1, &t, cookie(j, p, CK_REQ, 0),
					       DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
}

/* Stage `stage`'s RDMA Write (from local to remote) or Read (from remote
 * to local), then its NOTE. */
static int post_rdma(struct a2a_job *j, struct a2a_pair *p, int stage, int write,
		     DAT_LMR_TRIPLET *local, const DAT_RMR_TRIPLET *remote)
{
	DAT_RETURN r = write ? dat_ep_post_rdma_write(p->ep, 1, local, cookie(j, p, CK_REQ, 0),
						      remote, DAT_COMPLETION_DEFAULT_FLAG)
			     : dat_ep_post_rdma_read(p->ep, 1, local, cookie(j, p, CK_READ, 0),
						     remote, DAT_COMPLETION_DEFAULT_FLAG);

	return post_req(j, p, r, write ? "dat_ep_post_rdma_write" : "dat_ep_post_rdma_read") ||
	       send_ctl(j, p, CTL_NOTE, stage);
}

static int post_step(struct a2a_job *j, struct a2a_pair *p, int stage)
{
	size_t size = step_size(j, stage);
	DAT_LMR_TRIPLET src = lmr_at(&j->regs[0], woff(stage, p->rank) * 8, size);
	DAT_LMR_TRIPLET land = lmr_at(p->mem, land_off(j), size);
	DAT_RMR_TRIPLET to = p->peer_tgt, from = p->peer_src;

	switch (step_op(stage)) {
	case OP_SEND:
		return post_req(j, p, dat_ep_post_send(p->ep, 1, &src, cookie(j, p, CK_REQ, 0),
						       DAT_COMPLETION_DEFAULT_FLAG),
				"dat_ep_post_send");
	case OP_WRITE:
		to.virtual_address += tgt_off(j, stage % 2);
		to.segment_length = (DAT_SEG_LENGTH)size;
		return post_rdma(j, p, stage, 1, &src, &to);
	default:
		from.virtual_address += woff(stage, j->o->rank) * 8;
		from.segment_length = (DAT_SEG_LENGTH)size;
		return post_rdma(j, p, stage, 0, &land, &from);
	}
}

static int enter_stage(struct a2a_job *j, struct a2a_pair *p, int stage)
{
	p->stage = stage;
	if (stage == 0)
		return send_ctl(j, p, CTL_HELLO, stage);
	if (stage == j->stages - 1)
		return send_ctl(j, p, CTL_DONE, stage);
	return post_step(j, p, stage);
}

static int stage_complete(const struct a2a_pair *p)
{
	return p->stage >= 0 && p->pending == 0 && p->peer_msgs > p->stage;
}

int a2a_pair_past_steps(const struct a2a_job *j, const struct a2a_pair *p)
{
	return p->st == PS_ENDED || p->unreached ||
	       (p->st == PS_UP && (p->stage > j->steps ||
				   (p->stage == j->steps && stage_complete(p))));
}

int a2a_pair_finished(const struct a2a_job *j, const struct a2a_pair *p)
{
	return p->stage == j->stages - 1 && stage_complete(p);
}

int a2a_pair_settled(const struct a2a_pair *p)
{
	return p->st == PS_ENDED && p->posted == p->completed;
}

int a2a_pair_lost(const struct a2a_job *j, const struct a2a_pair *p)
{
	return p->end_event && p->peer_msgs < j->stages;
}

void a2a_advance(struct a2a_job *j, struct a2a_pair *p)
{
	while (p->st == PS_UP && !p->stuck) {
		int next = p->stage + 1;

		if (p->stage >= 0 && !stage_complete(p))
			return;
		if (next == j->stages)
			return;
		/* The listener answers HELLO: then the dialer's receives are up. */
		if (next == 0 && !p->active && p->peer_msgs == 0)
			return;
		if (next == j->stages - 1 && !j->steps_done)
			return;
		if (enter_stage(j, p, next))
			return;
	}
}

/* -------------------------------------------------------- completions */

static void bad(struct a2a_job *j, struct a2a_pair *p, const char *what, int stage, const char *why)
{
	if (p->bad++ < MAX_REPORTS)
		printf("iwa2a: rank %d: FAILED CHECK: %s of stage %d from rank %d: %s\n",
		       j->o->rank, what, stage, p->rank, why);
}

/* pat_check of `len` bytes at buf: what was wrong, or NULL. */
static const char *pattern_wrong(const void *buf, size_t len, uint64_t seed, uint64_t w)
{
	static char why[64];
	long at = pat_check(buf, len, seed, w);

	if (at < 0)
		return NULL;
	snprintf(why, sizeof why, "wrong data at byte %ld of %zu", at, len);
	return why;
}

static void checked(struct a2a_pair *p, int op, size_t size)
{
	p->checked[op]++;
	p->bytes += size;
}

/* A control message of type `type` for `stage`: 0, or reported. */
static int take_ctl(struct a2a_job *j, struct a2a_pair *p, const unsigned char *buf,
		    size_t len, enum ctl_type type, int stage, struct ctl *c)
{
	static const char *const names[] = { "?", "HELLO", "NOTE", "DONE" };
	char why[96];

	ctl_decode(buf, c);
	if (len == A2A_CTL_LEN && c->magic == CTL_MAGIC && c->type == (uint32_t)type &&
	    c->stage == (uint32_t)stage && c->from == (uint32_t)p->rank &&
	    c->plan == plan_hash(j->o))
		return 0;
	snprintf(why, sizeof why, "not the %s expected (%zu bytes, type %u, stage %u, from %u%s)",
		 names[type], len, c->type, c->stage, c->from,
		 c->plan == plan_hash(j->o) ? "" : ", another plan of stages");
	bad(j, p, "message", stage, why);
	return -1;
}

static void take_hello(struct a2a_job *j, struct a2a_pair *p, const unsigned char *buf,
		       size_t len)
{
	struct ctl c;

	if (take_ctl(j, p, buf, len, CTL_HELLO, 0, &c))
		return;
	if (c.tgt_len < land_off(j) || c.src_len < j->o->max + PAT_SLACK) {
		bad(j, p, "HELLO", 0, "its regions are smaller than ours");
		return;
	}
	p->peer_tgt = (DAT_RMR_TRIPLET){ .rmr_context = c.tgt_rmr,
					 .virtual_address = c.tgt_addr,
					 .segment_length = (DAT_SEG_LENGTH)c.tgt_len };
	p->peer_src = (DAT_RMR_TRIPLET){ .rmr_context = c.src_rmr,
					 .virtual_address = c.src_addr,
					 .segment_length = (DAT_SEG_LENGTH)c.src_len };
}

/* The peer's message m: HELLO, a step's Send or NOTE, or DONE. */
static void take_message(struct a2a_job *j, struct a2a_pair *p, unsigned slot, size_t len)
{
	const unsigned char *buf = (const unsigned char *)p->mem->buf + slot_off(j, slot);
	int m = p->peer_msgs, me = j->o->rank;
	struct ctl c;

	if (m == 0) {
		take_hello(j, p, buf, len);
	} else if (m == j->stages - 1) {
		take_ctl(j, p, buf, len, CTL_DONE, m, &c);
	} else if (m >= j->stages) {
		bad(j, p, "message", m, "a message after DONE");
	} else if (step_op(m) == OP_SEND) {
		size_t size = step_size(j, m);
		const char *why = len != size ? "wrong length"
					      : pattern_wrong(buf, size, src_seed(p->rank), woff(m, me));

		if (why)
			bad(j, p, "Send", m, why);
		else
			checked(p, OP_SEND, size);
	} else if (!take_ctl(j, p, buf, len, CTL_NOTE, m, &c) && step_op(m) == OP_WRITE) {
		/* RDMAP placed the Write before delivering this NOTE. */
		size_t size = step_size(j, m);
		const char *why = pattern_wrong((char *)p->mem->buf + tgt_off(j, m % 2), size,
						src_seed(p->rank), woff(m, me));

		if (why)
			bad(j, p, "RDMA Write", m, why);
		else
			checked(p, OP_WRITE, size);
	}
	p->peer_msgs++;
	/* A receive for each message still to come, no more: a clean end
	 * flushes nothing. */
	if (p->st != PS_ENDED && !p->stuck && p->peer_msgs + p->recvs_out < j->stages)
		post_recv(j, p, slot);
}

static void take_read(struct a2a_job *j, struct a2a_pair *p, size_t len)
{
	size_t size = step_size(j, p->stage);
	const char *why = len != size ? "wrong length"
				      : pattern_wrong((char *)p->mem->buf + land_off(j), size,
						      rsrc_seed(p->rank), woff(p->stage, j->o->rank));

	if (why)
		bad(j, p, "RDMA Read", p->stage, why);
	else
		checked(p, OP_READ, size);
}

void a2a_dto_event(struct a2a_job *j, const DAT_EVENT *ev)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *c = &ev->event_data.dto_completion_event_data;
	uint64_t ck = c->user_cookie.as_64;
	uint64_t idx = ck >> 40;
	unsigned gen = (unsigned)(ck >> 24) & 0xffff, slot = (unsigned)ck & 0xffff;
	enum ck_kind kind = (enum ck_kind)((ck >> 16) & 0xff);
	struct a2a_pair *p;

	if (ev->event_number != DAT_DTO_COMPLETION_EVENT || idx >= (uint64_t)j->npeers) {
		printf("iwa2a: rank %d: unexpected event %s (cookie 0x%llx) on the DTO EVD\n",
		       j->o->rank, du_event_name(ev->event_number), (unsigned long long)ck);
		j->failed = 1;
		return;
	}
	p = &j->pairs[idx];
	if (gen != (p->gen & 0xffff))
		return;		/* an EP freed since (a failed accept) */
	p->completed++;
	p->last_ms = a2a_now_ms();
	if (kind == CK_RECV)
		p->recvs_out--;
	else
		p->pending--;
	if (c->status != DAT_DTO_SUCCESS) {
		if (c->status == DAT_DTO_ERR_FLUSHED) {
			p->flushed++;
		} else if (p->errors++ < MAX_REPORTS) {
			printf("iwa2a: rank %d: a %s with rank %d completed with status %d at stage %d\n",
			       j->o->rank, kind == CK_RECV ? "receive" : "request", p->rank,
			       (int)c->status, p->stage);
		}
		return;
	}
	if (kind == CK_RECV)
		take_message(j, p, slot, (size_t)c->transfered_length);
	else if (kind == CK_READ)
		take_read(j, p, (size_t)c->transfered_length);
}

/* ------------------------------------------------------------ reports */

void a2a_pair_describe(const struct a2a_job *j, const struct a2a_pair *p, char *buf, size_t n)
{
	static const char *const states[] = { "waiting to connect", "connecting", "retrying",
					      "connected", "ended" };
	int op = p->stage >= 1 && p->stage < j->stages - 1 ? step_op(p->stage) : -1;
	char last[48] = "no event yet";

	if (p->last_ms > 0)
		snprintf(last, sizeof last, "the last event %.1f s ago",
			 (a2a_now_ms() - p->last_ms) / 1e3);
	snprintf(buf, n, "%s%s, stage %d of %d%s%s, %d of our requests pending, %d messages "
		 "from it, %ld posts, %ld completions, %s",
		 states[p->st], p->stuck ? " (a post was refused)" : "", p->stage,
		 j->stages - 1, op >= 0 ? " " : "", op >= 0 ? op_names[op] : "", p->pending,
		 p->peer_msgs, p->posted, p->completed, last);
}
