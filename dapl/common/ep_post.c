/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Endpoints: work posting (dat_ep_post_*).  The QP and the work slots
 * named by ibv_wc.wr_id are in ep_qp.c, the IOV checks in lmr.c, and what
 * a completion becomes in dto_event.c.
 *
 * Choices where DAT 2.0 leaves room:
 *   - Local read privilege is not enforced on send / RDMA write sources:
 *     no RDMA device can, and consumers routinely register send buffers
 *     without DAT_MEM_PRIV_LOCAL_READ_FLAG.  Local write is enforced for
 *     receive and RDMA read sinks.
 */
#include "config.h"

#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_mem.h"

/* Per-post completion flags.  Solicited wait marks a send as solicited;
 * it means nothing on RDMA.  Receives may only be unsignalled (or wait for
 * solicited sends). */
#define POST_SEND_FLAGS                                                   \
	(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | \
	 DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG)
#define POST_RDMA_FLAGS                                                   \
	(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG | \
	 DAT_COMPLETION_BARRIER_FENCE_FLAG)
#define POST_RECV_FLAGS                                                   \
	(DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG)

/* ------------------------------------------------------------ posting */

/* One post call, as its entry point describes it. */
struct post {
	DAT_DTOS op;
	DAT_COUNT n;
	const DAT_LMR_TRIPLET *iov;
	const DAT_RMR_TRIPLET *remote;	/* RDMA only */
	DAT_DTO_COOKIE cookie;
	DAT_COMPLETION_FLAGS flags;
	uint64_t total;			/* filled by the checks */
	int invalidate;			/* Send with Invalidate */
	DAT_RMR_CONTEXT inv_rkey;
};

/* Completion flags of a request, as the engine knows them.
 *   SUPPRESS: a successful completion produces no event (errors still do:
 *     the engine always reports them), so no IBV_SEND_SIGNALED.
 *   UNSIGNALLED: DAT still queues the event but need not notify waiters;
 *     the engine has no per-completion notification control for requests,
 *     so the event is queued and may notify (DAT allows a provider to
 *     notify anyway: the flag is a hint for consumers that poll).
 *   SOLICITED_WAIT on a Send: RDMAP Send with Solicited Event.
 *   BARRIER_FENCE: wait for earlier RDMA Reads (IBV_SEND_FENCE). */
static unsigned int send_flags(DAT_COMPLETION_FLAGS f, DAT_DTOS op)
{
	unsigned int s = 0;

	if (!(f & DAT_COMPLETION_SUPPRESS_FLAG))
		s |= IBV_SEND_SIGNALED;
	if ((f & DAT_COMPLETION_SOLICITED_WAIT_FLAG) && op == DAT_DTO_SEND)
		s |= IBV_SEND_SOLICITED;
	if (f & DAT_COMPLETION_BARRIER_FENCE_FLAG)
		s |= IBV_SEND_FENCE;
	return s;
}

/* An RDMA Read moves exactly the remote segment: the engine reads as much
 * as the sink SGEs hold, so trim them to that length. */
static int sge_trim(struct ibv_sge *sge, int n, uint64_t len)
{
	int i;

	for (i = 0; i < n && len > 0; i++) {
		if (sge[i].length > len)
			sge[i].length = (uint32_t)len;
		len -= sge[i].length;
	}
	return i;
}

/* A Send or RDMA request over the SGEs of its local IOV. */
static DAT_RETURN post_request(struct dapl_wr_pool *pool, const struct post *p,
			       struct ibv_sge *sge,
			       const struct dapl_wr_ctx *ctx)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sge;
	wr.num_sge = (int)p->n;
	wr.send_flags = send_flags(p->flags, p->op);
	switch (p->op) {
	case DAT_DTO_RDMA_WRITE:
		wr.opcode = IBV_WR_RDMA_WRITE;
		break;
	case DAT_DTO_RDMA_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		wr.num_sge = sge_trim(sge, wr.num_sge,
				      p->remote->segment_length);
		break;
	default:
		wr.opcode = p->invalidate ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND;
		wr.invalidate_rkey = p->inv_rkey;
		break;
	}
	if (p->remote) {
		wr.wr.rdma.remote_addr = p->remote->virtual_address;
		wr.wr.rdma.rkey = p->remote->rmr_context;
	}
	return dapl_ep_pool_post_send(pool, &wr, ctx, p->total);
}

/* Hand the checked work request to the engine QP; the pool was locked
 * under ia->lock and is released here. */
static DAT_RETURN ep_post_start(struct dapl_wr_pool *pool, const struct post *p)
{
	struct ibv_sge sge[IWE_MAX_SGE];
	struct dapl_wr_ctx ctx;
	DAT_RETURN r;

	memset(&ctx, 0, sizeof(ctx));
	ctx.cookie = p->cookie;
	ctx.op = p->op;
	ctx.flags = p->flags;
	ctx.suppressed = p->op != DAT_DTO_RECEIVE &&
			 (p->flags & DAT_COMPLETION_SUPPRESS_FLAG);
	/* For a read, what moves is the remote segment. */
	ctx.length = (DAT_SEG_LENGTH)(p->op == DAT_DTO_RDMA_READ ?
				      p->remote->segment_length : p->total);
	dapl_lmr_sge_fill(sge, p->iov, p->n);
	if (p->op == DAT_DTO_RECEIVE) {
		struct ibv_recv_wr wr = { .sg_list = sge, .num_sge = (int)p->n };

		r = dapl_ep_pool_post_recv(pool, &wr, &ctx, p->total);
	} else {
		r = post_request(pool, p, sge, &ctx);
	}
	dapl_ep_pool_release(pool);
	return r;
}

static DAT_COUNT iov_limit(const struct dapl_ep *ep, DAT_DTOS op)
{
	switch (op) {
	case DAT_DTO_RECEIVE:
		return ep->attr.max_recv_iov;
	case DAT_DTO_RDMA_READ:
		return ep->attr.max_rdma_read_iov;
	case DAT_DTO_RDMA_WRITE:
		return ep->attr.max_rdma_write_iov;
	default:
		return ep->attr.max_request_iov;
	}
}

/* Receives may be posted before a connection exists (DAT: so that the
 * first message finds a buffer), but need somewhere to complete. */
static DAT_RETURN recv_state_check(const struct dapl_ep *ep)
{
	if (ep->srq)	/* its receives come from the SRQ */
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
	/* The QP exists once the EP is configured (PZ and all three EVDs). */
	return dapl_ep_config_error(ep);
}

/* Total lengths against the provider's limits and the remote segment.
 * The EP's max_message_size / max_rdma_size are what the consumer asked
 * for, not a cap: consumers (Debian's dtest among them) ask for 64 KiB and
 * then move megabytes, which the IA's limits allow. */
static DAT_RETURN length_check(const struct dapl_ep *ep, const struct post *p)
{
	(void)ep;
	switch (p->op) {
	case DAT_DTO_SEND:
		return p->total > DAPL_MAX_MESSAGE ? DAT_LENGTH_ERROR
						   : DAT_SUCCESS;
	case DAT_DTO_RDMA_WRITE:
		if (p->total > DAPL_MAX_MESSAGE ||
		    p->total > p->remote->segment_length)
			return DAT_LENGTH_ERROR;
		return DAT_SUCCESS;
	case DAT_DTO_RDMA_READ:
		if (p->remote->segment_length > DAPL_MAX_MESSAGE ||
		    p->remote->segment_length > p->total)
			return DAT_LENGTH_ERROR;
		return DAT_SUCCESS;
	default:
		return DAT_SUCCESS;
	}
}

/* IOV count and pointer (arguments 2 and 3 of every LMR post), state,
 * memory, lengths. */
static DAT_RETURN post_check_locked(struct dapl_ep *ep, struct post *p)
{
	int sink = p->op == DAT_DTO_RECEIVE || p->op == DAT_DTO_RDMA_READ;
	DAT_RETURN r;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (p->n < 0 || p->n > iov_limit(ep, p->op))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (p->n > 0 && !p->iov)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (p->op == DAT_DTO_RECEIVE)
		r = recv_state_check(ep);
	else
		r = dapl_ep_connected(ep) ? DAT_SUCCESS : dapl_ep_state_error(ep);
	if (r != DAT_SUCCESS)
		return r;
	r = dapl_lmr_iov_check_locked(ep->obj.ia, ep->pz, p->n, p->iov,
				      sink ? DAT_MEM_PRIV_LOCAL_WRITE_FLAG
					   : DAT_MEM_PRIV_NONE_FLAG,
				      DAT_INVALID_ARG3, &p->total);
	if (r != DAT_SUCCESS)
		return r;
	return length_check(ep, p);
}

/* The checks of a post said r, under ia->lock, which is released here:
 * the EP's pool, locked for the post, or NULL with r set.  The pool is
 * locked under ia->lock so that a concurrent reset or free cannot retire
 * it between the checks and the post, and held across the engine call so
 * that slots are taken in the engine's queue order. */
static struct dapl_wr_pool *pool_hold_unlock(struct dapl_ep *ep, DAT_RETURN *r)
{
	struct dapl_wr_pool *pool = NULL;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (*r == DAT_SUCCESS) {
		pool = dapl_ep_pool_hold_locked(ep);
		if (!pool)
			*r = DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
	}
	dapl_ia_unlock(ep->obj.ia);
	return pool;
}

/* Common path of the LMR posts; flags_arg is the completion flags'
 * argument number, 'allowed' the flags that post accepts. */
static DAT_RETURN post_lmr(DAT_EP_HANDLE ep_handle, struct post *p,
			   DAT_COMPLETION_FLAGS allowed, DAT_RETURN flags_arg)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct dapl_wr_pool *pool = NULL;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (p->flags & ~allowed)
		return DAT_INVALID_PARAMETER | flags_arg;
	dapl_ia_lock(ep->obj.ia);
	/* dat.h: no unsignalled receive on an EP configured with the EVD
	 * threshold flag for receives. */
	if (p->op == DAT_DTO_RECEIVE &&
	    (p->flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
	    (ep->attr.recv_completion_flags & DAT_COMPLETION_EVD_THRESHOLD_FLAG))
		r = DAT_INVALID_PARAMETER | flags_arg;
	else
		r = post_check_locked(ep, p);
	pool = pool_hold_unlock(ep, &r);
	if (!pool)
		return r;
	return ep_post_start(pool, p);
}

DAT_RETURN dapl_ep_post_send(DAT_EP_HANDLE ep_handle, DAT_COUNT n,
			     DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
			     DAT_COMPLETION_FLAGS flags)
{
	struct post p = { DAT_DTO_SEND, n, iov, NULL, cookie, flags, 0, 0, 0 };

	return post_lmr(ep_handle, &p, POST_SEND_FLAGS, DAT_INVALID_ARG5);
}

DAT_RETURN dapl_ep_post_send_with_invalidate(DAT_EP_HANDLE ep_handle,
					     DAT_COUNT n, DAT_LMR_TRIPLET *iov,
					     DAT_DTO_COOKIE cookie,
					     DAT_COMPLETION_FLAGS flags,
					     DAT_BOOLEAN invalidate,
					     DAT_RMR_CONTEXT rmr_context)
{
	struct post p = { DAT_DTO_SEND, n, iov, NULL, cookie, flags, 0,
			  invalidate == DAT_TRUE, rmr_context };

	if (invalidate != DAT_TRUE && invalidate != DAT_FALSE)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG6;
	/* RDMAP Send with Invalidate carries rmr_context to the peer. */
	return post_lmr(ep_handle, &p, POST_SEND_FLAGS, DAT_INVALID_ARG5);
}

DAT_RETURN dapl_ep_post_recv(DAT_EP_HANDLE ep_handle, DAT_COUNT n,
			     DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
			     DAT_COMPLETION_FLAGS flags)
{
	struct post p = { DAT_DTO_RECEIVE, n, iov, NULL, cookie, flags, 0, 0, 0 };

	return post_lmr(ep_handle, &p, POST_RECV_FLAGS, DAT_INVALID_ARG5);
}

static DAT_RETURN post_rdma(DAT_EP_HANDLE ep_handle, DAT_DTOS op, DAT_COUNT n,
			    DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
			    const DAT_RMR_TRIPLET *remote,
			    DAT_COMPLETION_FLAGS flags)
{
	struct post p = { op, n, iov, remote, cookie, flags, 0, 0, 0 };

	if (!dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (!remote)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	return post_lmr(ep_handle, &p, POST_RDMA_FLAGS, DAT_INVALID_ARG6);
}

DAT_RETURN dapl_ep_post_rdma_read(DAT_EP_HANDLE ep_handle, DAT_COUNT n,
				  DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
				  const DAT_RMR_TRIPLET *remote,
				  DAT_COMPLETION_FLAGS flags)
{
	return post_rdma(ep_handle, DAT_DTO_RDMA_READ, n, iov, cookie, remote,
			 flags);
}

DAT_RETURN dapl_ep_post_rdma_write(DAT_EP_HANDLE ep_handle, DAT_COUNT n,
				   DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
				   const DAT_RMR_TRIPLET *remote,
				   DAT_COMPLETION_FLAGS flags)
{
	return post_rdma(ep_handle, DAT_DTO_RDMA_WRITE, n, iov, cookie, remote,
			 flags);
}

/* RDMA Read into a local RMR: iWARP places Read Responses through the
 * sink STag, so the engine takes a bound window's STag as the sink (it
 * must grant remote write, as for a peer's RDMA Write; the engine checks
 * it, with the bounds, when the read is posted: DAT_PRIVILEGES_VIOLATION
 * otherwise).  The completion reports the remote segment's length. */
static DAT_RETURN rmr_read_post(struct dapl_wr_pool *pool,
				const DAT_RMR_TRIPLET *local,
				DAT_DTO_COOKIE cookie,
				const DAT_RMR_TRIPLET *remote,
				DAT_COMPLETION_FLAGS flags)
{
	struct ibv_sge sge = { .addr = local->virtual_address,
			       .length = (uint32_t)remote->segment_length,
			       .lkey = local->rmr_context };
	struct ibv_send_wr wr;
	struct dapl_wr_ctx ctx;
	DAT_RETURN r;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = send_flags(flags, DAT_DTO_RDMA_READ);
	wr.wr.rdma.remote_addr = remote->virtual_address;
	wr.wr.rdma.rkey = remote->rmr_context;
	memset(&ctx, 0, sizeof(ctx));
	ctx.cookie = cookie;
	ctx.op = DAT_DTO_RDMA_READ;
	ctx.flags = flags;
	ctx.suppressed = !!(flags & DAT_COMPLETION_SUPPRESS_FLAG);
	ctx.length = remote->segment_length;
	r = dapl_ep_pool_post_send(pool, &wr, &ctx, remote->segment_length);
	dapl_ep_pool_release(pool);
	if (DAT_GET_TYPE(r) == DAT_INVALID_PARAMETER)
		r = DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE;
	return r;
}

DAT_RETURN dapl_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep_handle,
					 const DAT_RMR_TRIPLET *local,
					 DAT_DTO_COOKIE cookie,
					 const DAT_RMR_TRIPLET *remote,
					 DAT_COMPLETION_FLAGS flags)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct dapl_wr_pool *pool = NULL;
	DAT_RETURN r = DAT_SUCCESS;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (!local)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!remote)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (flags & ~POST_RDMA_FLAGS)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	dapl_ia_lock(ep->obj.ia);
	if (!dapl_ep_connected(ep))
		r = dapl_ep_state_error(ep);
	else if (remote->segment_length > local->segment_length ||
		 remote->segment_length > ep->attr.max_rdma_size)
		r = DAT_LENGTH_ERROR;
	pool = pool_hold_unlock(ep, &r);
	if (!pool)
		return r;
	return rmr_read_post(pool, local, cookie, remote, flags);
}
