/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager's active side: the TCP connect, the MPA
 * request, and what the reply means.  Each handler returns the state to
 * enter (iw_cm_priv.h).
 *
 * Mapping of outcomes: TCP connect error (a refusal once the grace for a
 * peer about to listen is over: cm_refused_pause_ms), or a reset before
 * the reply -> UNREACHABLE; no reply in time -> TIMED_OUT; a reply with
 * R -> REJECTED with the peer's private data; anything else that is
 * not an acceptable reply, or an orderly close before the reply (no
 * listener took the request) -> NON_PEER_REJECTED.  A well-formed reply
 * whose IRD/ORD or RTR choice we cannot use is answered, as RFC 6581
 * asks, with a Terminate of layer LLP (insufficient IRD, or no matching
 * RTR) before the stream is closed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iw_fdlimit.h"
#include "iw_cm_priv.h"

static int fail(struct iwe_conn *c, int type, int status, const char *reason)
{
	/* An adopted socket is the consumer's: leave it as it is. */
	if (!c->adopted && type != IWE_CM_REJECTED)
		cm_reset_socket(c->fd);
	return cm_end(c, type, status, reason, NULL, 0);
}

int cm_active_socket(struct iwe_device *dev, int *fdp)
{
	struct sockaddr_in src = dev->attr.addr;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return iwe_fd_limit_note(errno, "TCP connect");
	/* The device's address as source; the port is chosen at connect
	 * time, so thousands of connects do not exhaust bind ports. */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	src.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		int err = errno;

		close(fd);
		return err;
	}
	cm_set_nodelay(fd);
	cm_tune_own_socket(fd);
	*fdp = fd;
	return 0;
}

/* Build the request (service header first when asked) into c->out. */
int cm_active_request(struct iwe_conn *c, const void *pdata, size_t len,
		      int with_svc_hdr)
{
	uint8_t pd[IW_MPA_MAX_PRIVATE_DATA], frame[IW_MPA_MAX_RR_LEN];
	size_t off = 0;
	uint64_t svc_be;
	ssize_t n;

	if (with_svc_hdr) {
		memcpy(pd, CM_SVC_MAGIC, CM_SVC_MAGIC_LEN);
		svc_be = iw_be64(c->service);
		memcpy(pd + CM_SVC_MAGIC_LEN, &svc_be, sizeof(svc_be));
		off = IWE_CM_SERVICE_HDR_LEN;
	}
	if (len)
		memcpy(pd + off, pdata, len);
	c->req = (struct iw_mpa_params){
		.rev = c->params.mpa_rev,
		.crc = !!c->params.crc,
		.ird = cm_clamp_rd(c->params.ird, IWE_MAX_IRD),
		.ord = cm_clamp_rd(c->params.ord, IWE_MAX_ORD),
		.pdata = pd,
		.pdata_len = off + len,
	};
	if (c->req.rev == IW_MPA_REV_ENHANCED && c->params.rtr) {
		c->req.p2p = 1;
		c->req.rtr = c->params.rtr;
	}
	n = iw_mpa_build(frame, sizeof(frame), 0, &c->req);
	c->req.pdata = NULL;	/* pd dies here; check_reply ignores it */
	if (n < 0)
		return -n == ENOBUFS ? EMSGSIZE : (int)-n;
	return cm_out_set(c, frame, (size_t)n);
}

/* 1: refused within the grace, to connect again after a pause. */
static int refused_again(struct iwe_conn *c, int err)
{
	if (err != ECONNREFUSED)
		return 0;
	c->refused_pause_ms = cm_refused_pause_ms(c);
	return c->refused_pause_ms >= 0;
}

/* Inside an API call: a failed connect is queued, not delivered. */
static int connect_failed(struct iwe_conn *c, int err)
{
	if (refused_again(c, err))
		return CS_REFUSED_PAUSE;
	c->final = 1;
	cm_queue_event(c, IWE_CM_UNREACHABLE, err, "TCP connect failed");
	return CS_IDLE;
}

/* The handshake may be over already (on loopback it is done by the
 * time connect returns): then the request goes now, without a watch for
 * writability and a loop round.  The send itself asks: EAGAIN with
 * nothing sent is a handshake still under way, left to the watch; any
 * other error is the connect's own (ECONNREFUSED...), which the send
 * took from the socket, so it is reported here. */
static int request_now(struct iwe_conn *c)
{
	int err = cm_out_flush(c);

	if (err == EAGAIN && !c->out_off)
		return CS_CONNECTING;
	if (err && err != EAGAIN)
		return connect_failed(c, err);
	cm_fill_addrs(c);
	return CS_MPA_SENT;
}

/* Start the TCP connect. */
int cm_active_connect(struct iwe_conn *c, const struct sockaddr_in *dst)
{
	struct sockaddr_in to = *dst;

	to.sin_port = htons(cm_service_port(c->service));
	c->remote = to;
	if (connect(c->fd, (struct sockaddr *)&to, sizeof(to)) < 0 &&
	    errno != EINPROGRESS)
		return connect_failed(c, errno);
	return request_now(c);
}

/* Write what is left of the request.  The state to enter. */
static int flush_request(struct iwe_conn *c)
{
	int err = cm_out_flush(c);

	if (err && err != EAGAIN)
		return fail(c, IWE_CM_UNREACHABLE, err,
			    "connection lost while sending the MPA request");
	return CS_MPA_SENT;
}

int cm_active_connected(struct iwe_conn *c)
{
	int err = 0;
	socklen_t l = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		err = errno;
	if (err && refused_again(c, err))
		return CS_REFUSED_PAUSE;
	if (err)
		return fail(c, IWE_CM_UNREACHABLE, err, "TCP connect failed");
	cm_fill_addrs(c);
	return flush_request(c);
}

/* The pause after a refusal is over: the same connect on a fresh socket
 * (a TCP socket whose connect failed is not portably reusable). */
int cm_active_reconnect(struct iwe_conn *c)
{
	int fd, err = cm_active_socket(c->dev, &fd);

	if (err)
		return fail(c, IWE_CM_UNREACHABLE, err, "TCP connect failed");
	close(c->fd);
	c->fd = fd;
	return cm_active_connect(c, &c->remote);
}

/* The reply is well formed but asks what we cannot do: tell the peer,
 * which is in FPDU mode now, with an LLP Terminate, then close. */
static void send_llp_terminate(struct iwe_conn *c,
			       const struct iw_mpa_frame *f, int st)
{
	uint8_t buf[64];
	ssize_t n = iw_mpa_build_llp_terminate(buf, sizeof(buf),
					       c->req.crc || f->crc,
					       iw_mpa_term_ecode(st));

	if (n > 0 && send(c->fd, buf, (size_t)n,
			  MSG_DONTWAIT | MSG_NOSIGNAL) == n) {
		char a[IW_LOG_ADDRS_LEN];

		iw_log_terminate(1, c->qp ? c->qp->qp_num : 0,
				 iw_log_sock_addrs(c->fd, a, sizeof(a)),
				 IW_TERM_LAYER_LLP, IW_TERM_LLP_ETYPE_MPA,
				 iw_mpa_term_ecode(st));
		shutdown(c->fd, SHUT_WR);
	}
}

static int reply_unusable(int st)
{
	return st == IW_MPA_ERR_INSUFF_IRD || st == IW_MPA_ERR_NO_RTR ||
	       st == IW_MPA_ERR_RTR_MULTIPLE ||
	       st == IW_MPA_ERR_RTR_NOT_OFFERED ||
	       st == IW_MPA_ERR_P2P_MISMATCH;
}

static int on_reply(struct iwe_conn *c, const struct iw_mpa_frame *f)
{
	int st = iw_mpa_check_reply(&c->req, f);

	if (st != IW_MPA_OK) {
		if (reply_unusable(st) && !c->adopted && !f->reject) {
			send_llp_terminate(c, f, st);
			return cm_end(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
				      iw_mpa_strerror(st), NULL, 0);
		}
		return fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
			    iw_mpa_strerror(st));
	}
	if (f->reject)
		return cm_end(c, IWE_CM_REJECTED, ECONNREFUSED,
			      "rejected by the peer", f->pdata, f->pdata_len);
	iw_mpa_initiator_conn(&c->req, f, &c->neg);
	/* The accepting consumer's private data comes with ESTABLISHED. */
	c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL, f->pdata,
				    f->pdata_len };
	return CS_ESTABLISHED;
}

static int read_reply(struct iwe_conn *c)
{
	struct iw_mpa_frame f;
	int st, r = cm_read_frame(c, IW_MPA_EXPECT_REP, &f, &st);

	if (r == 0)
		return CS_MPA_SENT;
	if (r == -ENODATA)
		return fail(c, IWE_CM_NON_PEER_REJECTED, ECONNABORTED,
			    "closed by the peer before the MPA reply");
	if (r < 0)
		return fail(c, IWE_CM_UNREACHABLE, -r,
			    "connection reset before the MPA reply");
	if (st != IW_MPA_OK)
		return fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
			    iw_mpa_strerror(st));
	return on_reply(c, &f);
}

int cm_active_io(struct iwe_conn *c, uint32_t revents)
{
	int next = flush_request(c);

	if (next == CS_MPA_SENT && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		next = read_reply(c);
	return next;
}

int cm_active_timeout(struct iwe_conn *c)
{
	return fail(c, IWE_CM_TIMED_OUT, ETIMEDOUT,
		    c->state == CS_CONNECTING ? "TCP connect timed out" :
		    "no MPA reply in time");
}
