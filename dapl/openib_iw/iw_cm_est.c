/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager's established connections.  After the MPA
 * exchange the QP takes the stream (iwe_qp_attach_llp): from then on the
 * QP watches the socket itself and the CM is out of the data path; the QP
 * notifies the CM (a task on the progress thread) when the first segment
 * arrives, when the stream ends, and when its transmit side drains
 * during a graceful disconnect.  Each handler returns the state to enter
 * (iw_cm_priv.h).
 *
 * The consumer sees ESTABLISHED before any completion of the connection:
 * the QP is attached with its receive side held (responder with RTR:
 * held after the RTR), and the hold is released only after ESTABLISHED
 * was delivered (iw_cm.c), so a Send that arrives right behind the RTR or
 * the MPA reply completes after the event, whatever the threads do.
 *
 * Ends: the peer's close between segments (TCP: its FIN between FPDUs
 * or its reset, an abrupt disconnect; TRP: its F), or any end after we
 * started a graceful disconnect -> DISCONNECTED; a Terminate, a TCP
 * stream cut inside an FPDU, TRP's retransmission limit or a timeout ->
 * BROKEN.
 *
 * Both transports (MPA over TCP, TRP over UDP) share this logic; what
 * differs is behind struct est_transport: how the QP is attached, how
 * our side closes (TCP: a FIN; TRP: a sequenced F), and how it gives up
 * at once (TCP: a reset; TRP has none and sends its F).
 */
#include <errno.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"
#include "iw_qp.h"
#include "iw_trp.h"

/* What an established connection leaves to its transport. */
struct est_transport {
	/* Attach c->qp with the parameters common to both: 0 or errno. */
	int (*attach)(struct iwe_conn *c, struct iwe_stream_params *sp,
		      const struct iwe_qp_cm_opts *o, int responder);
	/* Our orderly close, behind what was queued. */
	void (*close)(struct iwe_conn *c);
	/* Give up at once. */
	void (*abandon)(struct iwe_conn *c);
	/* The wire has a reset (TCP): the peer's is its abrupt close
	 * (RFC 5040 abortive close, as iWARP stacks report it), and a
	 * broken stream is reset in turn. */
	int has_reset;
	const char *broken;	/* the reason of an end of no known cause */
};

static int tcp_attach(struct iwe_conn *c, struct iwe_stream_params *sp,
		      const struct iwe_qp_cm_opts *o, int responder)
{
	/* Bytes read with the MPA frame, behind it: the QP's first. */
	struct iwe_mpa_start st = {
		.early = c->in + c->in_frame,
		.len = (uint32_t)(c->in_len - c->in_frame),
	};
	int err;

	(void)responder;
	sp->crc = c->neg.crc;
	err = iwe_qp_attach_llp(c->qp, c->fd, sp, o, &iwe_llp_mpa,
				st.len ? &st : NULL);
	/* The peer timeout: our connected socket's once the RTR is out
	 * (four system calls, not in the RTR's way); an accepted socket
	 * came with it from the listener (port_socket), an adopted (SSP)
	 * one is the consumer's own. */
	if (!err && c->active && !c->adopted)
		cm_set_peer_timeout(c->fd);
	return err;
}

static void tcp_close(struct iwe_conn *c)
{
	shutdown(c->fd, SHUT_WR);
}

static void tcp_abandon(struct iwe_conn *c)
{
	cm_reset_socket(c->fd);
}

static const struct est_transport tcp_transport = {
	.attach = tcp_attach,
	.close = tcp_close,
	.abandon = tcp_abandon,
	.has_reset = 1,
	.broken = "stream broken",
};

/* The QP starts from what the exchange agreed on (iw_cm_trp.c): PSNs,
 * the peer's credits; the responder's sends the accept reply as its
 * first packet. */
static int trp_attach(struct iwe_conn *c, struct iwe_stream_params *sp,
		      const struct iwe_qp_cm_opts *o, int responder)
{
	struct iwe_trp_start st = {
		.tx_psn = responder ? c->trp_isn : c->trp_isn + 1,
		.rx_psn = c->trp_peer_isn + 1,
		.peer_credits = c->trp_peer_credits,
		.first = responder ? c->out : NULL,
		.first_len = responder ? c->out_len : 0,
		.ack_now = !responder,
	};
	int err = iwe_qp_attach_llp(c->qp, c->fd, sp, o, &iwe_llp_trp, &st);

	if (!err)
		cm_out_set(c, NULL, 0);	/* the reply is the QP's now */
	return err;
}

static void trp_close(struct iwe_conn *c)
{
	iwe_trp_send_fin(c->qp);
}

/* No reset in TRP: the F is the one end the peer hears, and it is the
 * attached QP that sends it. */
static void trp_abandon(struct iwe_conn *c)
{
	if (c->attached)
		iwe_trp_send_fin(c->qp);
}

static const struct est_transport trp_transport = {
	.attach = trp_attach,
	.close = trp_close,
	.abandon = trp_abandon,
	.has_reset = 0,
	.broken = "TRP stream broken",
};

static const struct est_transport *transport(const struct iwe_conn *c)
{
	return c->udp ? &trp_transport : &tcp_transport;
}

static void qp_notify(void *arg)
{
	struct iwe_conn *c = arg;

	/* Under the QP lock, maybe on a consumer thread. */
	iwe_prog_post(c->prog, &c->qp_task);
}

int cm_est_attach(struct iwe_conn *c, int responder)
{
	struct iwe_stream_params sp = {
		.ird = cm_clamp_rd(c->neg.ird, IWE_MAX_IRD),
		.ord = cm_clamp_rd(c->neg.ord, IWE_MAX_ORD),
		.mpa_rev = c->neg.rev,
	};
	struct iwe_qp_cm_opts o = {
		.responder = responder,
		.rtr = c->neg.rtr,
		.hold = responder && c->neg.rtr ? IWE_RX_HOLD_AFTER_FIRST :
						  IWE_RX_HOLD,
		.prog = c->prog,
		.from = &c->watch,
		.notify = qp_notify,
		.notify_arg = c,
		.local = &c->local,
		.remote = &c->remote,
	};
	int err = transport(c)->attach(c, &sp, &o, responder);

	if (!err)
		c->attached = 1;
	return err;
}

static int disconnecting(const struct iwe_conn *c)
{
	return c->state == CS_DISC_DRAIN || c->state == CS_DISC_WAIT;
}

/* The stream ended: which event that is depends on how. */
static int est_end(struct iwe_conn *c, int err)
{
	const struct est_transport *t = transport(c);
	int disc = disconnecting(c);
	/* ENOTCONN: the peer closed between segments, its graceful close.
	 * A stream cut inside an FPDU, a Terminate, a CRC error or a
	 * timeout breaks the connection. */
	int peer_closed = err == ENOTCONN ||
			  (t->has_reset && (err == ECONNRESET || err == EPIPE));
	int orderly = disc || (peer_closed && c->state == CS_ESTABLISHED);

	cm_log_end(c, err);
	c->fins_met = err == ENOTCONN && t->has_reset;
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (err == ENOTCONN && !disc)
		t->close(c);	/* answer the peer's close */
	if (!orderly && t->has_reset)
		t->abandon(c);
	return cm_end(c, orderly ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN, err,
		      orderly ? "connection closed" :
		      err == EPROTO ? "terminated" :
		      err == ETIMEDOUT ? "peer stopped answering" : t->broken,
		      NULL, 0);
}

/* Active over TRP: the connection failed before our RTR was
 * acknowledged (err ETIMEDOUT: not in time).  Not established, so a
 * connect's outcome; the F tells the responder. */
int cm_est_rtr_unacked(struct iwe_conn *c, int err)
{
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	transport(c)->abandon(c);
	return err == ETIMEDOUT ?
		cm_end(c, IWE_CM_TIMED_OUT, err,
		       "our RTR was not acknowledged in time", NULL, 0) :
		cm_end(c, IWE_CM_NON_PEER_REJECTED, err,
		       "connection failed before our RTR was acknowledged",
		       NULL, 0);
}

int cm_est_qp_changed(struct iwe_conn *c)
{
	struct iwe_qp_io_status st;

	iwe_qp_io_status(c->qp, &st);
	/* The RTR and the peer's FIN may arrive in one read: established
	 * first (the end is noticed again once the hold is released). */
	if (c->state == CS_RTR_WAIT && st.first_rx) {
		c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL, NULL,
					    0 };
		return CS_ESTABLISHED;
	}
	/* Likewise the acknowledgement of our RTR and what follows it (the
	 * RTR is the QP's first packet, the one after our request's). */
	if (c->state == CS_RTR_ACK_WAIT &&
	    iwe_trp_tx_acked(c->qp, c->trp_isn + 1)) {
		iwe_qp_want_drain(c->qp, 0);
		c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL, c->in,
					    c->in_len };
		return CS_ESTABLISHED;
	}
	if (st.state == IWE_QPS_ERROR && st.stream_err)
		return c->state == CS_RTR_ACK_WAIT ?
			cm_est_rtr_unacked(c, st.stream_err) :
			est_end(c, st.stream_err);
	if (c->state == CS_DISC_DRAIN && st.tx_drained) {
		transport(c)->close(c);
		return CS_DISC_WAIT;
	}
	return c->state;
}

/* The RTR never came (passive), or a graceful disconnect took too long. */
int cm_est_timeout(struct iwe_conn *c)
{
	int disc = disconnecting(c);

	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	transport(c)->abandon(c);
	return cm_end(c, disc ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN,
		      ETIMEDOUT, disc ? "disconnect timed out" :
		      "no RTR from the initiator", NULL, 0);
}

/* Abrupt at the verbs level: the QP flushes at once.  On an established
 * stream with no FPDU half written, the send queue goes out followed by
 * our close (completed Sends reach the peer, which sees an orderly end);
 * otherwise we give up (TCP: a reset). */
void cm_est_abort(struct iwe_conn *c)
{
	int established = c->state == CS_RTR_WAIT ||
			  c->state == CS_ESTABLISHED || disconnecting(c);

	if (c->qp && (c->attached || c->state == CS_ACCEPTING))
		iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (established && c->qp && iwe_qp_tx_drained(c->qp))
		transport(c)->close(c);
	else
		transport(c)->abandon(c);
}
