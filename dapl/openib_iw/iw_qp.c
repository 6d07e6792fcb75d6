/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Queue pairs, the top floor (see iw_qp.h): the object, the verbs state
 * machine, the progress driver that runs the transport's receive side
 * and RDMAP/DDP transmit and turns their results into Terminates and
 * errors, and -- for a QP attached by the connection manager -- the watch
 * of its socket on the device's progress thread.
 *
 * Who drives a connected QP (doc/architecture.md, "The progress model"):
 *  - the progress thread, whenever the socket is readable (or writable
 *    while a segment waits for room): input is read and placed as soon
 *    as it arrives, whatever the consumer does.  It never blocks on the
 *    QP lock: it try-locks and, when a consumer holds it, leaves a kick
 *    that the holder runs before letting go (iwe_qp_unlock);
 *  - a consumer thread inside a call: a post transmits inline; a poll of
 *    an empty CQ, or a blocking wait's spin, reads the QP's input itself
 *    (the CQ's poll hook).  Nothing of it outlives the call.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "iw_env.h"
#include "iw_llp.h"
#include "iw_qp.h"
#include "iw_slab.h"
#include "iw_trp.h"

/* Posts closer together than this are a burst: past its first
 * QP_BURST_INLINE posts, which go at once, they are sent together
 * (one sendmsg) when the burst ends -- at QP_DEFER_MAX segments or
 * QP_DEFER_BYTES of payload, when the consumer polls or arms a CQ of the
 * QP, or when the progress thread, woken by the first post held, gets
 * to them, whichever comes first.  No timer: the burst waits for nothing
 * but a thread that is already on its way.  A post after a pause goes
 * out at once (a ping-pong never waits), and so does a bulk message (half
 * a held burst or more) and a small post right after a bulk one.  One
 * sendmsg per 64-byte Write cost a stream of them three quarters of its
 * rate on 2 CPUs (bench/run.sh, "64 B Write rate").  Only a post smaller
 * than QP_HOLD_BELOW is held: two of them fit in a held burst, which
 * then goes with the post that overflows it, so it saves at least two
 * sendmsg calls for the wake-up of the progress thread its first held
 * post may cost.  A stream of 32 KiB Writes, each held until the next,
 * ran 2.0-2.8 GB/s, sent at once 2.9-4.6 (40 KiB: 2.7-3.4 and 2.8-3.8);
 * of 24 KiB ones, held two at a time, it lost a tenth sent at once.  The
 * first posts go at once because the commonest pair -- an RDMA Write and
 * the Send that announces it (a rendezvous' FIN) -- is not a stream:
 * holding the Send cost it a wake-up of the progress thread, which on 2
 * CPUs took the CPU of the peer about to read it (the Write rendezvous
 * at 64 B-4 KiB: 104-133 us one way with the Send held, 40-46 without). */
#define QP_BURST_NS  (5u * 1000u)
#define QP_BURST_INLINE 2
#define QP_DEFER_MAX 16
#define QP_DEFER_BYTES (64u << 10)
#define QP_HOLD_BELOW (QP_DEFER_BYTES / 2)

/* How long a Send that came before any receive was posted waits for
 * one (IWDAPL_RNR_MS, read at each connection; default 5000, 0: the
 * RFC's Terminate at once): a consumer that posts its receives when it
 * sees ESTABLISHED -- as InfiniBand-era ones do, counting on the
 * adapter's receiver-not-ready retry -- does so within milliseconds, on
 * a loaded machine within a second or two; one that never posts learns
 * of it within seconds (doc/semantics.md). */
static uint64_t qp_rnr_grace_ns(void)
{
	return (uint64_t)iw_env_long("IWDAPL_RNR_MS", 5000, 0, 600000) *
	       1000000u;
}

static atomic_uint qp_num_next = 1;

/* ---------------------------------------------------- the CM's watch */

static void qp_notify(struct iwe_qp_priv *q)
{
	if (q->notify)
		q->notify(q->notify_arg);
}

/* What the progress thread watches the socket for: input always (a
 * receive hold or a failed QP leave it in the socket: it wakes the
 * thread once, edge-triggered, and the hold's release reads it), room
 * while a segment waits for it.  A failed QP over UDP stops: no window
 * bounds what the peer sends to a socket nobody reads, and each
 * datagram would be a wake-up. */
static uint32_t watch_interest(struct iwe_qp_priv *q)
{
	uint32_t ev = EPOLLET;

	/* A stream held for a receive (MPA) stays in the socket: only its
	 * end matters meanwhile.  TRP reads on (acks come that way too). */
	if (!(q->state == IWE_QPS_ERROR && q->llp == &iwe_llp_trp))
		ev |= EPOLLRDHUP |
		      (q->rnr_wait && q->llp != &iwe_llp_trp ? 0 : EPOLLIN);
	if (q->llp && q->llp->tx_blocked(q))
		ev |= EPOLLOUT;
	return ev;
}

/* The progress thread's share: a consumer spinning on the QP's CQ reads
 * the input itself (its spin drives the QP), so the thread is not woken
 * for it meanwhile; the spin's end gives it back (re-arming the watch
 * reports input that came since). */
static uint32_t thread_interest(struct iwe_qp_priv *q, uint32_t ev)
{
	return q->spinners ? ev & ~(uint32_t)EPOLLIN : ev;
}

/* Tell the CQs what a consumer's poll of them should look at (fd -1:
 * nothing, the socket is about to go).  A failed QP has nothing for a
 * poll; one whose stream waits for a receive reads nothing meanwhile. */
static void update_hooks(struct iwe_qp_priv *q, int fd, uint32_t ev)
{
	struct iwe_qp *p = &q->pub;
	int readable = fd >= 0 && (ev & EPOLLIN) &&
		       q->state != IWE_QPS_ERROR;
	int blocked = fd >= 0 && (ev & EPOLLOUT);

	if (fd != q->hook_fd || readable != q->hook_readable) {
		q->hook_fd = fd;
		q->hook_readable = readable;
		iwe_cq_hook_watch(p->send_cq, &q->send_hook, fd, readable);
		if (p->recv_cq != p->send_cq)
			iwe_cq_hook_watch(p->recv_cq, &q->recv_hook, fd,
					  readable);
	}
	if (blocked != q->hook_blocked) {
		q->hook_blocked = blocked;
		iwe_cq_hook_blocked(p->send_cq, &q->send_hook, blocked);
		if (p->recv_cq != p->send_cq)
			iwe_cq_hook_blocked(p->recv_cq, &q->recv_hook, blocked);
	}
}

/* Any thread, QP lock held: epoll_ctl is thread-safe and the watch's
 * bookkeeping is under the QP lock once registered. */
static void update_watch(struct iwe_qp_priv *q)
{
	uint32_t ev;

	if (!q->prog || q->watch.fd < 0)
		return;
	ev = watch_interest(q);
	if (iwe_prog_watch_mod(q->prog, &q->watch, thread_interest(q, ev)))
		abort();	/* EPOLL_CTL_MOD on a live fd: ENOMEM only */
	update_hooks(q, q->watch.fd, ev);
}

/* ------------------------------------------------------------ failing */

void iwe_qp_fail(struct iwe_qp_priv *q, int err)
{
	IWE_QP_ASSERT_LOCKED(q);
	if (!q->stream_err && err)
		q->stream_err = err;
	if (q->state == IWE_QPS_ERROR)
		return;
	q->state = IWE_QPS_ERROR;
	iwe_tx_detach_wrs(q);
	iwe_wq_flush_sq(q);
	iwe_wq_flush_rq(q);
	if (q->srq)
		q->ev_pending |= IWE_QP_EV_LAST_WQE;
	qp_notify(q);
}

/* The receive side failed: send the Terminate it asks for, or act on the
 * one it received, then fail the QP. */
static int rx_failed(struct iwe_qp_priv *q, int err)
{
	struct iwe_rx *r = &q->rx;

	/* Over TRP a user error of one request is not fatal (doc/trp.md). */
	if (q->llp == &iwe_llp_trp && iwe_trp_rx_failed(q))
		return 0;
	q->rx_dead = 1;
	if (r->term_in) {
		const struct iwe_term *t = &r->term_rcvd;
		int access = (t->layer == IW_TERM_LAYER_RDMAP &&
			      t->etype == IW_TERM_RDMAP_ETYPE_REMOTE_PROT) ||
			     (t->layer == IW_TERM_LAYER_DDP &&
			      t->etype == IW_TERM_DDP_ETYPE_TAGGED);
		/* The WR being cut into segments may be the one named. */
		uint32_t end = q->sq_tx + (q->tx.kind == IWE_TX_SQ);

		iwe_tx_detach_wrs(q);
		iwe_wq_fail_matching(q, t, access ? IBV_WC_REM_ACCESS_ERR :
					   IBV_WC_REM_OP_ERR, end);
		q->tx.term_sent = 1;	/* never answer a Terminate */
		err = EPROTO;
	} else if (r->term_out) {
		q->tx_gate = 0;		/* the peer did send: it may hear why */
		if (r->bad_read_resp) {
			iwe_tx_detach_wrs(q);
			iwe_wq_fail_oldest_read(q);
		}
		iwe_tx_queue_terminate(q, &r->term);
		err = EPROTO;
	}
	iwe_qp_fail(q, err);
	return err;
}

/* A Send waits for a receive (iw_rx.c, rx_not_ready): go on once one is
 * posted; past the grace, go on to the RFC's Terminate. */
static void rnr_check(struct iwe_qp_priv *q)
{
	if (!q->rnr_wait)
		return;
	if (q->srq ? iwe_srq_has_wr(q->srq) : q->rq_head != q->rq_tail) {
		q->rnr_wait = 0;
	} else if (iwe_now_ns() >= q->rnr_deadline) {
		q->rnr_wait = 0;
		q->rnr_expired = 1;
	}
	if (!q->rnr_wait && q->srq)
		iwe_srq_unwait(q->srq, &q->srq_waiter);
}

static int run_rx(struct iwe_qp_priv *q)
{
	int first = q->first_rx, err;

	if (q->fd < 0 || !q->llp || q->state == IWE_QPS_RESET)
		return 0;
	if (q->rx_dead || q->state == IWE_QPS_ERROR)
		return q->stream_err;
	rnr_check(q);
	err = q->llp->rx_progress(q);
	if (first != q->first_rx)
		qp_notify(q);
	return err ? rx_failed(q, err) : 0;
}

/* 0, or the stream's errno once it failed.  EAGAIN (the socket is full)
 * is not a failure: the watch waits for room. */
static int run_tx(struct iwe_qp_priv *q)
{
	int err, drained_before = !iwe_tx_busy(q);

	if (q->fd < 0 || !q->llp)
		return 0;
	/* A held burst goes now: no look is owed for it (over TRP an arm
	 * may still owe one for an ack held back, iw_trp_rx.c). */
	if (atomic_exchange(&q->tx_deferred, 0))
		iwe_qp_unwant_look(q, q->llp == &iwe_llp_trp ?
				      IWE_CQ_WANT_POLL :
				      IWE_CQ_WANT_POLL | IWE_CQ_WANT_ARM);
	q->tx_deferred_bytes = 0;
	err = iwe_tx_progress_locked(q);
	if (err == EFAULT) {
		/* The consumer unmapped memory a message was sent from. */
		struct iwe_term t = { .layer = IW_TERM_LAYER_RDMAP,
			.etype = IW_TERM_RDMAP_ETYPE_CATASTROPHIC };

		iwe_tx_queue_terminate(q, &t);
		iwe_qp_fail(q, err);
		iwe_tx_progress_locked(q);
	} else if (err && err != EAGAIN) {
		/* The peer reset the stream: a Terminate it sent first is
		 * in our receive queue and says why. */
		if (err == EPIPE || err == ECONNRESET)
			run_rx(q);
		iwe_qp_fail(q, err);
	}
	if (q->want_drain && !drained_before && !iwe_tx_busy(q))
		qp_notify(q);
	return q->state == IWE_QPS_ERROR ? q->stream_err : 0;
}

/* Receive, then send what that queued (Read Responses, a Terminate). */
static int run_io(struct iwe_qp_priv *q)
{
	int err = run_rx(q), terr;

	terr = run_tx(q);
	update_watch(q);
	return err ? err : terr;
}

/* What a kick asks for: run the QP's progress (iw_qp_lock.c calls it
 * through q->on_kick when the lock it left is taken back). */
static void qp_kicked(struct iwe_qp_priv *q)
{
	atomic_store(&q->kick, 0);
	run_io(q);
}

/* Progress thread: the socket is readable or writable. */
static void watch_cb(struct iwe_prog_watch *w, uint32_t revents)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(w, struct iwe_qp_priv, watch);
	uint64_t reads;
	int rtr;

	/* Edge-triggered: a FIN that came with data shows only here; the
	 * receive side then reads on to the end of the stream. */
	if (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		atomic_store(&q->rx_hup, 1);
	if (revents & EPOLLIN)
		atomic_fetch_add(&q->input_wakeups, 1);
	atomic_store(&q->kick, 1);
	if (!iwe_qp_trylock(q)) {
		/* A consumer's call holds the QP: it reads the input. */
		if (revents & EPOLLIN)
			iwe_prog_note_input(q->prog, 0);
		return;		/* the holder runs the kick */
	}
	if (!q->llp) {
		atomic_store(&q->kick, 0);
		iwe_qp_release(q, 0);
		return;
	}
	reads = q->rx_reads;
	rtr = q->rtr_expect && !q->first_rx;
	qp_kicked(q);
	/* Whether the input was still there for us, or a poller took it.
	 * An edge for input this thread read on an earlier wake-up (a
	 * message in several segments) says neither, and neither does the
	 * RTR: the connection's, not a consumer's message. */
	if ((revents & EPOLLIN) && !rtr) {
		if (q->rx_reads != reads)
			iwe_prog_note_input(q->prog, 1);
		else if (reads != q->rx_reads_prog)
			iwe_prog_note_input(q->prog, 0);
	}
	q->rx_reads_prog = q->rx_reads;
	iwe_qp_release(q, 0);
}

/* A consumer polled a CQ of this QP empty, or spins in a blocking wait:
 * drive the QP from its thread.  A QP busy on another thread is left to
 * it (the poll looks again; what the progress thread reads completes
 * into the CQ), unless the consumer would rather wait for it (wait: a
 * waiter that would sleep on this socket).  IWE_CQ_HOOK_* flags. */
static int poll_hook(struct iwe_qp_priv *q, int wait)
{
	uint64_t reads;

	if (!q->prog)
		return 0;
	iwe_prog_note_consumer(q->prog);
	if (wait)
		iwe_qp_lock(q);
	else if (!iwe_qp_trylock(q))
		return IWE_CQ_HOOK_BUSY;
	atomic_store(&q->kick, 0);
	reads = q->rx_reads;
	if (q->watch.fd >= 0)
		run_io(q);
	reads = q->rx_reads - reads;
	iwe_qp_release(q, 1);
	return reads ? IWE_CQ_HOOK_READ : 0;
}

/* A consumer armed a CQ of this QP and may sleep: what waited for its
 * next look goes now (a burst of posts; over TRP, an ack held for the
 * consumer's answer). */
static void arm_hook(struct iwe_qp_priv *q)
{
	if (!q->prog ||
	    (!atomic_load(&q->tx_deferred) && q->llp != &iwe_llp_trp))
		return;
	iwe_qp_lock(q);
	if (atomic_load(&q->tx_deferred))
		run_tx(q);
	if (q->llp && q->llp->rx_idle && q->fd >= 0)
		q->llp->rx_idle(q);
	update_watch(q);
	iwe_qp_release(q, 1);
}

/* Progress thread: a Send began to wait for a receive (time the grace:
 * the timer runs this again), or a receive came to the SRQ; have the QP
 * look. */
static void rnr_task(struct iwe_prog_task *t)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(t, struct iwe_qp_priv,
						 rnr_task);
	uint64_t now = iwe_now_ns(), end = q->rnr_deadline;

	if (!q->rnr_timer.slot && end > now)
		iwe_prog_timer_arm_ns(q->prog, &q->rnr_timer, end - now);
	atomic_store(&q->kick, 1);
	if (!iwe_qp_trylock(q))
		return;		/* the holder runs the kick */
	qp_kicked(q);
	iwe_qp_release(q, 0);
}

static void rnr_timer_cb(struct iwe_prog_timer *t)
{
	rnr_task(&IWE_CONTAINER_OF(t, struct iwe_qp_priv, rnr_timer)->rnr_task);
}

/* The SRQ got a receive (under its lock: ask, do not take the QP's). */
static void rnr_srq_resume(struct iwe_srq_waiter *w)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(w, struct iwe_qp_priv,
						 srq_waiter);

	iwe_prog_post(q->prog, &q->rnr_task);
}

/* Progress thread: the safety net of a burst of posts -- it goes now,
 * unless the consumer's poll, arm or a full burst sent it already. */
static void defer_task(struct iwe_prog_task *t)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(t, struct iwe_qp_priv,
						 defer_task);

	if (!atomic_load(&q->tx_deferred))
		return;
	atomic_store(&q->kick, 1);
	if (!iwe_qp_trylock(q))
		return;		/* the holder runs the kick */
	qp_kicked(q);
	iwe_qp_release(q, 0);
}

static int send_poll_hook(struct iwe_cq_hook *h, int wait)
{
	return poll_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, send_hook),
			 wait);
}

static int recv_poll_hook(struct iwe_cq_hook *h, int wait)
{
	return poll_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, recv_hook),
			 wait);
}

/* A consumer spins on a CQ of this QP (iwe_cq_spin): the progress
 * thread's watch leaves the input to it until it stops. */
static void spin_hook(struct iwe_qp_priv *q, int on)
{
	iwe_qp_lock(q);
	q->spinners += on ? 1 : -1;
	update_watch(q);
	iwe_qp_release(q, 1);
}

static void send_spin_hook(struct iwe_cq_hook *h, int on)
{
	spin_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, send_hook), on);
}

static void recv_spin_hook(struct iwe_cq_hook *h, int on)
{
	spin_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, recv_hook), on);
}

static void send_arm_hook(struct iwe_cq_hook *h)
{
	arm_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, send_hook));
}

static void recv_arm_hook(struct iwe_cq_hook *h)
{
	arm_hook(IWE_CONTAINER_OF(h, struct iwe_qp_priv, recv_hook));
}

/* ------------------------------------------------------------ create */

/* max_qp per device, as iwe_device_query reports. */
static int qp_reserve(struct iwe_device *dev)
{
	int ok;

	iwe_lock(&dev->lock);
	ok = dev->nqp < dev->attr.max_qp;
	if (ok)
		dev->nqp++;
	iwe_unlock(&dev->lock);
	return ok;
}

/* The device's last QP gone, its spare transmit batches go too (each
 * keeps its CRC staging, 64 KiB to 1 MiB): a process that closed its
 * connections holds nothing for them. */
static void qp_unreserve(struct iwe_device *dev)
{
	int last;

	iwe_lock(&dev->lock);
	last = --dev->nqp == 0;
	iwe_unlock(&dev->lock);
	if (last)
		iwe_mpa_tx_spares_free(dev);
}

/* With an SRQ the receive caps are ignored (verbs). */
static int caps_valid(const struct iwe_qp_cap *c, int srq)
{
	return c->max_send_wr >= 1 && c->max_send_wr <= IWE_MAX_QP_WR &&
	       (srq || (c->max_recv_wr >= 1 &&
			c->max_recv_wr <= IWE_MAX_QP_WR &&
			c->max_recv_sge <= IWE_MAX_SGE)) &&
	       c->max_send_sge <= IWE_MAX_SGE;
}

/* The send and receive queues are allocated at their first post
 * (iw_post.c): a connection that never posts holds none. */
static int qp_alloc_queues(struct iwe_qp_priv *q)
{
	size_t cs = q->srq ? q->srq->max_sge : 1;

	q->srq_cur.sg = calloc(cs, sizeof(*q->srq_cur.sg));
	return q->srq_cur.sg ? 0 : ENOMEM;
}

/* The Read rings are sized by the ORD and IRD a connection settled. */
static void free_read_rings(struct iwe_qp_priv *q)
{
	if (q->orq)
		iw_slab_free(q->orq, (q->orq_mask + 1) * sizeof(*q->orq));
	if (q->irq)
		iw_slab_free(q->irq, (q->irq_mask + 1) * sizeof(*q->irq));
	q->orq = NULL;
	q->irq = NULL;
}

static void qp_free(struct iwe_qp_priv *q)
{
	iwe_tx_fini(q);
	iwe_wq_sq_free(q);
	iwe_wq_rq_free(q);
	free_read_rings(q);
	free(q->srq_cur.sg);
	iw_slab_free(q, sizeof(*q));
}

struct iwe_qp *iwe_create_qp(struct iwe_pd *pd,
			     const struct iwe_qp_init_attr *attr)
{
	struct iwe_qp_priv *q;

	if (!pd || !attr || !attr->send_cq || !attr->recv_cq ||
	    !caps_valid(&attr->cap, attr->srq != NULL) ||
	    (attr->srq && attr->srq->pd != pd)) {
		errno = EINVAL;
		return NULL;
	}
	if (!qp_reserve(pd->dev)) {
		errno = ENOMEM;
		return NULL;
	}
	q = iw_slab_zalloc(sizeof(*q));
	if (!q) {
		qp_unreserve(pd->dev);
		errno = ENOMEM;
		return NULL;
	}
	q->pub = (struct iwe_qp){ .pd = pd, .send_cq = attr->send_cq,
				  .recv_cq = attr->recv_cq,
				  .qp_context = attr->qp_context,
				  .cap = attr->cap };
	q->handler = attr->event_handler;
	if (attr->srq) {
		q->srq = iwe_srq_priv(attr->srq);
		/* Receives are the SRQ's: report what it provides. */
		q->pub.cap.max_recv_wr = 0;
		q->pub.cap.max_recv_sge = q->srq->max_sge;
	}
	if (qp_alloc_queues(q)) {
		qp_free(q);
		qp_unreserve(pd->dev);
		errno = ENOMEM;
		return NULL;
	}
	q->pub.qp_num = atomic_fetch_add(&qp_num_next, 1);
	q->sq_sig_all = !!attr->sq_sig_all;
	q->fd = -1;
	q->on_kick = qp_kicked;
	q->watch.fd = -1;
	q->watch.cb = watch_cb;
	q->defer_task.fn = defer_task;
	q->rnr_task.fn = rnr_task;
	q->rnr_timer.cb = rnr_timer_cb;
	q->srq_waiter.resume = rnr_srq_resume;
	iwe_qp_idle_init(q);
	q->send_hook = IWE_CQ_HOOK_INIT(send_poll_hook, send_arm_hook,
					 send_spin_hook);
	q->recv_hook = IWE_CQ_HOOK_INIT(recv_poll_hook, recv_arm_hook,
					 recv_spin_hook);
	q->hook_fd = -1;
	q->state = IWE_QPS_RESET;
	iwe_lock_init(&q->lock);
	iwe_tx_init(q);
	iwe_rx_init(q);
	iwe_pd_get(pd);
	iwe_cq_get(attr->send_cq);
	iwe_cq_get(attr->recv_cq);
	/* One hook when both queues complete on one CQ (one DAT EVD for
	 * requests and receives, as dtest, iwdtest and MPI libraries use):
	 * with two, each empty poll drove the QP twice, and the second
	 * drive's recv (EAGAIN) stood between an arrival and its
	 * completion -- 450 ns of an 8-byte ping-pong's one-way time. */
	iwe_cq_add_hook(attr->send_cq, &q->send_hook);
	if (attr->recv_cq != attr->send_cq)
		iwe_cq_add_hook(attr->recv_cq, &q->recv_hook);
	if (q->srq)
		iwe_srq_attach(q->srq);
	return &q->pub;
}

/* Progress thread: stop watching the socket. */
static void unwatch(void *arg)
{
	struct iwe_qp_priv *q = arg;

	iwe_qp_lock(q);
	update_hooks(q, -1, 0);
	if (q->placing)
		iwe_prog_note_placing(q->prog, 0);
	q->placing = 0;
	iwe_prog_watch_del(q->prog, &q->watch);
	iwe_prog_unpost(q->prog, &q->defer_task);
	iwe_prog_unpost(q->prog, &q->rnr_task);
	iwe_prog_timer_cancel(q->prog, &q->rnr_timer);
	iwe_qp_idle_stop(q);
	q->notify = NULL;
	q->notify_arg = NULL;
	iwe_qp_unlock(q);
}

static void transport_detach(struct iwe_qp_priv *q)
{
	if (q->llp)
		q->llp->detach(q);
	q->llp = NULL;
}

int iwe_destroy_qp(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	/* First off the CQs (waits for a poller in the hooks). */
	iwe_cq_del_hook(qp->send_cq, &q->send_hook);
	iwe_cq_del_hook(qp->recv_cq, &q->recv_hook);
	/* Off the SRQ's waiters before unwatch drops the task it posts. */
	if (q->srq)
		iwe_srq_unwait(q->srq, &q->srq_waiter);
	if (q->prog)
		iwe_prog_call(q->prog, unwatch, q);
	/* Nobody else can reach the QP now; the lock keeps the checks of
	 * the lower floors true. */
	iwe_qp_lock(q);
	iwe_wq_drop_sq(q);
	transport_detach(q);
	iwe_unlock(&q->lock);
	if (q->srq)
		iwe_srq_detach(q->srq);
	iwe_cq_put(qp->send_cq);
	iwe_cq_put(qp->recv_cq);
	qp_unreserve(qp->pd->dev);
	iwe_pd_put(qp->pd);
	pthread_mutex_destroy(&q->lock.m);
	qp_free(q);
	return 0;
}

/* ---------------------------------------------------- state machine */

static int transition_ok(int from, int to)
{
	if (to == IWE_QPS_ERROR || to == IWE_QPS_RESET)
		return 1;
	switch (from) {
	case IWE_QPS_RESET:
		return to == IWE_QPS_INIT;
	case IWE_QPS_INIT:
		return to == IWE_QPS_INIT || to == IWE_QPS_RTR;
	case IWE_QPS_RTR:
		return to == IWE_QPS_RTS;
	case IWE_QPS_RTS:
	case IWE_QPS_SQD:
		return to == IWE_QPS_RTS || to == IWE_QPS_SQD;
	default:
		return 0;
	}
}

/* Back to a fresh QP: queues emptied without completions, stream gone.
 * A socket still watched stays watched until iwe_qp_detach_cm. */
static void qp_reset(struct iwe_qp_priv *q)
{
	iwe_tx_detach_wrs(q);
	iwe_wq_drop_sq(q);
	q->srq_cur_valid = 0;	/* discarded, as the RQ's WRs are */
	q->sq_head = q->sq_tx = q->sq_tail = 0;
	q->rq_head = q->rq_tail = 0;
	q->orq_head = q->orq_tail = q->irq_head = q->irq_tail = 0;
	transport_detach(q);
	q->fd = -1;
	q->stream_err = 0;
	q->rx_dead = 0;
	q->tx_gate = q->first_rx = 0;
	q->rtr_expect = 0;
	q->rx_hold = IWE_RX_OPEN;
	q->want_drain = 0;
	if (q->srq)
		iwe_srq_unwait(q->srq, &q->srq_waiter);
	q->rnr_wait = q->rnr_expired = q->rnr_logged = 0;
	memset(&q->term_sent, 0, sizeof(q->term_sent));
	memset(&q->term_rcvd, 0, sizeof(q->term_rcvd));
	iwe_tx_init(q);
	iwe_rx_init(q);
	q->state = IWE_QPS_RESET;
}

int iwe_modify_qp(struct iwe_qp *qp, enum iwe_qp_state state)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	iwe_qp_lock(q);
	if (!transition_ok(q->state, (int)state))
		err = EINVAL;
	else if (state == IWE_QPS_ERROR)
		iwe_qp_fail(q, 0);	/* the consumer asked: no stream error */
	else if (state == IWE_QPS_RESET)
		qp_reset(q);
	else
		q->state = (int)state;
	/* Leaving SQD may release queued sends. */
	if (!err && state == IWE_QPS_RTS)
		run_tx(q);
	update_watch(q);
	iwe_qp_unlock(q);
	return err;
}

enum iwe_qp_state iwe_qp_get_state(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int s;

	iwe_qp_lock(q);
	s = q->state;
	iwe_qp_unlock(q);
	return (enum iwe_qp_state)s;
}

/* ------------------------------------------------------------ posting */

void iwe_qp_recv_posted(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	if (!q->rnr_wait)
		return;
	run_io(q);
	update_watch(q);
}

void iwe_qp_post_kick(struct iwe_qp_priv *q, uint64_t bytes)
{
	if (q->prog)
		iwe_prog_note_consumer(q->prog);
	if (q->state != IWE_QPS_RTS || q->fd < 0 || !q->llp ||
	    q->llp->tx_blocked(q))
		return;		/* the watch resumes once there is room */
	/* The gap since the last post (or flush) returned is the
	 * consumer's own time between posts. */
	int close = q->tx_last_small &&
		    iwe_now_ns() - q->tx_last_ns < QP_BURST_NS;

	q->tx_burst = close ? q->tx_burst + 1 : 0;
	if (q->prog && q->tx_burst >= QP_BURST_INLINE && bytes < QP_HOLD_BELOW &&
	    atomic_load(&q->tx_deferred) < QP_DEFER_MAX &&
	    q->tx_deferred_bytes + bytes < QP_DEFER_BYTES) {
		q->tx_deferred_bytes += bytes;
		if (atomic_fetch_add(&q->tx_deferred, 1) == 0) {
			iwe_prog_post(q->prog, &q->defer_task);
			iwe_qp_want_look(q, IWE_CQ_WANT_POLL |
					    IWE_CQ_WANT_ARM);
		}
	} else {
		run_tx(q);
		update_watch(q);
	}
	q->tx_last_small = bytes < QP_HOLD_BELOW;
	q->tx_last_ns = iwe_now_ns();
}

/* ------------------------------------------------------------ stream */

static int stream_params_valid(const struct iwe_stream_params *p)
{
	if (p->mulpdu && (p->mulpdu < IWE_MIN_MULPDU ||
			  p->mulpdu > IW_FPDU_MAX_ULPDU))
		return 0;
	return p->ird <= IWE_MAX_IRD && p->ord <= IWE_MAX_ORD &&
	       (p->mpa_rev == 1 || p->mpa_rev == 2);
}

int iwe_qp_attach_stream(struct iwe_qp *qp, int fd,
			 const struct iwe_stream_params *p)
{
	return iwe_qp_attach_llp(qp, fd, p, NULL, NULL, NULL);
}

static void apply_cm_opts(struct iwe_qp_priv *q, const struct iwe_qp_cm_opts *o)
{
	if (o->responder) {
		/* MPA: only the initiator may send the first FPDU. */
		q->tx_gate = 1;
		q->rtr_expect = o->rtr;
	} else {
		q->tx.rtr_pending = o->rtr;
	}
	q->rx_hold = o->hold;
	q->notify = o->notify;
	/* The grace needs the progress thread's timer. */
	q->rnr_grace_ns = o->prog ? qp_rnr_grace_ns() : 0;
	q->notify_arg = o->notify_arg;
	q->prog = o->prog;
}

/* The transport a QP of this device runs over by default. */
static const struct iwe_llp_ops *device_llp(const struct iwe_qp_priv *q)
{
	return q->pub.pd->dev->attr.transport == IWE_TRANSPORT_UDP ?
	       &iwe_llp_trp : &iwe_llp_mpa;
}

static int llp_attach(struct iwe_qp_priv *q, const struct iwe_llp_ops *llp,
		      const void *start)
{
	int err;

	q->llp = llp;
	err = start && llp->attach_with ? llp->attach_with(q, start)
					: llp->attach(q);
	if (err)
		q->llp = NULL;
	return err;
}

/* The QP's watch of fd: the CM's registration taken over when it has
 * one (its place in epoll's ready list kept), else a new one.  0 or
 * errno. */
static int watch_socket(struct iwe_qp_priv *q, int fd,
			const struct iwe_qp_cm_opts *o)
{
	const uint32_t ev = EPOLLET | EPOLLIN | EPOLLRDHUP;

	if (o->from && o->from->fd == fd)
		return iwe_prog_watch_move(o->prog, o->from, &q->watch, ev);
	return iwe_prog_watch_add(o->prog, &q->watch, fd, ev);
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t c = 1;

	while (c < n)
		c <<= 1;
	return c;
}

/* The Read rings for the ORD and IRD the connection settled (at least
 * one entry each: the Read RTR takes an ORQ entry).  Empty at attach: a
 * fresh QP's counters are 0, and qp_reset zeroes them.  0 or ENOMEM. */
static int alloc_read_rings(struct iwe_qp_priv *q)
{
	uint32_t oc = pow2_at_least(q->ord), ic = pow2_at_least(q->ird);
	struct iwe_orq_ent *o = iw_slab_zalloc(oc * sizeof(*o));
	struct iwe_irq_ent *i = iw_slab_zalloc(ic * sizeof(*i));

	if (!o || !i) {
		iw_slab_free(o, oc * sizeof(*o));
		iw_slab_free(i, ic * sizeof(*i));
		return ENOMEM;
	}
	free_read_rings(q);
	q->orq = o;
	q->irq = i;
	q->orq_mask = oc - 1;
	q->irq_mask = ic - 1;
	return 0;
}

/* Progress thread only when o->prog is set. */
static int attach_locked(struct iwe_qp_priv *q, int fd,
			 const struct iwe_stream_params *p,
			 const struct iwe_qp_cm_opts *o,
			 const struct iwe_llp_ops *llp, const void *start)
{
	IWE_QP_ASSERT_LOCKED(q);
	/* An MPA initiator's first FPDU (the RTR) goes before the watch's
	 * epoll_ctl: the responder's ESTABLISHED waits for it, and nothing
	 * the responder sends can come before it. */
	int rtr_first = o && o->prog && !o->responder &&
			(llp ? llp : device_llp(q)) == &iwe_llp_mpa;
	int err, watched;

	if ((q->state != IWE_QPS_INIT && q->state != IWE_QPS_RTR) ||
	    q->fd >= 0)
		return EINVAL;
	q->crc = !!p->crc;
	q->mulpdu = p->mulpdu ? p->mulpdu : IWE_DEFAULT_MULPDU;
	q->ird = p->ird ? p->ird : 1;
	q->ord = p->ord ? p->ord : 1;
	if (alloc_read_rings(q))
		return ENOMEM;
	q->fd = fd;		/* TRP may send at attach (the reply) */
	if (o && o->local && o->remote)
		iw_log_addrs(o->local, o->remote, q->log_addrs,
			     sizeof(q->log_addrs));
	else
		iw_log_sock_addrs(fd, q->log_addrs, sizeof(q->log_addrs));
	/* Watched before the transport sends anything (TRP's accept reply
	 * goes at attach; an MPA initiator's RTR, above, is the one thing
	 * sent first): the peer's answer then makes the socket ready
	 * in arrival order, ahead of what the peer did after it on other
	 * connections.  Registered later, a socket whose RTR was already
	 * in was queued behind the end of a connection the peer closed
	 * after that RTR, and ESTABLISHED came after that DISCONNECTED
	 * (dtestcm's server counts on the order). */
	watched = o && o->prog && !rtr_first && !watch_socket(q, fd, o);
	err = llp_attach(q, llp ? llp : device_llp(q), start);
	if (err) {
		if (watched)
			iwe_prog_watch_del(o->prog, &q->watch);
		q->fd = -1;
		return err;
	}
	q->state = IWE_QPS_RTS;
	if (o)
		apply_cm_opts(q, o);
	if (rtr_first) {
		run_tx(q);	/* not watched yet: update_watch waits */
		watched = !watch_socket(q, fd, o);
	}
	/* A socket an MPA stream took under the watch has its bytes
	 * reported by that ADD or MOD (edge-triggered, it tells what is
	 * already there): the hold's release needs to read only what a read
	 * during the hold left (iw_mpa_rx.c), or what came with the MPA
	 * frame (start).  Else it reads, to be sure. */
	q->rx_left = !watched || q->llp != &iwe_llp_mpa || start;
	if (q->prog && !watched) {
		q->prog = NULL;
		q->notify = NULL;
	}
	/* Receives and sends may have been posted before; the initiator's
	 * RTR goes first. */
	run_tx(q);
	update_watch(q);
	iwe_qp_idle_hold(q);
	return 0;
}

int iwe_qp_attach_llp(struct iwe_qp *qp, int fd,
		      const struct iwe_stream_params *p,
		      const struct iwe_qp_cm_opts *o,
		      const struct iwe_llp_ops *llp, const void *start)
{
	struct iwe_qp_priv *q;
	int err;

	if (!qp || fd < 0 || !p || !stream_params_valid(p) ||
	    (o && (o->rtr & ~7u)))
		return EINVAL;
	q = iwe_qp_priv(qp);
	iwe_qp_lock(q);
	err = attach_locked(q, fd, p, o, llp, start);
	iwe_qp_unlock(q);
	return err;
}

void iwe_qp_release_hold(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	iwe_qp_lock(q);
	if (q->prog && q->watch.fd >= 0 && !q->placing) {
		/* The thread places its input from now on. */
		q->placing = 1;
		iwe_prog_note_placing(q->prog, 1);
	}
	if (q->rx_hold != IWE_RX_OPEN) {
		q->rx_hold = IWE_RX_OPEN;
		/* Nothing left behind: no recv that could only say EAGAIN
		 * (two a connection's setup, one on each side). */
		if (q->rx_left) {
			run_io(q);
		} else {
			run_tx(q);
			update_watch(q);
		}
	}
	iwe_qp_unlock(q);
}

void iwe_qp_detach_cm(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	if (q->prog)
		unwatch(q);
}

void iwe_qp_want_drain(struct iwe_qp *qp, int on)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	iwe_qp_lock(q);
	q->want_drain = !!on;
	if (on && !iwe_tx_busy(q))
		qp_notify(q);
	iwe_qp_unlock(q);
}

void iwe_qp_io_status(struct iwe_qp *qp, struct iwe_qp_io_status *st)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	iwe_qp_lock(q);
	st->state = q->state;
	st->stream_err = q->stream_err;
	st->first_rx = q->first_rx;
	if (q->fd < 0 || q->state == IWE_QPS_ERROR)
		st->tx_drained = !q->llp || !q->llp->tx_blocked(q);
	else
		st->tx_drained = !iwe_tx_busy(q) && !q->tx.rtr_pending &&
				 !q->tx.term_pending && q->sq_tx == q->sq_tail &&
				 q->irq_head == q->irq_tail;
	iwe_qp_unlock(q);
}

int iwe_qp_first_rx(struct iwe_qp *qp)
{
	struct iwe_qp_io_status st;

	iwe_qp_io_status(qp, &st);
	return st.first_rx;
}

int iwe_qp_tx_drained(struct iwe_qp *qp)
{
	struct iwe_qp_io_status st;

	iwe_qp_io_status(qp, &st);
	return st.tx_drained;
}

static int tx_step_locked(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	int err = run_tx(q);

	update_watch(q);
	return err;
}

static int rx_step_locked(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	return q->fd >= 0 ? run_io(q) : 0;
}

/* One step of the driver, for a caller that drives the QP itself. */
static int drive_step(struct iwe_qp *qp,
		      int (*step_locked)(struct iwe_qp_priv *))
{
	struct iwe_qp_priv *q;
	int err;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	iwe_qp_lock(q);
	err = step_locked(q);
	iwe_qp_unlock(q);
	return err;
}

int iwe_qp_progress_tx(struct iwe_qp *qp)
{
	return drive_step(qp, tx_step_locked);
}

int iwe_qp_progress_rx(struct iwe_qp *qp)
{
	return drive_step(qp, rx_step_locked);
}

void iwe_qp_terminate_info(struct iwe_qp *qp, struct iwe_term_info *sent,
			   struct iwe_term_info *rcvd)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	iwe_qp_lock(q);
	if (sent)
		*sent = q->term_sent;
	if (rcvd)
		*rcvd = q->term_rcvd;
	iwe_qp_unlock(q);
}

void iwe_qp_query_stats(struct iwe_qp *qp, struct iwe_qp_stats *st)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	iwe_qp_lock(q);
	*st = q->stats;
	st->input_wakeups = atomic_load(&q->input_wakeups);
	iwe_qp_unlock(q);
}

uint32_t iwe_qp_srq_held(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	uint32_t n;

	iwe_qp_lock(q);
	n = (uint32_t)q->srq_cur_valid;
	iwe_qp_unlock(q);
	return n;
}
