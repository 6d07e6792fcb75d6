/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager's ground floor (see iw_cm_priv.h): negotiation
 * parameters, the conn object and its free, event delivery, and the
 * socket helpers every part of the CM shares.
 *
 * Environment knobs (iwe_cm_params_from_env; each overrides the value
 * the caller put in struct iwe_cm_params; an invalid value keeps it and
 * is reported once, see iw_env.h):
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
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"
#include "iw_env.h"
#include "iw_qp.h"
#include "iw_slab.h"

#define CONN_OF(ptr, member) IWE_CONTAINER_OF(ptr, struct iwe_conn, member)

/* The public RTR bits are the MPA layer's own. */
_Static_assert(IWE_RTR_SEND == IW_RTR_SEND && IWE_RTR_WRITE == IW_RTR_WRITE &&
	       IWE_RTR_READ == IW_RTR_READ, "RTR bits differ");

/* ------------------------------------------------------------ params */

static const char *const rtr_names[] = { "none", "write", "read", "send" };
static const unsigned rtr_bits[] = { 0, IW_RTR_WRITE, IW_RTR_READ,
				     IW_RTR_SEND };

static void env_rtr(struct iwe_cm_params *p)
{
	int cur = -1, i;

	for (i = 0; i < 4; i++)
		if (p->rtr == rtr_bits[i])
			cur = i;
	i = iw_env_choice("IWDAPL_RTR", rtr_names, 4, cur);
	if (i >= 0)
		p->rtr = rtr_bits[i];
}

void iwe_cm_params_from_env(struct iwe_cm_params *p)
{
	if (!p)
		return;
	p->mpa_rev = (int)iw_env_long("IWDAPL_MPA_REV", p->mpa_rev, 1, 2);
	/* cm_mpa_timeout: 0 in p means the default, so say which. */
	p->mpa_timeout_ms = (int)iw_env_long("IWDAPL_MPA_TIMEOUT_MS",
					     cm_mpa_timeout(p), 1, 3600000);
	p->crc = iw_env_bool("IWDAPL_CRC", p->crc);
	env_rtr(p);
}

int cm_params_valid(const struct iwe_cm_params *p)
{
	return p && (p->mpa_rev == 1 || p->mpa_rev == 2) &&
	       !(p->rtr & ~(unsigned)IW_RTR_MASK);
}

unsigned cm_clamp_rd(uint32_t v, unsigned max)
{
	return v == 0 ? 1 : v > max ? max : v;
}

void cm_local_from_params(const struct iwe_cm_params *p,
			  struct iw_mpa_local *l)
{
	memset(l, 0, sizeof(*l));
	l->rev = p->mpa_rev;
	l->crc = !!p->crc;
	l->ird = cm_clamp_rd(p->ird, IWE_MAX_IRD);
	l->ord = cm_clamp_rd(p->ord, IWE_MAX_ORD);
	/* As responder we take any RTR the initiator offers; a single
	 * configured type is the preference. */
	l->rtr_ok = IW_RTR_MASK;
	if (p->rtr && !(p->rtr & (p->rtr - 1)))
		l->rtr_pref = p->rtr;
}

int cm_mpa_timeout(const struct iwe_cm_params *p)
{
	return p->mpa_timeout_ms > 0 ? p->mpa_timeout_ms
				     : CM_DEFAULT_MPA_TIMEOUT_MS;
}

int cm_refused_pause_ms(struct iwe_conn *c)
{
	static long grace_cache = -1;
	long grace = iw_env_long_once(&grace_cache, "IWDAPL_CONNECT_REFUSED_MS",
				      CM_REFUSED_GRACE_MS, 0,
				      CM_REFUSED_GRACE_MAX_MS);
	uint64_t now = iwe_now_ns(), pause_ns;

	if (c->adopted)
		return -1;		/* no connect of ours */
	if (!c->refused++) {
		if (c->timeout_ms > 0 && c->timeout_ms < grace)
			grace = c->timeout_ms;
		c->refused_end_ns = now + (uint64_t)grace * 1000000u;
	}
	if (now + 1000000u > c->refused_end_ns)
		return -1;
	pause_ns = (uint64_t)1000000u << (c->refused < 8 ? c->refused - 1 : 7);
	if (pause_ns > c->refused_end_ns - now)
		pause_ns = c->refused_end_ns - now;	/* the last try */
	return (int)(pause_ns / 1000000u);
}

uint16_t cm_service_port(uint64_t service)
{
	if (service <= 65535)
		return (uint16_t)service;
	return (uint16_t)(IWE_CM_SERVICE_PORT_BASE +
			  service % IWE_CM_SERVICE_PORTS);
}

/* ------------------------------------------------------------- conns */

struct iwe_cm_dev *cm_dev(struct iwe_device *dev)
{
	if (!dev->cm)
		dev->cm = calloc(1, sizeof(*dev->cm));
	return dev->cm;
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

static void conn_free_task(struct iwe_prog_task *t)
{
	struct iwe_conn *c = CONN_OF(t, free_task);

	free(c->out);
	iw_slab_free(c, sizeof(*c));
}

struct iwe_conn *cm_conn_new(struct iwe_device *dev, struct iwe_prog *p,
			     int fd, void (*io)(struct iwe_prog_watch *,
						uint32_t),
			     void (*on_timer)(struct iwe_prog_timer *),
			     void (*on_qp)(struct iwe_prog_task *))
{
	struct iwe_cm_dev *cm = cm_dev(dev);
	struct iwe_conn *c = cm ? iw_slab_zalloc(sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	c->dev = dev;
	c->prog = p;
	c->fd = fd;
	c->state = CS_NEW;
	c->pend.type = -1;
	c->watch.fd = -1;
	c->watch.cb = io;
	c->timer.cb = on_timer;
	c->qp_task.fn = on_qp;
	c->ev_task.fn = conn_ev_task;
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

/* A passive conn whose request is not complete yet is on its port's
 * list, oldest first (for the CM_HALF_OPEN_MAX cap). */
void cm_half_open_add(struct cm_port *p, struct iwe_conn *c)
{
	c->port = p;
	c->pnext = NULL;
	c->pprev = p->half_open_tail;
	if (p->half_open_tail)
		p->half_open_tail->pnext = c;
	else
		p->half_open = c;
	p->half_open_tail = c;
	p->nhalf_open++;
}

void cm_half_open_del(struct iwe_conn *c)
{
	struct cm_port *p = c->port;

	if (!p)
		return;
	if (c->pprev)
		c->pprev->pnext = c->pnext;
	else
		p->half_open = c->pnext;
	if (c->pnext)
		c->pnext->pprev = c->pprev;
	else
		p->half_open_tail = c->pprev;
	p->nhalf_open--;
	c->port = NULL;
	c->pnext = c->pprev = NULL;
}

/* Unlink and free (later: the current epoll batch may name it). */
static void conn_unlink(struct iwe_conn *c)
{
	struct iwe_cm_dev *cm = c->dev->cm;

	cm_quiesce(c);
	iwe_prog_unpost(c->prog, &c->ev_task);
	iwe_prog_unpost(c->prog, &c->qp_task);
	if (c->qp && c->attached)
		iwe_qp_detach_cm(c->qp);
	cm_half_open_del(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		cm->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->dead = 1;
	cm_set_state(c, CS_DROPPED);
	iwe_prog_post(c->prog, &c->free_task);
}

/* A conn in state s waits for the peer or the network, and its next
 * event for the loop (what a consumer polling for it waits on). */
static int state_awaited(int s)
{
	switch (s) {
	case CS_CONNECTING:
	case CS_REFUSED_PAUSE:
	case CS_MPA_SENT:
	case CS_REQ_WAIT:
	case CS_ACCEPTING:
	case CS_REJECTING:
	case CS_RTR_WAIT:
	case CS_RTR_ACK_WAIT:
	case CS_DISC_DRAIN:
	case CS_DISC_WAIT:
		return 1;
	default:
		return 0;
	}
}

void cm_set_state(struct iwe_conn *c, int s)
{
	int d = state_awaited(s) - state_awaited(c->state);

	if (d)
		atomic_fetch_add_explicit(&c->dev->cm_awaited, d,
					  memory_order_relaxed);
	c->state = s;
}

void cm_conn_drop(struct iwe_conn *c)
{
	if (c->dead)
		return;
	if (c->qp && c->attached)
		iwe_qp_detach_cm(c->qp);
	if (!c->released && c->fd >= 0)
		close(c->fd);
	c->released = 1;
	conn_unlink(c);
}

/* ------------------------------------------------------------ events */

/* "L->R" of c: an active conn names the port it connects to even before
 * its socket is connected, and an unknown local address is the
 * device's. */
static char *conn_addrs(const struct iwe_conn *c, char *buf, size_t len)
{
	struct sockaddr_in local = c->local, remote = c->remote;

	if (local.sin_family != AF_INET) {
		local = c->dev->attr.addr;
		local.sin_port = 0;
	}
	if (c->active && !c->adopted)
		remote.sin_port = htons(cm_service_port(c->service));
	return iw_log_addrs(&local, &remote, buf, len);
}

void cm_log(const struct iwe_conn *c, enum iw_log_level level,
	    const char *fmt, ...)
{
	char a[IW_LOG_ADDRS_LEN], obj[IW_LOG_ADDRS_LEN + 8];
	va_list ap;

	if (!iw_log_on(level))
		return;
	snprintf(obj, sizeof(obj), "conn %s", conn_addrs(c, a, sizeof(a)));
	va_start(ap, fmt);
	iw_logv(level, obj, fmt, ap);
	va_end(ap);
}

/* Every event, at the level of what it tells: a connection that could
 * not be made is the consumer's business (error), one that broke is a
 * warning unless the peer stopped answering, the rest is routine. */
static void log_event(const struct iwe_conn *c, int type, int status,
		      const char *reason)
{
	static const struct {
		const char *what;
		enum iw_log_level level;
	} ev[] = {
		[IWE_CM_CONNECT_REQUEST] = { "connection request", IW_LOG_INFO },
		[IWE_CM_ESTABLISHED] = { "established", IW_LOG_INFO },
		[IWE_CM_REJECTED] = { "rejected by the peer", IW_LOG_ERROR },
		[IWE_CM_NON_PEER_REJECTED] = { "refused", IW_LOG_ERROR },
		[IWE_CM_UNREACHABLE] = { "unreachable", IW_LOG_ERROR },
		[IWE_CM_TIMED_OUT] = { "timed out", IW_LOG_ERROR },
		[IWE_CM_DISCONNECTED] = { "disconnected", IW_LOG_INFO },
		[IWE_CM_BROKEN] = { "broken", IW_LOG_WARN },
		[IWE_CM_SOCKET_DOWN] = { "socket down", IW_LOG_WARN },
		[IWE_CM_BAD_REQUEST] = { "not an MPA request", IW_LOG_ERROR },
	};
	enum iw_log_level level;
	char eb[64];

	if (type < 0 || (size_t)type >= sizeof(ev) / sizeof(ev[0]))
		return;
	level = ev[type].level;
	if (type == IWE_CM_BROKEN && status == ETIMEDOUT)
		level = IW_LOG_ERROR;
	if (type == IWE_CM_REJECTED)
		reason = NULL;		/* the event says it all */
	if (type == IWE_CM_REJECTED || status == EPROTO)
		status = 0;		/* adds nothing to the reason */
	if (iw_log_on(level))
		cm_log(c, level, "%s%s%s%s%s%s", ev[type].what,
		       reason ? ": " : "", reason ? reason : "",
		       status ? " (" : "",
		       status ? strerror_r(status, eb, sizeof(eb)) : "",
		       status ? ")" : "");
}

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
	if (!c->dead)
		log_event(c, type, status, reason);
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

int cm_end(struct iwe_conn *c, int type, int status, const char *reason,
	   const void *pdata, size_t pdata_len)
{
	c->final = 1;
	c->pend = (struct cm_pend){ type, status, reason, pdata, pdata_len };
	return CS_IDLE;
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

/* Read the rest of an MPA frame into c->in.  Each read asks for as
 * much as c->in holds, so a header and its private data come in one
 * call (two when read exactly); bytes past the frame's end -- FPDUs a
 * peer sent right behind it -- stay after it (c->in_frame) and are the
 * QP's first input at attach (iw_cm_est.c).  1: parsing finished, *st
 * is IW_MPA_OK or an error; 0: would block; -errno from the socket, and
 * -ENODATA for an orderly close. */
int cm_read_frame(struct iwe_conn *c, enum iw_mpa_expect expect,
		  struct iw_mpa_frame *f, int *st)
{
	for (;;) {
		size_t need = 0;
		ssize_t n;

		*st = iw_mpa_parse(c->in, c->in_len, expect, f, &need);
		if (*st == IW_MPA_OK)
			c->in_frame = f->frame_len;
		if (*st != IW_MPA_NEED_MORE)
			return 1;
		if (need > sizeof(c->in) - c->in_len) {
			*st = IW_MPA_ERR_PD_LEN;	/* parse bounds it */
			return 1;
		}
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
			 MSG_DONTWAIT);
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
	/* The peer is known already when we connected or accepted. */
	if (c->remote.sin_family == AF_INET)
		return;
	l = sizeof(c->remote);
	if (getpeername(c->fd, (struct sockaddr *)&c->remote, &l) < 0)
		memset(&c->remote, 0, sizeof(c->remote));
}

/* An RDMA connection that ended (both sides closed, or it broke) has
 * nothing left in flight that a late segment could corrupt: MPA would drop
 * it.  Closing with a zero linger, before the peer's FIN has come, spares
 * the port a TIME_WAIT (and an orphaned FIN_WAIT), so a listener can come
 * back on it at once and many short connections do not exhaust the
 * ports.  (After the peer's FIN it spares nothing: the kernel moved the
 * connection to TIME_WAIT on that FIN, if we had sent ours first.) */
void cm_skip_time_wait(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* Close the socket of a connection whose stream did not end with the
 * peer's FIN read (it broke, was reset, or the peer's FIN is still to
 * come).  Bytes still in the send queue belong to messages the consumer
 * saw complete (an abrupt disconnect right after a Send completion is
 * common: dapltest does it): let the kernel deliver them, which a
 * zero-linger close would discard.  Unread input would make close()
 * reset the stream, so it is dropped first.  With nothing queued the
 * port skips TIME_WAIT. */
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

/* Big socket buffers (forced where allowed, as TRP's): a message of a
 * few MiB goes into the socket from the post that sends it, and the
 * peer's window takes it at once, so that a large transfer is moved by
 * the two threads it must involve -- the poster and the receiver --
 * and not also by each side's progress thread taking turns as the
 * window opens (each turn a wake-up on a busy machine).  Set before the
 * connection exists: the window scale is chosen at the handshake.  A
 * limit, not memory: only what is queued uses any. */
#define CM_SOCKBUF (4 << 20)

/* Congestion control: IWDAPL_TCP_CONGESTION, default cubic ("system":
 * the system's).  An RNIC runs its own TCP, and so do we: a pacing one
 * (BBR, the system default on some hosts) sends a message of MiBs over
 * a millisecond in 64 KiB pieces even on loopback, each piece a wake-up
 * of the receiver's progress thread, which must preempt a consumer
 * spinning on memory to place it -- an RDMA Write ping-pong polling
 * memory took 1215-1361 us at 2 MiB against 580-605 with cubic, and
 * Debian's dtest -W -a 18 s against 9 (doc/performance.md).
 * Where the name is not allowed to this process
 * (net.ipv4.tcp_allowed_congestion_control) or not built, reno, which
 * every process may use; failing that, the system's.  The first socket
 * tells whether the system gives cubic (one getsockopt); when it does
 * -- Linux's default -- no socket sets it (a system call of some 30 a
 * connection).  A process that changes its network namespace afterwards
 * keeps what its first one said. */
static void cm_set_congestion(int fd)
{
	const char *cc = iw_env_str("IWDAPL_TCP_CONGESTION", "cubic");
	static atomic_int system_cubic;	/* 0 not known, 1 yes, -1 no */
	static atomic_int told;

	if (!strcmp(cc, "system"))
		return;
	if (!atomic_load(&system_cubic)) {
		char have[32] = "";
		socklen_t l = sizeof(have) - 1;
		int cubic = !getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, have, &l) &&
			    !strcmp(have, "cubic");

		atomic_store(&system_cubic, cubic ? 1 : -1);
	}
	if (atomic_load(&system_cubic) > 0 && !strcmp(cc, "cubic"))
		return;
	if (!setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		return;
	if (!atomic_exchange(&told, 1))
		iw_log(IW_LOG_INFO, "TCP congestion control %s: %s; using "
		       "reno", cc, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
}

void cm_tune_own_socket(int fd)
{
	int want = CM_SOCKBUF;

	cm_set_congestion(fd);

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
}

void cm_set_peer_timeout(int fd)
{
	long ms = iw_env_peer_timeout_ms();
	int on = 1, every_s = ms / 4000 > 1 ? (int)(ms / 4000) : 1;
	unsigned int user_ms = (unsigned int)ms;

	if (!ms)
		return;		/* the kernel's defaults: minutes, none */
	/* Idle: a keepalive probe every quarter of the timeout (at least a
	 * second); the user timeout, not TCP_KEEPCNT, then ends the
	 * connection once nothing came back for ms (tcp(7)).  Not every
	 * second as TRP's idle probe: a peer whose process died is heard
	 * at once (its kernel resets or closes), so the probe only finds a
	 * host that is gone, and each probe of 10,000 idle connections
	 * costs the busy ones (one among 10,000 idle ran its 8 B ping-pong
	 * 1.2x slower with a probe a second).  Sending: data
	 * unacknowledged for ms ends it too (instead of tcp_retries2's
	 * quarter of an hour). */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &every_s, sizeof(every_s));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &every_s, sizeof(every_s));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms,
		   sizeof(user_ms));
}

void cm_log_end(struct iwe_conn *c, int err)
{
	char eb[64];

	if (iw_log_on(IW_LOG_DEBUG))
		cm_log(c, IW_LOG_DEBUG, "stream ended: %s (state %d)",
		       strerror_r(err, eb, sizeof(eb)), c->state);
}
