/* The connection manager's passive side: listeners and their ports, the
 * MPA request of each accepted TCP connection, CONNECT_REQUEST, accept
 * and reject.
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

#include "iw_cm_priv.h"
#include "iw_qp.h"

#define LISTEN_BACKLOG 1024
#define ACCEPT_BURST   64

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

/* --------------------------------------------------------- requests */

static void reply_io(struct iwe_conn *c, uint32_t revents);
static void reply_timeout(struct iwe_conn *c);

/* Reject reply with the reason as private data, then close. */
void cm_refuse(struct iwe_conn *c, int rev, const char *reason)
{
	struct iw_mpa_params rp = {
		.rev = rev == IW_MPA_REV_ENHANCED ? rev : IW_MPA_REV_BASIC,
		.reject = 1,
		.pdata = reason,
		.pdata_len = strlen(reason),
	};
	uint8_t frame[IW_MPA_MAX_RR_LEN];
	ssize_t n = iw_mpa_build(frame, sizeof(frame), 1, &rp);

	if (n < 0 || cm_out_set(c, frame, (size_t)n)) {
		cm_conn_drop(c);
		return;
	}
	c->orphan = 1;
	c->state = CS_REJECTING;
	c->io = reply_io;
	c->on_timer = reply_timeout;
	iwe_prog_timer_arm(c->prog, &c->timer, CM_DEFAULT_MPA_TIMEOUT_MS);
	reply_io(c, EPOLLOUT);
}

/* Which listener a parsed request is for; strips the service header.
 * NULL: nobody takes it. */
static struct iwe_listener *route_request(struct iwe_conn *c,
					  struct iw_mpa_frame *f)
{
	struct cm_port *p = c->port;
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

static void deliver_request(struct iwe_conn *c, struct iwe_listener *l,
			    const struct iw_mpa_frame *f)
{
	l->delivered++;
	c->port = NULL;		/* the listener may go; this conn stays */
	c->orphan = 0;
	c->params = l->params;
	c->handler = l->handler;
	c->ctx = l->ctx;
	c->state = CS_REQ_RCVD;
	/* Not watched until accept: the bytes behind the request are
	 * FPDUs for the QP. */
	cm_quiesce(c);
	cm_event(c, IWE_CM_CONNECT_REQUEST, 0, NULL, f->pdata, f->pdata_len);
}

static void handle_request(struct iwe_conn *c, struct iw_mpa_frame *f)
{
	struct iwe_listener *l = route_request(c, f);
	struct iw_mpa_local loc;
	int st;

	if (!l || (l->max_requests && l->delivered >= l->max_requests)) {
		cm_conn_drop(c);
		return;
	}
	cm_local_from_params(&l->params, &loc);
	st = iw_mpa_negotiate(&loc, f, &c->rep, &c->neg);
	if (st == IW_MPA_ERR_NO_RTR) {
		cm_refuse(c, f->rev, iw_mpa_strerror(st));
		return;
	}
	if (st != IW_MPA_OK) {
		cm_conn_drop(c);
		return;
	}
	deliver_request(c, l, f);
}

static void passive_io(struct iwe_conn *c, uint32_t revents)
{
	struct iw_mpa_frame f;
	int st, r;

	(void)revents;
	r = cm_read_frame(c, IW_MPA_EXPECT_REQ, &f, &st);
	if (r == 0)
		return;
	if (r < 0 || st == IW_MPA_ERR_BAD_KEY || st == IW_MPA_ERR_WRONG_KEY)
		cm_conn_drop(c);	/* gone, or not speaking MPA */
	else if (st != IW_MPA_OK)
		cm_refuse(c, c->in_len > 17 ? c->in[17] : 1,
			  iw_mpa_strerror(st));
	else
		handle_request(c, &f);
}

static void passive_timeout(struct iwe_conn *c)
{
	cm_conn_drop(c);	/* no request in time: close, no event */
}

/* Writing a reply: accept goes on to FPDU mode, reject to close. */
static void reply_io(struct iwe_conn *c, uint32_t revents)
{
	int err = cm_out_flush(c);

	(void)revents;
	if (err == EAGAIN) {
		cm_watch(c, EPOLLOUT);
		return;
	}
	if (c->state == CS_ACCEPTING) {
		iwe_prog_timer_cancel(c->prog, &c->timer);
		if (err || cm_attach(c, 1)) {
			iwe_modify_qp(c->qp, IWE_QPS_ERROR);
			cm_reset_socket(c->fd);
			cm_finish(c, IWE_CM_BROKEN, err ? err : EINVAL,
				  "accept reply could not be sent", NULL, 0);
			return;
		}
		cm_passive_established(c);
		return;
	}
	/* Rejected: an orderly close after the reply (an adopted socket
	 * stays open for the consumer to release). */
	if (!c->adopted)
		shutdown(c->fd, SHUT_WR);
	cm_quiesce(c);
	c->state = CS_IDLE;
	c->final = 1;
	if (c->orphan)
		cm_conn_drop(c);
}

static void reply_timeout(struct iwe_conn *c)
{
	/* The peer does not read its reply. */
	if (c->state == CS_ACCEPTING) {
		iwe_modify_qp(c->qp, IWE_QPS_ERROR);
		cm_reset_socket(c->fd);
		cm_finish(c, IWE_CM_BROKEN, ETIMEDOUT,
			  "accept reply not taken", NULL, 0);
		return;
	}
	c->state = CS_IDLE;
	c->final = 1;
	cm_quiesce(c);
	if (c->orphan)
		cm_conn_drop(c);
}

/* ------------------------------------------------------------ accept */

static int mpa_timeout(const struct iwe_cm_params *p)
{
	return p->mpa_timeout_ms > 0 ? p->mpa_timeout_ms
				     : CM_DEFAULT_MPA_TIMEOUT_MS;
}

static void accept_one(struct cm_port *p, int fd)
{
	struct iwe_conn *c = cm_conn_new(p->dev, p->prog, fd);
	struct iwe_listener *l;
	int ms = 0;

	if (!c) {
		close(fd);
		return;
	}
	c->port = p;
	c->orphan = 1;
	c->state = CS_REQ_WAIT;
	c->io = passive_io;
	c->on_timer = passive_timeout;
	cm_set_nodelay(fd);
	cm_fill_addrs(c);
	for (l = p->listeners; l; l = l->next)
		if (mpa_timeout(&l->params) > ms)
			ms = mpa_timeout(&l->params);
	cm_watch(c, EPOLLIN);
	iwe_prog_timer_arm(c->prog, &c->timer, ms);
}

static void port_io(struct iwe_prog_watch *w, uint32_t revents)
{
	struct cm_port *p = IWE_CONTAINER_OF(w, struct cm_port, watch);
	int i, fd;

	(void)revents;
	for (i = 0; i < ACCEPT_BURST; i++) {
		fd = accept4(p->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;	/* EAGAIN, or the peer already gave up */
		accept_one(p, fd);
	}
}

/* ------------------------------------------------------------ listen */

static void port_free_task(struct iwe_prog_task *t)
{
	free(IWE_CONTAINER_OF(t, struct cm_port, free_task));
}

static void listener_free_task(struct iwe_prog_task *t)
{
	free(IWE_CONTAINER_OF(t, struct iwe_listener, free_task));
}

static int port_socket(struct iwe_device *dev, uint16_t port, int *fdp,
		       uint16_t *bound)
{
	struct sockaddr_in a = dev->attr.addr;
	socklen_t len = sizeof(a);
	int fd, one = 1, err;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	/* Restart after a crash without waiting out TIME_WAIT; Linux
	 * still refuses a second listener on the port. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_port = htons(port);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, LISTEN_BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		err = errno;
		close(fd);
		return err;
	}
	*fdp = fd;
	*bound = ntohs(a.sin_port);
	return 0;
}

static int port_open(struct iwe_device *dev, struct iwe_prog *prog,
		     uint16_t port, int hashed, struct cm_port **out)
{
	struct iwe_cm_dev *cm = cm_dev(dev);
	struct cm_port *p = calloc(1, sizeof(*p));
	int err;

	if (!p || !cm) {
		free(p);
		return ENOMEM;
	}
	err = port_socket(dev, port, &p->fd, &p->port);
	if (err) {
		free(p);
		return err;
	}
	p->dev = dev;
	p->prog = prog;
	p->hashed = hashed;
	p->watch.fd = -1;
	p->watch.cb = port_io;
	p->free_task.fn = port_free_task;
	err = iwe_prog_watch_add(prog, &p->watch, p->fd, EPOLLIN);
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
	struct iwe_conn *c, *next;

	for (pp = &cm->ports; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	for (c = cm->conns; c; c = next) {
		next = c->next;
		if (c->port == p)
			cm_conn_drop(c);
	}
	iwe_prog_watch_del(p->prog, &p->watch);
	close(p->fd);
	iwe_prog_post(p->prog, &p->free_task);
}

struct listen_args {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	uint64_t service;		/* 0: any port */
	const struct iwe_cm_params *params;
	unsigned max_requests;
	iwe_cm_handler handler;
	void *ctx;
	struct iwe_listener *out;
	int err;
};

static int listen_port(struct listen_args *a, struct cm_port **pp)
{
	struct iwe_cm_dev *cm = cm_dev(a->dev);
	int hashed = a->service > 65535;
	uint16_t port = hashed ? (uint16_t)(IWE_CM_SERVICE_PORT_BASE +
			a->service % IWE_CM_SERVICE_PORTS) :
			(uint16_t)a->service;

	if (!cm)
		return ENOMEM;
	if (a->service && find_service(cm, a->service))
		return EADDRINUSE;
	*pp = a->service ? find_port(cm, port) : NULL;
	if (*pp)
		return (hashed && (*pp)->hashed) ? 0 : EADDRINUSE;
	return port_open(a->dev, a->prog, port, hashed, pp);
}

static void do_listen(void *arg)
{
	struct listen_args *a = arg;
	struct iwe_listener *l = calloc(1, sizeof(*l));
	struct cm_port *p = NULL;

	a->err = l ? listen_port(a, &p) : ENOMEM;
	if (a->err) {
		free(l);
		return;
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
	a->out = l;
}

static int listen_common(struct listen_args *a, struct iwe_listener **out)
{
	if (!a->dev || !a->handler || !out || !cm_params_valid(a->params))
		return EINVAL;
	a->prog = iwe_prog_get(a->dev);
	if (!a->prog)
		return errno;
	iwe_prog_call(a->prog, do_listen, a);
	if (!a->err)
		*out = a->out;
	return a->err;
}

int iwe_cm_listen(struct iwe_device *dev, uint64_t service,
		  const struct iwe_cm_params *params, unsigned max_requests,
		  iwe_cm_handler handler, void *ctx, struct iwe_listener **out)
{
	struct listen_args a = { .dev = dev, .service = service,
				 .params = params,
				 .max_requests = max_requests,
				 .handler = handler, .ctx = ctx };

	if (service == 0)
		return EINVAL;
	return listen_common(&a, out);
}

int iwe_cm_listen_any(struct iwe_device *dev, uint64_t *service,
		      const struct iwe_cm_params *params,
		      iwe_cm_handler handler, void *ctx,
		      struct iwe_listener **out)
{
	struct listen_args a = { .dev = dev, .params = params,
				 .handler = handler, .ctx = ctx };
	int err;

	if (!service)
		return EINVAL;
	err = listen_common(&a, out);
	if (!err)
		*service = a.out->service;
	return err;
}

static void listener_remove(struct iwe_cm_dev *cm, struct iwe_listener *l)
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

static void do_listen_destroy(void *arg)
{
	struct iwe_listener *l = arg;

	listener_remove(l->port->dev->cm, l);
}

void iwe_cm_listen_destroy(struct iwe_listener *l)
{
	if (l)
		iwe_prog_call(l->port->prog, do_listen_destroy, l);
}

void cm_ports_fini(struct iwe_cm_dev *cm)
{
	while (cm->ports)
		listener_remove(cm, cm->ports->listeners);
}

/* ------------------------------------------------- accept and reject */

struct answer_args {
	struct iwe_conn *c;
	struct iwe_qp *qp;
	const void *pdata;
	size_t pdata_len;
	iwe_cm_handler handler;
	void *ctx;
	int err;
};

/* Build the reply (accepting or rejecting) and start writing it. */
static int answer(struct iwe_conn *c, const struct answer_args *a,
		  int reject)
{
	struct iw_mpa_params rp = c->rep;
	uint8_t frame[IW_MPA_MAX_RR_LEN];
	ssize_t n;

	rp.reject = reject;
	rp.pdata = a->pdata;
	rp.pdata_len = a->pdata_len;
	n = iw_mpa_build(frame, sizeof(frame), 1, &rp);
	if (n < 0)
		return EINVAL;
	if (cm_out_set(c, frame, (size_t)n))
		return ENOMEM;
	c->state = reject ? CS_REJECTING : CS_ACCEPTING;
	c->io = reply_io;
	c->on_timer = reply_timeout;
	iwe_prog_timer_arm(c->prog, &c->timer, mpa_timeout(&c->params));
	/* Written from the loop: no handler runs inside the API call. */
	cm_watch(c, EPOLLOUT);
	return 0;
}

static void do_accept(void *arg)
{
	struct answer_args *a = arg;
	struct iwe_conn *c = a->c;

	if (c->dead || c->state != CS_REQ_RCVD ||
	    iwe_qp_get_state(a->qp) != IWE_QPS_INIT) {
		a->err = EINVAL;
		return;
	}
	c->qp = a->qp;
	c->handler = a->handler;
	c->ctx = a->ctx;
	if (c->adopted)
		cm_set_nodelay(c->fd);	/* it carries FPDUs from now on */
	a->err = answer(c, a, 0);
	if (a->err)
		c->qp = NULL;
}

static void do_reject(void *arg)
{
	struct answer_args *a = arg;
	struct iwe_conn *c = a->c;

	if (c->dead || c->state != CS_REQ_RCVD) {
		a->err = EINVAL;
		return;
	}
	a->err = answer(c, a, 1);
}

int iwe_cm_accept(struct iwe_conn *c, struct iwe_qp *qp, const void *pdata,
		  size_t pdata_len, iwe_cm_handler handler, void *ctx)
{
	struct answer_args a = { c, qp, pdata, pdata_len, handler, ctx, 0 };

	if (!c || !qp || !handler || (pdata_len && !pdata) ||
	    pdata_len > IWE_MAX_PRIVATE_DATA)
		return EINVAL;
	iwe_prog_call(c->prog, do_accept, &a);
	return a.err;
}

int iwe_cm_reject(struct iwe_conn *c, const void *pdata, size_t pdata_len)
{
	struct answer_args a = { c, NULL, pdata, pdata_len, NULL, NULL, 0 };

	if (!c || (pdata_len && !pdata) || pdata_len > IWE_MAX_PRIVATE_DATA)
		return EINVAL;
	iwe_prog_call(c->prog, do_reject, &a);
	return a.err;
}
