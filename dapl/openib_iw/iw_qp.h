/* Queue pair internals shared by iw_qp.c (object, queues, state machine),
 * iw_tx.c (transmit state machine) and iw_rx.c (receive state machine).
 *
 * Locking: one mutex per QP protects everything below: the queues, the
 * state, and both state machines.  Posting threads take it briefly; the
 * progress functions hold it across non-blocking socket calls, so a post
 * waits at most for one sendmsg/recv round.  Lock order: QP, then CQ (and
 * CQ, then channel), then device (iwe_mr_check).
 */
#ifndef IW_QP_H
#define IW_QP_H

#include <stdint.h>
#include <sys/uio.h>

#include "iw_priv.h"
#include "iw_wire.h"

/* An SGE resolved against the STag table when it was posted. */
struct iwe_sge_res {
	char *addr;
	uint32_t length;
	uint32_t lkey;
};

struct iwe_swqe {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t total;			/* bytes over all SGEs */
	uint32_t rkey;
	uint32_t inv_rkey;		/* Send with Invalidate */
	uint32_t num_sge;
	uint8_t opcode;			/* enum ibv_wr_opcode */
	uint8_t signaled;
	uint8_t fence;
	uint8_t solicited;
	uint8_t tx_done;		/* every FPDU / Read Request sent */
	uint16_t rd_issued;		/* Read Requests sent (one per SGE) */
	uint16_t rd_pending;		/* of those, responses still due */
	struct iwe_sge_res *sg;		/* num_sge entries */
	/* IBV_WR_BIND_MW: reserved at post (iwe_mw_bind_reserve); done
	 * once executed or cancelled. */
	struct iwe_mw *bind_mw;
	struct iwe_mr *bind_mr;		/* NULL for an unbind */
	uint64_t bind_addr, bind_len;
	uint32_t bind_rkey;
	int bind_access;
	uint8_t bind_done;
};

struct iwe_rwqe {
	uint64_t wr_id;
	uint64_t total;
	uint32_t num_sge;
	struct iwe_sge_res *sg;
};

/* An RDMA Read Request we issued and whose response is still due. */
struct iwe_orq_ent {
	uint32_t wqe_idx;		/* SQ slot counter of the Read WR */
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t done;			/* response bytes placed */
	uint32_t src_stag;		/* for matching a Terminate */
	uint64_t src_to;
	uint8_t rtr;			/* the Read RTR: no WR behind it */
};

/* A Read Request we accepted and must answer. */
struct iwe_irq_ent {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	char *src;			/* validated source memory */
};

/* A Terminate to send (filled from the offending segment). */
struct iwe_term {
	uint8_t layer, etype, ecode;
	uint8_t has_hdr;		/* offending DDP header known */
	uint8_t has_rdmap;		/* ...and it was a Read Request */
	uint16_t seglen;		/* ULPDU length of the offender */
	uint8_t hdr[IW_UNTAGGED_HDR_LEN + sizeof(struct iw_read_req_body)];
	uint8_t hdr_len;		/* DDP header bytes in hdr */
};

enum iwe_tx_kind {
	IWE_TX_IDLE = 0,
	IWE_TX_SQ,			/* a Send / Write / Read Request */
	IWE_TX_READ_RESP,
	IWE_TX_TERMINATE,
	IWE_TX_RTR,			/* the initiator's zero-length RTR */
};

#define IWE_TX_HDR_MAX (IW_FPDU_LEN_FIELD + IW_TERM_MAX_ULPDU)
/* One sendmsg carries up to IWE_TX_BATCH FPDUs of one message and at
 * most IWE_TX_BATCH_BYTES of payload (the size of the CRC staging
 * buffer). */
#define IWE_TX_BATCH 8
#define IWE_TX_BATCH_BYTES (256u << 10)
#define IWE_TX_IOV_MAX (IWE_TX_BATCH * (IWE_MAX_SGE + 2))

/* Per FPDU of a batch: its header and trailer, and where it ends. */
struct iwe_tx_seg {
	uint8_t hdr[IWE_TX_HDR_MAX];	/* length field + DDP/RDMAP header */
	uint8_t trailer[3 + IW_FPDU_CRC_LEN];
	size_t end;			/* batch offset just past it */
};

struct iwe_tx {
	/* The message being sent. */
	int kind;
	uint32_t wqe_idx;		/* IWE_TX_SQ */
	uint8_t opcode;			/* enum iw_opcode */
	uint8_t last_sent;		/* the L segment is framed */
	uint32_t stag;			/* tagged: sink STag */
	uint64_t to;			/* tagged: sink TO of byte 0 */
	uint32_t qn, msn, inv_stag;	/* untagged */
	uint64_t msg_len, msg_off;	/* payload bytes, bytes framed */
	uint32_t seg_len;		/* payload per segment: the message is
					 * cut into equal segments */
	const struct iwe_sge_res *src;	/* payload gather list */
	uint32_t nsrc, src_idx, src_off;
	struct iwe_sge_res one_src;	/* single-buffer payloads */
	/* The batch of FPDUs being written: iov[iov_first..iovcnt) is
	 * what is left (advanced in place as the socket takes bytes). */
	struct iwe_tx_seg seg[IWE_TX_BATCH];
	int nseg;
	struct iovec iov[IWE_TX_IOV_MAX];
	int iovcnt, iov_first;
	size_t fpdu_len, fpdu_sent;	/* batch bytes; 0/0: none in flight */
	char *bounce;			/* payload copied when WRs flush */
	/* With CRC the payload is copied here first and the CRC computed
	 * over the copy, so it covers exactly the bytes on the wire even
	 * if the consumer writes to its buffer meanwhile. */
	char *stage;			/* IWE_TX_BATCH_BYTES, on first use */
	size_t stage_used;
	/* Sequence numbers, per untagged queue (RFC 5041: start at 1). */
	uint32_t msn_send, msn_rreq;
	/* Pending Terminate; goes out at the next FPDU boundary. */
	int term_pending, term_sent;
	struct iwe_term term;
	/* Initiator: IW_RTR_* still to send as the very first FPDU. */
	unsigned rtr_pending;
};

enum iwe_rx_stage {
	IWE_RX_HDR = 0,			/* length field + DDP header (+ body) */
	IWE_RX_PAYLOAD,
	IWE_RX_TRAILER,			/* pad + CRC */
	IWE_RX_DEAD,			/* stream given up */
};

#define IWE_RX_HDR_MAX (IW_FPDU_LEN_FIELD + IW_TERM_MAX_ULPDU)
/* Read-ahead: the bytes that follow the current FPDU's tail are read in
 * the same system call, up to this many (the next FPDU's header, or
 * whole small FPDUs). */
#define IWE_RX_RA 2048

struct iwe_rx {
	int stage;
	uint8_t hdr[IWE_RX_HDR_MAX];
	uint32_t hdr_have, hdr_need;	/* need grows as the header tells */
	uint16_t ulpdu_len;
	uint16_t ctrl;
	uint8_t opcode;
	uint32_t payload_len, payload_have;
	uint8_t trailer[3 + IW_FPDU_CRC_LEN];
	uint32_t trailer_have, trailer_need;
	uint32_t crc;			/* running CRC of this FPDU */
	/* Where the payload goes: a gather list of host ranges, or
	 * discard (an error waits for the CRC before it is reported). */
	struct iovec place[IWE_MAX_SGE];
	int nplace;
	int discard;
	int err_pending;		/* term holds the error to report */
	int bad_read_resp;		/* ...about a Read Response */
	struct iwe_term term;
	/* Untagged Send reassembly. */
	uint32_t msn_send;		/* MSN of the next/current Send */
	uint32_t msn_rreq;		/* MSN of the next Read Request */
	uint32_t send_mo;		/* bytes of the current Send so far */
	int send_active;
	uint32_t inv_stag;		/* Send with Invalidate, this FPDU */
	int rtr_send;			/* this FPDU is the zero-length Send
					 * RTR: consumed without a receive */
	struct iwe_irq_ent rreq;	/* Read Request, acted on at its end */
	/* Read-ahead bytes not consumed yet: ra[ra_off..ra_len). */
	uint32_t ra_off, ra_len;
	uint8_t ra[IWE_RX_RA];
	char scratch[4096];		/* discard sink */
};

/* Shared receive queue (iw_srq.c).  Its lock comes after a QP's lock and
 * before the CQ and device locks. */
struct iwe_srq_priv {
	struct iwe_srq pub;
	pthread_mutex_t lock;
	struct iwe_rwqe *ring;		/* max_wr slots */
	struct iwe_sge_res *sge;	/* max_sge per slot */
	uint32_t max_wr, max_sge;
	uint32_t head, tail;		/* free-running; posted = tail - head */
	uint32_t limit;			/* armed limit, 0: disarmed */
	uint32_t users;			/* QPs attached */
	iwe_event_handler handler;
};

static inline struct iwe_srq_priv *iwe_srq_priv(struct iwe_srq *srq)
{
	return IWE_CONTAINER_OF(srq, struct iwe_srq_priv, pub);
}

/* Events a QP call noticed under its lock, delivered after unlocking. */
#define IWE_QP_EV_LAST_WQE  0x1u
#define IWE_QP_EV_SRQ_LIMIT 0x2u

struct iwe_qp_priv {
	struct iwe_qp pub;
	pthread_mutex_t lock;
	/* SRQ: the receive taken for the Send being placed, copied out of
	 * the SRQ (which may be resized meanwhile). */
	struct iwe_srq_priv *srq;
	struct iwe_rwqe srq_cur;
	int srq_cur_valid;
	iwe_event_handler handler;
	unsigned ev_pending;		/* IWE_QP_EV_* */
	int state;			/* enum iwe_qp_state */
	int sq_sig_all;
	int fd;				/* -1 while detached */
	int crc;
	uint32_t mulpdu, ird, ord;
	/* Send queue: slots [head, tail) in use; [head, tx) sent or being
	 * sent; counters are free-running, slot = counter % max_send_wr. */
	struct iwe_swqe *sq;
	struct iwe_sge_res *sq_sge;
	uint32_t sq_head, sq_tx, sq_tail;
	/* Receive queue: [head, tail). */
	struct iwe_rwqe *rq;
	struct iwe_sge_res *rq_sge;
	uint32_t rq_head, rq_tail;
	/* Outstanding Read Requests (ORD) and Read Responses owed (IRD). */
	struct iwe_orq_ent *orq;
	uint32_t orq_head, orq_tail;
	struct iwe_irq_ent *irq;
	uint32_t irq_head, irq_tail;
	struct iwe_tx tx;
	struct iwe_rx rx;
	struct iwe_term_info term_sent, term_rcvd;
	int stream_err;			/* errno the progress calls report */
	/* Set by the connection manager (iwe_qp_attach_cm). */
	void (*tx_hook)(void *arg);	/* TX hit EAGAIN: the progress thread
					 * must watch for writability */
	void *tx_hook_arg;
	int tx_gate;			/* responder: transmit nothing until
					 * the first FPDU has arrived */
	int first_rx;			/* the first FPDU has arrived */
	unsigned rtr_expect;		/* responder: the negotiated RTR */
};

static inline struct iwe_qp_priv *iwe_qp_priv(struct iwe_qp *qp)
{
	return IWE_CONTAINER_OF(qp, struct iwe_qp_priv, pub);
}

static inline struct iwe_swqe *iwe_sq_slot(struct iwe_qp_priv *q,
					   uint32_t ctr)
{
	return &q->sq[ctr % q->pub.cap.max_send_wr];
}

static inline struct iwe_rwqe *iwe_rq_slot(struct iwe_qp_priv *q,
					   uint32_t ctr)
{
	return &q->rq[ctr % q->pub.cap.max_recv_wr];
}

/* ---- iw_qp.c: connection-manager attachment (take q->lock) */

struct iwe_qp_cm_opts {
	int responder;			/* stay silent until the first FPDU */
	unsigned rtr;			/* IW_RTR_*: initiator sends it first;
					 * responder consumes it */
	void (*tx_hook)(void *arg);	/* see iwe_qp_priv.tx_hook */
	void *tx_hook_arg;
};

/* iwe_qp_attach_stream with the MPA roles: NULL opts is the initiator
 * without RTR (what iwe_qp_attach_stream does). */
int iwe_qp_attach_cm(struct iwe_qp *qp, int fd,
		     const struct iwe_stream_params *p,
		     const struct iwe_qp_cm_opts *o);
/* Forget the TX hook: after return it is not called any more. */
void iwe_qp_clear_tx_hook(struct iwe_qp *qp);
/* An FPDU waits for the socket to become writable. */
int iwe_qp_tx_blocked(struct iwe_qp *qp);
/* The first FPDU from the peer has been received (responder's RTR). */
int iwe_qp_first_rx(struct iwe_qp *qp);
/* Nothing left that the transmit side could still send on its own. */
int iwe_qp_tx_drained(struct iwe_qp *qp);

/* ---- iw_qp.c (all with q->lock held) */

/* Move to ERROR, flush every outstanding WR; 'err' is what the progress
 * calls report from now on.  Idempotent. */
void iwe_qp_fail(struct iwe_qp_priv *q, int err);
/* Complete, in order, the send WRs at the head that are finished. */
void iwe_qp_sq_retire(struct iwe_qp_priv *q);
/* Complete the head receive WR with byte_len bytes received. */
void iwe_qp_rq_complete(struct iwe_qp_priv *q, uint32_t byte_len,
			int solicited, uint32_t inv_stag);
/* A Terminate arrived: find the WR it names and fail it with 'status'. */
void iwe_qp_fail_matching(struct iwe_qp_priv *q, const struct iwe_term *t,
			  enum ibv_wc_status status);
void iwe_qp_fail_oldest_read(struct iwe_qp_priv *q);
/* Unlock q, then deliver the events noticed meanwhile (no lock held). */
void iwe_qp_unlock(struct iwe_qp_priv *q);
/* The receive WR for a Send segment at message offset mo: the RQ's head,
 * or with an SRQ the one taken for this message (taken now when mo and
 * the message so far are 0).  NULL: none posted. */
const struct iwe_rwqe *iwe_qp_recv_wqe(struct iwe_qp_priv *q, uint32_t mo,
				       uint32_t msg_so_far);

/* How an SGE list is resolved against the STag table. */
enum iwe_sge_use {
	IWE_SGE_SOURCE = 0,		/* read locally: any MR of the PD */
	IWE_SGE_SINK,			/* written locally: MR, local write */
	IWE_SGE_READ_SINK,		/* RDMA Read sink: iwe_read_sink_check */
};
int iwe_sgl_resolve(const struct iwe_pd *pd, const struct ibv_sge *sg,
		    int n, enum iwe_sge_use use, struct iwe_sge_res *out,
		    uint64_t *total);

/* ---- iw_srq.c (QP lock held where a QP is involved) */

/* Take the oldest WR into *out (whose sg has max_sge entries).  Returns 0,
 * or ENOENT when the SRQ is empty.  *limit_hit: the armed limit fired. */
int iwe_srq_take(struct iwe_srq_priv *s, struct iwe_rwqe *out,
		 int *limit_hit);
void iwe_srq_attach(struct iwe_srq_priv *s);
void iwe_srq_detach(struct iwe_srq_priv *s);
/* Call the SRQ's handler for IWE_EVENT_SRQ_LIMIT_REACHED (no lock). */
void iwe_srq_report_limit(struct iwe_srq_priv *s);

/* ---- iw_tx.c */

void iwe_tx_init(struct iwe_qp_priv *q);
void iwe_tx_fini(struct iwe_qp_priv *q);
int iwe_tx_progress_locked(struct iwe_qp_priv *q);
/* Queue a Terminate; it goes out once the FPDU in flight is finished. */
void iwe_tx_queue_terminate(struct iwe_qp_priv *q, const struct iwe_term *t);
/* The WRs are about to be flushed: stop reading their memory (the rest
 * of an FPDU in flight is copied aside) and forget unsent messages. */
void iwe_tx_detach_wrs(struct iwe_qp_priv *q);
int iwe_tx_busy(const struct iwe_qp_priv *q);

/* ---- iw_rx.c */

void iwe_rx_init(struct iwe_qp_priv *q);
int iwe_rx_progress_locked(struct iwe_qp_priv *q);

#endif
