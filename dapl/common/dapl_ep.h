/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Endpoints, Service Points (PSP, RSP), Connection Requests and Shared
 * Receive Queues: the objects of the connection model, and the glue that
 * binds them to the engine's QPs and connection manager.
 *
 * Files, from the bottom: ep_state.c (the EP state machine, reservation),
 * ep_qp.c (the EP's QP and its work slots), srq.c, cm.c (an EP's
 * connection: connect, disconnect, accept, the engine's events), ep.c (EP
 * objects), ep_post.c and ep_connect.c (the posting and connection calls),
 * cr.c (Connection Requests: a request's arrival, accept, reject), sp.c
 * (PSPs and RSPs); dapl/ssp/ssp.c (SSPs) sits beside sp.c.
 *
 * Dependencies are counted in obj.users, under ia->lock as everywhere
 * except on EVDs, whose counts may come from other IAs (evd_queue.c):
 *   - an EP counts one user on its PZ, on each of its EVDs (once per role,
 *     so an EVD serving two roles is counted twice) and on its SRQ;
 *   - a PSP, RSP or SSP counts one user on its CR EVD;
 *   - an SRQ counts one user on its PZ.
 * The connect EVD of an EP and the CR EVD of a Service Point may belong
 * to another IA of the provider instance; everything else an object
 * names belongs to its own IA (doc/semantics.md, "Sharing across IAs").
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
	 * it only through dapl_ep_transition_locked(). */
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
	/* The RSP (or SSP) that reserved it, or NULL: opaque here.  The
	 * reserver's own pointer to the EP, if it keeps one, is cleared when
	 * the reservation ends (dapl_ep_forget_reserver_locked). */
	const void *reserved_by;
	struct dapl_ep **reserver_ref;
	struct dapl_cr *cr;		/* the pending CR it belongs to, or NULL */
	int provider_created;		/* made for a PSP_PROVIDER_FLAG CR */
	/* The engine QP and the slots of work posted to it (ep_qp.c);
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
	/* Counters (dapl_stats.h): connection outcomes and the QPs it had
	 * before the current one; under ia->lock. */
	DAT_IW_STATS stats;
};

/* ---- the state machine (ep_state.c) ---- */

/* The DAT_INVALID_STATE subtype that names a state. */
DAT_RETURN dapl_ep_state_subtype(DAT_EP_STATE state);
/* DAT_INVALID_STATE | the subtype of the EP's current state. */
DAT_RETURN dapl_ep_state_error(const struct dapl_ep *ep);
/* The configured form of a state (UNCONFIGURED_RESERVED -> RESERVED...). */
DAT_EP_STATE dapl_ep_base_state(DAT_EP_STATE state);

/* Whether the EP has what a connection needs: a PZ and its three EVDs
 * (receives go to the recv EVD even when they come from an SRQ). */
int dapl_ep_is_configured(const struct dapl_ep *ep);
/* DAT_SUCCESS for a configured EP, else DAT_INVALID_STATE with the
 * subtype naming the first piece missing (EP_PZ, EP_EVD_*). */
DAT_RETURN dapl_ep_config_error(const struct dapl_ep *ep);

/* Whether DAT's EP state machine (plus the returns of failed calls, see
 * ep_state.c) allows going from one state to another. */
int dapl_ep_transition_legal(DAT_EP_STATE from, DAT_EP_STATE to);
/* Move the EP to state 'to' (either form): it lands in the matching
 * UNCONFIGURED_* state when it lacks its PZ or an EVD.  An illegal change
 * is a provider bug: asserted, and refused (returns 0) under NDEBUG. */
int dapl_ep_transition_locked(struct dapl_ep *ep, DAT_EP_STATE to);
/* Whether another object (an RSP, a pending CR) owns the EP: the
 * consumer frees that first (DAT 2.0 dat_ep_free). */
int dapl_ep_owned(const struct dapl_ep *ep);
/* Whether dat_ep_modify may change it: only before a connection exists. */
int dapl_ep_modifiable(const struct dapl_ep *ep);
/* The first state of a new EP, not yet visible to anyone. */
void dapl_ep_state_init(struct dapl_ep *ep);

/* Whether the EP is connected (DTOs other than receives may be posted).
 * Caller holds ia->lock for a stable answer. */
int dapl_ep_connected(const struct dapl_ep *ep);

/* DAT_SUCCESS when the EP may start a connection (active connect, SSP
 * socket connect, accept): configured and UNCONNECTED.  Otherwise
 * DAT_INVALID_STATE with the state's subtype, or for an unconfigured EP the
 * subtype naming what is missing (EP_PZ, EP_EVD_*). */
DAT_RETURN dapl_ep_check_connectable(const struct dapl_ep *ep);

/* Reserve an UNCONNECTED EP (configured or not) for an RSP or SSP: it
 * becomes RESERVED (UNCONFIGURED_RESERVED).  'ref', if not NULL, is where
 * the owner keeps the EP: it is set now and cleared when the reservation
 * ends.  Returns the state error otherwise. */
DAT_RETURN dapl_ep_reserve_locked(struct dapl_ep *ep, const void *owner,
				  struct dapl_ep **ref);
/* Drop the reservation of 'owner'; an EP still RESERVED goes back to
 * UNCONNECTED, one that moved on (a CR took it) keeps its state. */
void dapl_ep_unreserve_locked(struct dapl_ep *ep, const void *owner);
/* End the reservation whoever holds it, leaving the state alone (the EP
 * is freed, or its CR was answered). */
void dapl_ep_forget_reserver_locked(struct dapl_ep *ep);

/* Take the EP's conn away for destruction (state bookkeeping reset);
 * destroy the result with iwe_cm_conn_destroy after unlocking. */
struct iwe_conn *dapl_ep_take_conn_locked(struct dapl_ep *ep);

/* A log line prefixed with the EP's handle (iw_log.h): at error level
 * (always), or at debug level. */
void dapl_ep_debug(const struct dapl_ep *ep, int always, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define DAPL_EP_DEBUG(ep, ...) dapl_ep_debug((ep), 0, __VA_ARGS__)

/* ---- the EP's QP and work slots (ep_qp.c) ---- */

/* What a work request carries to its completion: one slot of the EP's
 * pool, named by ibv_wc.wr_id.  The operation and length are kept because
 * verbs leaves wc.opcode undefined on error and byte_len defined for
 * receives only. */
struct dapl_wr_ctx {
	DAT_DTO_COOKIE cookie;
	DAT_DTOS op;
	DAT_SEG_LENGTH length;		/* bytes posted (sends, RDMA) */
	DAT_COMPLETION_FLAGS flags;
	uint32_t pos;			/* ring position when posted */
	uint8_t state;			/* enum in ep_qp.c */
	uint8_t suppressed;		/* posted without IBV_SEND_SIGNALED */
	/* RMR binds (op DAT_DTO_BIND_MW; cookie holds the RMR cookie). */
	DAT_RMR_HANDLE rmr;
	uint32_t rmr_seq;		/* which bind of that RMR */
};

/* ibv_wc.wr_id of a receive posted to an SRQ: this bit, the SRQ's id in
 * bits 32..62 and its slot in bits 0..31 (srq.c).  wr_ids of EP work
 * carry a qp_num there, which never reaches bit 63. */
#define DAPL_WR_SRQ_BIT (UINT64_C(1) << 63)

/* Give a configured EP without a QP its QP (in INIT) and slot pool.  A
 * no-op for an unconfigured EP or one that has a QP (creating a QP never
 * waits for the progress thread). */
DAT_RETURN dapl_ep_qp_create_locked(struct dapl_ep *ep);
/* Detach the EP's pool (ep->pool = NULL) for dapl_ep_qp_retire. */
struct dapl_wr_pool *dapl_ep_qp_detach_locked(struct dapl_ep *ep);
/* Flush (QP to ERROR) and destroy a detached QP.  Its completions still
 * queued in EVDs keep their cookies.  No lock held; NULL is a no-op. */
void dapl_ep_qp_retire(struct dapl_wr_pool *pool);
/* The engine QP of a pool (NULL for none). */
struct iwe_qp *dapl_ep_qp(const struct dapl_wr_pool *pool);
/* Posts the pool refused because its ring was full (0 for none). */
uint64_t dapl_ep_pool_queue_full(struct dapl_wr_pool *pool);
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
 * message still arriving. */
void dapl_ep_outstanding_locked(const struct dapl_ep *ep, DAT_COUNT *recvs,
				DAT_COUNT *requests);
/* The slot of an EP work completion (not an SRQ receive): copied into
 * *ctx and released, with the EP handle the pool reports (even a stale
 * one).  0 when its pool is gone (retired long ago). */
int dapl_ep_wc_take(const struct ibv_wc *wc, struct dapl_wr_ctx *ctx,
		    DAT_EP_HANDLE *ep);
/* The EP handle of the QP with this number, or DAT_HANDLE_NULL. */
DAT_EP_HANDLE dapl_ep_of_qp_num(uint32_t qp_num);

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
				 const struct iwe_sock_facts *facts,
				 DAT_TIMEOUT timeout, DAT_COUNT pd_size,
				 const void *pd);
DAT_RETURN dapl_cm_disconnect(struct dapl_ep *ep, DAT_CLOSE_FLAGS how);
/* Accept the request 'conn' of CR 'cr' (owned by the caller, who has
 * taken it from the CR) on 'ep': the EP takes the conn and the CR's
 * addresses, sends the MPA reply and waits for ESTABLISHED.  On failure
 * the EP is as before and the conn is still the caller's. */
DAT_RETURN dapl_cm_accept(struct dapl_ep *ep, struct iwe_conn *conn,
			  const struct dapl_cr *cr, DAT_COUNT pd_size,
			  const void *pd);

/* ---- EP objects (ep.c) ---- */

/* An EP the provider creates for a PSP_PROVIDER_FLAG connection request:
 * no PZ, no EVDs, default attributes, UNCONFIGURED_UNCONNECTED until the
 * consumer dat_ep_modify's it. */
DAT_RETURN dapl_ep_create_internal(struct dapl_ia *ia, struct dapl_ep **out);
/* Free an EP whatever its state, releasing its counts (abrupt close, or a
 * provider-created EP whose CR is rejected).  Tears its connection and QP
 * down first; no event names it afterwards.  Caller holds no lock. */
void dapl_ep_destroy(struct dapl_ep *ep);

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
};

/* ------------------------------------------------- Connection Request */

struct dapl_cr {
	struct dapl_obj obj;
	/* The Service Point is referenced by handle, not pointer: freeing it
	 * has no effect on its CRs (DAT 2.0), and a stale handle is safe. */
	DAT_HANDLE sp_handle;
	DAT_CONN_QUAL conn_qual;
	struct dapl_ep *ep;		/* RSP's / SSP's / provider-created EP */
	DAT_SOCK_ADDR6 remote_addr;
	DAT_PORT_QUAL remote_port;
	DAT_COUNT pd_size;
	unsigned char pd[IWE_MAX_PRIVATE_DATA];
	struct iwe_conn *conn;		/* owned until accepted or rejected */
	int busy;			/* an accept/reject is in progress */
};

/* What a listener (PSP, RSP or SSP) knows of a request that arrives on
 * it, taken under ia->lock. */
struct dapl_sp_view {
	DAT_HANDLE handle;		/* PSP, RSP or SSP handle */
	DAT_CONN_QUAL qual;		/* reported as the CR's qualifier */
	struct dapl_evd *evd;		/* CR EVD */
	struct dapl_ep *ep;		/* the reserved EP, the provider-created
					 * one, or NULL */
};

/* A request arrived (ev: IWE_CM_CONNECT_REQUEST) on a listener whose view
 * is v: create its CR and post DAT_CONNECTION_REQUEST_EVENT, under
 * ia->lock so that the CR cannot be answered before it is complete.  The
 * CR takes the conn and v->ep (PASSIVE_CONNECTION_PENDING).  On failure
 * nothing is left: the EP is back in its state, and the conn is still the
 * caller's, who refuses it. */
DAT_RETURN dapl_cr_arrive_locked(struct dapl_ia *ia,
				 const struct dapl_sp_view *v,
				 const struct iwe_cm_event *ev);

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
	struct dapl_lock lock;		/* slots; after ia->lock */
	uint32_t id;			/* in the process-wide SRQ table */
	struct dapl_srq_slot *slots;
	uint32_t nslots, free_head;	/* free list, 1-based; 0 = none */
	DAT_COUNT outstanding;		/* posted, completion not dequeued */
	struct dapl_srq *hnext;		/* SRQ table chain */
};

/* The cookie of an SRQ receive completion (wr_id has DAPL_WR_SRQ_BIT);
 * frees its slot.  0 when the SRQ is gone (freed since). */
int dapl_srq_wc_take(uint64_t wr_id, DAT_DTO_COOKIE *cookie);

/* ------------------------------------------ checks shared by modules */

/* The private data arguments of connect, accept and reject: a size within
 * bounds (else size_arg) and a buffer when it is not 0 (else pd_arg). */
static inline DAT_RETURN dapl_pd_check(DAT_COUNT size, const void *pd,
				       DAT_RETURN size_arg, DAT_RETURN pd_arg)
{
	if (size < 0 || size > DAPL_MAX_PRIVATE_DATA)
		return DAT_INVALID_PARAMETER | size_arg;
	if (size > 0 && !pd)
		return DAT_INVALID_PARAMETER | pd_arg;
	return DAT_SUCCESS;
}

static inline int dapl_qual_ok(DAT_CONN_QUAL q)
{
	return q >= DAPL_QUAL_MIN;
}

#endif
