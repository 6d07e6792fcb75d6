/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* An engine completion (struct ibv_wc) as a DAT event.
 *
 * The wr_id names what was posted: a slot of an EP's pool (ep_qp.c), or
 * of an SRQ (srq.c) when DAPL_WR_SRQ_BIT is set.  The slot gives the
 * cookie, the operation and the posted length; the engine gives the
 * status and, for receives, the operation that arrived and its length.
 * Statuses and operations are translated by the two tables below; the
 * rest is a copy.
 *
 * A completion can also say something about another object: a failed
 * bind leaves its RMR unbound, and a Send with Invalidate received unbinds
 * the RMR it names.  Both are applied here, as the event is made, so the
 * consumer never sees the event before the RMR says so.
 */
#include "config.h"

#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"
#include "dapl_mem.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Engine status to DAT status, indexed by enum ibv_wc_status.  Only
 * IBV_WC_SUCCESS maps to DAT_DTO_SUCCESS (0): a zero entry elsewhere is a
 * status missing here, reported as a transport error. */
static const DAT_DTO_COMPLETION_STATUS status_map[] = {
	[IBV_WC_SUCCESS] = DAT_DTO_SUCCESS,
	[IBV_WC_WR_FLUSH_ERR] = DAT_DTO_ERR_FLUSHED,
	[IBV_WC_LOC_LEN_ERR] = DAT_DTO_ERR_LOCAL_LENGTH,
	[IBV_WC_LOC_QP_OP_ERR] = DAT_DTO_ERR_LOCAL_EP,
	[IBV_WC_LOC_EEC_OP_ERR] = DAT_DTO_ERR_LOCAL_EP,
	[IBV_WC_TM_ERR] = DAT_DTO_ERR_LOCAL_EP,
	[IBV_WC_TM_RNDV_INCOMPLETE] = DAT_DTO_ERR_LOCAL_EP,
	[IBV_WC_LOC_PROT_ERR] = DAT_DTO_ERR_LOCAL_PROTECTION,
	[IBV_WC_LOC_ACCESS_ERR] = DAT_DTO_ERR_LOCAL_PROTECTION,
	[IBV_WC_LOC_RDD_VIOL_ERR] = DAT_DTO_ERR_LOCAL_PROTECTION,
	[IBV_WC_MW_BIND_ERR] = DAT_RMR_OPERATION_FAILED,
	[IBV_WC_BAD_RESP_ERR] = DAT_DTO_ERR_BAD_RESPONSE,
	[IBV_WC_REM_ACCESS_ERR] = DAT_DTO_ERR_REMOTE_ACCESS,
	[IBV_WC_REM_INV_REQ_ERR] = DAT_DTO_ERR_REMOTE_RESPONDER,
	[IBV_WC_REM_OP_ERR] = DAT_DTO_ERR_REMOTE_RESPONDER,
	[IBV_WC_REM_INV_RD_REQ_ERR] = DAT_DTO_ERR_REMOTE_RESPONDER,
	[IBV_WC_REM_ABORT_ERR] = DAT_DTO_ERR_REMOTE_RESPONDER,
	[IBV_WC_RNR_RETRY_EXC_ERR] = DAT_DTO_ERR_RECEIVER_NOT_READY,
	[IBV_WC_RETRY_EXC_ERR] = DAT_DTO_ERR_TRANSPORT,
	[IBV_WC_INV_EECN_ERR] = DAT_DTO_ERR_TRANSPORT,
	[IBV_WC_INV_EEC_STATE_ERR] = DAT_DTO_ERR_TRANSPORT,
	[IBV_WC_FATAL_ERR] = DAT_DTO_ERR_TRANSPORT,
	[IBV_WC_RESP_TIMEOUT_ERR] = DAT_DTO_ERR_TRANSPORT,
	[IBV_WC_GENERAL_ERR] = DAT_DTO_ERR_TRANSPORT,
};

/* Operation of a successful completion, indexed by enum ibv_wc_opcode:
 * below IBV_WC_RECV what we initiated, from it on (that bit set) what
 * arrived, counted from IBV_WC_RECV.  Atomics, tag-matching management
 * and the rest have no DAT 2.0 operation. */
struct op_entry {
	DAT_DTOS op;
	int known;
};

static const struct op_entry request_op_map[] = {
	[IBV_WC_SEND] = { DAT_DTO_SEND, 1 },
	[IBV_WC_RDMA_WRITE] = { DAT_DTO_RDMA_WRITE, 1 },
	[IBV_WC_RDMA_READ] = { DAT_DTO_RDMA_READ, 1 },
	[IBV_WC_BIND_MW] = { DAT_DTO_BIND_MW, 1 },
	[IBV_WC_LOCAL_INV] = { DAT_DTO_LMR_INVALIDATE, 1 },
};

static const struct op_entry receive_op_map[] = {
	[IBV_WC_RECV - IBV_WC_RECV] = { DAT_DTO_RECEIVE, 1 },
	[IBV_WC_RECV_RDMA_WITH_IMM - IBV_WC_RECV] = { DAT_DTO_RECEIVE, 1 },
	[IBV_WC_TM_RECV - IBV_WC_RECV] = { DAT_DTO_RECEIVE, 1 },
	[IBV_WC_TM_NO_TAG - IBV_WC_RECV] = { DAT_DTO_RECEIVE, 1 },
};

static DAT_DTO_COMPLETION_STATUS wc_status(enum ibv_wc_status s)
{
	if (s == IBV_WC_SUCCESS)
		return DAT_DTO_SUCCESS;
	if ((size_t)s < ARRAY_SIZE(status_map) && status_map[s])
		return status_map[s];
	return DAT_DTO_ERR_TRANSPORT;	/* a status newer than this table */
}

/* Only meaningful for successful completions (verbs leaves the opcode of
 * an error completion undefined). */
static DAT_DTOS wc_op(const struct ibv_wc *wc)
{
	const struct op_entry *map = request_op_map;
	size_t n = ARRAY_SIZE(request_op_map), i = wc->opcode;

	if (wc->opcode & IBV_WC_RECV) {
		map = receive_op_map;
		n = ARRAY_SIZE(receive_op_map);
		i -= IBV_WC_RECV;
	}
	if (i >= n || !map[i].known)
		return DAT_DTO_EXTENSION_BASE;
	if (map[i].op == DAT_DTO_RECEIVE && (wc->wc_flags & IBV_WC_WITH_INV))
		return DAT_DTO_RECEIVE_WITH_INVALIDATE;
	return map[i].op;
}

/* The slot that wr_id names, released: 0 when its pool or SRQ is gone. */
static int take_slot(const struct ibv_wc *wc, struct dapl_wr_ctx *ctx,
		     DAT_EP_HANDLE *ep)
{
	if (!(wc->wr_id & DAPL_WR_SRQ_BIT))
		return dapl_ep_wc_take(wc, ctx, ep);
	/* A receive of an SRQ: the cookie is the SRQ's, the EP the QP's. */
	memset(ctx, 0, sizeof(*ctx));
	ctx->op = DAT_DTO_RECEIVE;
	*ep = dapl_ep_of_qp_num(wc->qp_num);
	return dapl_srq_wc_take(wc->wr_id, &ctx->cookie);
}

/* An RMR bind (dat_rmr_bind) completed. */
static void bind_fill(const struct ibv_wc *wc, const struct dapl_wr_ctx *ctx,
		      DAT_EVENT *event)
{
	DAT_RMR_BIND_COMPLETION_EVENT_DATA *b =
		&event->event_data.rmr_completion_event_data;

	event->event_number = DAT_RMR_BIND_COMPLETION_EVENT;
	b->rmr_handle = ctx->rmr;
	b->user_cookie.as_64 = ctx->cookie.as_64;
	b->status = wc_status(wc->status);
}

/* A DTO completed; ctx is NULL when its slot is gone. */
static void dto_fill(const struct ibv_wc *wc, const struct dapl_wr_ctx *ctx,
		     DAT_EP_HANDLE ep, DAT_EVENT *event)
{
	DAT_DTO_COMPLETION_EVENT_DATA *d =
		&event->event_data.dto_completion_event_data;

	event->event_number = DAT_DTO_COMPLETION_EVENT;
	d->status = wc_status(wc->status);
	d->ep_handle = ep;
	if (ctx)
		d->user_cookie = ctx->cookie;
	/* On error DAT leaves length and operation-specific data undefined;
	 * the posted operation is still the most useful thing to report. */
	d->operation = ctx ? ctx->op : wc_op(wc);
	if (wc->status != IBV_WC_SUCCESS)
		return;
	if (ctx && ctx->op == DAT_DTO_RECEIVE)
		d->operation = wc_op(wc);	/* may carry an invalidate */
	/* byte_len is what arrived in a receive; for the operations we
	 * initiate, the posted length (for a read, the remote segment) is
	 * what moved: verbs does not define byte_len for all of them. */
	if (d->operation == DAT_DTO_RECEIVE ||
	    d->operation == DAT_DTO_RECEIVE_WITH_INVALIDATE || !ctx)
		d->transfered_length = wc->byte_len;
	else
		d->transfered_length = ctx->length;
	if (d->operation == DAT_DTO_RECEIVE_WITH_INVALIDATE)
		d->rmr_context = wc->invalidated_rkey;
}

void dapl_dto_event(struct dapl_ia *ia, const struct ibv_wc *wc,
		    DAT_EVD_HANDLE evd, DAT_EVENT *event)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&event->event_data.dto_completion_event_data;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	struct dapl_wr_ctx ctx;
	int known = take_slot(wc, &ctx, &ep);

	memset(event, 0, sizeof(*event));
	event->evd_handle = evd;
	if (known && ctx.op == DAT_DTO_BIND_MW) {
		bind_fill(wc, &ctx, event);
		if (wc->status != IBV_WC_SUCCESS)
			dapl_rmr_bind_failed(ctx.rmr, ctx.rmr_seq);
		return;
	}
	dto_fill(wc, known ? &ctx : NULL, ep, event);
	if (d->status == DAT_DTO_SUCCESS &&
	    d->operation == DAT_DTO_RECEIVE_WITH_INVALIDATE)
		dapl_rmr_remote_invalidated(ia, d->rmr_context);
}
