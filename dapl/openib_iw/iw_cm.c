/* The connection manager: core, active side, established connections,
 * disconnect and destroy.  Listeners, requests, accept and reject live
 * in iw_cm_passive.c; adopted sockets (SSPs) in iw_cm_ssp.c.  See the
 * contract at the end of iw_engine.h, and iw_cm_priv.h for the model:
 * every conn is driven on its device's progress thread.
 *
 * Environment knobs (iwe_cm_params_from_env; each overrides the value
 * the caller put in struct iwe_cm_params, invalid values are ignored):
 *   IWDAPL_MPA_REV=1|2            MPA revision to speak (2: RFC 6581
 *                                 enhanced setup with IRD/ORD and RTR).
 *   IWDAPL_CRC=0|1|off|on|no|yes  ask for the MPA CRC32c (it is used when
 *                                 either side asks).
 *   IWDAPL_RTR=none|write|read|send
 *                                 the RTR of peer-to-peer setup (rev 2):
 *                                 as initiator, the only type offered
 *                                 (none: plain client-server); as
 *                                 responder, the preferred type (any
 *                                 offered type is accepted).
 *   IWDAPL_MPA_TIMEOUT_MS=n       passive side: how long to wait for the
 *                                 MPA request (and for the RTR after
 *                                 accepting), in milliseconds.
 *
 * Mapping of outcomes (active side): TCP connect error, or a reset
 * before the reply -> UNREACHABLE; no reply in time -> TIMED_OUT; a
 * reply with R -> REJECTED with the peer's private data; anything else
 * that is not an acceptable reply, or an orderly close before the reply
 * (no listener took the request) -> NON_PEER_REJECTED.  Established:
 * the peer's FIN between FPDUs, its reset (an abrupt disconnect), or any
 * end after we started a graceful disconnect -> DISCONNECTED; a
 * Terminate, a close inside an FPDU or a timeout -> BROKEN.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"
#include "iw_qp.h"

#define CONN_OF(ptr, member) IWE_CONTAINER_OF(ptr, struct iwe_conn, member)

/* The public RTR bits are the MPA layer's own. */
_Static_assert(IWE_RTR_SEND == IW_RTR_SEND && IWE_RTR_WRITE == IW_RTR_WRITE &&
	       IWE_RTR_READ == IW_RTR_READ, "RTR bits differ");

/* ------------------------------------------------------------ params */

static int env_int(const char *name, long lo, long hi, long *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return 0;
	*out = v;
	return 1;
}

static void env_crc(struct iwe_cm_params *p)
{
	const char *s = getenv("IWDAPL_CRC");

	if (!s)
		return;
	if (!strcmp(s, "1") || !strcasecmp(s, "on") || !strcasecmp(s, "yes"))
		p->crc = 1;
	else if (!strcmp(s, "0") || !strcasecmp(s, "off") ||
		 !strcasecmp(s, "no"))
		p->crc = 0;
}

static void env_rtr(struct iwe_cm_params *p)
{
	static const struct { const char *name; unsigned rtr; } map[] = {
		{ "none", 0 }, { "write", IW_RTR_WRITE },
		{ "read", IW_RTR_READ }, { "send", IW_RTR_SEND },
	};
	const char *s = getenv("IWDAPL_RTR");
	size_t i;

	for (i = 0; s && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcasecmp(s, map[i].name))
			p->rtr = map[i].rtr;
}

void iwe_cm_params_from_env(struct iwe_cm_params *p)
{
	long v;

	if (!p)
		return;
	if (env_int("IWDAPL_MPA_REV", 1, 2, &v))
		p->mpa_rev = (int)v;
	if (env_int("IWDAPL_MPA_TIMEOUT_MS", 1, 3600000, &v))
		p->mpa_timeout_ms = (int)v;
	env_crc(p);
	env_rtr(p);
}

int cm_params_valid(const struct iwe_cm_params *p)
{
	return p && (p->mpa_rev == 1 || p->mpa_rev == 2) &&
	       !(p->rtr & ~(unsigned)IW_RTR_MASK);
}

static unsigned clamp_rd(uint32_t v, unsigned max)
{
	return v == 0 ? 1 : v > max ? max : v;
}

void cm_local_from_params(const struct iwe_cm_params *p,
			  struct iw_mpa_local *l)
{
	memset(l, 0, sizeof(*l));
	l->rev = p->mpa_rev;
	l->crc = !!p->crc;
	l->ird = clamp_rd(p->ird, IWE_MAX_IRD);
	l->ord = clamp_rd(p->ord, IWE_MAX_ORD);
	/* As responder we take any RTR the initiator offers; a single
	 * configured type is the preference. */
	l->rtr_ok = IW_RTR_MASK;
	if (p->rtr && !(p->rtr & (p->rtr - 1)))
		l->rtr_pref = p->rtr;
}

/* ------------------------------------------------------------- conns */

struct iwe_cm_dev *cm_dev(struct iwe_device *dev)
{
	if (!dev->cm)
		dev->cm = calloc(1, sizeof(*dev->cm));
	return dev->cm;
}

static void conn_watch_cb(struct iwe_prog_watch *w, uint32_t revents)
{
	struct iwe_conn *c = CONN_OF(w, watch);

	c->io(c, revents);
}

static void conn_timer_cb(struct iwe_prog_timer *t)
{
	struct iwe_conn *c = CONN_OF(t, timer);

	if (c->on_timer)
		c->on_timer(c);
}

static void conn_ev_task(struct iwe_prog_task *t)
{
	struct iwe_conn *c = CONN_OF(t, ev_task);
	struct cm_pending_ev q[CM_MAX_PENDING_EV];
	int i, n = c->nev;

	/* Handlers may queue more: take a copy first. */
	memcpy(q, c->evq, sizeof(q));
	c->nev = 0;
	for (i = 0; i < n; i++)
		cm_event(c, q[i].type, q[i].status, q[i].reason, NULL, 0);
}

static void est_io(struct iwe_conn *c, uint32_t revents);

/* The QP's TX hit a full socket, or a consumer polling its CQ changed
 * something the CM must see (the stream ended, the first FPDU came). */
static void conn_kick_task(struct iwe_prog_task *t)
{
	struct iwe_conn *c = CONN_OF(t, kick_task);

	if (c->dead || !c->attached || c->final)
		return;
	if (iwe_qp_get_state(c->qp) == IWE_QPS_ERROR)
		est_io(c, EPOLLIN);	/* learns why, ends the conn */
	else
		cm_est_start(c);
}

static void conn_free_task(struct iwe_prog_task *t)
{
	struct iwe_conn *c = CONN_OF(t, free_task);

	free(c->out);
	free(c);
}

struct iwe_conn *cm_conn_new(struct iwe_device *dev, struct iwe_prog *p,
			     int fd)
{
	struct iwe_cm_dev *cm = cm_dev(dev);
	struct iwe_conn *c = cm ? calloc(1, sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	c->dev = dev;
	c->prog = p;
	c->fd = fd;
	c->watch.fd = -1;
	c->watch.cb = conn_watch_cb;
	c->timer.cb = conn_timer_cb;
	c->ev_task.fn = conn_ev_task;
	c->kick_task.fn = conn_kick_task;
	c->free_task.fn = conn_free_task;
	c->next = cm->conns;
	if (cm->conns)
		cm->conns->prev = c;
	cm->conns = c;
	return c;
}

void cm_quiesce(struct iwe_conn *c)
{
	iwe_prog_watch_del(c->prog, &c->watch);
	iwe_prog_timer_cancel(c->prog, &c->timer);
}

void cm_watch(struct iwe_conn *c, uint32_t events)
{
	int err;

	if (c->watch.fd < 0)
		err = iwe_prog_watch_add(c->prog, &c->watch, c->fd, events);
	else
		err = iwe_prog_watch_mod(c->prog, &c->watch, events);
	if (err)
		abort();	/* EPOLL_CTL on a live fd only fails on ENOMEM */
}

/* Unlink and free (later: the current epoll batch may name it). */
static void conn_unlink(struct iwe_conn *c)
{
	struct iwe_cm_dev *cm = c->dev->cm;

	cm_quiesce(c);
	iwe_prog_unpost(c->prog, &c->ev_task);
	iwe_prog_unpost(c->prog, &c->kick_task);
	if (c->qp)
		iwe_qp_clear_tx_hook(c->qp);
	if (c->prev)
		c->prev->next = c->next;
	else
		cm->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->dead = 1;
	iwe_prog_post(c->prog, &c->free_task);
}

void cm_conn_drop(struct iwe_conn *c)
{
	if (c->dead)
		return;
	if (!c->released && c->fd >= 0)
		close(c->fd);
	conn_unlink(c);
}

/* ------------------------------------------------------------ events */

void cm_event(struct iwe_conn *c, int type, int status, const char *reason,
	      const void *pdata, size_t pdata_len)
{
	struct iwe_cm_event ev = {
		.type = (enum iwe_cm_event_type)type,
		.conn = c,
		.service = c->service,
		.pdata = pdata,
		.pdata_len = pdata_len,
		.local = c->local,
		.remote = c->remote,
		.status = status,
		.reason = reason,
	};

	/* Events queued by API calls happened first. */
	if (c->nev)
		conn_ev_task(&c->ev_task);
	if (!c->dead && c->handler)
		c->handler(&ev, c->ctx);
}

/* For events decided inside an API call: handlers are not re-entered
 * from the call, the loop delivers them in order. */
void cm_queue_event(struct iwe_conn *c, int type, int status,
		    const char *reason)
{
	if (c->nev == CM_MAX_PENDING_EV)
		return;		/* cannot happen: at most two per conn */
	c->evq[c->nev++] = (struct cm_pending_ev){ type, status, reason };
	iwe_prog_post(c->prog, &c->ev_task);
}

void cm_finish(struct iwe_conn *c, int type, int status, const char *reason,
	       const void *pdata, size_t pdata_len)
{
	cm_quiesce(c);
	c->state = CS_IDLE;
	c->final = 1;
	if (c->orphan) {
		cm_conn_drop(c);
		return;
	}
	cm_event(c, type, status, reason, pdata, pdata_len);
}

/* ----------------------------------------------------------- socket I/O */

int cm_out_set(struct iwe_conn *c, const void *buf, size_t len)
{
	uint8_t *b = len ? malloc(len) : NULL;

	if (len && !b)
		return ENOMEM;
	if (len)
		memcpy(b, buf, len);
	free(c->out);
	c->out = b;
	c->out_len = len;
	c->out_off = 0;
	return 0;
}

/* 0 when everything is out, EAGAIN, or the socket's errno. */
int cm_out_flush(struct iwe_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? EAGAIN : errno;
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	return 0;
}

/* Read the rest of an MPA frame into c->in, never a byte past its end
 * (the FPDUs behind it belong to the QP).  1: parsing finished, *st is
 * IW_MPA_OK or an error; 0: would block; -errno from the socket, and
 * -ENODATA for an orderly close. */
int cm_read_frame(struct iwe_conn *c, enum iw_mpa_expect expect,
		  struct iw_mpa_frame *f, int *st)
{
	for (;;) {
		size_t need = 0;
		ssize_t n;

		*st = iw_mpa_parse(c->in, c->in_len, expect, f, &need);
		if (*st != IW_MPA_NEED_MORE)
			return 1;
		if (need > sizeof(c->in) - c->in_len) {
			*st = IW_MPA_ERR_PD_LEN;	/* parse bounds it */
			return 1;
		}
		n = recv(c->fd, c->in + c->in_len, need, MSG_DONTWAIT);
		if (n == 0)
			return -ENODATA;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? 0 : -errno;
		c->in_len += (size_t)n;
	}
}

void cm_fill_addrs(struct iwe_conn *c)
{
	socklen_t l = sizeof(c->local);

	if (getsockname(c->fd, (struct sockaddr *)&c->local, &l) < 0)
		memset(&c->local, 0, sizeof(c->local));
	l = sizeof(c->remote);
	if (getpeername(c->fd, (struct sockaddr *)&c->remote, &l) < 0)
		memset(&c->remote, 0, sizeof(c->remote));
}

/* An RDMA connection that ended (both sides closed, or it broke) has
 * nothing left in flight that a late segment could corrupt: MPA would drop
 * it.  Closing with a zero linger spares the port a TIME_WAIT, so a
 * listener can come back on it at once and many short connections do not
 * exhaust the ports. */
void cm_skip_time_wait(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* Close the socket of a connection that ended in order.  Bytes still in
 * the send queue belong to messages the consumer saw complete (an abrupt
 * disconnect right after a Send completion is common: dapltest does it):
 * let the kernel deliver them, which a zero-linger close would discard.
 * Unread input would make close() reset the stream, so it is dropped
 * first.  With nothing queued the port skips TIME_WAIT. */
void cm_close_ended(int fd)
{
	char sink[4096];
	int queued = 0;

	if (ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0) {
		while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT | MSG_TRUNC) > 0)
			;
	} else {
		cm_skip_time_wait(fd);
	}
	close(fd);
}

/* Reset the connection now but keep the descriptor (the QP may still
 * name it, and it is closed only by iwe_cm_conn_destroy): a TCP
 * "disconnect" through connect(AF_UNSPEC) with zero linger sends RST. */
void cm_reset_socket(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (connect(fd, &sa, sizeof(sa)) < 0) {
		/* Nothing more we can do; close() will still reset. */
	}
}

void cm_set_nodelay(int fd)
{
	int one = 1;

	/* MPA frames and small FPDUs must not wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ------------------------------------------------------- established */

static void cm_tx_hook(void *arg)
{
	struct iwe_conn *c = arg;

	/* Called under the QP lock, maybe on a posting thread. */
	iwe_prog_post(c->prog, &c->kick_task);
}

int cm_attach(struct iwe_conn *c, int responder)
{
	struct iwe_stream_params sp = {
		.crc = c->neg.crc,
		.ird = clamp_rd(c->neg.ird, IWE_MAX_IRD),
		.ord = clamp_rd(c->neg.ord, IWE_MAX_ORD),
		.mpa_rev = c->neg.rev,
	};
	struct iwe_qp_cm_opts o = {
		.responder = responder,
		.rtr = c->neg.rtr,
		.tx_hook = cm_tx_hook,
		.tx_hook_arg = c,
	};
	int err = iwe_qp_attach_cm(c->qp, c->fd, &sp, &o);

	if (!err)
		c->attached = 1;
	return err;
}

/* IWDAPL_DEBUG=1: say on stderr why an established connection ended. */
static void est_log_end(struct iwe_conn *c, int err)
{
	/* Progress threads of several devices may get here at once. */
	static int debug = -1;
	int on = __atomic_load_n(&debug, __ATOMIC_RELAXED);
	struct iwe_term_info sent, rcvd;

	if (on < 0) {
		const char *v = getenv("IWDAPL_DEBUG");

		on = v && *v && *v != '0';
		__atomic_store_n(&debug, on, __ATOMIC_RELAXED);
	}
	if (!on)
		return;
	iwe_qp_terminate_info(c->qp, &sent, &rcvd);
	fprintf(stderr, "iwdapl: conn %p ended: %s (state %d)", (void *)c,
		strerror(err), c->state);
	if (sent.valid)
		fprintf(stderr, ", sent Terminate %u/%u/0x%02x", sent.layer,
			sent.etype, sent.ecode);
	if (rcvd.valid)
		fprintf(stderr, ", received Terminate %u/%u/0x%02x",
			rcvd.layer, rcvd.etype, rcvd.ecode);
	fputc('\n', stderr);
}

/* The stream ended: which event that is depends on how. */
static void est_end(struct iwe_conn *c, int err)
{
	int disconnecting = c->state == CS_DISC_DRAIN ||
			    c->state == CS_DISC_WAIT;
	/* A FIN between FPDUs is the peer's graceful close; a reset is its
	 * abrupt one (RFC 5040 abortive close), as iWARP stacks report it.
	 * A stream cut inside an FPDU, a Terminate, a CRC error or a
	 * timeout breaks the connection. */
	int peer_closed = err == ENOTCONN || err == ECONNRESET || err == EPIPE;
	int orderly = disconnecting ||
		      (peer_closed && c->state == CS_ESTABLISHED);

	est_log_end(c, err);
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (err == ENOTCONN && !disconnecting)
		shutdown(c->fd, SHUT_WR);	/* answer the peer's FIN */
	if (!orderly)
		cm_reset_socket(c->fd);
	cm_finish(c, orderly ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN, err,
		  orderly ? "connection closed" :
		  err == EPROTO ? "terminated" : "stream broken", NULL, 0);
}

static void est_graceful_step(struct iwe_conn *c)
{
	if (c->state == CS_DISC_DRAIN && iwe_qp_tx_drained(c->qp)) {
		shutdown(c->fd, SHUT_WR);
		c->state = CS_DISC_WAIT;
	}
}

/* After any progress: deliver the passive ESTABLISHED once the RTR is
 * in, move a graceful disconnect along, and watch for writability only
 * while an FPDU waits for room. */
/* The responder is established once the initiator's first FPDU (the RTR,
 * or any FPDU without RTR) has arrived. */
static void est_check_rtr(struct iwe_conn *c)
{
	if (c->state == CS_RTR_WAIT && iwe_qp_first_rx(c->qp)) {
		iwe_prog_timer_cancel(c->prog, &c->timer);
		c->state = CS_ESTABLISHED;
		cm_event(c, IWE_CM_ESTABLISHED, 0, NULL, NULL, 0);
	}
}

void cm_est_start(struct iwe_conn *c)
{
	uint32_t ev = EPOLLIN;

	est_graceful_step(c);
	if (c->state != CS_DISC_WAIT && iwe_qp_tx_blocked(c->qp))
		ev |= EPOLLOUT;
	cm_watch(c, ev);
	est_check_rtr(c);
}

static void est_io(struct iwe_conn *c, uint32_t revents)
{
	int err = 0;

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
		err = iwe_qp_progress_rx(c->qp);
	if (!err && (revents & EPOLLOUT))
		err = iwe_qp_progress_tx(c->qp);
	/* The RTR and the peer's FIN may arrive in one read: established
	 * first, then an orderly close. */
	if (err == ENOTCONN)
		est_check_rtr(c);
	if (err)
		est_end(c, err);
	else
		cm_est_start(c);
}

/* RTR never came (passive), or a graceful disconnect took too long. */
static void est_timeout(struct iwe_conn *c)
{
	int disconnecting = c->state == CS_DISC_DRAIN ||
			    c->state == CS_DISC_WAIT;

	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	cm_reset_socket(c->fd);
	cm_finish(c, disconnecting ? IWE_CM_DISCONNECTED : IWE_CM_BROKEN,
		  ETIMEDOUT, disconnecting ? "disconnect timed out" :
		  "no RTR from the initiator", NULL, 0);
}

static void est_enter(struct iwe_conn *c, int state)
{
	c->state = state;
	c->io = est_io;
	c->on_timer = est_timeout;
	cm_est_start(c);
}

/* ------------------------------------------------------------ active */

static void active_fail(struct iwe_conn *c, int type, int status,
			const char *reason)
{
	/* An adopted socket is the consumer's: leave it as it is. */
	if (!c->adopted && type != IWE_CM_REJECTED)
		cm_reset_socket(c->fd);
	cm_finish(c, type, status, reason, NULL, 0);
}

static void active_reply(struct iwe_conn *c, const struct iw_mpa_frame *f)
{
	int st = iw_mpa_check_reply(&c->req, f);

	if (st != IW_MPA_OK) {
		active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
			    iw_mpa_strerror(st));
		return;
	}
	if (f->reject) {
		cm_finish(c, IWE_CM_REJECTED, ECONNREFUSED,
			  "rejected by the peer", f->pdata, f->pdata_len);
		return;
	}
	iw_mpa_initiator_conn(&c->req, f, &c->neg);
	if (cm_attach(c, 0)) {
		active_fail(c, IWE_CM_NON_PEER_REJECTED, EINVAL,
			    "QP cannot be attached (not in INIT)");
		return;
	}
	iwe_prog_timer_cancel(c->prog, &c->timer);
	est_enter(c, CS_ESTABLISHED);
	/* The accepting consumer's private data comes with it. */
	cm_event(c, IWE_CM_ESTABLISHED, 0, NULL, f->pdata, f->pdata_len);
}

static void active_read(struct iwe_conn *c)
{
	struct iw_mpa_frame f;
	int st, r = cm_read_frame(c, IW_MPA_EXPECT_REP, &f, &st);

	if (r == 0)
		return;
	if (r == -ENODATA)
		active_fail(c, IWE_CM_NON_PEER_REJECTED, ECONNABORTED,
			    "closed by the peer before the MPA reply");
	else if (r < 0)
		active_fail(c, IWE_CM_UNREACHABLE, -r,
			    "connection reset before the MPA reply");
	else if (st != IW_MPA_OK)
		active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
			    iw_mpa_strerror(st));
	else
		active_reply(c, &f);
}

void cm_active_io(struct iwe_conn *c, uint32_t revents)
{
	int err = cm_out_flush(c);

	if (err && err != EAGAIN) {
		active_fail(c, IWE_CM_UNREACHABLE, err,
			    "connection lost while sending the MPA request");
		return;
	}
	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		active_read(c);
		if (c->state != CS_MPA_SENT)
			return;
	}
	cm_watch(c, EPOLLIN | (c->out ? EPOLLOUT : 0));
}

void cm_active_timeout(struct iwe_conn *c)
{
	active_fail(c, IWE_CM_TIMED_OUT, ETIMEDOUT,
		    c->state == CS_CONNECTING ? "TCP connect timed out" :
		    "no MPA reply in time");
}

static void active_connected(struct iwe_conn *c, uint32_t revents)
{
	int err = 0;
	socklen_t l = sizeof(err);

	(void)revents;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		err = errno;
	if (err) {
		active_fail(c, IWE_CM_UNREACHABLE, err, "TCP connect failed");
		return;
	}
	cm_fill_addrs(c);
	c->state = CS_MPA_SENT;
	c->io = cm_active_io;
	cm_active_io(c, 0);
}

/* Build the request (service header first when asked) into c->out. */
int cm_active_start(struct iwe_conn *c, const void *pdata, size_t len,
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
		.ird = clamp_rd(c->params.ird, IWE_MAX_IRD),
		.ord = clamp_rd(c->params.ord, IWE_MAX_ORD),
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

static int connect_socket(struct iwe_device *dev, int *fdp)
{
	struct sockaddr_in src = dev->attr.addr;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
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
	*fdp = fd;
	return 0;
}

static uint16_t service_port(uint64_t service)
{
	if (service <= 65535)
		return (uint16_t)service;
	return (uint16_t)(IWE_CM_SERVICE_PORT_BASE +
			  service % IWE_CM_SERVICE_PORTS);
}

static void do_connect(void *arg)
{
	struct connect_args *a = arg;
	struct iwe_device *dev = a->qp->pd->dev;
	struct sockaddr_in dst = *a->dst;
	struct iwe_conn *c;
	int fd = -1, rc;

	a->err = connect_socket(dev, &fd);
	if (a->err)
		return;
	c = cm_conn_new(dev, iwe_prog_get(dev), fd);
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
	c->remote = dst;
	a->err = cm_active_start(c, a->pdata, a->pdata_len, a->service > 65535);
	if (a->err) {
		cm_conn_drop(c);
		return;
	}
	c->state = CS_CONNECTING;
	c->io = active_connected;
	c->on_timer = cm_active_timeout;
	a->out = c;
	dst.sin_port = htons(service_port(a->service));
	rc = connect(fd, (struct sockaddr *)&dst, sizeof(dst));
	if (rc < 0 && errno != EINPROGRESS) {
		c->final = 1;
		c->state = CS_IDLE;
		cm_queue_event(c, IWE_CM_UNREACHABLE, errno,
			       "TCP connect failed");
		return;
	}
	cm_watch(c, EPOLLOUT);
	if (a->timeout_ms > 0)
		iwe_prog_timer_arm(c->prog, &c->timer, a->timeout_ms);
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

/* -------------------------------------------------------- disconnect */

struct conn_args {
	struct iwe_conn *c;
	int graceful;
	int ret;
};

/* Abrupt at the verbs level: the QP flushes and the event is posted at
 * once.  On an established stream with no FPDU half written, the send
 * queue goes out followed by a FIN (completed Sends reach the peer, which
 * sees an orderly end); otherwise the stream is reset. */
static void abrupt(struct iwe_conn *c)
{
	int established = c->state == CS_RTR_WAIT ||
			  c->state == CS_ESTABLISHED ||
			  c->state == CS_DISC_DRAIN || c->state == CS_DISC_WAIT;

	cm_quiesce(c);
	if (c->qp && (c->attached || c->state == CS_ACCEPTING))
		iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	if (established && c->qp && iwe_qp_tx_drained(c->qp))
		shutdown(c->fd, SHUT_WR);
	else
		cm_reset_socket(c->fd);
	c->state = CS_IDLE;
	c->final = 1;
	cm_queue_event(c, IWE_CM_DISCONNECTED, 0, "disconnected");
}

static void do_disconnect(void *arg)
{
	struct conn_args *a = arg;
	struct iwe_conn *c = a->c;

	a->ret = 0;
	switch (c->state) {
	case CS_RTR_WAIT:
	case CS_ESTABLISHED:
		if (!a->graceful)
			break;
		c->state = CS_DISC_DRAIN;
		iwe_prog_timer_arm(c->prog, &c->timer, CM_DISC_TIMEOUT_MS);
		cm_est_start(c);
		return;
	case CS_DISC_DRAIN:
	case CS_DISC_WAIT:
		if (a->graceful)
			return;
		break;
	case CS_CONNECTING:
	case CS_MPA_SENT:
	case CS_ACCEPTING:
		break;
	case CS_IDLE:
		return;		/* already over */
	default:
		a->ret = EINVAL;
		return;
	}
	abrupt(c);
}

int iwe_cm_disconnect(struct iwe_conn *c, int graceful)
{
	struct conn_args a = { c, graceful, 0 };

	if (!c)
		return EINVAL;
	iwe_prog_call(c->prog, do_disconnect, &a);
	return a.ret;
}

/* ----------------------------------------------------------- destroy */

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
	if (!c->released) {
		if (c->final && c->attached) {
			cm_close_ended(c->fd);
		} else {
			if (!c->final)
				cm_reset_socket(c->fd);	/* abandoned: reset */
			close(c->fd);
		}
		c->released = 1;
	}
	conn_unlink(c);
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

/* ------------------------------------------------------ device close */

static void do_fini(void *arg)
{
	struct iwe_device *dev = arg;
	struct iwe_cm_dev *cm = dev->cm;
	struct conn_args a = { NULL, 0, 0 };

	while (cm->conns) {
		a.c = cm->conns;
		a.c->orphan = 0;
		a.c->state = CS_IDLE;	/* no reject reply to wait for */
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

/* The accept reply is out and the QP attached.  Maybe inside
 * iwe_cm_accept: the event is queued, not delivered. */
void cm_passive_established(struct iwe_conn *c)
{
	if (c->neg.rtr) {
		/* ESTABLISHED once the RTR is in; bounded wait. */
		iwe_prog_timer_arm(c->prog, &c->timer,
				   c->params.mpa_timeout_ms > 0 ?
				   c->params.mpa_timeout_ms :
				   CM_DEFAULT_MPA_TIMEOUT_MS);
		est_enter(c, CS_RTR_WAIT);
		return;
	}
	est_enter(c, CS_ESTABLISHED);
	cm_queue_event(c, IWE_CM_ESTABLISHED, 0, NULL);
}
