/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Queue pair internals.
 *
 * Floors, bottom up (no file calls into a floor above it):
 *   iw_wq.c      work queues: WQE slots, completions, flushing, the SRQ
 *                receive being filled, Terminate-to-WR matching
 *   iw_tx.c      RDMAP/DDP transmit: chooses the next message and cuts it
 *                into DDP segments for the transport
 *   iw_rx.c      RDMAP/DDP receive: checks each arriving segment, tells the
 *                transport where its payload goes, acts at its end; holds
 *                the per-opcode table (iwe_rdmap_ops)
 *   iw_mpa_tx.c  the MPA/TCP transport (iw_llp.h): FPDU framing, CRC,
 *   iw_mpa_rx.c  batched sendmsg, and FPDUs taken off the byte stream
 *   iw_qp.c      the object: create/destroy, verbs state machine, posting,
 *                the progress driver that runs RX, TX and the transport and
 *                turns their results into errors and Terminates, and the
 *                socket watch of an attached connection
 * RX and TX never fail the QP themselves: they return an errno and leave
 * what to report (a Terminate to send, one received) in their state; the
 * driver in iw_qp.c acts on it.
 *
 * Locking: one mutex per QP protects everything below.  Posting threads
 * take it briefly; progress holds it across non-blocking socket calls, so
 * a post waits at most for one sendmsg/recvmsg round.  The progress
 * thread never blocks on it: it try-locks and, when busy, leaves a kick
 * that the holder handles before it lets go (iwe_qp_unlock).  Lock order:
 * QP, then SRQ, then CQ (then channel), then device (iwe_mr_check).
 */
#ifndef IW_QP_H
#define IW_QP_H

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "iw_priv.h"
#include "iw_log.h"
#include "iw_progress.h"
#include "iw_slab.h"
#include "iw_wire.h"

/* The QP lock is held by this thread (debug builds). */
#define IWE_QP_ASSERT_LOCKED(q) IWE_ASSERT_LOCKED(&(q)->lock)

struct iwe_llp_ops;

struct iwe_swqe {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t total;			/* bytes over all SGEs */
	uint32_t rkey;
	uint32_t inv_rkey;		/* Send with Invalidate */
	uint32_t num_sge;
	uint8_t opcode;			/* enum ibv_wr_opcode */
	uint8_t signaled;
	uint8_t fence;
	uint8_t solicited;
	uint8_t tx_done;		/* every segment / Read Request handed
					 * to the transport and done there */
	uint16_t rd_issued;		/* Read Requests sent (one per SGE) */
	uint16_t rd_pending;		/* of those, responses still due */
	uint16_t rd_done_reqs;		/* of those, done in the transport */
	struct iwe_sge_res *sg;		/* num_sge entries */
	/* IBV_WR_BIND_MW: reserved at post (iwe_mw_bind_reserve); done
	 * once executed or cancelled. */
	struct iwe_mw *bind_mw;
	struct iwe_mr *bind_mr;		/* NULL for an unbind */
	uint64_t bind_addr, bind_len;
	uint32_t bind_rkey;
	int bind_access;
	uint8_t bind_done;
};

struct iwe_rwqe {
	uint64_t wr_id;
	uint64_t total;
	uint32_t num_sge;
	struct iwe_sge_res *sg;
};

/* An RDMA Read Request we issued and whose response is still due. */
struct iwe_orq_ent {
	uint32_t wqe_idx;		/* SQ slot counter of the Read WR */
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t done;			/* response bytes placed */
	uint32_t src_stag;		/* for matching a Terminate */
	uint64_t src_to;
	uint8_t rtr;			/* the Read RTR: no WR behind it */
};

/* A Read Request we accepted and must answer. */
struct iwe_irq_ent {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	char *src;			/* validated source memory */
};

/* A Terminate (sent or received): the error, and the offending segment's
 * headers when known. */
struct iwe_term {
	uint8_t layer, etype, ecode;
	uint8_t has_hdr;		/* offending DDP header known */
	uint8_t has_rdmap;		/* ...and it was a Read Request */
	uint16_t seglen;		/* ULPDU length of the offender */
	uint8_t hdr[IW_UNTAGGED_HDR_LEN + sizeof(struct iw_read_req_body)];
	uint8_t hdr_len;		/* DDP header bytes in hdr */
};

/* Header bytes of the longest segment header: an untagged header and the
 * longest RDMAP body we act on (a Terminate's). */
#define IWE_SEG_HDR_MAX IW_TERM_MAX_ULPDU

/* ------------------------------------------------------------- TX */

enum iwe_tx_kind {
	IWE_TX_IDLE = 0,
	IWE_TX_SQ,			/* a Send / Write / Read Request */
	IWE_TX_READ_RESP,
	IWE_TX_TERMINATE,
	IWE_TX_RTR,			/* the initiator's zero-length RTR */
};

/* What to do when the transport is done with a segment. */
struct iwe_tx_tok {
	uint8_t kind;			/* enum iwe_tx_kind; IDLE: nothing */
	uint8_t last;			/* last segment of its message */
	uint32_t wqe_idx;		/* IWE_TX_SQ */
};

struct iwe_tx {
	/* The message being cut into segments. */
	int kind;
	uint32_t wqe_idx;		/* IWE_TX_SQ */
	uint8_t opcode;			/* enum iw_opcode */
	uint32_t stag;			/* tagged: sink STag */
	uint64_t to;			/* tagged: sink TO of byte 0 */
	uint32_t qn, msn, inv_stag;	/* untagged */
	uint64_t msg_len, msg_off;	/* payload bytes, bytes cut */
	uint32_t seg_len;		/* payload per segment: the message is
					 * cut into equal segments */
	uint8_t body[IWE_SEG_HDR_MAX];	/* RDMAP body after the DDP header
					 * (Read Request, Terminate) */
	uint8_t body_len;
	const struct iwe_sge_res *src;	/* payload gather list */
	uint32_t nsrc, src_idx, src_off;
	struct iwe_sge_res one_src;	/* single-buffer payloads */
	/* Segments handed to the transport and not done there yet. */
	struct iwe_tx_tok *tok;
	uint32_t tok_cap, tok_head, tok_count;
	/* Sequence numbers, per untagged queue (RFC 5041: start at 1). */
	uint32_t msn_send, msn_rreq;
	/* Pending Terminate; goes out at the next message boundary. */
	int term_pending, term_sent;
	/* The pending one (term_soft) or the one going out (term_cur_soft)
	 * is non-fatal (TRP): the connection goes on after it, and a fatal
	 * one queued while it waits takes its place. */
	int term_soft, term_cur_soft;
	struct iwe_term term;
	/* Initiator: IW_RTR_* still to send as the very first segment. */
	unsigned rtr_pending;
};

/* ------------------------------------------------------------- RX */

/* The segment being received, as RDMAP/DDP sees it. */
struct iwe_rx {
	uint16_t ctrl;
	uint8_t opcode;
	uint32_t ulpdu_len;
	uint8_t hdr[IWE_SEG_HDR_MAX];	/* DDP header + RDMAP body */
	uint32_t hdr_len;
	uint32_t payload_len;
	/* Where the payload goes: host ranges in order; none to drop it. */
	struct iovec place[IWE_MAX_SGE];
	int nplace;
	uint32_t inv_stag;		/* Send with Invalidate, this segment */
	struct iwe_mr_cache wr_stag;	/* the last RDMA Write target */
	int rtr_send;			/* this segment is the zero-length Send
					 * RTR: consumed without a receive */
	int not_ready;			/* no receive for this Send (yet) */
	struct iwe_irq_ent rreq;	/* Read Request, queued at its end */
	/* Untagged Send reassembly. */
	uint32_t msn_send;		/* MSN of the next/current Send */
	uint32_t msn_rreq;		/* MSN of the next Read Request */
	uint32_t send_mo;		/* bytes of the current Send so far */
	/* What went wrong, for the driver (iw_qp.c): */
	int term_out;			/* term: a Terminate to send */
	int bad_read_resp;		/* ...about our oldest Read */
	struct iwe_term term;
	int term_in;			/* term_rcvd: the peer terminated */
	struct iwe_term term_rcvd;
};

/* ------------------------------------------------------------ SRQ */

/* A QP waiting for a receive of its SRQ (the receiver-not-ready grace):
 * the SRQ calls resume, under its lock, once a receive is posted. */
struct iwe_srq_waiter {
	struct iwe_srq_waiter *next;
	int queued;			/* under the SRQ's lock */
	void (*resume)(struct iwe_srq_waiter *w);
};

/* Shared receive queue (iw_srq.c).  Its lock comes after a QP's lock and
 * before the CQ and device locks. */
struct iwe_srq_priv {
	struct iwe_srq pub;
	struct iwe_lock lock;
	struct iwe_rwqe *ring;		/* max_wr slots */
	struct iwe_sge_res *sge;	/* max_sge per slot */
	uint32_t max_wr, max_sge;
	uint32_t head, tail;		/* free-running; posted = tail - head */
	uint32_t limit;			/* armed limit, 0: disarmed */
	uint32_t users;			/* QPs attached */
	struct iwe_srq_waiter *waiters;	/* QPs waiting for a receive */
	iwe_event_handler handler;
};

static inline struct iwe_srq_priv *iwe_srq_priv(struct iwe_srq *srq)
{
	return IWE_CONTAINER_OF(srq, struct iwe_srq_priv, pub);
}

/* ------------------------------------------------------------- QP */

/* Events a QP call noticed under its lock, delivered after unlocking. */
#define IWE_QP_EV_LAST_WQE  0x1u
#define IWE_QP_EV_SRQ_LIMIT 0x2u
#define IWE_QP_EV_IDLE      0x4u

/* Receive hold (iwe_qp_attach_llp's opts): the CM delivers ESTABLISHED before any
 * completion of the connection can be seen. */
enum iwe_rx_hold {
	IWE_RX_OPEN = 0,
	IWE_RX_HOLD,			/* take nothing off the wire */
	IWE_RX_HOLD_AFTER_FIRST,	/* take the first segment (the RTR) */
};

struct iwe_qp_priv {
	struct iwe_qp pub;
	struct iwe_lock lock;
	/* SRQ: the receive taken for the Send being placed, copied out of
	 * the SRQ (which may be resized meanwhile). */
	struct iwe_srq_priv *srq;
	struct iwe_rwqe srq_cur;
	int srq_cur_valid;
	iwe_event_handler handler;
	unsigned ev_pending;		/* IWE_QP_EV_* */
	int state;			/* enum iwe_qp_state */
	int sq_sig_all;
	/* The transport, once attached. */
	int fd;				/* -1 while detached */
	const struct iwe_llp_ops *llp;
	void *llp_tx, *llp_rx;		/* the transport's state */
	int crc;
	uint32_t mulpdu, ird, ord;
	/* Send queue: slots [head, tail) in use; [head, tx) sent or being
	 * sent; counters are free-running, slot = counter % max_send_wr. */
	struct iwe_swqe *sq;
	struct iwe_sge_res *sq_sge;
	uint32_t sq_head, sq_tx, sq_tail;
	/* Receive queue: [head, tail). */
	struct iwe_rwqe *rq;
	struct iwe_sge_res *rq_sge;
	uint32_t rq_head, rq_tail;
	/* Outstanding Read Requests (ORD) and Read Responses owed (IRD):
	 * rings of a power of two >= ord and >= ird entries, allocated at
	 * attach, when the connection has settled both (an EP that never
	 * connects does not hold the 10 KiB the maxima would take). */
	struct iwe_orq_ent *orq;
	uint32_t orq_head, orq_tail, orq_mask;
	struct iwe_irq_ent *irq;
	uint32_t irq_head, irq_tail, irq_mask;
	struct iwe_tx tx;
	struct iwe_rx rx;
	struct iwe_term_info term_sent, term_rcvd;
	char log_addrs[IW_LOG_ADDRS_LEN];	/* "L->R" at attach, for the
						 * log (the peer may be gone
						 * when a Terminate is read) */
	struct iwe_qp_stats stats;
	int stream_err;			/* errno the progress calls report */
	int rx_dead;			/* the receive side gave up */
	int want_drain;			/* notify when TX goes idle */
	/* MPA roles (iwe_qp_attach_llp's opts). */
	int tx_gate;			/* responder: transmit nothing until
					 * the first segment has arrived */
	int first_rx;			/* the first segment has arrived */
	unsigned rtr_expect;		/* responder: the negotiated RTR */
	int rx_hold;			/* enum iwe_rx_hold */
	int rx_left;			/* input may wait behind the hold:
					 * its release reads */
	/* Attached by the connection manager: the QP watches its socket on
	 * the device's progress thread and tells the CM (notify) when the
	 * stream ends or the first segment arrives. */
	struct iwe_prog *prog;
	struct iwe_prog_watch watch;	/* EPOLLET; its interest changes
					 * under the QP lock, any thread */
	int placing;			/* counted in iwe_prog_note_placing:
					 * watched, its hold released */
	atomic_uint_fast64_t input_wakeups;	/* iwe_qp_stats' */
	uint64_t rx_reads;		/* reads of the socket that got data */
	uint64_t rx_data;		/* data packets or reads taken, not a
					 * transport's pure acks (the idle
					 * give-back's activity) */
	uint64_t rx_reads_prog;		/* ... when the progress thread last
					 * looked */
	void (*notify)(void *arg);
	void *notify_arg;
	atomic_int kick;		/* progress asked for while locked */
	void (*on_kick)(struct iwe_qp_priv *q);	/* runs it (iw_qp.c) */
	/* Posts of a burst not sent yet (iwe_qp_post_kick). */
	atomic_int tx_deferred;
	uint64_t tx_deferred_bytes;	/* their payload */
	uint64_t tx_last_ns;		/* the last post's time */
	int tx_last_small;		/* ... and it was a small one */
	uint32_t tx_burst;		/* posts in a row close together */
	struct iwe_prog_task defer_task;
	atomic_int rx_hup;		/* the peer closed (or the socket
					 * failed): read up to the end */
	/* Receiver not ready (iw_rx.c, rx_send): a Send arrived with no
	 * receive posted; its segment stays where the transport has it,
	 * and what follows behind it, until a receive is posted or the
	 * grace (rnr_grace_ns, 0: none, the RFC's Terminate) runs out. */
	uint64_t rnr_grace_ns;
	int rnr_wait;			/* waiting now */
	int rnr_expired;		/* the grace ran out: Terminate */
	int rnr_logged;			/* said once per connection */
	uint64_t rnr_deadline;		/* ns */
	struct iwe_prog_task rnr_task;	/* arms rnr_timer on the loop */
	struct iwe_prog_timer rnr_timer;
	struct iwe_srq_waiter srq_waiter;
	/* The QP's hooks on its CQs (iwe_cq_add_hook), and what they
	 * were last told (under the QP lock). */
	struct iwe_cq_hook send_hook, recv_hook;
	int hook_fd, hook_readable, hook_blocked;
	int spinners;			/* consumers spinning on its CQs */
	/* The idle give-back (iw_qp_idle.c), under the QP lock. */
	int idle_watched;		/* its timer is armed or about to be */
	uint64_t idle_seen;		/* activity at the last look */
	struct iwe_prog_task idle_task;	/* arms idle_timer on the loop */
	struct iwe_prog_timer idle_timer;
};

static inline struct iwe_qp_priv *iwe_qp_priv(struct iwe_qp *qp)
{
	return IWE_CONTAINER_OF(qp, struct iwe_qp_priv, pub);
}

/* op (iwe_cq_hook_want or _unwant) on the QP's hook in each of its CQs.
 * A QP without a progress thread is driven by its owner alone: no look
 * is ever owed to it. */
static inline void iwe_qp_hooks_op(struct iwe_qp_priv *q, int what,
				   void (*op)(struct iwe_cq *,
					      struct iwe_cq_hook *, int))
{
	struct iwe_qp *p = &q->pub;

	if (!q->prog)
		return;
	op(p->send_cq, &q->send_hook, what);
	if (p->recv_cq != p->send_cq)
		op(p->recv_cq, &q->recv_hook, what);
}

/* Have the consumer's next poll and/or arm of the QP's CQs
 * (IWE_CQ_WANT_*) look at the QP: what it holds waits for that look. */
static inline void iwe_qp_want_look(struct iwe_qp_priv *q, int what)
{
	iwe_qp_hooks_op(q, what, iwe_cq_hook_want);
}

/* What iwe_qp_want_look asked for was done (by whichever thread sent the
 * burst): the CQs' next poll and arm need not look. */
static inline void iwe_qp_unwant_look(struct iwe_qp_priv *q, int what)
{
	iwe_qp_hooks_op(q, what, iwe_cq_hook_unwant);
}

/* The QP's hook in its receive CQ: the send hook when one CQ serves both
 * (iw_qp.c adds one hook then). */
static inline struct iwe_cq_hook *iwe_qp_recv_hook(struct iwe_qp_priv *q)
{
	return q->pub.recv_cq == q->pub.send_cq ? &q->send_hook : &q->recv_hook;
}

static inline struct iwe_swqe *iwe_sq_slot(struct iwe_qp_priv *q,
					   uint32_t ctr)
{
	return &q->sq[ctr % q->pub.cap.max_send_wr];
}

static inline struct iwe_rwqe *iwe_rq_slot(struct iwe_qp_priv *q,
					   uint32_t ctr)
{
	return &q->rq[ctr % q->pub.cap.max_recv_wr];
}

static inline struct iwe_orq_ent *iwe_orq_slot(struct iwe_qp_priv *q,
					       uint32_t ctr)
{
	return &q->orq[ctr & q->orq_mask];
}

static inline struct iwe_irq_ent *iwe_irq_slot(struct iwe_qp_priv *q,
					       uint32_t ctr)
{
	return &q->irq[ctr & q->irq_mask];
}

/* ---- iw_qp.c: connection-manager attachment */

struct iwe_qp_cm_opts {
	int responder;			/* stay silent until the first segment */
	unsigned rtr;			/* IW_RTR_*: initiator sends it first;
					 * responder consumes it */
	int hold;			/* enum iwe_rx_hold until released */
	struct iwe_prog *prog;		/* watch the socket on this thread */
	struct iwe_prog_watch *from;	/* the CM's watch of the socket, if
					 * any: the QP's takes its place */
	void (*notify)(void *arg);	/* the stream ended, or the first
					 * segment arrived; any thread, under
					 * the QP lock: just post a task */
	void *notify_arg;
	/* The connection's addresses, known to the CM: the log's "L->R"
	 * without asking the socket again (NULL: ask it). */
	const struct sockaddr_in *local, *remote;
};

/* Progress thread: the CM delivered ESTABLISHED; take the stream. */
void iwe_qp_release_hold(struct iwe_qp *qp);
/* Progress thread: stop watching the socket and forget notify; after
 * return the QP calls notify no more. */
void iwe_qp_detach_cm(struct iwe_qp *qp);
/* The first segment from the peer has been received (responder's RTR). */
int iwe_qp_first_rx(struct iwe_qp *qp);
/* Nothing left that the transmit side could still send on its own. */
int iwe_qp_tx_drained(struct iwe_qp *qp);
/* Notify also when the transmit side goes idle (on: a graceful
 * disconnect, an RTR over TRP waiting for its acknowledgement), or no
 * longer (off). */
void iwe_qp_want_drain(struct iwe_qp *qp, int on);
/* What the connection manager looks at after a notify (taking the lock
 * also delivers the QP's pending asynchronous events). */
struct iwe_qp_io_status {
	int state;			/* enum iwe_qp_state */
	int stream_err;			/* why the stream ended, or 0 */
	int first_rx;
	int tx_drained;			/* as iwe_qp_tx_drained */
};
void iwe_qp_io_status(struct iwe_qp *qp, struct iwe_qp_io_status *st);

/* ---- iw_qp_lock.c: the QP lock and its kick */

void iwe_qp_lock(struct iwe_qp_priv *q);
int iwe_qp_trylock(struct iwe_qp_priv *q);	/* 1: locked */
/* Unlock; run the progress a kick asked for meanwhile (q->on_kick);
 * deliver the asynchronous events, or with keep_events leave them
 * pending and tell the connection manager (the caller may hold locks a
 * handler needs). */
void iwe_qp_release(struct iwe_qp_priv *q, int keep_events);
void iwe_qp_unlock(struct iwe_qp_priv *q);	/* iwe_qp_release(q, 0) */
void iwe_qp_lock_for_post(struct iwe_qp_priv *q);
/* Have the QP's progress run now, or by the holder of its lock. */
void iwe_qp_kick(struct iwe_qp_priv *q);

/* ---- iw_qp.c, for iw_post.c */

/* Transmit what was just posted, inline, unless the socket is full. */
void iwe_qp_post_kick(struct iwe_qp_priv *q, uint64_t bytes);
/* Receives were just posted: a Send waiting for one goes on now. */
void iwe_qp_recv_posted(struct iwe_qp_priv *q);
/* Move to ERROR, flush every outstanding WR; 'err' is what the progress
 * calls report from now on.  Idempotent. */
void iwe_qp_fail(struct iwe_qp_priv *q, int err);

/* ---- iw_qp_idle.c: the idle give-back (QP lock held) */

void iwe_qp_idle_init(struct iwe_qp_priv *q);
/* Something was allocated for traffic: give it back once idle. */
void iwe_qp_idle_hold(struct iwe_qp_priv *q);
/* Progress thread, the socket no longer watched: no more looks. */
void iwe_qp_idle_stop(struct iwe_qp_priv *q);

/* ---- iw_wq.c (all with q->lock held) */

/* A queue's slots, made at its first post (an EP that never sends, or
 * never receives, holds none) and given back when the QP is quiet or
 * goes: 0 or ENOMEM; free: none is outstanding. */
int iwe_wq_sq_make(struct iwe_qp_priv *q);
int iwe_wq_rq_make(struct iwe_qp_priv *q);
void iwe_wq_sq_free(struct iwe_qp_priv *q);
void iwe_wq_rq_free(struct iwe_qp_priv *q);

/* Complete, in order, the send WRs at the head that are finished. */
void iwe_wq_sq_retire(struct iwe_qp_priv *q);
/* Complete the head receive WR with byte_len bytes received. */
void iwe_wq_rq_complete(struct iwe_qp_priv *q, uint32_t byte_len,
			int solicited, uint32_t inv_stag);
/* The receive WR for a Send segment at message offset mo: the RQ's head,
 * or with an SRQ the one taken for this message (taken now when mo and
 * the message so far are 0).  NULL: none posted. */
const struct iwe_rwqe *iwe_wq_recv_wqe(struct iwe_qp_priv *q, uint32_t mo,
				       uint32_t msg_so_far);
/* A WR leaves the send queue with status (signaled rules apply to
 * successes). */
void iwe_wq_push_send_wc(struct iwe_qp_priv *q, struct iwe_swqe *w,
			 enum ibv_wc_status status);
/* Flush every outstanding WR (send, receive, ORD/IRD) with FLUSH_ERR. */
void iwe_wq_flush_sq(struct iwe_qp_priv *q);
void iwe_wq_flush_rq(struct iwe_qp_priv *q);
/* Discard the send queue silently (reset, destroy). */
void iwe_wq_drop_sq(struct iwe_qp_priv *q);
/* The peer's Terminate names a WR still outstanding, among the send
 * WRs before counter end: complete the SQ in order up to it (finished
 * ones succeed, the rest flush) and fail it with status.  Returns 1 if
 * one matched. */
int iwe_wq_fail_matching(struct iwe_qp_priv *q, const struct iwe_term *t,
			 enum ibv_wc_status status, uint32_t end);
/* Our oldest Read got a response that does not fit it: BAD_RESP_ERR. */
void iwe_wq_fail_oldest_read(struct iwe_qp_priv *q);

/* ---- iw_srq.c (QP lock held where a QP is involved) */

/* Take the oldest WR into *out (whose sg has max_sge entries).  Returns 0,
 * or ENOENT when the SRQ is empty.  *limit_hit: the armed limit fired. */
int iwe_srq_take(struct iwe_srq_priv *s, struct iwe_rwqe *out,
		 int *limit_hit);
/* Whether a receive is posted (a glance, without the lock). */
int iwe_srq_has_wr(struct iwe_srq_priv *s);
/* Be resumed at the next post (once); forget it (a QP that goes). */
void iwe_srq_wait(struct iwe_srq_priv *s, struct iwe_srq_waiter *w);
void iwe_srq_unwait(struct iwe_srq_priv *s, struct iwe_srq_waiter *w);
void iwe_srq_attach(struct iwe_srq_priv *s);
void iwe_srq_detach(struct iwe_srq_priv *s);
/* Call the SRQ's handler for IWE_EVENT_SRQ_LIMIT_REACHED (no lock). */
void iwe_srq_report_limit(struct iwe_srq_priv *s);

/* ---- iw_tx.c */

void iwe_tx_init(struct iwe_qp_priv *q);
/* The list of segments in the transport goes (a QP freed, or idle with
 * none in it: iw_qp_idle.c). */
static inline void iwe_tx_fini(struct iwe_qp_priv *q)
{
	iw_slab_free(q->tx.tok, q->tx.tok_cap * sizeof(*q->tx.tok));
	q->tx.tok = NULL;
	q->tx.tok_cap = 0;
}
/* Cut messages into segments and hand them to the transport while it has
 * room, write, act on the segments done.  0, EAGAIN (the socket is full:
 * watch for room), or the transport's errno. */
int iwe_tx_progress_locked(struct iwe_qp_priv *q);
/* Queue a Terminate; it goes out once the message in flight is done. */
void iwe_tx_queue_terminate(struct iwe_qp_priv *q, const struct iwe_term *t);
/* A non-fatal Terminate (TRP): queued unless one is already. */
void iwe_tx_queue_soft_terminate(struct iwe_qp_priv *q,
				 const struct iwe_term *t);
/* The WRs are about to be flushed: the transport stops reading their
 * memory, unsent messages are forgotten. */
void iwe_tx_detach_wrs(struct iwe_qp_priv *q);
/* A message is being cut, or segments wait in the transport (TRP: until
 * acknowledged). */
static inline int iwe_tx_busy(const struct iwe_qp_priv *q)
{
	return q->tx.kind != IWE_TX_IDLE || q->tx.tok_count != 0;
}

/* ---- iw_rx.c: the receive side of RDMAP/DDP, for the transports */

void iwe_rx_init(struct iwe_qp_priv *q);
/* Header bytes (DDP header and RDMAP body) a segment whose first two
 * ULPDU bytes are the control word ctrl and whose ULPDU is ulpdu_len
 * bytes needs before it can be placed; never more than ulpdu_len. */
uint32_t iwe_rx_hdr_need(uint16_t ctrl, uint32_t ulpdu_len);
/* The header of a segment of ulpdu_len bytes arrived (hdr_len bytes,
 * exactly iwe_rx_hdr_need).  Checks it and sets rx.place/nplace and
 * rx.payload_len.  0, or EPROTO with rx.term_out set. */
int iwe_rx_begin(struct iwe_qp_priv *q, const uint8_t *hdr,
		 uint32_t hdr_len, uint32_t ulpdu_len);
/* Place len payload bytes at payload offset off (ordered, iw_place.h).
 * 0, or EFAULT: the consumer unmapped the destination (iw_guard.h). */
int iwe_rx_place(struct iwe_qp_priv *q, uint32_t off, const void *src,
		 uint32_t len);
/* The destination is gone: a local catastrophic Terminate (EPROTO). */
int iwe_rx_local_error(struct iwe_qp_priv *q);
/* The whole segment arrived intact.  0, or EPROTO (rx.term_out: a
 * Terminate to send; rx.term_in: the peer's Terminate was received). */
int iwe_rx_end(struct iwe_qp_priv *q);
/* A segment whose ULPDU is too short for any DDP header. */
int iwe_rx_short_segment(struct iwe_qp_priv *q, const uint8_t *ulpdu,
			 uint32_t ulpdu_len);
/* iwe_rx_begin returns this for a Send that finds no receive posted
 * while the receiver-not-ready grace runs: the transport keeps the
 * segment, and everything behind it, for later (iwe_rx_may_take). */
#define IWE_RX_NOT_READY EAGAIN

/* The header checked by iwe_rx_begin before its segment is whole will be
 * checked again when it is: forget the error found now. */
void iwe_rx_forget_error(struct iwe_qp_priv *q);
/* The transport's own error (bad CRC...): a Terminate of layer LLP. */
int iwe_rx_llp_error(struct iwe_qp_priv *q, unsigned ecode);
/* Whether the transport may take the next segment off the wire now. */
static inline int iwe_rx_may_take(const struct iwe_qp_priv *q)
{
	return !q->rnr_wait &&
	       (q->rx_hold == IWE_RX_OPEN ||
		(q->rx_hold == IWE_RX_HOLD_AFTER_FIRST && !q->first_rx));
}

/* One entry per RDMAP opcode (RFC 5040 section 4; siw's iwarp_pktinfo
 * plays the same part).  Opcodes without rx_begin are refused. */
struct iwe_rdmap_op {
	const char *name;
	uint8_t tagged;			/* DDP tagged buffer model */
	uint8_t qn;			/* untagged: queue number */
	uint8_t body_len;		/* RDMAP body after the DDP header that
					 * the header stage needs (Read
					 * Request 28; Terminate: see rx) */
	uint8_t se;			/* Send with Solicited Event */
	uint8_t inv;			/* Send with Invalidate */
	void (*rx_begin)(struct iwe_qp_priv *q);
	void (*rx_end)(struct iwe_qp_priv *q);
};
extern const struct iwe_rdmap_op iwe_rdmap_ops[16];

/* The DDP header bytes for a segment (tagged or untagged, from the
 * opcode's entry). */
static inline unsigned iwe_rdmap_hdr_len(unsigned opcode)
{
	return iwe_rdmap_ops[opcode & 15].tagged ? IW_TAGGED_HDR_LEN
						: IW_UNTAGGED_HDR_LEN;
}

#endif
