/* Connection manager internals shared by iw_cm.c (core, active side,
 * established connections, disconnect, destroy), iw_cm_passive.c
 * (listeners, requests, accept, reject) and iw_cm_ssp.c (adopted
 * sockets).
 *
 * Threading: every field below is touched on the device's progress
 * thread only (API calls run their body there through iwe_prog_call), so
 * there is no CM lock.  The one cross-thread path is the QP's TX hook,
 * which only posts conn->kick_task.
 */
#ifndef IW_CM_PRIV_H
#define IW_CM_PRIV_H

#include <netinet/in.h>

#include "iw_engine.h"
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

enum cm_state {
	CS_CONNECTING,		/* active: TCP connect in progress */
	CS_MPA_SENT,		/* active: request sent, reading the reply */
	CS_REQ_WAIT,		/* passive: reading (or peeking) the request */
	CS_REQ_RCVD,		/* passive: CONNECT_REQUEST delivered */
	CS_ACCEPTING,		/* passive: accept reply being written */
	CS_REJECTING,		/* reject reply being written */
	CS_RTR_WAIT,		/* passive: attached, waiting for the RTR */
	CS_ESTABLISHED,
	CS_DISC_DRAIN,		/* graceful: finishing queued transmits */
	CS_DISC_WAIT,		/* graceful: FIN sent, waiting for the peer's */
	CS_IDLE,		/* nothing watched: after the final event, or
				 * an adopted socket parked for release */
};

struct cm_port;

struct cm_pending_ev {
	int type, status;
	const char *reason;
};
#define CM_MAX_PENDING_EV 4

struct iwe_conn {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	struct iwe_conn *next, *prev;	/* the device's conn list */
	int state;			/* enum cm_state */
	int fd;
	int active;			/* MPA initiator */
	int adopted;			/* SSP: the consumer's socket */
	int saved_fl;			/* adopted: F_GETFL to restore */
	int released;			/* fd handed back: never closed */
	int attached;			/* the QP runs on fd */
	int orphan;			/* no consumer: freed when done */
	int final;			/* no further events will come */
	int dead;			/* destroyed; free_task pending */
	void (*io)(struct iwe_conn *c, uint32_t revents);
	void (*on_timer)(struct iwe_conn *c);
	struct iwe_prog_watch watch;
	struct iwe_prog_timer timer;
	struct iwe_prog_task ev_task;	/* delivers evq from the loop */
	struct iwe_prog_task kick_task;	/* TX blocked: watch EPOLLOUT */
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
	uint8_t *out;			/* bytes to write before anything
					 * else: request, reply, final msg */
	size_t out_len, out_off;
	struct sockaddr_in local, remote;
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
	struct iwe_listener *listeners;
	struct iwe_prog_task free_task;
};

struct iwe_cm_dev {
	struct iwe_conn *conns;
	struct cm_port *ports;
};

/* ---- iw_cm.c */
struct iwe_cm_dev *cm_dev(struct iwe_device *dev);
int cm_params_valid(const struct iwe_cm_params *p);
void cm_local_from_params(const struct iwe_cm_params *p,
			  struct iw_mpa_local *l);
struct iwe_conn *cm_conn_new(struct iwe_device *dev, struct iwe_prog *p,
			     int fd);
void cm_conn_drop(struct iwe_conn *c);	/* free a conn nobody owns */
void cm_quiesce(struct iwe_conn *c);	/* stop watching and timing */
void cm_watch(struct iwe_conn *c, uint32_t events);
void cm_event(struct iwe_conn *c, int type, int status, const char *reason,
	      const void *pdata, size_t pdata_len);
void cm_queue_event(struct iwe_conn *c, int type, int status,
		    const char *reason);
void cm_finish(struct iwe_conn *c, int type, int status, const char *reason,
	       const void *pdata, size_t pdata_len);
int cm_out_set(struct iwe_conn *c, const void *buf, size_t len);
int cm_out_flush(struct iwe_conn *c);
int cm_read_frame(struct iwe_conn *c, enum iw_mpa_expect expect,
		  struct iw_mpa_frame *f, int *st);
void cm_fill_addrs(struct iwe_conn *c);
int cm_attach(struct iwe_conn *c, int responder);
void cm_est_start(struct iwe_conn *c);
void cm_passive_established(struct iwe_conn *c);
int cm_active_start(struct iwe_conn *c, const void *pdata, size_t len,
		    int with_svc_hdr);
void cm_active_io(struct iwe_conn *c, uint32_t revents);
void cm_active_timeout(struct iwe_conn *c);
void cm_reset_socket(int fd);
void cm_skip_time_wait(int fd);
void cm_close_ended(int fd);
void cm_set_nodelay(int fd);

/* ---- iw_cm_passive.c */
void cm_ports_fini(struct iwe_cm_dev *cm);
/* Answer a request the CM refuses on its own: a reject reply carrying
 * the reason as private data, then close. */
void cm_refuse(struct iwe_conn *c, int rev, const char *reason);

/* ---- iw_cm_ssp.c */
void cm_ssp_passive_io(struct iwe_conn *c, uint32_t revents);

#endif
