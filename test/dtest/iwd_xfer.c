/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest's session and transfer protocol over DAT.
 *
 * Setup: the client connects with private data {magic, version, largest
 * size, receive ring depth} so the server can size and post its receive
 * ring before it accepts (iWARP has no receiver-not-ready retry: a Send
 * that finds no receive posted kills the connection).  Then each side
 * sends a HELLO carrying the RMR triplet of its target region.
 *
 * Tests are driven by the client: BEGIN(mode, size, iters, seed, window W,
 * see window.h), the server answers READY, then
 *   write:    the client RDMA-writes iteration i into slot i % W of the
 *             server's region and, after each W/2 writes, sends DONE;
 *             RDMAP orders the Send after the Writes, so on DONE the server
 *             checks those writes and ACKs them.  At most W writes are
 *             unacknowledged, so checking overlaps the transfer.
 *   send:     the client sends; the server checks each message in its ring
 *             and ACKs every W/2 messages, which are the client's credits.
 *   read:     the server fills its region once; the client RDMA-reads
 *             iteration i from word offset pat_woff(i) and checks it, with
 *             at most W reads outstanding.
 *   pingpong: ping i and pong i both checked, each round trip timed; the
 *             server's count of bad pings comes in a final ACK.
 *   wpp, rdv, rdvw, rdvstream, bibw: iwd_patterns.c.
 * Receives complete in posting order, so ring slot = receive count % ring. */
#include "iwd_sess.h"
#include "pattern.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC 0x49574454u		/* "IWDT" */
#define VERSION 1u
#define RING_BYTES (64u << 20)		/* receive ring: RING_MIN..RING_MAX slots */
#define RING_MIN 4
#define RING_MAX WIN_LIMIT		/* a send window fits the ring */
#define CTL_SLOTS 192
#define REQ_DEPTH (MAX_REQ - 4)		/* < MAX_REQ, and < CTL_SLOTS: see send_msg */
#define RD_DEPTH WIN_LIMIT
#define WIRE_MSG sizeof(struct iwd_msg)
#define MAX_REPORTS 5

enum { CK_SEND = 1, CK_WRITE, CK_READ, CK_RECV };
#define CK(kind, idx) (((uint64_t)(kind) << 56) | (uint64_t)(idx))
#define CK_IDX(ck) ((ck) & ((1ull << 56) - 1))

struct conn_pd { uint32_t magic, version, s_max, ring; };

static const char *const mode_names[M_COUNT] = {
	"write", "read", "send", "pingpong", "wpp", "rdv", "rdvw", "rdvstream", "bibw"
};

const char *iwd_mode_name(int mode)
{
	return mode >= 0 && mode < M_COUNT ? mode_names[mode] : "?";
}

int iwd_mode_is_pingpong(int mode)
{
	return mode == M_PINGPONG || mode == M_WPP || mode == M_RDV || mode == M_RDVW;
}

/* ---------------------------------------------------------- wire format */

#define MSG_WORDS (sizeof(struct iwd_msg) / 8)

static void msg_encode(const struct iwd_msg *m, void *p)
{
	uint64_t w[MSG_WORDS];
	size_t k;

	memcpy(w, m, sizeof w);
	w[0] = MAGIC;
	for (k = 0; k < MSG_WORDS; k++)
		w[k] = htobe64(w[k]);
	memcpy(p, w, sizeof w);
}

static int msg_decode(const void *p, size_t len, struct iwd_msg *m)
{
	uint64_t w[MSG_WORDS];
	size_t k;

	if (len != WIRE_MSG)
		return -1;
	memcpy(w, p, sizeof w);
	for (k = 0; k < MSG_WORDS; k++)
		w[k] = be64toh(w[k]);
	memcpy(m, w, sizeof w);
	return m->magic == MAGIC ? 0 : -1;
}

/* ---------------------------------------------------------------- posts */

static DAT_LMR_TRIPLET lmr_at(const struct du_region *g, size_t off, size_t len)
{
	DAT_LMR_TRIPLET t = {
		.virtual_address = (DAT_VADDR)(uintptr_t)((char *)g->buf + off),
		.segment_length = (DAT_SEG_LENGTH)len,
		.lmr_context = g->lctx,
	};
	return t;
}

static DAT_DTO_COOKIE cookie(int kind, uint64_t idx)
{
	DAT_DTO_COOKIE c;

	c.as_64 = CK(kind, idx);
	return c;
}

static int post_recv(struct iwd_sess *s, long slot)
{
	DAT_LMR_TRIPLET t = lmr_at(&s->reg[R_RING], (size_t)slot * s->slot, s->slot);

	return du_check(dat_ep_post_recv(s->d.ep, 1, &t, cookie(CK_RECV, (uint64_t)slot),
					 DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

/* Keeps outstanding requests below the EP's request queue depth. */
static int throttle(struct iwd_sess *s)
{
	while (s->req_posted - s->req_done >= REQ_DEPTH) {
		if (s->sig_h == s->sig_t) {
			fprintf(stderr, "iwdtest: the request queue is full of unsignaled requests\n");
			return -1;
		}
		if (sess_pump(s))
			return -1;
	}
	return 0;
}

/* Counts a successful request post (the caller throttled before).  A
 * post refused because the connection is gone (the peer died between
 * the last completion and this post) ends the test as a flushed
 * completion does: with the EP's end event reported. */
static int posted(struct iwd_sess *s, DAT_RETURN r, const char *what, DAT_COMPLETION_FLAGS f)
{
	if (r != DAT_SUCCESS) {
		int rc = du_check(r, what);

		if (DAT_GET_TYPE(r) == DAT_INVALID_STATE &&
		    DAT_GET_SUBTYPE(r) == DAT_INVALID_STATE_EP_DISCONNECTED)
			du_report_end(&s->d);
		return rc;
	}
	s->req_posted++;
	if (!(f & DAT_COMPLETION_SUPPRESS_FLAG))
		s->sig_at[s->sig_t++ % MAX_REQ] = s->req_posted;
	return 0;
}

int sess_reap(struct iwd_sess *s, long post_no)
{
	while (s->req_done < post_no)
		if (sess_pump(s))
			return -1;
	return 0;
}

int sess_send_msg(struct iwd_sess *s, const struct iwd_msg *m)
{
	/* Requests complete in order and fewer than CTL_SLOTS are ever
	 * outstanding, so the slot used CTL_SLOTS sends ago is free. */
	size_t off = (s->ctl_next++ % CTL_SLOTS) * WIRE_MSG;
	DAT_LMR_TRIPLET t = lmr_at(&s->reg[R_CTL], off, WIRE_MSG);

	if (throttle(s))
		return -1;
	msg_encode(m, (char *)s->reg[R_CTL].buf + off);
	return posted(s, dat_ep_post_send(s->d.ep, 1, &t, cookie(CK_SEND, 0),
					  DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send",
		      DAT_COMPLETION_DEFAULT_FLAG);
}

/* Data transfer i always starts at word offset pat_woff(i) of the source. */
static int post_data_send(struct iwd_sess *s, long i, size_t size)
{
	DAT_LMR_TRIPLET t = lmr_at(&s->reg[R_SRC], pat_woff((uint64_t)i) * 8, size);

	return throttle(s) ||
	       posted(s, dat_ep_post_send(s->d.ep, 1, &t, cookie(CK_SEND, (uint64_t)i),
					  DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send",
		      DAT_COMPLETION_DEFAULT_FLAG);
}

DAT_RMR_TRIPLET sess_peer_at(const struct iwd_sess *s, size_t off, size_t len)
{
	DAT_RMR_TRIPLET r = {
		.virtual_address = s->peer.virtual_address + off,
		.segment_length = (DAT_SEG_LENGTH)len,
		.rmr_context = s->peer.rmr_context,
	};
	return r;
}

DAT_RMR_TRIPLET sess_msg_triplet(const struct iwd_msg *m)
{
	DAT_RMR_TRIPLET r = {
		.virtual_address = (DAT_VADDR)m->addr,
		.segment_length = (DAT_SEG_LENGTH)m->len,
		.rmr_context = (DAT_RMR_CONTEXT)m->rmr,
	};
	return r;
}

void sess_offer_region(const struct iwd_sess *s, int region, size_t off, size_t len,
		       struct iwd_msg *m)
{
	m->addr = (uint64_t)(uintptr_t)((char *)s->reg[region].buf + off);
	m->len = len;
	m->rmr = s->reg[region].rctx;
}

int sess_post_write(struct iwd_sess *s, long i, size_t size, DAT_RMR_TRIPLET dst,
		    DAT_COMPLETION_FLAGS f)
{
	DAT_LMR_TRIPLET t = lmr_at(&s->reg[R_SRC], pat_woff((uint64_t)i) * 8, size);

	return throttle(s) ||
	       posted(s, dat_ep_post_rdma_write(s->d.ep, 1, &t, cookie(CK_WRITE, (uint64_t)i),
						&dst, f), "dat_ep_post_rdma_write", f);
}

int sess_post_read(struct iwd_sess *s, long i, DAT_RMR_TRIPLET from)
{
	size_t size = s->rd_size;
	DAT_LMR_TRIPLET t = lmr_at(&s->reg[R_TGT], (size_t)(i % s->rd_slots) * size, size);

	from.segment_length = (DAT_SEG_LENGTH)size;
	return throttle(s) ||
	       posted(s, dat_ep_post_rdma_read(s->d.ep, 1, &t, cookie(CK_READ, (uint64_t)i),
					       &from, DAT_COMPLETION_DEFAULT_FLAG),
		      "dat_ep_post_rdma_read", DAT_COMPLETION_DEFAULT_FLAG);
}

/* ----------------------------------------------------------- completions */

void sess_report(struct iwd_sess *s, const char *fmt, ...)
{
	va_list ap;

	if (s->reports++ >= MAX_REPORTS)
		return;
	fputs("iwdtest: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

long sess_check(struct iwd_sess *s, const char *what, const void *buf, size_t len,
		size_t want, uint64_t seed, long i, long last)
{
	uint64_t t0;
	long bad;

	if (len != want) {
		sess_report(s, "%s %ld: %zu bytes, expected %zu", what, i, len, want);
		return 1;
	}
	if (!s->o->verify_all && i != last)
		return 0;
	t0 = lat_now_ns();
	bad = pat_check(buf, len, seed, pat_woff((uint64_t)i));
	s->check_ns += lat_now_ns() - t0;
	if (bad < 0)
		return 0;
	sess_report(s, "%s %ld of %zu bytes: wrong data at byte %ld", what, i, len, bad);
	return 1;
}

static int on_recv(struct iwd_sess *s, long slot, size_t len)
{
	const unsigned char *buf = (unsigned char *)s->reg[R_RING].buf + (size_t)slot * s->slot;
	struct iwd_msg *m = &s->q[s->qt % QLEN];

	if (s->rx_left > 0) {
		s->rx_errs += sess_check(s, "received message", buf, len, s->rx_size,
					 s->rx_seed, s->rx_idx, s->rx_last);
		s->rx_idx++;
		s->rx_left--;
	} else if (s->qt - s->qh >= QLEN) {
		fprintf(stderr, "iwdtest: too many unprocessed control messages\n");
		return -1;
	} else if (msg_decode(buf, len, m)) {
		fprintf(stderr, "iwdtest: garbled control message (%zu bytes)\n", len);
		return -1;
	} else {
		s->qt++;
	}
	return post_recv(s, slot);
}

static void on_read(struct iwd_sess *s, long i)
{
	const char *buf = (char *)s->reg[R_TGT].buf + (size_t)(i % s->rd_slots) * s->rd_size;

	s->rd_errs += sess_check(s, "RDMA read", buf, s->rd_size, s->rd_size,
				 s->rd_seed, i, s->rd_last);
	s->rd_done++;
}

int sess_pump(struct iwd_sess *s)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *c;
	DAT_EVENT ev;
	uint64_t ck;

	if (du_wait(&s->d, s->d.dto_evd, &ev, "a completion"))
		return -1;
	if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
		fprintf(stderr, "iwdtest: unexpected event 0x%x on the DTO EVD\n",
			(unsigned)ev.event_number);
		return -1;
	}
	c = &ev.event_data.dto_completion_event_data;
	ck = c->user_cookie.as_64;
	if (c->status != DAT_DTO_SUCCESS) {
		static const char *const kinds[] = { "?", "send", "RDMA write", "RDMA read", "receive" };
		fprintf(stderr, "iwdtest: %s %llu completed with DTO status %d%s\n",
			kinds[(ck >> 56) <= CK_RECV ? ck >> 56 : 0],
			(unsigned long long)CK_IDX(ck), (int)c->status,
			c->status == DAT_DTO_ERR_FLUSHED ? " (flushed: the connection is gone)" : "");
		if (c->status == DAT_DTO_ERR_FLUSHED)
			du_report_end(&s->d);
		return -1;
	}
	if (ck >> 56 == CK_RECV)
		return on_recv(s, (long)CK_IDX(ck), c->transfered_length);
	if (s->sig_h == s->sig_t) {
		fprintf(stderr, "iwdtest: a completion of a request posted unsignaled\n");
		return -1;
	}
	s->req_done = s->sig_at[s->sig_h++ % MAX_REQ];
	if (ck >> 56 == CK_READ)
		on_read(s, (long)CK_IDX(ck));
	return 0;
}

int sess_wait_msg(struct iwd_sess *s, uint32_t type, struct iwd_msg *m)
{
	while (!sess_msg_ready(s))
		if (sess_pump(s))
			return -1;
	*m = s->q[s->qh++ % QLEN];
	if (type && m->type != type) {
		fprintf(stderr, "iwdtest: protocol error: message %u, expected %u\n",
			(unsigned)m->type, type);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ the client */

static long window_for(const struct iwd_sess *s, int mode, size_t size)
{
	long w = win_for_size(size, s->o->window);

	/* Every unacknowledged Send may hold a slot of the receiver's ring;
	 * rdvstream's client may have a FIN for each RTS of its window and
	 * then the final ACK in its ring. */
	if (mode == M_SEND && w > s->ring)
		w = s->ring;
	if (mode == M_RDVSTREAM && w > s->ring - 1)
		w = s->ring - 1;
	/* bibw: each side may have up to 3 DONEs and 3 ACKs of the peer's
	 * not yet taken from its ring; with a window of 2, 2 of each. */
	if (mode == M_BIBW && s->ring < 8 && w > 2)
		w = 2;
	return w;
}

static int wait_ack(struct iwd_sess *s, long *acked, long *errs)
{
	struct iwd_msg a;

	if (sess_wait_msg(s, MSG_ACK, &a))
		return -1;
	*acked = (long)a.count;
	*errs = (long)a.errors;
	return 0;
}

int sess_stream_write(struct iwd_sess *s, const struct iwd_msg *b, long i, long *first)
{
	long n = (long)b->iters, w = (long)b->window;
	struct iwd_msg d = { .type = MSG_DONE, .first = (uint64_t)*first,
			     .count = (uint64_t)(i + 1 - *first) };

	if (sess_post_write(s, i, b->size, sess_peer_at(s, (size_t)(i % w) * b->size, b->size),
			    DAT_COMPLETION_DEFAULT_FLAG))
		return -1;
	if (i + 1 - *first < win_ack_every(w) && i < n - 1)
		return 0;
	*first = i + 1;
	return sess_send_msg(s, &d);
}

/* write and send: at most W unacknowledged, acknowledged every W/2. */
static int client_stream(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	long n = (long)b->iters, w = (long)b->window;
	long acked = 0, first = 0, i;

	for (i = 0; i < n; i++) {
		while (i - acked >= w)
			if (wait_ack(s, &acked, errs))
				return -1;
		if (b->mode == M_SEND ? post_data_send(s, i, b->size)
				      : sess_stream_write(s, b, i, &first))
			return -1;
	}
	while (acked < n)
		if (wait_ack(s, &acked, errs))
			return -1;
	return 0;
}

void sess_expect_reads(struct iwd_sess *s, size_t size, long slots, uint64_t seed, long last)
{
	s->rd_size = size;
	s->rd_seed = seed;
	s->rd_done = s->rd_errs = 0;
	s->rd_last = last;
	s->rd_slots = slots;
}

static int client_read(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	long n = (long)b->iters, i, slots = (long)(s->reg[R_TGT].len / b->size);

	sess_expect_reads(s, b->size, slots < (long)b->window ? slots : (long)b->window,
			  b->seed, n - 1);
	for (i = 0; i < n; i++) {
		while (i - s->rd_done >= s->rd_slots)
			if (sess_pump(s))
				return -1;
		if (sess_post_read(s, i, sess_peer_at(s, pat_woff((uint64_t)i) * 8, b->size)))
			return -1;
	}
	while (s->rd_done < n)
		if (sess_pump(s))
			return -1;
	*errs = s->rd_errs;
	return 0;
}

static void expect_data(struct iwd_sess *s, size_t size, long n, uint64_t seed)
{
	s->rx_left = n;
	s->rx_idx = s->rx_errs = 0;
	s->rx_last = n - 1;
	s->rx_size = size;
	s->rx_seed = seed;
}

static int client_pingpong(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	long n = (long)b->iters, i;

	/* Only after READY: from here on, every receive is a pong. */
	expect_data(s, b->size, n, b->seed ^ PONG_SEED);
	for (i = 0; i < n; i++) {
		uint64_t t0 = lat_now_ns(), check0 = s->check_ns;

		if (post_data_send(s, i, b->size))
			return -1;
		while (s->rx_idx <= i)
			if (sess_pump(s))
				return -1;
		if (i < s->lat_cap)
			s->lat_ns[i] = sess_round_trip_ns(s, t0, check0);
		if (s->o->gap_us)
			usleep((useconds_t)s->o->gap_us);
	}
	*errs = s->rx_errs;
	return 0;
}

/* Ping-pong: room for the round-trip times of n iterations (or the first
 * LAT_MAX_SAMPLES of them). */
static int lat_alloc(struct iwd_sess *s, long n)
{
	s->lat_cap = n < LAT_MAX_SAMPLES ? n : LAT_MAX_SAMPLES;
	s->lat_ns = malloc((size_t)s->lat_cap * sizeof *s->lat_ns);
	if (!s->lat_ns) {
		fprintf(stderr, "iwdtest: out of memory for %ld latency samples\n", s->lat_cap);
		s->lat_cap = 0;
		return -1;
	}
	return 0;
}

static void lat_release(struct iwd_sess *s, struct iwd_result *r, long done)
{
	lat_summarize(s->lat_ns, done < s->lat_cap ? done : s->lat_cap, 0.5, &r->lat);
	free(s->lat_ns);
	s->lat_ns = NULL;
	s->lat_cap = 0;
}

int iwd_ring_slots(const struct iwd_sess *s)
{
	return s->ring;
}

int iwd_run(struct iwd_sess *s, int mode, size_t size, long n, struct iwd_result *r)
{
	struct iwd_msg b = { .type = MSG_BEGIN, .mode = (uint32_t)mode, .size = size,
			     .iters = (uint64_t)n };
	long errs = 0, perrs = 0;
	int rc, pp = iwd_mode_is_pingpong(mode);
	uint64_t t0;

	if (size < 1 || size > s->s_max || n < 1)
		return -1;
	memset(r, 0, sizeof *r);
	if (pp && lat_alloc(s, n))
		return -1;
	b.seed = pat_word(0x1d7e57, (uint64_t)++s->tests);
	b.window = (uint64_t)window_for(s, mode, size);
	r->window = (long)b.window;
	pat_fill(s->reg[R_SRC].buf, size + PAT_SLACK, b.seed, 0);
	if (s->o->corrupt)	/* in the range of iteration 0, at least */
		((unsigned char *)s->reg[R_SRC].buf)[size - 1] ^= 0x20;
	pattern_prepare(s, &b);
	if (sess_send_msg(s, &b) || sess_wait_msg(s, MSG_READY, &(struct iwd_msg){ 0 })) {
		lat_release(s, r, 0);
		return -1;
	}
	t0 = lat_now_ns();
	if (mode == M_WRITE || mode == M_SEND)
		rc = client_stream(s, &b, &errs);
	else if (mode == M_READ)
		rc = client_read(s, &b, &errs);
	else if (mode == M_PINGPONG)
		rc = client_pingpong(s, &b, &errs);
	else
		rc = pattern_client(s, &b, &errs);
	r->secs = (double)(lat_now_ns() - t0) / 1e9;
	if (pp) {
		lat_release(s, r, rc ? 0 : n);
		if (!rc)	/* the server's verdict on pings */
			rc = wait_ack(s, &(long){ 0 }, &perrs);
	}
	r->iters = mode == M_BIBW ? 2 * n : n;
	r->errors = errs + perrs;
	return rc;
}

/* ------------------------------------------------------------ the server */

long sess_check_writes(struct iwd_sess *s, const struct iwd_msg *b, const struct iwd_msg *done,
		       uint64_t seed)
{
	long n = (long)b->iters, w = (long)b->window, errs = 0, i;
	const char *tgt = s->reg[R_TGT].buf;

	for (i = (long)done->first; i < (long)(done->first + done->count); i++)
		errs += sess_check(s, "RDMA write", tgt + (size_t)(i % w) * b->size,
				   b->size, b->size, seed, i, n - 1);
	return errs;
}

static int serve_write(struct iwd_sess *s, const struct iwd_msg *b)
{
	long n = (long)b->iters, covered = 0, errs = 0;

	while (covered < n) {
		struct iwd_msg d, a = { .type = MSG_ACK };
		if (sess_wait_msg(s, MSG_DONE, &d))
			return -1;
		errs += sess_check_writes(s, b, &d, b->seed);
		covered = (long)(d.first + d.count);
		a.count = (uint64_t)covered;
		a.errors = (uint64_t)errs;
		if (sess_send_msg(s, &a))
			return -1;
	}
	return 0;
}

static int serve_send(struct iwd_sess *s, const struct iwd_msg *b)
{
	long n = (long)b->iters, every = win_ack_every((long)b->window);

	while (s->rx_idx < n) {
		long until = s->rx_idx + every < n ? s->rx_idx + every : n;
		struct iwd_msg a = { .type = MSG_ACK };
		while (s->rx_idx < until)
			if (sess_pump(s))
				return -1;
		/* The receives are already re-posted: these are fresh credits. */
		a.count = (uint64_t)s->rx_idx;
		a.errors = (uint64_t)s->rx_errs;
		if (sess_send_msg(s, &a))
			return -1;
	}
	return 0;
}

static int serve_pingpong(struct iwd_sess *s, const struct iwd_msg *b)
{
	long n = (long)b->iters, i;
	struct iwd_msg a = { .type = MSG_ACK, .count = b->iters };

	for (i = 0; i < n; i++) {
		while (s->rx_idx <= i)
			if (sess_pump(s))
				return -1;
		if (post_data_send(s, i, b->size))
			return -1;
	}
	a.errors = (uint64_t)s->rx_errs;
	return sess_send_msg(s, &a);
}

static int begin_ok(const struct iwd_sess *s, const struct iwd_msg *b)
{
	size_t sz = b->size;
	uint64_t w = b->window;

	if (b->mode >= M_COUNT || sz < 1 || sz > s->s_max || b->iters < 1 || w < 1 ||
	    w > WIN_LIMIT)
		return 0;
	/* A window of writes, or of reads (rdvstream), fits the target. */
	if ((b->mode == M_WRITE || b->mode == M_BIBW || b->mode == M_RDVSTREAM) &&
	    w * sz > s->reg[R_TGT].len)
		return 0;
	if (b->mode == M_WPP && sz % 8)		/* its last word is the sequence */
		return 0;
	if (b->mode == M_RDVSTREAM)
		return w < (uint64_t)s->ring;
	return b->mode != M_SEND || w <= (uint64_t)s->ring;
}

static int serve_one(struct iwd_sess *s, const struct iwd_msg *b)
{
	struct iwd_msg ready = { .type = MSG_READY };

	if (!begin_ok(s, b)) {
		fprintf(stderr, "iwdtest: client asked for an impossible test\n");
		return -1;
	}
	if (b->mode == M_READ)
		pat_fill(s->reg[R_TGT].buf, b->size + PAT_SLACK, b->seed, 0);
	if (b->mode == M_PINGPONG || pattern_answers((int)b->mode))
		pat_fill(s->reg[R_SRC].buf, b->size + PAT_SLACK, b->seed ^ PONG_SEED, 0);
	if (b->mode == M_SEND || b->mode == M_PINGPONG)
		expect_data(s, b->size, (long)b->iters, b->seed);
	pattern_prepare(s, b);
	if (sess_send_msg(s, &ready))
		return -1;
	if (b->mode == M_WRITE)
		return serve_write(s, b);
	if (b->mode == M_SEND)
		return serve_send(s, b);
	if (b->mode == M_PINGPONG)
		return serve_pingpong(s, b);
	return b->mode == M_READ ? 0 : pattern_serve(s, b);
}

int iwd_serve(struct iwd_sess *s)
{
	struct iwd_msg m;

	for (;;) {
		if (sess_wait_msg(s, 0, &m))
			return -1;
		if (m.type == MSG_QUIT)	/* reports counts every failed check */
			return sess_send_msg(s, &(struct iwd_msg){ .type = MSG_BYE }) ? -1 :
			       s->reports ? 1 : 0;
		if (m.type != MSG_BEGIN) {
			fprintf(stderr, "iwdtest: protocol error: message %u\n", (unsigned)m.type);
			return -1;
		}
		if (serve_one(s, &m))
			return -1;
	}
}

/* --------------------------------------------------------- setup, close */

/* Holds a window of writes: at most WIN_BYTES, or one message. */
static size_t tgt_len(size_t s_max)
{
	return (s_max > WIN_BYTES ? s_max : WIN_BYTES) + PAT_SLACK;
}

static int setup_memory(struct iwd_sess *s)
{
	struct du_ep_sizes sz = { .max_recv = s->ring, .max_req = MAX_REQ, .rdma_read = RD_DEPTH };
	size_t slot = s->s_max > WIRE_MSG ? s->s_max : WIRE_MSG;

	s->slot = (slot + 63) & ~(size_t)63;
	if (du_reg(&s->d, &s->reg[R_SRC], s->s_max + PAT_SLACK) ||
	    du_reg(&s->d, &s->reg[R_TGT], tgt_len(s->s_max)) ||
	    du_reg(&s->d, &s->reg[R_RING], s->slot * (size_t)s->ring) ||
	    du_reg(&s->d, &s->reg[R_CTL], (size_t)CTL_SLOTS * WIRE_MSG))
		return -1;
	return du_ep_create(&s->d, &sz);
}

static int post_ring(struct iwd_sess *s)
{
	int k;

	for (k = 0; k < s->ring; k++)
		if (post_recv(s, k))
			return -1;
	return 0;
}

static int send_hello(struct iwd_sess *s)
{
	struct iwd_msg h = { .type = MSG_HELLO };

	h.addr = (uint64_t)(uintptr_t)s->reg[R_TGT].buf;
	h.len = (uint32_t)s->reg[R_TGT].len;
	h.rmr = s->reg[R_TGT].rctx;
	return sess_send_msg(s, &h);
}

static int recv_hello(struct iwd_sess *s)
{
	struct iwd_msg h;

	if (sess_wait_msg(s, MSG_HELLO, &h))
		return -1;
	if (h.len < tgt_len(s->s_max)) {
		fprintf(stderr, "iwdtest: peer's region is too small (%llu bytes)\n",
			(unsigned long long)h.len);
		return -1;
	}
	s->peer.virtual_address = h.addr;
	s->peer.segment_length = (DAT_SEG_LENGTH)h.len;
	s->peer.rmr_context = (DAT_RMR_CONTEXT)h.rmr;
	return 0;
}

static int open_client(struct iwd_sess *s)
{
	struct conn_pd pd;
	int k;

	for (k = 0, s->s_max = 8; k < s->o->nsizes; k++)
		if (s->o->sizes[k] > s->s_max)
			s->s_max = s->o->sizes[k];
	s->ring = (int)(RING_BYTES / (s->s_max > WIRE_MSG ? s->s_max : WIRE_MSG));
	s->ring = s->ring < RING_MIN ? RING_MIN : s->ring > RING_MAX ? RING_MAX : s->ring;
	pd.magic = htobe32(MAGIC);
	pd.version = htobe32(VERSION);
	pd.s_max = htobe32((uint32_t)s->s_max);
	pd.ring = htobe32((uint32_t)s->ring);
	if (setup_memory(s))
		return -1;
	if (s->o->ssp) {
		int fd = du_ssp_dial(&s->d, s->o->host, (unsigned)s->o->qual, 5000);

		if (fd < 0 || du_ssp_connect(&s->d, fd, &pd, (int)sizeof pd))
			return -1;
	} else if (du_connect(&s->d, s->o->host, s->o->qual, &pd, (int)sizeof pd, 5000)) {
		return -1;
	}
	/* Our ring is posted before our HELLO; the server sends nothing first. */
	return post_ring(s) || send_hello(s) || recv_hello(s) ? -1 : 0;
}

static int open_server(struct iwd_sess *s)
{
	struct conn_pd pd = { 0 };
	DAT_CR_HANDLE cr;
	int pdlen = 0;

	if (s->o->ssp) {
		int fd = du_ssp_answer(&s->d, (unsigned)s->o->qual, (int)(s->d.tmo_us / 250));

		if (fd < 0 || du_ssp_wait_cr(&s->d, fd, s->d.tmo_us * 4, &cr, &pd,
					     (int)sizeof pd, &pdlen))
			return -1;
	} else if (du_listen(&s->d, s->o->qual) ||
		   du_wait_cr(&s->d, s->d.tmo_us * 4, &cr, &pd, (int)sizeof pd, &pdlen)) {
		return -1;
	}
	s->s_max = be32toh(pd.s_max);
	s->ring = (int)be32toh(pd.ring);
	if (pdlen < (int)sizeof pd || be32toh(pd.magic) != MAGIC ||
	    be32toh(pd.version) != VERSION || s->s_max < 1 || s->s_max > (1u << 30) ||
	    s->ring < RING_MIN || s->ring > RING_MAX) {
		fprintf(stderr, "iwdtest: connection request is not from iwdtest; rejected\n");
		dat_cr_reject(cr, 0, NULL);
		return -1;
	}
	if (setup_memory(s) || post_ring(s))
		return -1;
	if (du_accept(&s->d, cr))
		return -1;
	return recv_hello(s) || send_hello(s) ? -1 : 0;
}

struct iwd_sess *iwd_open(const struct iwd_opts *o)
{
	struct iwd_sess *s = calloc(1, sizeof *s);
	int qlen;

	if (!s)
		return NULL;
	s->o = o;
	s->d.poll = o->poll;
	s->d.tmo_us = (DAT_TIMEOUT)(o->wait_s * 1e6);
	qlen = RING_MAX + MAX_REQ + 8;
	if (du_open(&s->d, o->ia, qlen) ||
	    (o->server ? open_server(s) : open_client(s))) {
		iwd_close(s, 0);
		return NULL;
	}
	return s;
}

/* The server waits for the client to disconnect first, so that its BYE is
 * surely delivered; it disconnects itself only if the client does not. */
static void server_linger(struct iwd_sess *s)
{
	DAT_EVENT ev;
	DAT_COUNT more;

	if (dat_evd_wait(s->d.conn_evd, 5 * 1000000, 1, &ev, &more) != DAT_SUCCESS)
		du_disconnect(&s->d);
}

int iwd_close(struct iwd_sess *s, int say_bye)
{
	int rc = 0;

	if (say_bye && !s->o->server)
		rc = sess_send_msg(s, &(struct iwd_msg){ .type = MSG_QUIT }) ||
		     sess_wait_msg(s, MSG_BYE, &(struct iwd_msg){ 0 }) ? -1 : 0;
	if (say_bye && s->o->server)
		server_linger(s);
	else if (s->d.ep != DAT_HANDLE_NULL)
		du_disconnect(&s->d);
	du_close(&s->d, s->reg, R_COUNT);
	free(s);
	return rc;
}
