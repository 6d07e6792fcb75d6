/* The connection manager's established connections.  After the MPA
 * exchange the QP takes the stream (iwe_qp_attach_cm): from then on the
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
 * Ends: the peer's FIN between FPDUs, its reset (an abrupt disconnect),
 * or any end after we started a graceful disconnect -> DISCONNECTED; a
 * Terminate, a close inside an FPDU or a timeout -> BROKEN.
 */
#include <errno.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"
#include "iw_qp.h"

static void qp_notify(void *arg)
{
	struct iwe_conn *c = arg;

	/* Under the QP lock, maybe on a consumer thread. */
	iwe_prog_post(c->prog, &c->qp_task);
}

int cm_est_attach(struct iwe_conn *c, int responder)
{
	struct iwe_stream_params sp = {
		.crc = c->neg.crc,
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
		.notify = qp_notify,
		.notify_arg = c,
	};
	int err = iwe_qp_attach_cm(c->qp, c->fd, &sp, &o);

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
	int disc = disconnecting(c);
	/* A FIN between FPDUs is the peer's graceful close; a reset is its
	 * abrupt one (RFC 5040 abortive close), as iWARP stacks report it.
	 * A stream cut inside an FPDU, a Terminate, a CRC error or a
	 * timeout breaks the connection. */
	int peer_closed = err == ENOTCONN || err == ECONNRESET || err == EPIPE;
	int orderly = disc || (peer_closed && c->state == CS_ESTABLISHED);

	cm_log_end(c, err);
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (err == ENOTCONN && !disc)
		shutdown(c->fd, SHUT_WR);	/* answer the peer's FIN */
	if (!orderly)
		cm_reset_socket(c->fd);
	return cm_end(c, orderly ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN, err,
		      orderly ? "connection closed" :
		      err == EPROTO ? "terminated" : "stream broken", NULL, 0);
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
	if (st.state == IWE_QPS_ERROR && st.stream_err)
		return est_end(c, st.stream_err);
	if (c->state == CS_DISC_DRAIN && st.tx_drained) {
		shutdown(c->fd, SHUT_WR);
		return CS_DISC_WAIT;
	}
	return c->state;
}

/* RTR never came (passive), or a graceful disconnect took too long. */
int cm_est_timeout(struct iwe_conn *c)
{
	int disc = disconnecting(c);

	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	cm_reset_socket(c->fd);
	return cm_end(c, disc ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN,
		      ETIMEDOUT, disc ? "disconnect timed out" :
		      "no RTR from the initiator", NULL, 0);
}

/* Abrupt at the verbs level: the QP flushes at once.  On an established
 * stream with no FPDU half written, the send queue goes out followed by
 * a FIN (completed Sends reach the peer, which sees an orderly end);
 * otherwise the stream is reset. */
void cm_est_abort(struct iwe_conn *c)
{
	int established = c->state == CS_RTR_WAIT ||
			  c->state == CS_ESTABLISHED || disconnecting(c);

	if (c->qp && (c->attached || c->state == CS_ACCEPTING))
		iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (established && c->qp && iwe_qp_tx_drained(c->qp))
		shutdown(c->fd, SHUT_WR);
	else
		cm_reset_socket(c->fd);
}
