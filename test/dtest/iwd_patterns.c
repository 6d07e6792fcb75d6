/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest's consumer patterns: the exchanges RDMA consumers (MPI, storage
 * protocols) build out of DAT's operations, on top of the session of
 * iwd_xfer.c.  The ping-pongs time each round trip (one way: half of it);
 * the client's message i and the server's answer i come from the pattern
 * streams seed and seed ^ PONG_SEED, from word offset pat_woff(i).
 *
 *   wpp:       RDMA Write ping-pong polling memory (MPI's eager rings,
 *              Debian's dtest -W): each side writes message i into offset
 *              0 of the peer's target region, its last 8 bytes holding the
 *              sequence number i + 1 (little-endian); the receiver spins on
 *              that word -- plain loads, no DAT call -- until it changes,
 *              checks the rest and writes back.  The provider places the
 *              last bytes of a Write last (doc/semantics.md, "Placement
 *              order"), so once the word changed the message is there.
 *              Every --signal'th Write is signaled (the others posted with
 *              DAT_COMPLETION_SUPPRESS_FLAG), and its sender reaps that
 *              completion before it spins.
 *   rdv:       Read rendezvous: RTS (a Send carrying the RMR triplet of the
 *              message in its sender's source region) -> the receiver
 *              RDMA-reads it into its target, checks it once the Read
 *              completed, and answers FIN; the answer comes back the same
 *              way.
 *   rdvw:      Write rendezvous: RTS (the size) -> CTS (the triplet of the
 *              receiver's target) -> the sender RDMA-writes the message and
 *              sends FIN, which RDMAP delivers after the Write's data; the
 *              answer comes back the same way.
 *   rdvstream: the client keeps W RTS outstanding (Read rendezvous); the
 *              server reads each into slot i % W of its target, at most W
 *              Reads in flight, and FINs them in order.
 *   bibw:      both sides stream RDMA Writes at once, each with the write
 *              mode's window and DONE/ACK scheme, into each other's target.
 * Control messages (RTS, CTS, FIN, DONE, ACK) carry the message number in
 * `first`, checked on receipt: the patterns run in lock step. */
#include "iwd_sess.h"
#include "pattern.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

/* wpp --corrupt: the client's first sequence word arrives damaged. */
#define SEQ_CORRUPT (1ull << 61)

int pattern_answers(int mode)
{
	return mode == M_WPP || mode == M_RDV || mode == M_RDVW || mode == M_BIBW;
}

/* One side of a ping-pong pattern. */
struct pp_side {
	const struct iwd_msg *b;
	long n, errs;
	uint64_t seed_in;		/* the peer's messages */
	/* wpp */
	uint64_t seen;			/* the watched word's last value */
	uint64_t saved;			/* the source word the sequence replaced */
	long stamped;			/* its iteration, or -1 */
};

typedef int (*pp_step)(struct iwd_sess *s, struct pp_side *p, long i);

static int protocol_error(const char *what, long want, const struct iwd_msg *m)
{
	fprintf(stderr, "iwdtest: protocol error: %s for message %llu (%llu bytes), expected %ld\n",
		what, (unsigned long long)m->first, (unsigned long long)m->len, want);
	return -1;
}

/* The control message of `type` for message i. */
static int wait_for(struct iwd_sess *s, uint32_t type, long i, struct iwd_msg *m)
{
	if (sess_wait_msg(s, type, m))
		return -1;
	return m->first == (uint64_t)i ? 0 : protocol_error("message out of step", i, m);
}

static int send_ctl(struct iwd_sess *s, uint32_t type, long i)
{
	return sess_send_msg(s, &(struct iwd_msg){ .type = type, .first = (uint64_t)i });
}

/* ------------------------------------------------------------------- wpp */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static uint64_t *watched_word(struct iwd_sess *s, size_t size)
{
	return (uint64_t *)(void *)((char *)s->reg[R_TGT].buf + size - 8);
}

/* Spins until the word changes from p->seen: a load and a pause, the clock
 * read every 4096 looks for the wait bound. */
static int spin_for_change(struct iwd_sess *s, struct pp_side *p, long i)
{
	uint64_t *w = watched_word(s, p->b->size);
	uint64_t end = lat_now_ns() + (uint64_t)(s->o->wait_s * 1e9), v;
	unsigned spins = 0;

	/* An acquire load: the rest of the message is read after the word
	 * (and ThreadSanitizer, which rejects fences, sees the order). */
	while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) == p->seen) {
		cpu_relax();
		if (++spins % 4096 == 0 && lat_now_ns() > end) {
			fprintf(stderr, "iwdtest: timed out after %.1f s waiting for RDMA Write %ld "
				"of %llu bytes to land\n", s->o->wait_s, i,
				(unsigned long long)p->b->size);
			return -1;
		}
	}
	p->seen = v;
	return 0;
}

static int wpp_take(struct iwd_sess *s, struct pp_side *p, long i)
{
	size_t size = p->b->size;
	uint64_t seq;

	if (spin_for_change(s, p, i))
		return -1;
	seq = le64toh(p->seen);
	if (seq != (uint64_t)i + 1) {
		sess_report(s, "RDMA write %ld: sequence word %#llx, expected %ld", i,
			    (unsigned long long)seq, i + 1);
		p->errs++;
		return 0;
	}
	p->errs += sess_check(s, "RDMA write", s->reg[R_TGT].buf, size - 8, size - 8,
			      p->seed_in, i, p->n - 1);
	return 0;
}

static void *source_word(struct iwd_sess *s, long i, size_t size)
{
	return (char *)s->reg[R_SRC].buf + pat_woff((uint64_t)i) * 8 + size - 8;
}

/* Message i goes out with the sequence in its last word.  The source word
 * the previous message replaced is restored first: that Write has landed,
 * as the peer's answer to it (or its next message) proves; while the
 * provider may still read a source, it is left alone. */
static int wpp_offer(struct iwd_sess *s, struct pp_side *p, long i)
{
	size_t size = p->b->size;
	int sig = (i + 1) % s->o->signal_every == 0 || i == p->n - 1;
	uint64_t seq = (uint64_t)i + 1;

	if (p->stamped >= 0)
		memcpy(source_word(s, p->stamped, size), &p->saved, 8);
	if (s->o->corrupt && !s->o->server && i == 0)
		seq ^= SEQ_CORRUPT;
	seq = htole64(seq);
	memcpy(&p->saved, source_word(s, i, size), 8);
	memcpy(source_word(s, i, size), &seq, 8);
	p->stamped = i;
	if (sess_post_write(s, i, size, sess_peer_at(s, 0, size),
			    sig ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG))
		return -1;
	return sig ? sess_reap(s, s->req_posted) : 0;
}

/* ------------------------------------------------------------------- rdv */

/* RTS i: the RMR triplet of message i in the source region. */
static int send_rts(struct iwd_sess *s, long i, size_t size)
{
	struct iwd_msg rts = { .type = MSG_RDV_RTS, .first = (uint64_t)i, .size = size };

	sess_offer_region(s, R_SRC, pat_woff((uint64_t)i) * 8, size, &rts);
	return sess_send_msg(s, &rts);
}

/* Takes RTS i from the queue and reads what it offers. */
static int read_offered(struct iwd_sess *s, long i)
{
	struct iwd_msg rts;

	if (wait_for(s, MSG_RDV_RTS, i, &rts))
		return -1;
	if (rts.len != s->rd_size)
		return protocol_error("RTS of the wrong size", i, &rts);
	return sess_post_read(s, i, sess_msg_triplet(&rts));
}

static int rdv_offer(struct iwd_sess *s, struct pp_side *p, long i)
{
	struct iwd_msg fin;

	return send_rts(s, i, p->b->size) || wait_for(s, MSG_RDV_FIN, i, &fin) ? -1 : 0;
}

/* The Read is checked as it completes (iwd_xfer.c, into s->rd_errs). */
static int rdv_take(struct iwd_sess *s, struct pp_side *p, long i)
{
	if (read_offered(s, i))
		return -1;
	while (s->rd_done <= i)
		if (sess_pump(s))
			return -1;
	return send_ctl(s, MSG_RDV_FIN, i);
}

/* ------------------------------------------------------------------ rdvw */

static int rdvw_offer(struct iwd_sess *s, struct pp_side *p, long i)
{
	size_t size = p->b->size;
	struct iwd_msg rts = { .type = MSG_RDV_RTS, .first = (uint64_t)i, .size = size, .len = size };
	struct iwd_msg cts;

	if (sess_send_msg(s, &rts) || wait_for(s, MSG_RDV_CTS, i, &cts))
		return -1;
	if (cts.len < size)
		return protocol_error("CTS too small", i, &cts);
	/* The FIN's completion retires the Write (requests complete in order). */
	if (sess_post_write(s, i, size, sess_msg_triplet(&cts), DAT_COMPLETION_SUPPRESS_FLAG))
		return -1;
	return send_ctl(s, MSG_RDV_FIN, i);
}

static int rdvw_take(struct iwd_sess *s, struct pp_side *p, long i)
{
	size_t size = p->b->size;
	struct iwd_msg rts, cts = { .type = MSG_RDV_CTS, .first = (uint64_t)i }, fin;

	if (wait_for(s, MSG_RDV_RTS, i, &rts))
		return -1;
	if (rts.size != size)
		return protocol_error("RTS of the wrong size", i, &rts);
	sess_offer_region(s, R_TGT, 0, size, &cts);
	if (sess_send_msg(s, &cts) || wait_for(s, MSG_RDV_FIN, i, &fin))
		return -1;
	p->errs += sess_check(s, "RDMA write", s->reg[R_TGT].buf, size, size, p->seed_in, i,
			      p->n - 1);
	return 0;
}

/* ----------------------------------------------------- ping-pong driver */

/* The client offers message i and takes the answer, timing the round trip;
 * the server takes, then offers.  The server's count of bad messages goes
 * to the client in the ACK that iwd_run awaits. */
static int pingpong(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	static const pp_step offer[] = { [M_WPP] = wpp_offer, [M_RDV] = rdv_offer,
					 [M_RDVW] = rdvw_offer };
	static const pp_step take[] = { [M_WPP] = wpp_take, [M_RDV] = rdv_take,
					[M_RDVW] = rdvw_take };
	int client = !s->o->server;
	struct pp_side p = { .b = b, .n = (long)b->iters, .stamped = -1,
			     .seed_in = client ? b->seed ^ PONG_SEED : b->seed };
	pp_step first = client ? offer[b->mode] : take[b->mode];
	pp_step second = client ? take[b->mode] : offer[b->mode];
	long i;

	sess_expect_reads(s, b->size, 1, p.seed_in, p.n - 1);
	for (i = 0; i < p.n; i++) {
		uint64_t t0 = client ? lat_now_ns() : 0, check0 = s->check_ns;

		if (first(s, &p, i) || second(s, &p, i))
			return -1;
		if (client && i < s->lat_cap)
			s->lat_ns[i] = sess_round_trip_ns(s, t0, check0);
	}
	*errs = p.errs + s->rd_errs;
	if (client)
		return 0;
	return sess_send_msg(s, &(struct iwd_msg){ .type = MSG_ACK, .count = b->iters,
						   .errors = (uint64_t)*errs });
}

/* ------------------------------------------------------------- rdvstream */

static int rdvstream_client(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	long n = (long)b->iters, w = (long)b->window, fins = 0, i;
	struct iwd_msg m;

	for (i = 0; i <= n; i++) {
		while (fins < n && (i - fins >= w || i == n)) {
			if (wait_for(s, MSG_RDV_FIN, fins, &m))
				return -1;
			fins++;
		}
		if (i < n && send_rts(s, i, b->size))
			return -1;
	}
	if (sess_wait_msg(s, MSG_ACK, &m))
		return -1;
	*errs = (long)m.errors;
	return 0;
}

/* Reads every RTS as soon as a slot is free, FINs each Read once it is
 * complete (and checked), and pumps only when neither can be done. */
static int rdvstream_serve(struct iwd_sess *s, const struct iwd_msg *b)
{
	long n = (long)b->iters, w = (long)b->window, taken = 0, finned = 0;

	sess_expect_reads(s, b->size, w, b->seed, n - 1);
	while (finned < n) {
		int rc;

		if (taken < n && taken - s->rd_done < w && sess_msg_ready(s))
			rc = read_offered(s, taken++);
		else if (finned < s->rd_done)
			rc = send_ctl(s, MSG_RDV_FIN, finned++);
		else
			rc = sess_pump(s);
		if (rc)
			return -1;
	}
	return sess_send_msg(s, &(struct iwd_msg){ .type = MSG_ACK, .count = b->iters,
						   .errors = (uint64_t)s->rd_errs });
}

/* ------------------------------------------------------------------ bibw */

/* Both sides alike: take the peer's DONEs (check, ACK) and ACKs first,
 * then write while the window allows, else pump.  *errs: bad writes seen
 * here plus those the peer's last ACK counted. */
static int bibw_side(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	long n = (long)b->iters, w = (long)b->window;
	long sent = 0, acked = 0, first = 0, covered = 0, mine = 0, theirs = 0;
	uint64_t seed_in = s->o->server ? b->seed : b->seed ^ PONG_SEED;
	struct iwd_msg m;

	while (acked < n || covered < n) {
		int rc;

		if (sess_msg_ready(s)) {
			if (sess_wait_msg(s, 0, &m))
				return -1;
			if (m.type == MSG_ACK) {
				acked = (long)m.count;
				theirs = (long)m.errors;
				continue;
			}
			if (m.type != MSG_DONE || (long)m.first != covered)
				return protocol_error("not the DONE expected", covered, &m);
			mine += sess_check_writes(s, b, &m, seed_in);
			covered = (long)(m.first + m.count);
			rc = sess_send_msg(s, &(struct iwd_msg){ .type = MSG_ACK,
				.count = (uint64_t)covered, .errors = (uint64_t)mine });
		} else if (sent < n && sent - acked < w) {
			rc = sess_stream_write(s, b, sent++, &first);
		} else {
			rc = sess_pump(s);
		}
		if (rc)
			return -1;
	}
	*errs = mine + theirs;
	return 0;
}

/* ------------------------------------------------------------- dispatch */

void pattern_prepare(struct iwd_sess *s, const struct iwd_msg *b)
{
	/* wpp: the peer's first message must change the watched word. */
	if (b->mode == M_WPP)
		*watched_word(s, b->size) = 0;
}

int pattern_client(struct iwd_sess *s, const struct iwd_msg *b, long *errs)
{
	if (b->mode == M_RDVSTREAM)
		return rdvstream_client(s, b, errs);
	if (b->mode == M_BIBW)
		return bibw_side(s, b, errs);
	return pingpong(s, b, errs);
}

int pattern_serve(struct iwd_sess *s, const struct iwd_msg *b)
{
	long errs;

	if (b->mode == M_RDVSTREAM)
		return rdvstream_serve(s, b);
	if (b->mode == M_BIBW)
		return bibw_side(s, b, &errs);
	return pingpong(s, b, &errs);
}
