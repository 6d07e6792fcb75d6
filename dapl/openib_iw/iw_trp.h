/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* TRP over UDP, the second transport under DDP (iw_llp.h;
 * the protocol is doc/trp.md, the header layout iw_wire.h).
 *
 * Files:
 *   iw_trp_tx.c    the transmit ring (every packet kept, copied, until
 *                  acknowledged), acknowledgements and credits, RTT and
 *                  retransmission (RFC 6298, selective-ack fast
 *                  retransmit), batched sendmmsg, the per-QP timer, the
 *                  test aid, and the llp table
 *   iw_trp_rx.c    recvmmsg into packet buffers, duplicate suppression,
 *                  the reorder buffer (bounded by the credits we grant),
 *                  in-order delivery to DDP, selective acks
 *   iw_trp_term.c  Terminates over TRP: which are non-fatal, the send
 *                  queue marker, the quiet time of fatal ones
 * Engine-internal header.  Everything runs with the QP lock held unless a
 * function says otherwise.
 */
#ifndef IW_TRP_H
#define IW_TRP_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "iw_llp.h"
#include "iw_qp.h"

/* Timers and limits; doc/trp.md lists them for a second implementer. */
#define TRP_RTO_INIT_US    200000u	/* before the first RTT sample */
#define TRP_RTO_MIN_US     20000u
#define TRP_RTO_MAX_US     2000000u
#define TRP_PTO_MIN_US     1000u	/* the probe timeout's floor: a
					 * loaded host's timers run late */
#define TRP_MAX_RETX       10		/* then the connection is lost */
#define TRP_FAST_RETX_GAP  3		/* sacked packets above a hole */
#define TRP_DONE_GATES     8		/* held completion batches */
#define TRP_QUIET_MS       500u		/* quiet time of our fatal Terminates */
#define TRP_IDLE_PROBE_MS  1000u	/* an idle connection's pure ack */
#define TRP_ACK_DELAY_US   1000u	/* a pure ack held for an answer
					 * (IWDAPL_TRP_ACK_DELAY_US) */
#define TRP_ACK_DELAY_MAX_US 5000u	/* well below TRP_RTO_MIN_US: a
					 * held ack must not draw a
					 * retransmission */
/* Packets in flight / reordering.  1 MiB Writes at a path MTU of 1500
 * on 2 CPUs acked ~300-500 us after sending at ~3 GB/s: 1.5 MiB in
 * flight (1024 packets) held the sender back (about 10 % less; a larger
 * window won 5 of 5 alternating pairs, then 3 of 4); 2048 packets no
 * longer did. */
#define TRP_WINDOW_BYTES   (4u << 20)
#define TRP_WINDOW_MIN     8u
#define TRP_WINDOW_MAX     2048u	/* powers of two; credits are 12 bits */
#define TRP_BATCH          64u		/* packets per sendmmsg/recvmmsg */
#define TRP_GSO_MAX        64		/* packets per UDP GSO send */
#define TRP_GSO_BYTES      65000u	/* and bytes */
#define TRP_ZC_MIN         512u	/* payload sent from registered
					 * memory, not copied to the ring */
#define TRP_REFUSALS_READ  4		/* ICMP errors read past in one
					 * receive, for the data queued
					 * behind them (recv_batch) */
#define TRP_GRO_BUFS       4u		/* coalesced datagrams per recvmmsg */
#define TRP_GRO_LEN        65536u	/* the largest UDP datagram, rounded */
#define TRP_SOCKBUF        (4u << 20)	/* SO_SNDBUF / SO_RCVBUF asked */
#define TRP_MIN_MTU        576u
#define TRP_MAX_MTU        65535u

/* Spare packet buffers, the last one given back on top: the next taker
 * gets a buffer still in cache.  One stack for received packets, one for
 * the transmit ring. */
struct trp_bufs {
	uint8_t **b;
	uint32_t n, cap;
};

static inline int trp_bufs_init(struct trp_bufs *s, uint32_t cap)
{
	s->b = iw_slab_zalloc(cap * sizeof(*s->b));
	s->n = 0;
	s->cap = s->b ? cap : 0;
	return s->b ? 0 : ENOMEM;
}

/* The top spare, else a new buffer of size bytes; NULL when out of
 * memory. */
static inline uint8_t *trp_bufs_get(struct trp_bufs *s, uint32_t size)
{
	return s->n ? s->b[--s->n] : malloc(size);
}

/* On top, or freed when the stack is full. */
static inline void trp_bufs_put(struct trp_bufs *s, uint8_t *buf)
{
	if (s->n < s->cap)
		s->b[s->n++] = buf;
	else
		free(buf);
}

/* Free the spares, keep the stack: an idle connection holds no packet
 * buffer. */
static inline uint32_t trp_bufs_trim(struct trp_bufs *s)
{
	uint32_t n = s->n;

	while (s->n)
		free(s->b[--s->n]);
	return n;
}

static inline void trp_bufs_free(struct trp_bufs *s)
{
	trp_bufs_trim(s);
	iw_slab_free(s->b, s->cap * sizeof(*s->b));
	s->b = NULL;
	s->cap = 0;
}

/* What the connection exchange agreed on (iw_cm_trp.c), or defaults. */
struct iwe_trp_start {
	uint32_t tx_psn;		/* PSN of our first sequenced packet */
	uint32_t rx_psn;		/* PSN of the peer's next one */
	uint32_t peer_credits;		/* the peer accepts up to
					 * tx_psn - 1 + peer_credits */
	const void *first;		/* responder: the MPA reply, sent as
					 * the I packet tx_psn */
	size_t first_len;
	int ack_now;			/* initiator: acknowledge the reply
					 * at once (its first packet) */
};

/* A packet in the transmit ring. */
struct trp_txp {
	uint8_t *buf;			/* TRP header + body, pkt_max bytes */
	uint32_t len;
	/* A Send's or Write's payload stays in registered memory (zc_len
	 * bytes at zc, after buf's len - zc_len) while its WR is pending;
	 * the marker copies it into buf before the WR can complete early. */
	const uint8_t *zc;
	uint32_t zc_len;
	uint64_t sent_ns;		/* last transmission, 0: never */
	uint8_t token;			/* a DDP segment of iw_tx.c */
	uint8_t sacked;
	uint8_t retx;			/* retransmissions so far */
	uint8_t fast;			/* fast-retransmitted since the RTO */
	uint8_t want_retx;		/* queued for retransmission */
	uint8_t fatal_term;		/* a fatal Terminate: then be quiet */
};

struct trp {
	/* Timer plumbing: the timer and its tasks run on the device's
	 * progress thread; mx guards q against the QP going away. */
	pthread_mutex_t mx;
	struct iwe_qp_priv *q;		/* NULL once detached */
	struct iwe_prog *prog;
	struct iwe_prog_timer timer;
	struct iwe_prog_task arm_task, free_task;
	_Atomic uint64_t want_ns;	/* deadline the timer should have */
	_Atomic uint64_t armed_ns;	/* deadline it has, 0: none */
	uint32_t pkt_max;		/* largest TRP packet (UDP payload) */
	/* Transmit: PSNs [snd_una, snd_nxt) are in the ring, of which
	 * [snd_una, snd_sent) went out at least once. */
	struct trp_txp *tx;
	uint32_t tx_cap;		/* power of two */
	/* Buffers of acknowledged packets, for the next ones.  (Kept on
	 * its slot, a ring of 1024 -- the window at a path MTU of 1500 --
	 * touched 1024 fresh buffers before the first reuse: a ping-pong
	 * took twice as long over its first thousand round trips, page
	 * faults on a VM.)  Room for tx_cap: no more buffers exist. */
	struct trp_bufs tx_spare;
	uint32_t snd_una, snd_sent, snd_nxt;
	uint32_t peer_limit;		/* highest PSN the peer accepts */
	uint32_t peer_ack;		/* newest ack PSN seen */
	uint32_t done;			/* tokens acknowledged, unreported */
	/* Tokens acknowledged by a packet the peer sent after some of its
	 * packets we have not delivered yet: held until those are (one of
	 * them may be a Terminate that fails the work, doc/trp.md).
	 * Oldest first; the last gate takes on more when all are used. */
	struct trp_done_gate {
		uint32_t psn;		/* the peer's PSNs before it */
		uint32_t tokens;
	} gates[TRP_DONE_GATES];
	uint32_t ngates;
	uint32_t nretx;			/* packets with want_retx */
	int blocked;			/* the socket said EAGAIN */
	int ack_by_term;		/* no pure ack: the Terminate queued
					 * next carries it */
	int fault;			/* EFAULT: a payload was not mapped
					 * (told once, by tx_write) */
	int gso;			/* UDP GSO in use */
	int gro;			/* UDP GRO asked of the socket */
	int ending;			/* the QP failed: no retransmission */
	int quiet;			/* a fatal Terminate went out */
	int refused;			/* ICMP port unreachable read: the
					 * peer is gone (trp_rx_progress) */
	int gate;			/* responder: our reply is unacked */
	uint32_t gate_psn;
	/* RTT estimate (RFC 6298), microseconds. */
	uint64_t srtt_us, rttvar_us, rto_us;
	int have_rtt;
	uint64_t deadline_ns;		/* retransmission timer, 0: off */
	int pto_armed;			/* a set deadline_ns is a probe
					 * timeout (timer_arm) */
	int tlp_pending;		/* a tail loss probe is unanswered */
	uint32_t tlp_high;		/* snd_sent when it went */
	uint64_t idle_ns;		/* next idle probe, 0: off */
	uint64_t heard_ns;		/* when the peer was last heard */
	uint64_t dead_ns;		/* idle and silent this long: lost,
					 * 0: never */
	uint64_t rack_ns;		/* newest send time the peer has */
	uint32_t recover;		/* after a timeout: snd_sent then */
	uint64_t recover_ns;		/* the timeout's time, 0: none */
	/* Receive: PSNs [rcv_dlv, rcv_nxt) arrived in order and wait for
	 * DDP; slots up to rcv_dlv + rx_cap - 1 hold packets that came
	 * early. */
	uint8_t **rx;
	uint32_t *rx_len;
	uint32_t rx_cap;		/* power of two */
	uint32_t rcv_dlv, rcv_nxt;
	uint32_t rcv_high;		/* past the highest PSN held out of
					 * order (selective acks end there) */
	uint32_t credit_cap;		/* what the socket buffer holds */
	int ack_due;
	/* Delayed ack: in-order packets since our last ack, whether
	 * something needs an ack at once, and until when a pure ack is
	 * held. */
	uint32_t rcv_unacked;
	int ack_urgent;
	uint64_t ack_hold_ns;
	uint64_t ack_delay_ns;		/* how long, 0: never held */
	int rcv_mid_msg;		/* the last delivered packet was not
					 * its message's last segment */
	int ack_hold_mid;		/* the hold is a mid-message one */
	/* The peer's lone packets get answers: one of ours went out
	 * within ack_delay_ns of the last one, and no hold has run out
	 * since (iw_trp_rx.c, ack_hold). */
	int ack_answered;
	uint64_t rcv_heard_ns;		/* when the last one came */
	struct trp_bufs rx_pool;	/* spare packet buffers */
	/* Non-fatal error in a Write: its later segments are dropped. */
	int skip_write;
	uint32_t skip_stag;
	uint32_t term_in_quiet;		/* quiet ms of the Terminate being
					 * delivered */
	/* Test aid (struct iwe_trp_test). */
	struct iwe_trp_test test;
	uint64_t rng;
	int held;			/* a packet held back: PSN held_psn */
	uint32_t held_psn;
	/* Counters, for tests and IWDAPL_DEBUG. */
	struct iwe_trp_stats {
		uint64_t sent, retx, fast_retx, rto, dup_rcvd, ooo_rcvd,
			 acks_sent, hook_drop, hook_dup, hook_reorder,
			 gso_sends,	/* sends that carried several */
			 gro_rcvd,	/* packets read coalesced (GRO) */
			 acks_held,	/* pure acks held for an answer */
			 rtt_sacked,	/* RTT samples from selective acks */
			 sack_blocks_max, /* most blocks in one ack sent */
			 tx_bufs,	/* packet buffers allocated */
			 bufs_trimmed,	/* spares freed while idle */
			 spares,	/* spare buffers held (a snapshot) */
			 tlp;		/* tail loss probes sent */
	} st;
};

static inline struct trp *trp_of(const struct iwe_qp_priv *q)
{
	return q->llp_tx;
}

/* The transmit ring's slot of a PSN. */
static inline struct trp_txp *trp_slot(const struct trp *t, uint32_t psn)
{
	return &t->tx[psn & (t->tx_cap - 1)];
}

/* ---- iw_trp_tx.c */
/* Send a pure ack (with selective-ack blocks) now. */
void trp_send_ack(struct trp *t, struct iwe_qp_priv *q);
/* The peer acknowledged up to ack with credits (any packet), having
 * sent its PSNs before heard: what the ack completes is reported once
 * those are delivered. */
void trp_on_ack(struct trp *t, struct iwe_qp_priv *q, uint32_t ack,
		uint32_t credits, uint32_t heard);
/* rcv_dlv moved: report the tokens whose gate it passed. */
void trp_done_release(struct trp *t);
/* Selective-ack blocks of a pure ack. */
void trp_on_sack(struct trp *t, const uint8_t *body, uint32_t len);
/* Send what is due: retransmissions, then new packets.  0, EAGAIN, or
 * the socket's errno. */
int trp_flush(struct trp *t, struct iwe_qp_priv *q);
/* The retransmission timer is due: 0, or ETIMEDOUT once the peer
 * stopped answering (a best-effort Terminate went out). */
int trp_check_rto(struct trp *t, struct iwe_qp_priv *q, uint64_t now);
/* Nothing of ours unacknowledged: probe now and then (heard: packets
 * came in this round).  now: iwe_now_ns() of the caller's round.  0, or
 * ETIMEDOUT once the peer was silent too long (a best-effort Terminate
 * went out). */
int trp_check_idle(struct trp *t, struct iwe_qp_priv *q, int heard,
		   uint64_t now);
/* Bring the progress thread's timer in line with deadline_ns and
 * idle_ns. */
void trp_timer_sync(struct trp *t, const struct iwe_qp_priv *q);
/* Credits we grant now. */
uint32_t trp_credits(const struct trp *t);

/* ---- iw_trp_rx.c */
/* A UDP socket with GRO on, for a udp device to keep open while it
 * lives (or -1): see iw_trp_rx.c. */
int trp_gro_key_hold(void);
int trp_rx_attach(struct trp *t, int fd, uint32_t rx_psn);
void trp_rx_detach(struct trp *t, int fd);
int trp_rx_progress(struct iwe_qp_priv *q);
/* llp rx_idle: a held ack goes now. */
void trp_rx_idle(struct iwe_qp_priv *q);
/* Selective-ack blocks into body (IW_TRP_SACK_MAX at most): bytes. */
uint32_t trp_sack_blocks(const struct trp *t, uint8_t *body);

/* ---- iw_trp_term.c */
/* A Terminate of this layer/type/code reports one request's user error
 * (non-fatal over TRP). */
int trp_term_nonfatal(unsigned layer, unsigned etype, unsigned ecode);
/* tx: a Terminate segment goes out; set its quiet time when fatal.
 * Returns 1 for a fatal one. */
int trp_term_outgoing(struct iwe_qp_priv *q, uint8_t *ulpdu, uint32_t len);
/* rx: -1 if the segment is no Terminate, else 1 for a fatal one (quiet
 * time set, or an error that is not a user error), 0 for a non-fatal
 * one; *quiet_ms: its quiet time. */
int trp_term_incoming(const uint8_t *ulpdu, uint32_t len,
		      uint32_t *quiet_ms);
/* iw_qp.c's rx_failed, first: 1 when the receive side's error was a
 * non-fatal Terminate (sent or received) and the connection goes on;
 * 0 when the QP fails, after the WRs whose segments the peer has
 * acknowledged completed. */
int iwe_trp_rx_failed(struct iwe_qp_priv *q);

/* ---- for the connection manager (any thread; they lock the QP) */
/* End of our side: a sequenced F while the QP runs (acknowledged,
 * retransmitted), else one best-effort F. */
void iwe_trp_send_fin(struct iwe_qp *qp);
/* Whether the peer acknowledged our packet psn (0 when the QP is not
 * attached to TRP). */
int iwe_trp_tx_acked(struct iwe_qp *qp, uint32_t psn);
/* Counters of a QP attached to TRP (zeros otherwise). */
void iwe_trp_stats(struct iwe_qp *qp, struct iwe_trp_stats *out);
/* The largest UDP payload a device's TRP packets use. */
uint32_t iwe_trp_pkt_max(const struct iwe_device *dev);
/* A QP's window in packets (reorder buffer, transmit ring): the credits
 * its connection request or reply grants. */
uint32_t iwe_trp_window(const struct iwe_device *dev);
/* "drop:PCT,reorder:PCT,dup:PCT,seed:N" (any subset, any order). */
int iwe_trp_test_parse(const char *spec, struct iwe_trp_test *out);

#endif
