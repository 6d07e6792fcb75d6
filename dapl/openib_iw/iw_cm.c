/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager's top floor (see iw_cm_priv.h): each conn's
 * state is changed in one place, cm_enter(), which performs what
 * entering a state means (what to watch, which timer, attaching the QP,
 * delivering the event a handler left); the socket, timer and QP events
 * are dispatched by state to the parts that know them; and the public
 * API (iw_engine.h) runs its bodies on the progress thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"
#include "iw_qp.h"
#include "iw_trp.h"

#define CONN_OF(ptr, member) IWE_CONTAINER_OF(ptr, struct iwe_conn, member)
#define ACCEPT_BURST 64

static void conn_io(struct iwe_prog_watch *w, uint32_t revents);
static void conn_timer(struct iwe_prog_timer *t);
static void conn_qp(struct iwe_prog_task *t);

/* ---------------------------------------------------------- entering */

static int attach_qp(struct iwe_conn *c, int responder)
{
	int err;

	if (c->attached)
		return c->state;
	/* The QP's watch takes the CM's place (cm_est_attach). */
	err = cm_est_attach(c, responder);
	if (!err)
		return c->state;
	iwe_prog_watch_del(c->prog, &c->watch);
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (!c->udp)
		cm_reset_socket(c->fd);
	return responder ? cm_end(c, IWE_CM_BROKEN, err,
				  "QP cannot be attached", NULL, 0)
			 : cm_end(c, IWE_CM_NON_PEER_REJECTED, err,
				  "QP cannot be attached (not in INIT)", NULL,
				  0);
}

static void arm(struct iwe_conn *c, int ms)
{
	iwe_prog_timer_arm(c->prog, &c->timer, ms);
}

/* What entering state s means; returns s, or the state to go to when
 * that failed. */
static int enter_state(struct iwe_conn *c, int prev)
{
	int s = c->state;

	switch (s) {
	case CS_CONNECTING:
		if (c->timeout_ms > 0)
			arm(c, c->timeout_ms);
		cm_watch(c, EPOLLOUT);
		return s;
	case CS_REFUSED_PAUSE:
		cm_quiesce(c);		/* the socket is replaced */
		arm(c, c->refused_pause_ms);
		return s;
	case CS_MPA_SENT:
		if (c->udp) {
			/* TRP: the request goes again on the timer. */
			arm(c, cm_trp_active_arm(c));
			cm_watch(c, EPOLLIN);
			return s;
		}
		if (prev == CS_NEW && c->timeout_ms > 0)
			arm(c, c->timeout_ms);
		/* Edge-triggered: level-triggered, a reply that a sleeping
		 * dat_evd_wait took from the device's epoll went back on
		 * epoll's ready list and woke the progress thread for it too.
		 * The request is written and the reply read until done or
		 * EAGAIN.  Bytes behind the reply (FPDUs) get no edge of
		 * their own: the QP's watch differs from this one, and the
		 * EPOLL_CTL_MOD that hands the socket over reports them. */
		cm_watch(c, EPOLLIN | EPOLLET | (c->out ? EPOLLOUT : 0));
		return s;
	case CS_REQ_WAIT:
		if (prev != s && c->timeout_ms > 0)
			arm(c, c->timeout_ms);
		if (c->udp && c->adopted)
			cm_watch(c, EPOLLIN | (c->out ? EPOLLOUT : 0));
		else if (!c->adopted)
			/* A PSP's accepted TCP socket (TRP requests come
			 * through the port's socket): edge-triggered from
			 * the start, as CS_REQ_RCVD wants it (one epoll_ctl
			 * fewer per accept); the request's reader reads
			 * until it has the frame or the socket is empty, so
			 * no edge is missed.  Not the QP's events: bytes
			 * behind the request (FPDUs, the peer's FIN) are read
			 * by nobody until the QP takes the socket, and the
			 * EPOLL_CTL_MOD of that hand-over reports them (with
			 * the QP's events here, fuzz_cm found a stream cut
			 * two bytes into its first FPDU never closed). */
			cm_watch(c, EPOLLIN | EPOLLET);
		else
			cm_watch(c, c->out ? EPOLLOUT : CM_SSP_PEEK_EVENTS);
		return s;
	case CS_REQ_RCVD:
		if (!c->udp) {
			/* The socket stays registered, edge-triggered (input
			 * before the accept is the QP's and wakes us once at
			 * most): so the peer's RTR, which follows our reply,
			 * takes its place in epoll's ready list as it
			 * arrives, and the QP's watch keeps that place
			 * (iwe_prog_watch_move).  Registered only at attach,
			 * after the reply went, an RTR that came while we
			 * were descheduled in between was queued behind what
			 * the peer did after it on other connections: a
			 * DISCONNECTED came before this ESTABLISHED (dtestcm's
			 * server then freed a live EP and waited forever).
			 * An adopted (SSP) socket alike.  Over TRP the QP
			 * sends the reply itself, once it watches the
			 * socket. */
			iwe_prog_timer_cancel(c->prog, &c->timer);
			/* An SSP's socket keeps the interest it was peeked
			 * with (EPOLLRDHUP too): an epoll_ctl fewer on the
			 * upgrade's path.  A close reported meanwhile is
			 * ignored in this state and reported again by the
			 * QP's watch, or met by the reject's reply. */
			cm_watch(c, c->adopted ? CM_SSP_PEEK_EVENTS :
						 EPOLLIN | EPOLLET);
			return s;
		}
		/* fall through */
	case CS_IDLE:
		/* Not watched until accept: the bytes behind the request
		 * are FPDUs for the QP. */
		cm_quiesce(c);
		if (s == CS_IDLE && c->orphan) {
			cm_conn_drop(c);
			return CS_DROPPED;
		}
		return s;
	case CS_ACCEPTING:
	case CS_REJECTING:
		if (prev != s)
			arm(c, c->timeout_ms);
		if (c->udp) {
			/* TRP: the reject reply goes now and again for a
			 * repeated request. */
			cm_watch(c, EPOLLIN);
			return prev != s ? cm_trp_reject_enter(c) : s;
		}
		if (prev != s) {
			/* The reply nearly always fits the socket at once:
			 * write it now rather than after a wait for EPOLLOUT
			 * (one epoll round and two epoll_ctl per accept). */
			int next = cm_passive_reply_io(c);

			if (next != s)
				return next;
		}
		cm_watch(c, EPOLLOUT);
		return s;
	case CS_RTR_WAIT:
		arm(c, cm_mpa_timeout(&c->params));
		return attach_qp(c, 1);
	case CS_RTR_ACK_WAIT:
		s = attach_qp(c, 0);
		if (s != CS_RTR_ACK_WAIT)
			return s;
		iwe_prog_watch_del(c->prog, &c->watch);	/* the QP's now */
		arm(c, cm_mpa_timeout(&c->params));
		/* Told when the transmit side goes idle: the RTR's
		 * acknowledgement retires its segment. */
		iwe_qp_want_drain(c->qp, 1);
		return s;
	case CS_ESTABLISHED:
		iwe_prog_timer_cancel(c->prog, &c->timer);
		s = attach_qp(c, !c->active);
		iwe_prog_watch_del(c->prog, &c->watch);	/* attached before */
		return s;
	case CS_DISC_DRAIN:
		arm(c, CM_DISC_TIMEOUT_MS);
		iwe_qp_want_drain(c->qp, 1);
		return s;
	default:
		return s;
	}
}

static void deliver_pending(struct iwe_conn *c)
{
	struct cm_pend p = c->pend;

	c->pend.type = -1;
	if (p.type < 0 || c->dead)
		return;
	cm_event(c, p.type, p.status, p.reason, p.pdata, p.pdata_len);
	/* The consumer has seen ESTABLISHED: completions may come now. */
	if (p.type == IWE_CM_ESTABLISHED && !c->dead &&
	    c->state == CS_ESTABLISHED)
		iwe_qp_release_hold(c->qp);
}

/* The one place a conn's state changes. */
static void cm_enter(struct iwe_conn *c, int s)
{
	while (s != CS_DROPPED && !c->dead) {
		int prev = c->state;

		cm_set_state(c, s);
		s = enter_state(c, prev);
		if (s == c->state)
			break;
	}
	if (s != CS_DROPPED && !c->dead)
		deliver_pending(c);
}

/* ---------------------------------------------------------- dispatch */

static void conn_io(struct iwe_prog_watch *w, uint32_t revents)
{
	struct iwe_conn *c = CONN_OF(w, watch);
	int next;

	switch (c->state) {
	case CS_CONNECTING:
		next = cm_active_connected(c);
		break;
	case CS_MPA_SENT:
		next = c->udp ? cm_trp_active_io(c) : cm_active_io(c, revents);
		break;
	case CS_REQ_WAIT:
		next = c->udp ? cm_trp_ssp_io(c) :
		       c->adopted ? cm_ssp_io(c, revents) : cm_passive_io(c);
		break;
	case CS_ACCEPTING:
	case CS_REJECTING:
		next = c->udp ? cm_trp_reject_io(c) : cm_passive_reply_io(c);
		break;
	default:
		return;
	}
	iwe_prog_note_conn(c->prog);	/* a connection being made */
	cm_enter(c, next);
}

static void conn_timer(struct iwe_prog_timer *t)
{
	struct iwe_conn *c = CONN_OF(t, timer);
	int next;

	switch (c->state) {
	case CS_CONNECTING:
	case CS_MPA_SENT:
		next = c->udp ? cm_trp_active_timeout(c) : cm_active_timeout(c);
		break;
	case CS_REFUSED_PAUSE:
		next = cm_active_reconnect(c);
		break;
	case CS_REQ_WAIT:
		next = cm_passive_timeout(c);
		break;
	case CS_ACCEPTING:
	case CS_REJECTING:
		next = cm_passive_reply_timeout(c);
		break;
	case CS_RTR_ACK_WAIT:
		next = cm_est_rtr_unacked(c, ETIMEDOUT);
		break;
	case CS_RTR_WAIT:
	case CS_DISC_DRAIN:
	case CS_DISC_WAIT:
		next = cm_est_timeout(c);
		break;
	default:
		return;
	}
	cm_enter(c, next);
}

/* The QP notified: the stream ended, the first segment came, or its
 * transmit side drained. */
static void conn_qp(struct iwe_prog_task *t)
{
	struct iwe_conn *c = CONN_OF(t, qp_task);

	if (c->dead || !c->attached || c->final)
		return;
	cm_enter(c, cm_est_qp_changed(c));
}

static struct iwe_conn *conn_new(struct iwe_device *dev, struct iwe_prog *p,
				 int fd);

/* A UDP listening port: each new peer's request gets a conn with a
 * socket of its own.  1 when the burst ended with datagrams left. */
static int trp_port_io(struct cm_port *p)
{
	static uint8_t buf[65536];	/* progress thread only */
	struct sockaddr_in from;
	struct iwe_conn *c;
	size_t len;
	int i, r, fd;

	for (i = 0; i < ACCEPT_BURST; i++) {
		r = cm_trp_port_recv(p, buf, sizeof(buf), &len, &from);
		if (r == 0)
			return 0;
		if (r < 0)
			continue;
		fd = cm_trp_peer_socket(p, &from);
		if (fd < 0)
			continue;
		c = conn_new(p->dev, p->prog, fd);
		if (!c) {
			close(fd);
			continue;
		}
		cm_enter(c, cm_trp_passive_request(c, p, buf, len));
	}
	return 1;
}

/* A TCP listening port: a conn for each connection accepted, to wait
 * for its request.  1 when the burst ended with connections left. */
static int tcp_port_io(struct cm_port *p)
{
	struct iwe_conn *c;
	struct sockaddr_in peer;
	int i, fd;

	for (i = 0; i < ACCEPT_BURST; i++) {
		fd = cm_passive_accept_fd(p, &peer);
		if (fd < 0)
			return 0;
		c = cm_conn_new(p->dev, p->prog, fd, conn_io, conn_timer,
				conn_qp);
		if (!c) {
			close(fd);
			continue;
		}
		cm_passive_setup(c, p, &peer);
		cm_enter(c, CS_REQ_WAIT);
	}
	return 1;
}

/* A burst of ACCEPT_BURST at most, so that a flood of connections or
 * requests does not hold the loop; what it leaves is taken at the next
 * turn (a task).  The port's readiness cannot say so: it is level-
 * triggered in the device's epoll, which the loop waits on edge-
 * triggered, so a port still readable after a burst makes no new edge
 * until another connection comes.  Under a flood of idle connections
 * already queued, the listener then took 64 and waited for the next
 * arrival -- 5 s, the idle ones' timeout, while a client's connect timed
 * out behind them (t_limits, on a busy machine). */
void cm_port_io(struct iwe_prog_watch *w, uint32_t revents)
{
	struct cm_port *p = IWE_CONTAINER_OF(w, struct cm_port, watch);
	int more;

	(void)revents;
	iwe_prog_note_conn(p->prog);
	more = p->dev->attr.transport == IWE_TRANSPORT_UDP ? trp_port_io(p) :
							     tcp_port_io(p);
	if (more)
		iwe_prog_post(p->prog, &p->more);
}

static struct iwe_conn *conn_new(struct iwe_device *dev, struct iwe_prog *p,
				 int fd)
{
	struct iwe_conn *c = cm_conn_new(dev, p, fd, conn_io, conn_timer,
					 conn_qp);

	if (c)
		c->udp = dev->attr.transport == IWE_TRANSPORT_UDP;
	return c;
}

/* ------------------------------------------------------------ connect */

struct connect_args {
	struct iwe_qp *qp;
	const struct sockaddr_in *dst;
	uint64_t service;
	const void *pdata;
	size_t pdata_len;
	int timeout_ms;
	const struct iwe_cm_params *params;
	iwe_cm_handler handler;
	void *ctx;
	struct iwe_conn *out;
	int err;
};

static void do_connect(void *arg)
{
	struct connect_args *a = arg;
	struct iwe_device *dev = a->qp->pd->dev;
	struct iwe_conn *c;
	int fd = -1;

	a->err = dev->attr.transport == IWE_TRANSPORT_UDP ?
		 cm_trp_socket(dev, &fd) : cm_active_socket(dev, &fd);
	if (a->err)
		return;
	c = conn_new(dev, iwe_prog_get(dev), fd);
	if (!c) {
		close(fd);
		a->err = ENOMEM;
		return;
	}
	c->active = 1;
	c->qp = a->qp;
	c->handler = a->handler;
	c->ctx = a->ctx;
	c->params = *a->params;
	c->service = a->service;
	c->remote = *a->dst;
	c->timeout_ms = a->timeout_ms;
	a->err = cm_active_request(c, a->pdata, a->pdata_len,
				   a->service > 65535);
	if (a->err) {
		cm_conn_drop(c);
		return;
	}
	a->out = c;
	cm_enter(c, c->udp ? cm_trp_connect(c, a->dst) :
		 cm_active_connect(c, a->dst));
}

int iwe_cm_connect(struct iwe_qp *qp, const struct sockaddr_in *dst,
		   uint64_t service, const void *pdata, size_t pdata_len,
		   int timeout_ms, const struct iwe_cm_params *params,
		   iwe_cm_handler handler, void *ctx, struct iwe_conn **out)
{
	struct connect_args a = { qp, dst, service, pdata, pdata_len,
				  timeout_ms, params, handler, ctx, NULL, 0 };
	struct iwe_prog *p;

	if (!qp || !dst || dst->sin_family != AF_INET || !handler || !out ||
	    !cm_params_valid(params) || (pdata_len && !pdata) ||
	    service == 0)
		return EINVAL;
	if (pdata_len > IWE_MAX_PRIVATE_DATA - 4 - IWE_CM_SERVICE_HDR_LEN)
		return EINVAL;
	if (iwe_qp_get_state(qp) != IWE_QPS_INIT)
		return EINVAL;
	p = iwe_prog_get(qp->pd->dev);
	if (!p)
		return errno;
	iwe_prog_call(p, do_connect, &a);
	if (!a.err)
		*out = a.out;
	return a.err;
}

/* ---------------------------------------------------- accept, reject */

struct answer_args {
	struct iwe_conn *c;
	struct iwe_qp *qp;
	const void *pdata;
	size_t pdata_len;
	iwe_cm_handler handler;
	void *ctx;
	int err;
	int forget;			/* reject: the engine frees the conn */
};

/* The reply is written from the loop: no handler runs inside the call. */
static void do_accept(void *arg)
{
	struct answer_args *a = arg;
	struct iwe_conn *c = a->c;

	if (c->dead || c->state != CS_REQ_RCVD ||
	    iwe_qp_get_state(a->qp) != IWE_QPS_INIT) {
		a->err = EINVAL;
		return;
	}
	a->err = cm_passive_answer(c, a->pdata, a->pdata_len, 0);
	if (a->err)
		return;
	c->qp = a->qp;
	c->handler = a->handler;
	c->ctx = a->ctx;
	if (c->udp) {
		/* TRP: the QP takes the reply as its first packet. */
		if (!c->neg.rtr)
			c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL,
						    NULL, 0 };
		cm_enter(c, c->neg.rtr ? CS_RTR_WAIT : CS_ESTABLISHED);
		return;
	}
	/* An adopted socket gets TCP_NODELAY once the reply is written
	 * (cm_passive_reply_io). */
	cm_enter(c, CS_ACCEPTING);
}

static void do_reject(void *arg)
{
	struct answer_args *a = arg;
	struct iwe_conn *c = a->c;

	if (c->dead || c->state != CS_REQ_RCVD) {
		a->err = EINVAL;
		return;
	}
	a->err = cm_passive_answer(c, a->pdata, a->pdata_len, 1);
	if (a->err)
		return;
	if (a->forget) {
		c->orphan = 1;	/* dropped once the reply is out */
		c->handler = NULL;
	}
	cm_enter(c, CS_REJECTING);
}

int iwe_cm_accept(struct iwe_conn *c, struct iwe_qp *qp, const void *pdata,
		  size_t pdata_len, iwe_cm_handler handler, void *ctx)
{
	struct answer_args a = { c, qp, pdata, pdata_len, handler, ctx, 0, 0 };

	if (!c || !qp || !handler || (pdata_len && !pdata) ||
	    pdata_len > IWE_MAX_PRIVATE_DATA)
		return EINVAL;
	iwe_prog_call(c->prog, do_accept, &a);
	return a.err;
}

static int reject(struct iwe_conn *c, const void *pdata, size_t pdata_len,
		  int forget)
{
	struct answer_args a = { c, NULL, pdata, pdata_len, NULL, NULL, 0,
				 forget };

	if (!c || (pdata_len && !pdata) || pdata_len > IWE_MAX_PRIVATE_DATA)
		return EINVAL;
	iwe_prog_call(c->prog, do_reject, &a);
	return a.err;
}

int iwe_cm_reject(struct iwe_conn *c, const void *pdata, size_t pdata_len)
{
	return reject(c, pdata, pdata_len, 0);
}

int iwe_cm_reject_forget(struct iwe_conn *c, const void *pdata,
			 size_t pdata_len)
{
	return reject(c, pdata, pdata_len, 1);
}

/* ------------------------------------------------ disconnect, destroy */

struct conn_args {
	struct iwe_conn *c;
	int graceful;
	int ret;
};

static void do_disconnect(void *arg)
{
	struct conn_args *a = arg;
	struct iwe_conn *c = a->c;

	a->ret = 0;
	switch (c->state) {
	case CS_RTR_WAIT:
	case CS_ESTABLISHED:
		if (a->graceful) {
			cm_enter(c, CS_DISC_DRAIN);
			return;
		}
		break;
	case CS_DISC_DRAIN:
	case CS_DISC_WAIT:
		if (a->graceful)
			return;
		break;
	case CS_CONNECTING:
	case CS_REFUSED_PAUSE:
	case CS_MPA_SENT:
	case CS_RTR_ACK_WAIT:
	case CS_ACCEPTING:
		break;
	case CS_IDLE:
		return;		/* already over */
	default:
		a->ret = EINVAL;
		return;
	}
	cm_est_abort(c);
	c->final = 1;
	cm_queue_event(c, IWE_CM_DISCONNECTED, 0, "disconnected");
	cm_enter(c, CS_IDLE);
}

int iwe_cm_disconnect(struct iwe_conn *c, int graceful)
{
	struct conn_args a = { c, graceful, 0 };

	if (!c)
		return EINVAL;
	iwe_prog_call(c->prog, do_disconnect, &a);
	return a.ret;
}

static void do_destroy(void *arg)
{
	struct iwe_conn *c = ((struct conn_args *)arg)->c;

	if (c->dead)
		return;
	if (c->state == CS_REJECTING && !c->adopted) {
		/* The reject reply is still going out: let it finish. */
		c->orphan = 1;
		c->handler = NULL;
		return;
	}
	if (c->qp && (c->attached || c->state == CS_ACCEPTING))
		iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (c->attached)
		iwe_qp_detach_cm(c->qp);	/* before the fd goes */
	if (!c->released && c->udp) {
		if (c->attached && !c->final)
			iwe_trp_send_fin(c->qp);	/* abandoned: tell the peer */
		close(c->fd);	/* no stream to reset: the peer's QP times out
				 * or has seen our F */
		c->released = 1;
	}
	if (!c->released) {
		if (c->final && c->attached && c->fins_met) {
			/* The stream was read to its end: no input left for
			 * close() to answer with a reset, and a TIME_WAIT,
			 * if any, came with the peer's FIN already (on the
			 * side that closed first) -- nothing for a zero
			 * linger to spare.  What is queued goes out behind
			 * a plain close. */
			close(c->fd);
		} else if (c->final && c->attached) {
			cm_close_ended(c->fd);
		} else {
			if (!c->final)
				cm_reset_socket(c->fd);	/* abandoned */
			close(c->fd);
		}
		c->released = 1;
	}
	cm_conn_drop(c);
}

void iwe_cm_conn_destroy(struct iwe_conn *c)
{
	struct conn_args a = { c, 0, 0 };

	if (c)
		iwe_prog_call(c->prog, do_destroy, &a);
}

void iwe_cm_conn_addrs(const struct iwe_conn *c, struct sockaddr_in *local,
		       struct sockaddr_in *remote)
{
	if (local)
		*local = c->local;
	if (remote)
		*remote = c->remote;
}

static void do_fini(void *arg)
{
	struct iwe_device *dev = arg;
	struct iwe_cm_dev *cm = dev->cm;
	struct conn_args a = { NULL, 0, 0 };

	while (cm->conns) {
		a.c = cm->conns;
		a.c->orphan = 0;
		cm_set_state(a.c, CS_IDLE);	/* no reject reply to wait for */
		do_destroy(&a);
	}
	cm_ports_fini(cm);
}

void iwe_cm_dev_fini(struct iwe_device *dev)
{
	if (!dev->cm)
		return;
	iwe_prog_call(dev->prog, do_fini, dev);
	free(dev->cm);
	dev->cm = NULL;
}

/* ------------------------------------------------------------- listen */

struct listen_call {
	struct cm_listen_args a;
	struct iwe_listener *out;
	int err;
};

static void do_listen(void *arg)
{
	struct listen_call *l = arg;

	l->err = cm_listen(&l->a, &l->out);
}

static int listen_run(struct listen_call *l, struct iwe_listener **out)
{
	if (!l->a.dev || !l->a.handler || !out || !cm_params_valid(l->a.params))
		return EINVAL;
	l->a.prog = iwe_prog_get(l->a.dev);
	if (!l->a.prog)
		return errno;
	l->a.port_cb = cm_port_io;
	iwe_prog_call(l->a.prog, do_listen, l);
	if (!l->err)
		*out = l->out;
	return l->err;
}

int iwe_cm_listen(struct iwe_device *dev, uint64_t service,
		  const struct iwe_cm_params *params, unsigned max_requests,
		  iwe_cm_handler handler, void *ctx, struct iwe_listener **out)
{
	struct listen_call l = { .a = { .dev = dev, .service = service,
					.params = params,
					.max_requests = max_requests,
					.handler = handler, .ctx = ctx } };

	if (service == 0)
		return EINVAL;
	return listen_run(&l, out);
}

int iwe_cm_listen_any(struct iwe_device *dev, uint64_t *service,
		      const struct iwe_cm_params *params,
		      iwe_cm_handler handler, void *ctx,
		      struct iwe_listener **out)
{
	struct listen_call l = { .a = { .dev = dev, .params = params,
					.handler = handler, .ctx = ctx } };
	int err;

	if (!service)
		return EINVAL;
	err = listen_run(&l, out);
	if (!err)
		*service = l.out->service;
	return err;
}

static void do_listen_destroy(void *arg)
{
	struct iwe_listener *l = arg;

	cm_listener_remove(l->port->dev->cm, l);
}

void iwe_cm_listen_destroy(struct iwe_listener *l)
{
	if (l)
		iwe_prog_call(l->port->prog, do_listen_destroy, l);
}

/* -------------------------------------------------------------- adopt */

struct adopt_args {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	const struct iwe_sock_facts *facts;	/* or NULL: ask the socket */
	int fd;
	const void *buf;		/* final message, or private data */
	size_t len;
	int timeout_ms;
	struct iwe_qp *qp;
	const struct iwe_cm_params *params;
	iwe_cm_handler handler;
	void *ctx;
	struct iwe_conn *out;
	int err;
};

/* A TCP socket handed over is connected: what the conn must send first
 * goes now, sparing a watch for writability and a loop round.  What the
 * socket does not take, or an error (which the socket reports again),
 * is left to the loop. */
static void out_now(struct iwe_conn *c)
{
	if (!c->udp && c->out)
		(void)cm_out_flush(c);
}

static struct iwe_conn *adopt_conn(struct adopt_args *a)
{
	struct iwe_conn *c = conn_new(a->dev, a->prog, a->fd);

	if (!c)
		return NULL;
	c->adopted = 1;
	c->handler = a->handler;
	c->ctx = a->ctx;
	c->params = *a->params;
	c->qp = a->qp;
	if (a->facts) {
		c->local = a->facts->local;
		c->remote = a->facts->remote;
	} else {
		cm_fill_addrs(c);
	}
	return c;
}

static void do_adopt_passive(void *arg)
{
	struct adopt_args *a = arg;
	struct iwe_conn *c = adopt_conn(a);

	if (!c || cm_out_set(c, a->buf, a->len)) {
		if (c) {
			c->released = 1;	/* the consumer keeps fd */
			cm_conn_drop(c);
		}
		a->err = ENOMEM;
		return;
	}
	a->out = c;
	/* The final message first (now when the socket takes it, else from
	 * the loop), then the peeking. */
	out_now(c);
	cm_enter(c, CS_REQ_WAIT);
}

static void do_adopt_active(void *arg)
{
	struct adopt_args *a = arg;
	struct iwe_conn *c = adopt_conn(a);

	if (!c) {
		a->err = ENOMEM;
		return;
	}
	c->active = 1;
	c->timeout_ms = a->timeout_ms;
	a->err = cm_active_request(c, a->buf, a->len, 0);
	if (a->err) {
		c->released = 1;
		cm_conn_drop(c);
		return;
	}
	a->out = c;
	out_now(c);
	/* After the request's send, not before: it is off the upgrade's
	 * path then, and enabling it pushes whatever Nagle held (linux
	 * pushes pending segments when TCP_NODELAY is set). */
	if (!c->udp)
		cm_set_nodelay(a->fd);
	cm_enter(c, CS_MPA_SENT);	/* the loop writes what is left */
}

static int adopt_run(struct adopt_args *a, void (*fn)(void *),
		     struct iwe_conn **out)
{
	a->prog = iwe_prog_get(a->dev);
	if (!a->prog)
		return errno;
	if (a->fd < 0 || (!a->facts && iwe_socket_transport(a->fd) !=
					 (int)a->dev->attr.transport))
		return EINVAL;
	/* The socket's file status flags stay the consumer's: every call
	 * on it passes MSG_DONTWAIT, so O_NONBLOCK is not needed, and
	 * setting it, then restoring it at release, were two system calls
	 * on each side's way to its first MPA frame. */
	iwe_prog_call(a->prog, fn, a);
	if (a->err)
		return a->err;
	*out = a->out;
	return 0;
}

int iwe_cm_adopt_passive(struct iwe_device *dev, int fd,
			 const struct iwe_sock_facts *facts,
			 const void *final_msg, size_t final_len,
			 const struct iwe_cm_params *params,
			 iwe_cm_handler handler, void *ctx,
			 struct iwe_conn **out)
{
	struct adopt_args a = { .dev = dev, .fd = fd, .facts = facts,
				.buf = final_msg,
				.len = final_len, .params = params,
				.handler = handler, .ctx = ctx };

	if (!dev || !handler || !out || !cm_params_valid(params) ||
	    (final_len && !final_msg))
		return EINVAL;
	return adopt_run(&a, do_adopt_passive, out);
}

int iwe_cm_adopt_active(struct iwe_qp *qp, int fd,
			const struct iwe_sock_facts *facts, const void *pdata,
			size_t pdata_len, int timeout_ms,
			const struct iwe_cm_params *params,
			iwe_cm_handler handler, void *ctx,
			struct iwe_conn **out)
{
	struct adopt_args a = { .fd = fd, .facts = facts, .buf = pdata,
				.len = pdata_len,
				.timeout_ms = timeout_ms, .qp = qp,
				.params = params, .handler = handler,
				.ctx = ctx };

	if (!qp || !handler || !out || !cm_params_valid(params) ||
	    (pdata_len && !pdata) ||
	    pdata_len > IWE_MAX_PRIVATE_DATA - 4 - IWE_CM_SERVICE_HDR_LEN ||
	    iwe_qp_get_state(qp) != IWE_QPS_INIT)
		return EINVAL;
	a.dev = qp->pd->dev;
	return adopt_run(&a, do_adopt_active, out);
}

struct release_args {
	struct iwe_conn *c;
	int ret, err;
};

static void do_release(void *arg)
{
	struct release_args *a = arg;
	struct iwe_conn *c = a->c;

	a->ret = -1;
	if (c->dead || !c->adopted || c->released) {
		a->err = EINVAL;
		return;
	}
	a->err = cm_ssp_release(c);
	if (a->err)
		return;
	cm_enter(c, CS_IDLE);
	a->ret = c->fd;
}

int iwe_cm_release_socket(struct iwe_conn *c)
{
	struct release_args a = { c, -1, EINVAL };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	iwe_prog_call(c->prog, do_release, &a);
	if (a.ret < 0)
		errno = a.err;
	return a.ret;
}
