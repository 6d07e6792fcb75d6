/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection manager internals.
 *
 * Floors, bottom up (no file calls into a floor above it, and the parts
 * of the middle floor do not call each other):
 *   iw_cm_conn.c     the conn object, events, socket helpers, parameters
 *   iw_cm_active.c   active side: TCP connect, MPA request, the reply
 *   iw_cm_passive.c  listeners, accepted sockets, the request, replies
 *   iw_cm_ssp.c      adopted sockets (Socket Service Points)
 *   iw_cm_est.c      established connections, over TCP or TRP: the QP
 *                    takes the stream; its end, disconnects, timeouts
 *   iw_cm_trp.c      the exchange over TRP/UDP (a udp device): the
 *                    request and reply in I packets, retransmitted;
 *                    listeners that give each peer its own connected
 *                    socket on the listening port; adopted UDP sockets
 *   iw_cm.c          one conn state, changed only in cm_enter(), the
 *                    dispatch of socket, timer and QP events by state,
 *                    and the public API (iw_engine.h)
 * A middle-floor handler never changes the state: it does its work and
 * returns the state to enter (and may leave one event in c->pend for
 * cm_enter to deliver once the state is set, so a consumer's handler
 * that calls back into the CM finds the conn consistent).
 *
 * Threading: every field below is touched on the device's progress
 * thread only (API calls run their body there through iwe_prog_call), so
 * there is no CM lock.  The one cross-thread path is the QP's notify,
 * which only posts conn->qp_task.
 */
#ifndef IW_CM_PRIV_H
#define IW_CM_PRIV_H

#include <netinet/in.h>
#include <sys/epoll.h>

#include "iw_engine.h"
#include "iw_log.h"
#include "iw_mpa.h"
#include "iw_priv.h"
#include "iw_progress.h"

/* The service header in front of the consumer's private data of a
 * request for a service above 65535: magic, then the BE64 service. */
#define CM_SVC_MAGIC     "IWDAPLsv"
#define CM_SVC_MAGIC_LEN 8
/* Graceful disconnect: how long to wait for the queued transmits and
 * the peer's FIN before resetting. */
#define CM_DISC_TIMEOUT_MS 3000
#define CM_DEFAULT_MPA_TIMEOUT_MS 5000
/* Connections accepted whose MPA request is not complete yet, per
 * listening port.  At the cap, the oldest is dropped if it has waited
 * CM_HALF_OPEN_MIN_AGE_MS (so a flood of idle connections cannot starve
 * clients that do send their request); a burst of young ones instead
 * pauses accepting for CM_HALF_OPEN_PAUSE_MS (they wait in the kernel's
 * backlog). */
#define CM_HALF_OPEN_MAX 256
#define CM_HALF_OPEN_MIN_AGE_MS 1000
#define CM_HALF_OPEN_PAUSE_MS 10
/* Out of descriptors: the listener pauses this long between retries
 * instead of spinning on a socket it cannot accept from. */
#define CM_ACCEPT_RETRY_MS 100
/* A connect refused (nobody listening) within this long of the first
 * refusal is tried again, after 1, 2, 4 ... ms (IWDAPL_CONNECT_REFUSED_MS,
 * 0: reported at once): a peer may tell its address before it listens
 * (dtest's server sends it on its side channel, then creates its PSP). */
#define CM_REFUSED_GRACE_MS 200
#define CM_REFUSED_GRACE_MAX_MS 60000

enum cm_state {
	CS_NEW,			/* just created, nothing watched */
	CS_CONNECTING,		/* active: TCP connect in progress */
	CS_REFUSED_PAUSE,	/* active: refused; connects again on the
				 * timer (TCP) */
	CS_MPA_SENT,		/* active: request sent, reading the reply */
	CS_REQ_WAIT,		/* passive: reading (or peeking) the request */
	CS_REQ_RCVD,		/* passive: CONNECT_REQUEST delivered */
	CS_ACCEPTING,		/* passive: accept reply being written */
	CS_REJECTING,		/* reject reply being written */
	CS_RTR_WAIT,		/* passive: attached, waiting for the RTR */
	CS_RTR_ACK_WAIT,	/* active over TRP: attached, waiting for
				 * the peer to acknowledge our RTR */
	CS_ESTABLISHED,
	CS_DISC_DRAIN,		/* graceful: finishing queued transmits */
	CS_DISC_WAIT,		/* graceful: FIN sent, waiting for the peer's */
	CS_IDLE,		/* nothing watched: after the final event, or
				 * an adopted socket parked for release */
	CS_DROPPED,		/* freed by the handler: touch it no more */
};

struct cm_port;

struct cm_pending_ev {
	int type, status;
	const char *reason;
};
#define CM_MAX_PENDING_EV 4

/* The event a handler leaves for cm_enter to deliver. */
struct cm_pend {
	int type;			/* -1: none */
	int status;
	const char *reason;
	const void *pdata;		/* into c->in, valid until delivered */
	size_t pdata_len;
};

struct iwe_conn {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	struct iwe_conn *next, *prev;	/* the device's conn list */
	struct iwe_conn *pnext, *pprev;	/* the port's half-open list */
	int state;			/* enum cm_state: cm_enter only */
	int fd;
	int active;			/* MPA initiator */
	int adopted;			/* SSP: the consumer's socket */
	int released;			/* fd handed back: never closed */
	int attached;			/* the QP runs on fd */
	int orphan;			/* no consumer: freed when done */
	int final;			/* no further events will come */
	int fins_met;			/* TCP: the peer's FIN read, ours
					 * sent or left to close() */
	int dead;			/* destroyed; free_task pending */
	int timeout_ms;			/* the timer of the current phase
					 * (<= 0: none) */
	uint64_t born_ns;		/* passive: when accepted */
	struct cm_pend pend;
	struct iwe_prog_watch watch;
	struct iwe_prog_timer timer;
	struct iwe_prog_task ev_task;	/* delivers evq from the loop */
	struct iwe_prog_task qp_task;	/* the QP notified */
	struct iwe_prog_task free_task;
	struct cm_pending_ev evq[CM_MAX_PENDING_EV];
	int nev;
	iwe_cm_handler handler;
	void *ctx;
	struct cm_port *port;		/* passive, until the request is
					 * delivered */
	struct iwe_cm_params params;
	uint64_t service;
	struct iwe_qp *qp;
	struct iw_mpa_params req;	/* active: the request we sent */
	struct iw_mpa_params rep;	/* passive: the reply to send */
	struct iw_mpa_conn neg;		/* the negotiated outcome */
	uint8_t in[IW_MPA_MAX_RR_LEN];	/* request or reply received */
	size_t in_len;
	size_t in_frame;		/* in[0..in_frame): the MPA frame;
					 * the bytes after it came with it,
					 * the stream's first (the QP's at
					 * attach) */
	uint8_t *out;			/* bytes to write before anything
					 * else: request, reply, final msg */
	size_t out_len, out_off;
	struct sockaddr_in local, remote;
	/* TRP (a udp device; iw_cm_trp.c). */
	int udp;
	uint32_t trp_isn;		/* PSN of our I packet */
	uint32_t trp_peer_isn;		/* PSN of the peer's */
	uint32_t trp_peer_credits;
	unsigned trp_tries;		/* request or reply transmissions */
	uint64_t trp_next_ns;		/* active: next retransmission */
	uint64_t trp_deadline_ns;	/* active: the timeout, 0: none */
	/* Active: connects refused so far, and until when another may
	 * go (cm_refused_pause_ms). */
	unsigned refused;
	int refused_pause_ms;		/* CS_REFUSED_PAUSE's length */
	uint64_t refused_end_ns;
};

struct iwe_listener {
	struct iwe_listener *next;
	struct cm_port *port;
	uint64_t service;
	struct iwe_cm_params params;
	unsigned max_requests, delivered;
	iwe_cm_handler handler;
	void *ctx;
	struct iwe_prog_task free_task;
};

/* One listening socket; several listeners share it when their services
 * (all above 65535) map onto the same port. */
struct cm_port {
	struct cm_port *next;
	struct iwe_device *dev;
	struct iwe_prog *prog;
	uint16_t port;
	int hashed;			/* requests carry the service header */
	int fd;
	struct iwe_prog_watch watch;
	struct iwe_prog_timer retry;	/* accept paused: out of fds */
	struct iwe_listener *listeners;
	struct iwe_conn *half_open;	/* oldest first */
	struct iwe_conn *half_open_tail;
	unsigned nhalf_open;
	struct iwe_prog_task more;	/* a burst left some: the next turn */
	struct iwe_prog_task free_task;
};

struct iwe_cm_dev {
	struct iwe_conn *conns;
	struct cm_port *ports;
};

/* ---- iw_cm_conn.c: the conn object, events, socket helpers */
struct iwe_cm_dev *cm_dev(struct iwe_device *dev);
int cm_params_valid(const struct iwe_cm_params *p);
unsigned cm_clamp_rd(uint32_t v, unsigned max);
void cm_local_from_params(const struct iwe_cm_params *p,
			  struct iw_mpa_local *l);
int cm_mpa_timeout(const struct iwe_cm_params *p);
/* Our connect was refused: how long to pause before trying again, or
 * -1 when the grace (CM_REFUSED_GRACE_MS, not beyond the connect's
 * timeout) is over and the refusal is the outcome. */
int cm_refused_pause_ms(struct iwe_conn *c);
uint16_t cm_service_port(uint64_t service);
struct iwe_conn *cm_conn_new(struct iwe_device *dev, struct iwe_prog *p,
			     int fd, void (*io)(struct iwe_prog_watch *,
						uint32_t),
			     void (*on_timer)(struct iwe_prog_timer *),
			     void (*on_qp)(struct iwe_prog_task *));
/* The one way a conn's state is set (after conn_new's CS_NEW). */
void cm_set_state(struct iwe_conn *c, int s);
void cm_conn_drop(struct iwe_conn *c);	/* close (unless released), free */
void cm_half_open_add(struct cm_port *p, struct iwe_conn *c);
void cm_half_open_del(struct iwe_conn *c);	/* no-op when not on one */
void cm_quiesce(struct iwe_conn *c);	/* stop watching and timing */
void cm_watch(struct iwe_conn *c, uint32_t events);
void cm_event(struct iwe_conn *c, int type, int status, const char *reason,
	      const void *pdata, size_t pdata_len);
void cm_queue_event(struct iwe_conn *c, int type, int status,
		    const char *reason);
/* Leave the final event for cm_enter (c->final set); returns CS_IDLE. */
int cm_end(struct iwe_conn *c, int type, int status, const char *reason,
	   const void *pdata, size_t pdata_len);
int cm_out_set(struct iwe_conn *c, const void *buf, size_t len);
int cm_out_flush(struct iwe_conn *c);
int cm_read_frame(struct iwe_conn *c, enum iw_mpa_expect expect,
		  struct iw_mpa_frame *f, int *st);
void cm_fill_addrs(struct iwe_conn *c);
void cm_reset_socket(int fd);
void cm_skip_time_wait(int fd);
void cm_close_ended(int fd);
void cm_set_nodelay(int fd);
/* Our own TCP sockets' buffers and congestion control (iw_cm_conn.c:
 * why), before connect or listen (an accepted socket inherits them). */
void cm_tune_own_socket(int fd);
/* IWDAPL_PEER_TIMEOUT_MS on a listening socket (its accepted sockets
 * inherit it) or an established connection's own connected socket (not
 * an adopted one: SSP leaves the consumer's options alone). */
void cm_set_peer_timeout(int fd);
/* A log line about c, prefixed "conn LOCAL->PEER: " (iw_log.h). */
void cm_log(const struct iwe_conn *c, enum iw_log_level level,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Debug level: why an established connection's stream ended. */
void cm_log_end(struct iwe_conn *c, int err);

/* ---- iw_cm_active.c (the int handlers return the state to enter) */
int cm_active_socket(struct iwe_device *dev, int *fdp);	/* 0 or errno */
int cm_active_request(struct iwe_conn *c, const void *pdata, size_t len,
		      int with_svc_hdr);		/* 0 or errno */
int cm_active_connect(struct iwe_conn *c, const struct sockaddr_in *dst);
int cm_active_connected(struct iwe_conn *c);
int cm_active_io(struct iwe_conn *c, uint32_t revents);
int cm_active_timeout(struct iwe_conn *c);
int cm_active_reconnect(struct iwe_conn *c);	/* CS_REFUSED_PAUSE's end */

/* ---- iw_cm_passive.c */
struct cm_listen_args {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	uint64_t service;		/* 0: a port the kernel picks */
	const struct iwe_cm_params *params;
	unsigned max_requests;
	iwe_cm_handler handler;
	void *ctx;
	void (*port_cb)(struct iwe_prog_watch *w, uint32_t revents);
};
int cm_listen(const struct cm_listen_args *a, struct iwe_listener **out);
void cm_listener_remove(struct iwe_cm_dev *cm, struct iwe_listener *l);
void cm_ports_fini(struct iwe_cm_dev *cm);
int cm_passive_accept_fd(struct cm_port *p, struct sockaddr_in *peer);
void cm_passive_setup(struct iwe_conn *c, struct cm_port *p,
		      const struct sockaddr_in *peer);
int cm_passive_io(struct iwe_conn *c);
/* A parsed request on port p (either transport): to its listener, which
 * takes it (REQ_RCVD, CONNECT_REQUEST left in c->pend); or refused with
 * a reject reply (REJECTING), or dropped unanswered (DROPPED). */
int cm_passive_request(struct iwe_conn *c, struct cm_port *p,
		       struct iw_mpa_frame *f);
int cm_passive_timeout(struct iwe_conn *c);
/* Build the accept (reject = 0) or reject reply into c->out. */
int cm_passive_answer(struct iwe_conn *c, const void *pdata, size_t len,
		      int reject);
int cm_passive_reply_io(struct iwe_conn *c);
int cm_passive_reply_timeout(struct iwe_conn *c);

/* ---- iw_cm_ssp.c */
int cm_ssp_io(struct iwe_conn *c, uint32_t revents);
/* Stop watching and restore the socket's flags: 0, or EBUSY once it
 * carries (or is about to carry) a connection. */
int cm_ssp_release(struct iwe_conn *c);
#define CM_SSP_PEEK_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLET)

/* ---- iw_cm_est.c (either transport: c->udp says which) */
/* Attach the QP to the stream (responder with RTR: held after the RTR;
 * otherwise held until ESTABLISHED is delivered).  0 or an errno. */
int cm_est_attach(struct iwe_conn *c, int responder);
/* The QP notified: the state to enter. */
int cm_est_qp_changed(struct iwe_conn *c);
int cm_est_timeout(struct iwe_conn *c);
/* CS_RTR_ACK_WAIT failed (ETIMEDOUT: its timer): TIMED_OUT, else
 * NON_PEER_REJECTED.  The state to enter. */
int cm_est_rtr_unacked(struct iwe_conn *c, int err);
/* An abrupt disconnect: QP to ERROR, our close after what was sent or
 * (TCP) a reset; the caller queues the event. */
void cm_est_abort(struct iwe_conn *c);

/* ---- iw_cm_trp.c (TRP/UDP; the int handlers return the state to
 * enter) */
int cm_trp_socket(struct iwe_device *dev, int *fdp);	/* 0 or errno */
int cm_trp_connect(struct iwe_conn *c, const struct sockaddr_in *dst);
/* Active, entering MPA_SENT: the first request goes out; ms until the
 * timer should fire. */
int cm_trp_active_arm(struct iwe_conn *c);
int cm_trp_active_io(struct iwe_conn *c);
int cm_trp_active_timeout(struct iwe_conn *c);
/* The listening port: one datagram that is a new peer's request
 * (1, *len bytes in buf, sender in *from), none left (0), or one
 * ignored (-1). */
int cm_trp_port_recv(struct cm_port *p, uint8_t *buf, size_t cap,
		     size_t *len, struct sockaddr_in *from);
/* A socket of its own for the peer: bound to the port, connected. */
int cm_trp_peer_socket(struct cm_port *p, const struct sockaddr_in *from);
int cm_trp_passive_request(struct iwe_conn *c, struct cm_port *p,
			   const uint8_t *pkt, size_t len);
/* The reply in c->out (reject): send it, and again for a repeated
 * request. */
int cm_trp_reject_enter(struct iwe_conn *c);
int cm_trp_reject_io(struct iwe_conn *c);
int cm_trp_ssp_io(struct iwe_conn *c);

/* ---- iw_cm.c: the listening port's accept loop (cm_listen_args) */
void cm_port_io(struct iwe_prog_watch *w, uint32_t revents);

#endif
