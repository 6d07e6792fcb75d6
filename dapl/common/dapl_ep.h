/* Endpoints, Service Points (PSP, RSP), Connection Requests and Shared
 * Receive Queues: the objects of the connection model, and the glue that
 * binds them to the engine's QPs and connection manager.
 *
 * Dependencies are counted in obj.users under ia->lock, as everywhere:
 *   - an EP counts one user on its PZ, on each of its EVDs (once per role,
 *     so an EVD serving two roles is counted twice) and on its SRQ;
 *   - a PSP or RSP counts one user on its CR EVD;
 *   - an SRQ counts one user on its PZ.
 * EP state and the EP <-> RSP/CR/conn links also change under ia->lock.
 *
 * Threading with the engine (cm.c): connection manager handlers run on the
 * device's progress thread and take ia->lock.  Every iwe_cm_* call waits
 * for that thread, so a consumer thread never makes one while holding
 * ia->lock: transitions happen in small functions under the lock, and the
 * engine calls come after it is released.  Ownership of an engine conn is
 * single and explicit: the CR owns it until accept or reject, then the EP
 * that accepted or connected owns it until dat_ep_reset / dat_ep_free (or
 * an abrupt dat_ia_close) destroys it; an SP owns only the conns it had to
 * refuse, until it is freed.
 */
#ifndef DAPL_EP_H
#define DAPL_EP_H

#include "dapl.h"

struct dapl_pz;
struct dapl_evd;
struct dapl_sp;
struct dapl_cr;
struct dapl_srq;
struct dapl_wr_pool;

/* Connection qualifiers: any non-zero 64-bit value.  Up to 65535 the
 * qualifier is the TCP port; the engine maps larger ones onto a port range
 * and verifies the full value in the request (MPI derives them from pids). */
#define DAPL_QUAL_MIN 1

/* ------------------------------------------------------------- EP */

struct dapl_ep {
	struct dapl_obj obj;
	/* Always the exact DAT state, UNCONFIGURED_* variants included; change
	 * it only through dapl_ep_set_state(). */
	DAT_EP_STATE state;
	struct dapl_pz *pz;
	struct dapl_evd *recv_evd;
	struct dapl_evd *request_evd;
	struct dapl_evd *connect_evd;
	struct dapl_srq *srq;
	DAT_EP_ATTR attr;		/* normalized: no zero "defaults" left */
	DAT_COUNT soft_hw, hard_hw;	/* dat_ep_set_watermark */
	/* Addressing, filled by the connection manager. */
	DAT_PORT_QUAL local_port;
	DAT_SOCK_ADDR6 remote_addr;	/* AF_UNSPEC until connected */
	DAT_PORT_QUAL remote_port;
	/* The RSP (or SSP) that reserved it, or NULL: opaque here. */
	const void *reserved_by;
	struct dapl_cr *cr;		/* the pending CR it belongs to, or NULL */
	int provider_created;		/* made for a PSP_PROVIDER_FLAG CR */
	/* The engine QP and the slots of work posted to it (ep_post.c);
	 * NULL until the EP is configured.  Replaced when the QP is
	 * recreated (dat_ep_modify, dat_ep_reset). */
	struct dapl_wr_pool *pool;
	/* Connection (cm.c). */
	struct iwe_conn *conn;		/* owned: destroyed by the EP */
	int cm_final;			/* the conn's last event arrived */
	int cm_adopt;			/* connect starting: the handler may
					 * learn the conn before the caller */
	int disc_posted;		/* DISCONNECTED/BROKEN/failure event
					 * posted for this connection */
	int dying;			/* being freed: handlers stay away */
	int adopted_socket;		/* connecting over a consumer's socket
					 * (SSP): a failure hands it back */
	int rdma_read_default;		/* the consumer never set the RDMA
					 * Read depths */
	/* Private data of the last connection event, kept here so the
	 * event's pointer stays valid until the EP is reused or freed. */
	DAT_COUNT ev_pd_size;
	unsigned char ev_pd[IWE_MAX_PRIVATE_DATA];
};

/* What a work request carries to its completion: one slot of the EP's
 * pool (ep_post.c), named by ibv_wc.wr_id.  The operation and length are
 * kept because verbs leaves wc.opcode undefined on error and byte_len
 * defined for receives only. */
struct dapl_wr_ctx {
	DAT_DTO_COOKIE cookie;
	DAT_DTOS op;
	DAT_SEG_LENGTH length;		/* bytes posted (sends, RDMA) */
	DAT_COMPLETION_FLAGS flags;
	uint32_t pos;			/* ring position when posted */
	uint8_t state;			/* enum in ep_post.c */
	uint8_t suppressed;		/* posted without IBV_SEND_SIGNALED */
	/* RMR binds (op DAT_DTO_BIND_MW; cookie holds the RMR cookie). */
	DAT_RMR_HANDLE rmr;
	uint32_t rmr_seq;		/* which bind of that RMR */
};

/* ibv_wc.wr_id of a receive posted to an SRQ: this bit, the SRQ's id in
 * bits 32..62 and its slot in bits 0..31 (srq.c).  wr_ids of EP work
 * carry a qp_num there, which never reaches bit 63. */
#define DAPL_WR_SRQ_BIT (UINT64_C(1) << 63)

/* Convert an engine completion into a DAT_DTO_COMPLETION_EVENT.  Fills
 * event_number and event_data; the caller sets evd_handle.  (Also declared
 * in dapl_evd.h.) */
void dapl_ep_wc_to_event(const struct ibv_wc *wc, DAT_EVENT *event);

/* The DAT_INVALID_STATE subtype that names a state. */
DAT_RETURN dapl_ep_state_subtype(DAT_EP_STATE state);
/* DAT_INVALID_STATE | the subtype of the EP's current state. */
DAT_RETURN dapl_ep_state_error(const struct dapl_ep *ep);

/* Whether the EP has what a connection needs: a PZ and its three EVDs
 * (receives go to the recv EVD even when they come from an SRQ). */
int dapl_ep_is_configured(const struct dapl_ep *ep);

/* Set the EP's state.  Pass the configured form (UNCONNECTED, RESERVED,
 * PASSIVE_CONNECTION_PENDING, TENTATIVE_CONNECTION_PENDING, ...): the EP
 * lands in the matching UNCONFIGURED_* state when it lacks its PZ or an
 * EVD.  Caller holds ia->lock. */
void dapl_ep_set_state(struct dapl_ep *ep, DAT_EP_STATE state);
/* The configured form of a state (UNCONFIGURED_RESERVED -> RESERVED...). */
DAT_EP_STATE dapl_ep_base_state(DAT_EP_STATE state);

/* Whether the EP is connected (DTOs other than receives may be posted).
 * Caller holds ia->lock. */
int dapl_ep_connected(const struct dapl_ep *ep);

/* DAT_SUCCESS when the EP may start a connection (active connect, SSP
 * socket connect, accept): configured and UNCONNECTED.  Otherwise
 * DAT_INVALID_STATE with the state's subtype, or for an unconfigured EP the
 * subtype naming what is missing (EP_PZ, EP_EVD_*).  Caller holds
 * ia->lock. */
DAT_RETURN dapl_ep_check_connectable(const struct dapl_ep *ep);

/* Reserve an UNCONNECTED EP (configured or not) for an RSP or SSP: it
 * becomes RESERVED (UNCONFIGURED_RESERVED).  Returns the state error
 * otherwise.  Caller holds ia->lock. */
DAT_RETURN dapl_ep_reserve(struct dapl_ep *ep, const void *owner);
/* Drop the reservation of 'owner'; an EP still RESERVED goes back to
 * UNCONNECTED, one that moved on (a CR took it) keeps its state.  Caller
 * holds ia->lock. */
void dapl_ep_unreserve(struct dapl_ep *ep, const void *owner);

/* An EP the provider creates for a PSP_PROVIDER_FLAG connection request:
 * no PZ, no EVDs, default attributes, UNCONFIGURED_UNCONNECTED until the
 * consumer dat_ep_modify's it. */
DAT_RETURN dapl_ep_create_internal(struct dapl_ia *ia, struct dapl_ep **out);
/* Free an EP whatever its state, releasing its counts (abrupt close, or a
 * provider-created EP whose CR is rejected).  Tears its connection and QP
 * down first; no event names it afterwards.  Caller holds no lock. */
void dapl_ep_destroy(struct dapl_ep *ep);

/* ---- the EP's QP and work slots (ep_post.c) ---- */

/* Give a configured EP without a QP its QP (in INIT) and slot pool.  A
 * no-op for an unconfigured EP or one that has a QP.  Caller holds
 * ia->lock (creating a QP never waits for the progress thread). */
DAT_RETURN dapl_ep_qp_create_locked(struct dapl_ep *ep);
/* Detach the EP's pool (ep->pool = NULL) for dapl_ep_qp_retire. */
struct dapl_wr_pool *dapl_ep_qp_detach_locked(struct dapl_ep *ep);
/* Flush (QP to ERROR) and destroy a detached QP.  Its completions still
 * queued in EVDs keep their cookies.  No lock held; NULL is a no-op. */
void dapl_ep_qp_retire(struct dapl_wr_pool *pool);
/* The engine QP of a pool (NULL for none). */
struct iwe_qp *dapl_ep_qp(const struct dapl_wr_pool *pool);
/* Posting: lock the EP's pool while holding ia->lock (NULL: no QP), post
 * after unlocking ia->lock, release.  The ctx is copied into a slot; total
 * is the posted length, for error mapping. */
struct dapl_wr_pool *dapl_ep_pool_hold_locked(struct dapl_ep *ep);
void dapl_ep_pool_release(struct dapl_wr_pool *pool);
DAT_RETURN dapl_ep_pool_post_send(struct dapl_wr_pool *p,
				  struct ibv_send_wr *wr,
				  const struct dapl_wr_ctx *ctx, uint64_t total);
DAT_RETURN dapl_ep_pool_post_recv(struct dapl_wr_pool *p,
				  struct ibv_recv_wr *wr,
				  const struct dapl_wr_ctx *ctx, uint64_t total);
/* Outstanding work of the EP (posted, completion not yet dequeued).  For
 * an EP with an SRQ, recvs counts the SRQ buffer it has taken for a
 * message still arriving.  Caller holds ia->lock. */
void dapl_ep_outstanding_locked(const struct dapl_ep *ep, DAT_COUNT *recvs,
				DAT_COUNT *requests);

/* ---- connections (cm.c) ---- */

/* Negotiation knobs for a connection of this EP (IA config + EP's
 * RDMA Read depths). */
void dapl_cm_params(const struct dapl_ep *ep, struct iwe_cm_params *p);
/* The same for a listener (device maxima: the accepting EP is unknown). */
void dapl_cm_listen_params(const struct dapl_ia *ia, struct iwe_cm_params *p);
DAT_RETURN dapl_cm_connect(struct dapl_ep *ep, const struct sockaddr_in *dst,
			   DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
			   DAT_COUNT pd_size, const void *pd);
/* Connect over a consumer's connected TCP socket (dat_iw_socket_connect):
 * as dapl_cm_connect, but the engine adopts fd and starts at MPA_SENT.
 * When the connection is not established the socket is handed back open.
 * RDMA Read depths the consumer never set become 0 (DAT iWARP extension
 * 3.1.4.3). */
DAT_RETURN dapl_cm_adopt_connect(struct dapl_ep *ep, int fd,
				 DAT_TIMEOUT timeout, DAT_COUNT pd_size,
				 const void *pd);
DAT_RETURN dapl_cm_disconnect(struct dapl_ep *ep, DAT_CLOSE_FLAGS how);
DAT_RETURN dapl_cm_accept(struct dapl_cr *cr, struct dapl_ep *ep,
			  DAT_COUNT pd_size, const void *pd);
DAT_RETURN dapl_cm_reject(struct dapl_cr *cr, DAT_COUNT pd_size,
			  const void *pd);
/* Take the EP's conn away for destruction (state bookkeeping reset).
 * Caller holds ia->lock; destroy the result with iwe_cm_conn_destroy
 * after unlocking. */
struct iwe_conn *dapl_cm_ep_take_conn_locked(struct dapl_ep *ep);
/* The handler of every conn an EP owns (ctx: the EP). */
void dapl_cm_ep_handler(const struct iwe_cm_event *ev, void *ctx);
/* The handler of PSP/RSP listeners (ctx: the SP). */
void dapl_cm_sp_handler(const struct iwe_cm_event *ev, void *ctx);
/* Refuse a delivered request nobody will answer: reject it and park it on
 * the SP for destruction (handlers may not destroy conns).  Caller holds
 * ia->lock. */
void dapl_cm_sp_park_locked(struct dapl_sp *sp, struct iwe_conn *c);
/* Destroy the parked conns of an SP whose listener is gone.  No lock. */
void dapl_cm_sp_reap(struct dapl_sp *sp);
/* The RSP that reserved an EP forgets it (EP freed, or its CR answered).
 * Caller holds ia->lock. */
void dapl_sp_forget_ep_locked(struct dapl_ep *ep);

/* --------------------------------------------------- Service Points */

enum dapl_sp_kind { DAPL_SP_PSP, DAPL_SP_RSP };

struct dapl_sp {
	struct dapl_obj obj;
	enum dapl_sp_kind sp_kind;
	DAT_CONN_QUAL qual;
	struct dapl_evd *evd;		/* CR EVD */
	DAT_PSP_FLAGS psp_flags;	/* PSP */
	struct dapl_ep *ep;		/* RSP: the reserved EP */
	/* Process-wide registry of qualifiers in use (sp.c). */
	struct in_addr addr;
	enum iwe_transport transport;
	struct dapl_sp *qnext;
	struct iwe_listener *listener;	/* engine listener */
	int dead;			/* being freed: refuse new requests */
	/* Requests refused by the handler, destroyed with the SP. */
	struct iwe_conn **parked;
	int nparked, parked_cap;
};

/* ------------------------------------------------- Connection Request */

struct dapl_cr {
	struct dapl_obj obj;
	/* The Service Point is referenced by handle, not pointer: freeing it
	 * has no effect on its CRs (DAT 2.0), and a stale handle is safe. */
	DAT_HANDLE sp_handle;
	DAT_CONN_QUAL conn_qual;
	struct dapl_ep *ep;		/* RSP's / provider-created EP, or NULL */
	DAT_SOCK_ADDR6 remote_addr;
	DAT_PORT_QUAL remote_port;
	DAT_COUNT pd_size;
	unsigned char pd[IWE_MAX_PRIVATE_DATA];
	struct iwe_conn *conn;		/* owned until accepted or rejected */
	int busy;			/* an accept/reject is in progress */
};

/* What the connection manager knows when a request arrives. */
struct dapl_cr_info {
	DAT_HANDLE sp_handle;		/* PSP, RSP or SSP handle */
	DAT_CONN_QUAL conn_qual;
	struct dapl_ep *ep;		/* optional local EP (see struct dapl_cr) */
	const struct sockaddr *remote;	/* AF_INET or AF_INET6 */
	DAT_PORT_QUAL remote_port;	/* the requesting side's port */
	const void *pd;
	DAT_COUNT pd_size;		/* truncated to IWE_MAX_PRIVATE_DATA */
	struct iwe_conn *conn;
};

/* Create and register a CR.  A given EP moves to PASSIVE_CONNECTION_PENDING
 * (or UNCONFIGURED_PASSIVE) and is linked to the CR; it must be RESERVED
 * (RSP, SSP) or provider-created and UNCONNECTED, else DAT_INVALID_STATE. */
DAT_RETURN dapl_cr_create(struct dapl_ia *ia, const struct dapl_cr_info *info,
			  struct dapl_cr **out);
/* Unregister and free a CR once accepted, rejected or handed off: the EP
 * is unlinked, its state is left to the caller, and so is cr->conn (take
 * it first).  Takes ia->lock. */
void dapl_cr_free(struct dapl_cr *cr);

/* ----------------------------------------------- Shared Receive Queue */

struct dapl_srq_slot;

struct dapl_srq {
	struct dapl_obj obj;
	struct dapl_pz *pz;
	DAT_SRQ_STATE state;
	DAT_COUNT max_recv_dtos;
	DAT_COUNT max_recv_iov;
	DAT_COUNT low_watermark;
	struct iwe_srq *esrq;		/* the engine SRQ */
	/* Cookies of posted receives, named by wr_id (DAPL_WR_SRQ_BIT). */
	pthread_mutex_t lock;		/* slots; after ia->lock */
	uint32_t id;			/* in the process-wide SRQ table */
	struct dapl_srq_slot *slots;
	uint32_t nslots, free_head;	/* free list, 1-based; 0 = none */
	DAT_COUNT outstanding;		/* posted, completion not dequeued */
	struct dapl_srq *hnext;		/* SRQ table chain */
};

/* The cookie of an SRQ receive completion (wr_id has DAPL_WR_SRQ_BIT);
 * frees its slot.  0 when the SRQ is gone (freed since). */
int dapl_srq_wc_take(uint64_t wr_id, DAT_DTO_COOKIE *cookie);

/* A bind posted by dat_rmr_bind did not happen (its completion carries an
 * error): the RMR, if it still records that bind (seq), becomes unbound,
 * as the engine left its window.  Takes ia->lock (rmr.c). */
void dapl_rmr_bind_failed(DAT_RMR_HANDLE rmr, uint32_t seq);

/* ------------------------------------------ checks shared by modules */

/* Look up an EVD of 'ia' that carries stream 'flag' and count one more
 * user of it, atomically with dat_evd_free.  NULL when the handle is bad,
 * not an EVD, of another IA or without the flag. */
struct dapl_evd *dapl_ep_pin_evd(struct dapl_ia *ia, DAT_EVD_HANDLE h,
				 DAT_EVD_FLAGS flag);
void dapl_ep_unpin_evd_locked(struct dapl_evd *evd);

/* Same for an SRQ of 'ia' (srq.c); NULL when the handle is bad. */
struct dapl_srq *dapl_srq_pin(struct dapl_ia *ia, DAT_SRQ_HANDLE h);
void dapl_srq_unpin_locked(struct dapl_srq *srq);

/* Validate a local IOV against the LMRs of a PZ: each non-empty segment
 * must lie inside a live LMR of 'pz' whose privileges include 'priv'
 * (DAT_MEM_PRIV_LOCAL_READ_FLAG or _LOCAL_WRITE_FLAG).  Adds the lengths
 * into *total.  Errors (DAT 2.0 post_* return values):
 *   unknown LMR or missing privilege -> DAT_PRIVILEGES_VIOLATION,
 *   LMR of another PZ                -> DAT_PROTECTION_VIOLATION,
 *   segment outside its LMR          -> DAT_INVALID_PARAMETER | iov_arg.
 * Caller holds ia->lock. */
DAT_RETURN dapl_ep_iov_check_locked(struct dapl_ia *ia,
				    const struct dapl_pz *pz, DAT_COUNT n,
				    const DAT_LMR_TRIPLET *iov,
				    DAT_MEM_PRIV_FLAGS priv,
				    DAT_RETURN iov_arg, uint64_t *total);

/* Private data bounds of connect/accept/reject. */
static inline int dapl_pd_size_ok(DAT_COUNT size)
{
	return size >= 0 && size <= DAPL_MAX_PRIVATE_DATA;
}

static inline int dapl_qual_ok(DAT_CONN_QUAL q)
{
	return q >= DAPL_QUAL_MIN;
}

#endif
