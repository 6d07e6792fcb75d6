/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager's passive side: listeners and their ports, the
 * MPA request of each accepted TCP connection, and the replies.  Each
 * conn handler returns the state to enter (iw_cm_priv.h).
 *
 * Services and ports: a service up to 65535 is its own port, listened on
 * by exactly one listener, and its requests carry only the consumer's
 * private data.  A larger service maps onto IWE_CM_SERVICE_PORT_BASE +
 * service % IWE_CM_SERVICE_PORTS; every listener whose service maps
 * there shares one socket, and the service header at the start of the
 * request's private data says which of them the request is for.  A port
 * is never both: mixing would let a plain request whose data happens to
 * start with the header reach the wrong consumer.
 *
 * A request the CM refuses before any consumer saw it: markers asked
 * for, or no common RTR type -> a reject reply with the reason as private
 * data; not MPA at all, an unknown service, max_requests reached, no
 * request within the timeout -> the socket is closed (the initiator sees
 * NON_PEER_REJECTED or its timeout).
 *
 * Hostile peers: at most CM_HALF_OPEN_MAX accepted connections per port
 * may still be sending their request (see iw_cm_priv.h for what happens
 * at the cap).  When
 * the process is out of descriptors (EMFILE, ENFILE) or memory, the port
 * stops being watched for CM_ACCEPT_RETRY_MS at a time: connections wait
 * in the kernel's backlog and are served once descriptors are free again,
 * and the progress thread does not spin on a socket it cannot accept
 * from.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iw_fdlimit.h"
#include "iw_cm_priv.h"
#include "iw_qp.h"

#define LISTEN_BACKLOG 1024

/* ------------------------------------------------------------- lookup */

static struct iwe_listener *find_service(struct iwe_cm_dev *cm, uint64_t svc)
{
	struct cm_port *p;
	struct iwe_listener *l;

	for (p = cm->ports; p; p = p->next)
		for (l = p->listeners; l; l = l->next)
			if (l->service == svc)
				return l;
	return NULL;
}

static struct cm_port *find_port(struct iwe_cm_dev *cm, uint16_t port)
{
	struct cm_port *p;

	for (p = cm->ports; p; p = p->next)
		if (p->port == port)
			return p;
	return NULL;
}

static int in_hashed_range(uint16_t port)
{
	return port >= IWE_CM_SERVICE_PORT_BASE &&
	       port < IWE_CM_SERVICE_PORT_BASE + IWE_CM_SERVICE_PORTS;
}

/* ------------------------------------------------------- accepting */

static void retry_cb(struct iwe_prog_timer *t)
{
	struct cm_port *p = IWE_CONTAINER_OF(t, struct cm_port, retry);

	iwe_prog_watch_mod(p->prog, &p->watch, EPOLLIN);
}

static void pause_accepting(struct cm_port *p, int ms)
{
	iwe_prog_watch_mod(p->prog, &p->watch, 0);
	iwe_prog_timer_arm(p->prog, &p->retry, ms);
}

/* Room for one more half-open connection: drop the oldest if it has
 * waited long enough, else pause.  0 when the caller must not accept. */
static int half_open_room(struct cm_port *p)
{
	if (p->nhalf_open < CM_HALF_OPEN_MAX)
		return 1;
	if (iwe_now_ns() - p->half_open->born_ns >=
	    CM_HALF_OPEN_MIN_AGE_MS * 1000000ull) {
		cm_conn_drop(p->half_open);
		return 1;
	}
	pause_accepting(p, CM_HALF_OPEN_PAUSE_MS);
	return 0;
}

/* One accepted socket and its peer's address, or -1 when there is none
 * (or no room or no descriptor for it: then the port pauses). */
int cm_passive_accept_fd(struct cm_port *p, struct sockaddr_in *peer)
{
	socklen_t l = sizeof(*peer);
	int fd;

	if (!half_open_room(p))
		return -1;
	memset(peer, 0, sizeof(*peer));
	fd = accept4(p->fd, (struct sockaddr *)peer, &l,
		     SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
	    errno == ENOMEM) {
		iwe_fd_limit_note(errno, "TCP accept");
		pause_accepting(p, CM_ACCEPT_RETRY_MS);
	}
	return -1;	/* EAGAIN, or the peer already gave up */
}

/* A conn for an accepted socket: it waits for the request, as the
 * newest of the port's half-open connections. */
void cm_passive_setup(struct iwe_conn *c, struct cm_port *p,
		      const struct sockaddr_in *peer)
{
	struct iwe_listener *l;

	c->born_ns = iwe_now_ns();
	cm_half_open_add(p, c);
	c->orphan = 1;
	c->timeout_ms = 0;
	for (l = p->listeners; l; l = l->next)
		if (cm_mpa_timeout(&l->params) > c->timeout_ms)
			c->timeout_ms = cm_mpa_timeout(&l->params);
	/* TCP_NODELAY came with the socket from the listener (Linux copies
	 * it on accept), and so did the local address: the listener's
	 * concrete one (port_socket).  Two system calls fewer per accept. */
	c->remote = *peer;	/* accept4 told it: no getpeername */
	c->local = p->dev->attr.addr;
	c->local.sin_port = htons(p->port);
}

/* --------------------------------------------------------- requests */

/* Reject reply with the reason as private data, then close. */
static int refuse(struct iwe_conn *c, int rev, const char *reason)
{
	struct iw_mpa_params rp = {
		.rev = rev == IW_MPA_REV_ENHANCED ? rev : IW_MPA_REV_BASIC,
		.reject = 1,
		.pdata = reason,
		.pdata_len = strlen(reason),
	};
	uint8_t frame[IW_MPA_MAX_RR_LEN];
	ssize_t n = iw_mpa_build(frame, sizeof(frame), 1, &rp);

	cm_log(c, IW_LOG_ERROR, "MPA request refused: %s", reason);
	if (n < 0 || cm_out_set(c, frame, (size_t)n)) {
		cm_conn_drop(c);
		return CS_DROPPED;
	}
	cm_half_open_del(c);
	c->orphan = 1;
	c->timeout_ms = CM_DEFAULT_MPA_TIMEOUT_MS;
	return CS_REJECTING;
}

/* Which listener of port p a parsed request is for; strips the service
 * header.  NULL: nobody takes it. */
static struct iwe_listener *route(struct cm_port *p, struct iwe_conn *c,
				  struct iw_mpa_frame *f)
{
	struct iwe_listener *l;
	int has_hdr = f->pdata_len >= IWE_CM_SERVICE_HDR_LEN &&
		      !memcmp(f->pdata, CM_SVC_MAGIC, CM_SVC_MAGIC_LEN);
	uint64_t svc_be;

	if (!p->hashed) {
		/* A request meant for a large service that maps here must
		 * not reach the plain one. */
		if (has_hdr && in_hashed_range(p->port))
			return NULL;
		c->service = p->port;
		return p->listeners;
	}
	if (!has_hdr)
		return NULL;
	memcpy(&svc_be, f->pdata + CM_SVC_MAGIC_LEN, sizeof(svc_be));
	c->service = iw_be64(svc_be);
	f->pdata += IWE_CM_SERVICE_HDR_LEN;
	f->pdata_len -= IWE_CM_SERVICE_HDR_LEN;
	for (l = p->listeners; l; l = l->next)
		if (l->service == c->service)
			return l;
	return NULL;
}

int cm_passive_request(struct iwe_conn *c, struct cm_port *p,
		       struct iw_mpa_frame *f)
{
	struct iwe_listener *l = route(p, c, f);
	struct iw_mpa_local loc;
	int st;

	if (!l || (l->max_requests && l->delivered >= l->max_requests)) {
		cm_log(c, IW_LOG_ERROR, "MPA request dropped: %s",
		       l ? "the listener takes no more requests" :
			   "no listener for its service");
		cm_conn_drop(c);
		return CS_DROPPED;
	}
	cm_local_from_params(&l->params, &loc);
	st = iw_mpa_negotiate(&loc, f, &c->rep, &c->neg);
	if (st == IW_MPA_ERR_NO_RTR)
		return refuse(c, f->rev, iw_mpa_strerror(st));
	if (st != IW_MPA_OK) {
		cm_log(c, IW_LOG_ERROR, "MPA request dropped: %s",
		       iw_mpa_strerror(st));
		cm_conn_drop(c);
		return CS_DROPPED;
	}
	l->delivered++;
	cm_half_open_del(c);	/* the listener may go; this conn stays */
	c->orphan = 0;
	c->params = l->params;
	c->handler = l->handler;
	c->ctx = l->ctx;
	c->pend = (struct cm_pend){ IWE_CM_CONNECT_REQUEST, 0, NULL, f->pdata,
				    f->pdata_len };
	return CS_REQ_RCVD;
}

int cm_passive_io(struct iwe_conn *c)
{
	struct iw_mpa_frame f;
	int st, r = cm_read_frame(c, IW_MPA_EXPECT_REQ, &f, &st);

	if (r == 0)
		return CS_REQ_WAIT;
	if (r < 0 || st == IW_MPA_ERR_BAD_KEY || st == IW_MPA_ERR_WRONG_KEY) {
		cm_log(c, r < 0 ? IW_LOG_DEBUG : IW_LOG_ERROR,
		       "MPA request dropped: %s", r < 0 ?
		       "the peer left before sending it" : iw_mpa_strerror(st));
		cm_conn_drop(c);	/* gone, or not speaking MPA */
		return CS_DROPPED;
	}
	if (st != IW_MPA_OK)
		return refuse(c, c->in_len > 17 ? c->in[17] : 1,
			      iw_mpa_strerror(st));
	return cm_passive_request(c, c->port, &f);
}

int cm_passive_timeout(struct iwe_conn *c)
{
	cm_log(c, IW_LOG_WARN, "no MPA request within %d ms: dropped",
	       c->timeout_ms);
	cm_conn_drop(c);	/* no request in time: close, no event */
	return CS_DROPPED;
}

/* ---------------------------------------------------------- replies */

int cm_passive_answer(struct iwe_conn *c, const void *pdata, size_t len,
		      int reject)
{
	struct iw_mpa_params rp = c->rep;
	uint8_t frame[IW_MPA_MAX_RR_LEN];
	ssize_t n;

	rp.reject = reject;
	rp.pdata = pdata;
	rp.pdata_len = len;
	n = iw_mpa_build(frame, sizeof(frame), 1, &rp);
	if (n < 0)
		return EINVAL;
	if (cm_out_set(c, frame, (size_t)n))
		return ENOMEM;
	c->timeout_ms = cm_mpa_timeout(&c->params);
	return 0;
}

static int accept_failed(struct iwe_conn *c, int err, const char *why)
{
	iwe_modify_qp(c->qp, IWE_QPS_ERROR);
	cm_reset_socket(c->fd);
	return cm_end(c, IWE_CM_BROKEN, err, why, NULL, 0);
}

/* Writing a reply: accept goes on to FPDU mode, reject to close. */
int cm_passive_reply_io(struct iwe_conn *c)
{
	int err = cm_out_flush(c);

	if (err == EAGAIN)
		return c->state;
	if (c->state == CS_ACCEPTING) {
		if (err)
			return accept_failed(c, err,
					     "accept reply could not be sent");
		/* An adopted socket carries FPDUs from now on.  Set after
		 * the reply's send, off the upgrade's path (setting it
		 * pushes anything Nagle held). */
		if (c->adopted)
			cm_set_nodelay(c->fd);
		if (c->neg.rtr)
			return CS_RTR_WAIT;
		c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL,
					    NULL, 0 };
		return CS_ESTABLISHED;
	}
	/* Rejected: an orderly close after the reply (an adopted socket
	 * stays open for the consumer to release). */
	if (!c->adopted)
		shutdown(c->fd, SHUT_WR);
	c->final = 1;
	return CS_IDLE;
}

int cm_passive_reply_timeout(struct iwe_conn *c)
{
	/* The peer does not read its reply. */
	if (c->state == CS_ACCEPTING)
		return accept_failed(c, ETIMEDOUT, "accept reply not taken");
	c->final = 1;
	return CS_IDLE;
}

/* ------------------------------------------------------------ listen */

/* The port's handler again, for what its last burst left (cm_port_io). */
static void port_more_task(struct iwe_prog_task *t)
{
	struct cm_port *p = IWE_CONTAINER_OF(t, struct cm_port, more);

	p->watch.cb(&p->watch, EPOLLIN);
}

static void port_free_task(struct iwe_prog_task *t)
{
	free(IWE_CONTAINER_OF(t, struct cm_port, free_task));
}

static void listener_free_task(struct iwe_prog_task *t)
{
	free(IWE_CONTAINER_OF(t, struct iwe_listener, free_task));
}

/* Connections of ours still hold this UDP port (their sockets share it
 * with the listener that accepted them): a new listener shares it too. */
static int udp_port_ours(struct iwe_device *dev, uint16_t port)
{
	const struct iwe_conn *c;

	for (c = dev->cm ? dev->cm->conns : NULL; port && c; c = c->next)
		if (c->udp && !c->dead && !c->active &&
		    c->local.sin_port == htons(port))
			return 1;
	return 0;
}

static int port_socket(struct iwe_device *dev, uint16_t port, int *fdp,
		       uint16_t *bound)
{
	struct sockaddr_in a = dev->attr.addr;
	socklen_t len = sizeof(a);
	int udp = dev->attr.transport == IWE_TRANSPORT_UDP;
	int fd, one = 1, err;

	fd = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
	if (fd < 0)
		return iwe_fd_limit_note(errno, "listen");
	/* TCP: restart after a crash without waiting out TIME_WAIT; Linux
	 * still refuses a second listener on the port.  UDP: bound
	 * exclusively first (a port in use is EADDRINUSE) unless our own
	 * connections hold it, then shared with the connected socket of
	 * each peer (iw_cm_trp.c). */
	if (!udp || udp_port_ours(dev, port))
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_port = htons(port);
	if (!udp) {
		/* Inherited by accepted sockets: no system call of these
		 * per connection. */
		cm_set_nodelay(fd);
		cm_tune_own_socket(fd);
		cm_set_peer_timeout(fd);
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (udp ? setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
			      sizeof(one)) : listen(fd, LISTEN_BACKLOG)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		err = errno;
		close(fd);
		return err;
	}
	*fdp = fd;
	*bound = ntohs(a.sin_port);
	return 0;
}

static int port_open(const struct cm_listen_args *a, uint16_t port,
		     int hashed, struct cm_port **out)
{
	struct iwe_cm_dev *cm = cm_dev(a->dev);
	struct cm_port *p = calloc(1, sizeof(*p));
	int err;

	if (!p || !cm) {
		free(p);
		return ENOMEM;
	}
	err = port_socket(a->dev, port, &p->fd, &p->port);
	if (err) {
		free(p);
		return err;
	}
	p->dev = a->dev;
	p->prog = a->prog;
	p->hashed = hashed;
	p->watch.fd = -1;
	p->watch.cb = a->port_cb;
	p->retry.cb = retry_cb;
	p->more.fn = port_more_task;
	p->free_task.fn = port_free_task;
	err = iwe_prog_watch_add(a->prog, &p->watch, p->fd, EPOLLIN);
	if (err) {
		close(p->fd);
		free(p);
		return err;
	}
	p->next = cm->ports;
	cm->ports = p;
	*out = p;
	return 0;
}

/* The last listener left: close the socket and the requests still
 * waiting on it. */
static void port_close(struct iwe_cm_dev *cm, struct cm_port *p)
{
	struct cm_port **pp;

	for (pp = &cm->ports; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	while (p->half_open)
		cm_conn_drop(p->half_open);
	iwe_prog_watch_del(p->prog, &p->watch);
	iwe_prog_timer_cancel(p->prog, &p->retry);
	iwe_prog_unpost(p->prog, &p->more);
	close(p->fd);
	iwe_prog_post(p->prog, &p->free_task);
}

static int listen_port(const struct cm_listen_args *a, struct cm_port **pp)
{
	struct iwe_cm_dev *cm = cm_dev(a->dev);
	int hashed = a->service > 65535;
	uint16_t port = cm_service_port(a->service);

	if (!cm)
		return ENOMEM;
	if (a->service && find_service(cm, a->service))
		return EADDRINUSE;
	*pp = a->service ? find_port(cm, port) : NULL;
	if (*pp)
		return (hashed && (*pp)->hashed) ? 0 : EADDRINUSE;
	return port_open(a, port, hashed, pp);
}

int cm_listen(const struct cm_listen_args *a, struct iwe_listener **out)
{
	struct iwe_listener *l = calloc(1, sizeof(*l));
	struct cm_port *p = NULL;
	int err = l ? listen_port(a, &p) : ENOMEM;

	if (err) {
		free(l);
		return err;
	}
	l->port = p;
	l->service = a->service ? a->service : p->port;
	l->params = *a->params;
	l->max_requests = a->max_requests;
	l->handler = a->handler;
	l->ctx = a->ctx;
	l->free_task.fn = listener_free_task;
	l->next = p->listeners;
	p->listeners = l;
	*out = l;
	return 0;
}

void cm_listener_remove(struct iwe_cm_dev *cm, struct iwe_listener *l)
{
	struct cm_port *p = l->port;
	struct iwe_listener **pp;

	for (pp = &p->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	iwe_prog_post(p->prog, &l->free_task);
	if (!p->listeners)
		port_close(cm, p);
}

void cm_ports_fini(struct iwe_cm_dev *cm)
{
	while (cm->ports)
		cm_listener_remove(cm, cm->ports->listeners);
}
