/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Endpoints: creation, attributes, query, modify, free, reset.  The state
 * machine: ep_state.c; connections: cm.c and ep_connect.c; posting:
 * ep_post.c; the QP and work slots: ep_qp.c.
 *
 * The EP owns one engine QP from the moment it is configured (PZ and its
 * three EVDs), in INIT, so receives can be posted before connecting.  A
 * change of PZ, EVDs or attributes (dat_ep_modify, allowed only before a
 * connection exists) and dat_ep_reset replace it; dat_ep_free destroys
 * it, after the connection.  Replaced QPs are flushed first, so what was
 * posted completes with DAT_DTO_ERR_FLUSHED.
 *
 * Choices where DAT 2.0 leaves room (each is repeated where it is coded):
 *   - An EP is "configured" when it has a PZ and its recv, request and
 *     connect EVDs (an SRQ does not replace the recv EVD: receives taken from
 *     the SRQ still complete there).  Without them it lives in the
 *     UNCONFIGURED_* variant of its state, and connecting it fails with
 *     DAT_INVALID_STATE naming what is missing, as the SSP specification asks.
 *   - dat_ep_modify works in the states before a connection exists
 *     (unconnected, reserved, connection pending and their unconfigured
 *     variants): that is what the unconfigured states are for.
 *   - dat_ep_free refuses the states in which another object owns the EP
 *     (RESERVED by an RSP, PASSIVE/TENTATIVE pending with a CR) and frees in
 *     every other state.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"
#include "dapl_mem.h"
#include "dapl_stats.h"
#include "iw_slab.h"

/* Defaults for attributes the consumer leaves to us (NULL attr, or zero in
 * the fields where zero means "default").  Small queues keep an idle EP
 * cheap; consumers that need more say so. */
#define EP_DEFAULT_DTOS 64
#define EP_DEFAULT_IOV 4
#define EP_DEFAULT_RDMA_READ 8

/* Completion flags an EP may be configured with: all the IA supports.
 * dat.h forbids unsignalled receives together with the threshold flag. */
#define EP_ATTR_FLAGS                                                     \
	(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | \
	 DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG | \
	 DAT_COMPLETION_EVD_THRESHOLD_FLAG)

/* Fields dat_ep_modify may change: the consumer-chosen links and the
 * attributes.  The IA, state, addresses and SRQ are fixed for life. */
#define EP_MODIFIABLE                                                     \
	(DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |          \
	 DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE | \
	 DAT_EP_FIELD_EP_ATTR_ALL)

/* -------------------------------------------------- dependency counts */

/* What an EP points to; each non-NULL member holds one count. */
struct ep_links {
	struct dapl_pz *pz;
	struct dapl_evd *recv, *request, *connect;
	struct dapl_srq *srq;
};

static void links_unpin_locked(struct dapl_ia *ia, const struct ep_links *l)
{
	DAPL_ASSERT_IA_LOCKED(ia);
	if (l->pz)
		dapl_obj_unpin_locked(&l->pz->obj);
	if (l->recv)
		dapl_evd_unpin(l->recv);
	if (l->request)
		dapl_evd_unpin(l->request);
	if (l->connect)
		dapl_evd_unpin(l->connect);
	if (l->srq)
		dapl_obj_unpin_locked(&l->srq->obj);
}

static void links_unpin(struct dapl_ia *ia, const struct ep_links *l)
{
	dapl_ia_lock(ia);
	links_unpin_locked(ia, l);
	dapl_ia_unlock(ia);
}

static DAT_RETURN pin_pz(struct dapl_ia *ia, DAT_PZ_HANDLE h,
			 struct dapl_pz **out)
{
	*out = NULL;
	if (h == DAT_HANDLE_NULL)
		return DAT_SUCCESS;
	*out = dapl_pz_pin(ia, h);
	return *out ? DAT_SUCCESS : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
}

static DAT_RETURN pin_evd(struct dapl_ia *ia, DAT_EVD_HANDLE h,
			  DAT_EVD_FLAGS flag, DAT_RETURN subtype,
			  struct dapl_evd **out)
{
	*out = NULL;
	if (h == DAT_HANDLE_NULL)
		return DAT_SUCCESS;
	*out = dapl_evd_pin(ia, h, flag);
	return *out ? DAT_SUCCESS : DAT_INVALID_HANDLE | subtype;
}

/* The consumer's handles as dat_ep_create / dat_ep_modify give them. */
struct ep_handles {
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE recv, request, connect;
};

/* Pin the objects named in 'mask' (DAT_EP_FIELD_* link bits); on error
 * nothing stays pinned. */
static DAT_RETURN links_pin(struct dapl_ia *ia, const struct ep_handles *h,
			    DAT_EP_PARAM_MASK mask, struct ep_links *l)
{
	DAT_RETURN r = DAT_SUCCESS;

	memset(l, 0, sizeof(*l));
	if (mask & DAT_EP_FIELD_PZ_HANDLE)
		r = pin_pz(ia, h->pz, &l->pz);
	if (r == DAT_SUCCESS && (mask & DAT_EP_FIELD_RECV_EVD_HANDLE))
		r = pin_evd(ia, h->recv, DAT_EVD_DTO_FLAG,
			    DAT_INVALID_HANDLE_EVD_RECV, &l->recv);
	if (r == DAT_SUCCESS && (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE))
		r = pin_evd(ia, h->request, DAT_EVD_DTO_FLAG,
			    DAT_INVALID_HANDLE_EVD_REQUEST, &l->request);
	if (r == DAT_SUCCESS && (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE))
		r = pin_evd(ia, h->connect, DAT_EVD_CONNECTION_FLAG,
			    DAT_INVALID_HANDLE_EVD_CONN, &l->connect);
	if (r != DAT_SUCCESS)
		links_unpin(ia, l);
	return r;
}

#define EP_LINK_FIELDS                                                    \
	(DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |          \
	 DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE)

static void links_of(const struct dapl_ep *ep, struct ep_links *l)
{
	l->pz = ep->pz;
	l->recv = ep->recv_evd;
	l->request = ep->request_evd;
	l->connect = ep->connect_evd;
	l->srq = ep->srq;
}

static void links_set(struct dapl_ep *ep, const struct ep_links *l)
{
	ep->pz = l->pz;
	ep->recv_evd = l->recv;
	ep->request_evd = l->request;
	ep->connect_evd = l->connect;
	ep->srq = l->srq;
}

/* The provider cannot give an SRQ's buffers to an EP of another PZ
 * (srq_ep_pz_difference_supported is FALSE): that is a model limit. */
static DAT_RETURN links_pz_srq_check(const struct ep_links *l)
{
	if (l->srq && l->pz && l->srq->pz != l->pz)
		return DAT_MODEL_NOT_SUPPORTED;
	return DAT_SUCCESS;
}

/* --------------------------------------------------------- attributes */

static DAT_COUNT min_count(DAT_COUNT def, uint32_t max)
{
	return (uint32_t)def < max ? def : (DAT_COUNT)max;
}

static void ep_default_attr(const struct dapl_ia *ia, DAT_EP_ATTR *a)
{
	const struct iwe_device_attr *d = &ia->dev_attr;

	memset(a, 0, sizeof(*a));
	a->service_type = DAT_SERVICE_TYPE_RC;
	a->max_message_size = DAPL_MAX_MESSAGE;
	a->max_rdma_size = DAPL_MAX_MESSAGE;
	a->qos = DAT_QOS_BEST_EFFORT;
	a->recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a->request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a->max_recv_dtos = min_count(EP_DEFAULT_DTOS, d->max_qp_wr);
	a->max_request_dtos = min_count(EP_DEFAULT_DTOS, d->max_qp_wr);
	a->max_recv_iov = min_count(EP_DEFAULT_IOV, d->max_sge);
	a->max_request_iov = min_count(EP_DEFAULT_IOV, d->max_sge);
	a->max_rdma_read_in = min_count(EP_DEFAULT_RDMA_READ, d->max_ird);
	a->max_rdma_read_out = min_count(EP_DEFAULT_RDMA_READ, d->max_ord);
	a->srq_soft_hw = DAT_HW_DEFAULT;
	a->max_rdma_read_iov = (DAT_COUNT)d->max_sge;
	a->max_rdma_write_iov = (DAT_COUNT)d->max_sge;
}

static int count_ok(DAT_COUNT v, uint32_t max)
{
	return v >= 0 && (uint32_t)v <= max;
}

static int named_ok(DAT_COUNT n, const DAT_NAMED_ATTR *attrs)
{
	return n == 0 || (n > 0 && attrs);
}

static int completion_flags_ok(const DAT_EP_ATTR *a)
{
	const DAT_COMPLETION_FLAGS both = DAT_COMPLETION_UNSIGNALLED_FLAG |
					  DAT_COMPLETION_EVD_THRESHOLD_FLAG;

	if ((a->recv_completion_flags & ~EP_ATTR_FLAGS) ||
	    (a->request_completion_flags & ~EP_ATTR_FLAGS))
		return 0;
	return (a->recv_completion_flags & both) != both;
}

static int ep_attr_valid(const struct dapl_ia *ia, const DAT_EP_ATTR *a)
{
	const struct iwe_device_attr *d = &ia->dev_attr;

	return a->service_type == DAT_SERVICE_TYPE_RC &&
	       a->max_message_size <= DAPL_MAX_MESSAGE &&
	       a->max_rdma_size <= DAPL_MAX_MESSAGE &&
	       a->qos == DAT_QOS_BEST_EFFORT && completion_flags_ok(a) &&
	       /* Zero DTOs is allowed: an EP may only send, or only
		* receive, or take its receives from an SRQ. */
	       count_ok(a->max_recv_dtos, d->max_qp_wr) &&
	       count_ok(a->max_request_dtos, d->max_qp_wr) &&
	       count_ok(a->max_recv_iov, d->max_sge) &&
	       count_ok(a->max_request_iov, d->max_sge) &&
	       count_ok(a->max_rdma_read_in, d->max_ird) &&
	       count_ok(a->max_rdma_read_out, d->max_ord) &&
	       (a->srq_soft_hw == DAT_HW_DEFAULT || a->srq_soft_hw >= 0) &&
	       count_ok(a->max_rdma_read_iov, d->max_sge) &&
	       count_ok(a->max_rdma_write_iov, d->max_sge) &&
	       named_ok(a->ep_transport_specific_count,
			a->ep_transport_specific) &&
	       named_ok(a->ep_provider_specific_count,
			a->ep_provider_specific);
}

/* Validate 'in' and store it in 'out' with defaults filled in: zero
 * message/RDMA sizes and zero RDMA IOV counts mean "the provider's" (MPI
 * libraries pass 0 there).  Named attributes: none is defined for this
 * provider, and keeping the consumer's pointers would leave them dangling,
 * so they are accepted and dropped.  'bad' is the error to return. */
static DAT_RETURN ep_attr_normalize(const struct dapl_ia *ia,
				    const DAT_EP_ATTR *in, DAT_EP_ATTR *out,
				    DAT_RETURN bad)
{
	DAT_COUNT max_sge = (DAT_COUNT)ia->dev_attr.max_sge;

	if (!ep_attr_valid(ia, in))
		return bad;
	*out = *in;
	if (!out->max_message_size)
		out->max_message_size = DAPL_MAX_MESSAGE;
	if (!out->max_rdma_size)
		out->max_rdma_size = DAPL_MAX_MESSAGE;
	if (!out->max_rdma_read_iov)
		out->max_rdma_read_iov = max_sge;
	if (!out->max_rdma_write_iov)
		out->max_rdma_write_iov = max_sge;
	out->ep_transport_specific_count = 0;
	out->ep_transport_specific = NULL;
	out->ep_provider_specific_count = 0;
	out->ep_provider_specific = NULL;
	return DAT_SUCCESS;
}

/* Copy the attribute fields selected by 'mask' from 'from' into 'to'. */
static void ep_attr_merge(DAT_EP_ATTR *to, const DAT_EP_ATTR *from,
			  DAT_EP_PARAM_MASK mask)
{
#define MERGE(bit, field)                                                 \
	do {                                                              \
		if (mask & DAT_EP_FIELD_EP_ATTR_##bit)                    \
			to->field = from->field;                          \
	} while (0)
	MERGE(SERVICE_TYPE, service_type);
	MERGE(MAX_MESSAGE_SIZE, max_message_size);
	MERGE(MAX_RDMA_SIZE, max_rdma_size);
	MERGE(QOS, qos);
	MERGE(RECV_COMPLETION_FLAGS, recv_completion_flags);
	MERGE(REQUEST_COMPLETION_FLAGS, request_completion_flags);
	MERGE(MAX_RECV_DTOS, max_recv_dtos);
	MERGE(MAX_REQUEST_DTOS, max_request_dtos);
	MERGE(MAX_RECV_IOV, max_recv_iov);
	MERGE(MAX_REQUEST_IOV, max_request_iov);
	MERGE(MAX_RDMA_READ_IN, max_rdma_read_in);
	MERGE(MAX_RDMA_READ_OUT, max_rdma_read_out);
	MERGE(SRQ_SOFT_HW, srq_soft_hw);
	MERGE(MAX_RDMA_READ_IOV, max_rdma_read_iov);
	MERGE(MAX_RDMA_WRITE_IOV, max_rdma_write_iov);
	MERGE(NUM_TRANSPORT_ATTR, ep_transport_specific_count);
	MERGE(TRANSPORT_SPECIFIC_ATTR, ep_transport_specific);
	MERGE(NUM_PROVIDER_ATTR, ep_provider_specific_count);
	MERGE(PROVIDER_SPECIFIC_ATTR, ep_provider_specific);
#undef MERGE
}

/* ------------------------------------------------------ create / free */

/* What freeing an EP must tear down outside ia->lock (engine calls wait
 * for the progress thread). */
struct ep_teardown {
	struct iwe_conn *conn;
	struct dapl_wr_pool *pool;
};

/* First step of freeing: unregister the handle so no new call finds the
 * EP, flag it for handlers, and take the conn and QP. */
static void ep_detach_locked(struct dapl_ep *ep, struct ep_teardown *t)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	ep->dying = 1;
	t->conn = dapl_ep_take_conn_locked(ep);
	t->pool = dapl_ep_qp_detach_locked(ep);
	if (ep->cr && ep->cr->ep == ep)
		ep->cr->ep = NULL;
	ep->cr = NULL;
	dapl_ep_forget_reserver_locked(ep);
	dapl_stats_ep_freed_locked(ep);
	dapl_obj_fini_locked(&ep->obj);
}

/* Last step: the conn is reset (no handler runs after this), the QP
 * flushed and destroyed, and only then are the PZ and EVDs released, so
 * an EVD cannot go while a QP completes into its CQ. */
static void ep_teardown(struct dapl_ep *ep, const struct ep_teardown *t)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct ep_links l;

	if (t->conn)
		iwe_cm_conn_destroy(t->conn);
	dapl_ep_qp_retire(t->pool);
	dapl_ia_lock(ia);
	links_of(ep, &l);
	links_unpin_locked(ia, &l);
	memset(&l, 0, sizeof(l));
	links_set(ep, &l);
	dapl_ia_unlock(ia);
	iw_slab_free(ep, sizeof(*ep));
}

void dapl_ep_destroy(struct dapl_ep *ep)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct ep_teardown t;

	dapl_ia_lock(ia);
	ep_detach_locked(ep, &t);
	dapl_ia_unlock(ia);
	ep_teardown(ep, &t);
}

/* Abrupt IA close: CRs and SPs went first and unlinked themselves; the PZ,
 * EVDs and SRQ go later, so their counts must drop now. */
static void ep_destroy_cb(struct dapl_obj *obj)
{
	dapl_ep_destroy((struct dapl_ep *)obj);
}

/* Allocate, link and register an EP; the links are consumed (unpinned on
 * failure). */
static DAT_RETURN ep_publish(struct dapl_ia *ia, const DAT_EP_ATTR *attr,
			     const struct ep_links *l, int provider_created,
			     struct dapl_ep **out)
{
	struct dapl_ep *ep = iw_slab_zalloc(sizeof(*ep));
	DAT_RETURN r;

	if (!ep) {
		links_unpin(ia, l);
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	}
	ep->attr = *attr;
	ep->soft_hw = DAT_WATERMARK_INFINITE;
	ep->hard_hw = DAT_WATERMARK_INFINITE;
	ep->provider_created = provider_created;
	links_set(ep, l);
	dapl_ep_state_init(ep);
	r = dapl_obj_init(&ep->obj, ia, DAPL_K_EP, DAT_HANDLE_TYPE_EP,
			  ep_destroy_cb);
	if (r != DAT_SUCCESS) {
		links_unpin(ia, l);
		iw_slab_free(ep, sizeof(*ep));
		return r;
	}
	/* The QP needs the handle (its completions name the EP). */
	dapl_ia_lock(ia);
	r = dapl_ep_qp_create_locked(ep);
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS) {
		dapl_ep_destroy(ep);
		return r;
	}
	*out = ep;
	return DAT_SUCCESS;
}

/* Both create calls; attr_arg/out_arg are their DAT_INVALID_ARGn. */
static DAT_RETURN ep_create(DAT_IA_HANDLE ia_handle, const struct ep_handles *h,
			    DAT_SRQ_HANDLE srq_handle, int with_srq,
			    const DAT_EP_ATTR *attr, DAT_EP_HANDLE *out,
			    DAT_RETURN attr_arg, DAT_RETURN out_arg)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct ep_links l;
	struct dapl_ep *ep;
	DAT_EP_ATTR a;
	DAT_RETURN r;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!attr)
		ep_default_attr(ia, &a);
	else if ((r = ep_attr_normalize(ia, attr, &a,
					DAT_INVALID_PARAMETER | attr_arg)))
		return r;
	if (!out)
		return DAT_INVALID_PARAMETER | out_arg;
	r = links_pin(ia, h, EP_LINK_FIELDS, &l);
	if (r != DAT_SUCCESS)
		return r;
	if (with_srq) {
		l.srq = dapl_obj_pin(ia, srq_handle, DAT_HANDLE_TYPE_SRQ);
		r = l.srq ? links_pz_srq_check(&l)
			  : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
		if (r != DAT_SUCCESS) {
			links_unpin(ia, &l);
			return r;
		}
	}
	r = ep_publish(ia, &a, &l, 0, &ep);
	if (r == DAT_SUCCESS) {
		ep->rdma_read_default = !attr;
		*out = ep->obj.handle;
	}
	return r;
}

DAT_RETURN dapl_ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz,
			  DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE request_evd,
			  DAT_EVD_HANDLE connect_evd, const DAT_EP_ATTR *attr,
			  DAT_EP_HANDLE *ep_handle)
{
	struct ep_handles h = { pz, recv_evd, request_evd, connect_evd };

	return ep_create(ia_handle, &h, DAT_HANDLE_NULL, 0, attr, ep_handle,
			 DAT_INVALID_ARG6, DAT_INVALID_ARG7);
}

DAT_RETURN dapl_ep_create_with_srq(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz,
				   DAT_EVD_HANDLE recv_evd,
				   DAT_EVD_HANDLE request_evd,
				   DAT_EVD_HANDLE connect_evd,
				   DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr,
				   DAT_EP_HANDLE *ep_handle)
{
	struct ep_handles h = { pz, recv_evd, request_evd, connect_evd };

	return ep_create(ia_handle, &h, srq, 1, attr, ep_handle,
			 DAT_INVALID_ARG7, DAT_INVALID_ARG8);
}

DAT_RETURN dapl_ep_create_internal(struct dapl_ia *ia, struct dapl_ep **out)
{
	struct ep_links l;
	DAT_EP_ATTR a;

	memset(&l, 0, sizeof(l));
	ep_default_attr(ia, &a);
	return ep_publish(ia, &a, &l, 1, out);
}

DAT_RETURN dapl_ep_free(DAT_EP_HANDLE ep_handle)
{
	struct dapl_ep *ep = dapl_obj_lock(ep_handle, DAT_HANDLE_TYPE_EP);
	struct ep_teardown t;
	struct dapl_ia *ia;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	ia = ep->obj.ia;
	/* An RSP or a pending CR owns the EP: the consumer frees the RSP or
	 * answers the CR first (DAT 2.0 dat_ep_free). */
	if (dapl_ep_owned(ep)) {
		r = dapl_ep_state_error(ep);
		dapl_ia_unlock(ia);
		return r;
	}
	/* Any other state frees, connected ones included: the connection is
	 * reset (no event follows) and posted work is flushed. */
	ep_detach_locked(ep, &t);
	dapl_ia_unlock(ia);
	ep_teardown(ep, &t);
	return DAT_SUCCESS;
}

/* ------------------------------------------------------ query / modify */

static void ep_fill_comm(const struct dapl_ia *ia, DAT_COMM *comm)
{
	int udp = ia->dev_attr.transport == IWE_TRANSPORT_UDP;

	comm->domain = AF_INET;
	comm->type = udp ? SOCK_DGRAM : SOCK_STREAM;
	comm->protocol = udp ? IPPROTO_UDP : IPPROTO_TCP;
}

static DAT_HANDLE handle_of(const void *obj)
{
	return obj ? ((const struct dapl_obj *)obj)->handle : DAT_HANDLE_NULL;
}

/* Every field is filled whatever the mask: DAT lets a provider return
 * more than asked, and it keeps the code simple.  The remote address is
 * never NULL: until a connection exists it is an AF_UNSPEC address, which
 * consumers that print it without checking survive. */
static void ep_fill_param(struct dapl_ep *ep, DAT_EP_PARAM *p)
{
	struct dapl_ia *ia = ep->obj.ia;

	p->ep_state = ep->state;
	ep_fill_comm(ia, &p->comm);
	p->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->ia_addr;
	p->local_port_qual = ep->local_port;
	p->remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ep->remote_addr;
	p->remote_port_qual = ep->remote_port;
	p->pz_handle = handle_of(ep->pz);
	p->recv_evd_handle = handle_of(ep->recv_evd);
	p->request_evd_handle = handle_of(ep->request_evd);
	p->connect_evd_handle = handle_of(ep->connect_evd);
	p->srq_handle = handle_of(ep->srq);
	p->ep_attr = ep->attr;
}

DAT_RETURN dapl_ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask,
			 DAT_EP_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_ep *ep = dapl_obj_query_get(ep_handle, DAT_HANDLE_TYPE_EP,
						DAT_INVALID_HANDLE_EP, mask,
						DAT_EP_FIELD_ALL, !param, &r);

	if (!ep)
		return r;
	/* The consumer knows its IA by the registry's index, not by ours. */
	param->ia_handle = dapl_ia_consumer_handle(ep->obj.ia);
	dapl_ia_lock(ep->obj.ia);
	ep_fill_param(ep, param);
	dapl_ia_unlock(ep->obj.ia);
	return DAT_SUCCESS;
}

/* Apply a validated modification: swap the selected links (new ones are
 * already pinned, old ones are unpinned), store the attributes and move
 * between a state and its unconfigured variant.  Caller holds ia->lock. */
static DAT_RETURN ep_modify_locked(struct dapl_ep *ep, DAT_EP_PARAM_MASK mask,
				   const DAT_EP_PARAM *param,
				   const struct ep_links *pinned,
				   struct dapl_wr_pool **old_qp)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct ep_links cur, next, old;
	DAT_EP_ATTR a = ep->attr;
	DAT_RETURN r;

	DAPL_ASSERT_IA_LOCKED(ia);
	if (!dapl_ep_modifiable(ep))
		return dapl_ep_state_error(ep);
	ep_attr_merge(&a, &param->ep_attr, mask);
	r = ep_attr_normalize(ia, &a, &a, DAT_INVALID_PARAMETER |
					     DAT_INVALID_ARG3);
	if (r != DAT_SUCCESS)
		return r;
	links_of(ep, &cur);
	next = cur;
	memset(&old, 0, sizeof(old));
#define SWAP(bit, member)                                                 \
	do {                                                              \
		if (mask & DAT_EP_FIELD_##bit) {                          \
			old.member = cur.member;                          \
			next.member = pinned->member;                     \
		}                                                         \
	} while (0)
	SWAP(PZ_HANDLE, pz);
	SWAP(RECV_EVD_HANDLE, recv);
	SWAP(REQUEST_EVD_HANDLE, request);
	SWAP(CONNECT_EVD_HANDLE, connect);
#undef SWAP
	r = links_pz_srq_check(&next);
	if (r != DAT_SUCCESS)
		return r;
	links_unpin_locked(ia, &old);
	links_set(ep, &next);
	ep->attr = a;
	if (mask & (DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN |
		    DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT))
		ep->rdma_read_default = 0;
	/* Same state, in the form that matches the new links. */
	dapl_ep_transition_locked(ep, ep->state);
	/* The QP is built from these: a new one, in INIT; the caller
	 * retires the old one after unlocking.  A new QP that cannot be
	 * made now is made again at the next post or connect. */
	*old_qp = dapl_ep_qp_detach_locked(ep);
	(void)dapl_ep_qp_create_locked(ep);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask,
			  const DAT_EP_PARAM *param)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct dapl_wr_pool *old_qp = NULL;
	struct ep_handles h;
	struct ep_links pinned;
	struct dapl_ia *ia;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (mask & ~EP_MODIFIABLE)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!param)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	ia = ep->obj.ia;
	h.pz = param->pz_handle;
	h.recv = param->recv_evd_handle;
	h.request = param->request_evd_handle;
	h.connect = param->connect_evd_handle;
	/* New links are checked like dat_ep_create's, and pinned before the
	 * lock is taken for the swap. */
	r = links_pin(ia, &h, mask & EP_LINK_FIELDS, &pinned);
	if (r != DAT_SUCCESS)
		return r;
	dapl_ia_lock(ia);
	if (dapl_obj_get_locked(ia, ep_handle, DAT_HANDLE_TYPE_EP) != ep)
		r = DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	else
		r = ep_modify_locked(ep, mask, param, &pinned, &old_qp);
	if (r != DAT_SUCCESS)
		links_unpin_locked(ia, &pinned);
	dapl_ia_unlock(ia);
	/* Until it is gone the old QP holds the old EVDs' CQs through the
	 * engine (iwe_destroy_cq refuses while it lives), so a dat_evd_free
	 * racing with this is refused, never unsafe. */
	dapl_ep_qp_retire(old_qp);
	return r;
}

/* ------------------------------------------------- status, reset, misc */

/* The EP's state and outstanding work, taken together under the lock. */
struct ep_status {
	DAT_EP_STATE state;
	DAT_COUNT recvs, requests;
};

static DAT_RETURN ep_status(DAT_EP_HANDLE ep_handle, struct ep_status *st)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	dapl_ia_lock(ep->obj.ia);
	dapl_ep_outstanding_locked(ep, &st->recvs, &st->requests);
	st->state = ep->state;
	dapl_ia_unlock(ep->obj.ia);
	return DAT_SUCCESS;
}

/* Every output is optional: a consumer may ask for one of them. */
DAT_RETURN dapl_ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *state,
			      DAT_BOOLEAN *in_dto_idle,
			      DAT_BOOLEAN *out_dto_idle)
{
	struct ep_status st;
	DAT_RETURN r = ep_status(ep_handle, &st);

	if (r == DAT_SUCCESS && state)
		*state = st.state;
	if (r == DAT_SUCCESS && in_dto_idle)
		*in_dto_idle = st.recvs == 0 ? DAT_TRUE : DAT_FALSE;
	if (r == DAT_SUCCESS && out_dto_idle)
		*out_dto_idle = st.requests == 0 ? DAT_TRUE : DAT_FALSE;
	return r;
}

/* DISCONNECTED -> UNCONNECTED with a fresh QP: the old connection is
 * destroyed, the old QP (flushed already by the disconnect) retired, so
 * completions still queued keep their cookies.  An EP already unconnected
 * is left as it is. */
DAT_RETURN dapl_ep_reset(DAT_EP_HANDLE ep_handle)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct ep_teardown t = { NULL, NULL };
	DAT_RETURN r = DAT_SUCCESS;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	dapl_ia_lock(ep->obj.ia);
	if (ep->state == DAT_EP_STATE_DISCONNECTED) {
		t.conn = dapl_ep_take_conn_locked(ep);
		t.pool = dapl_ep_qp_detach_locked(ep);
		ep->local_port = 0;
		ep->remote_port = 0;
		ep->ev_pd_size = 0;
		memset(&ep->remote_addr, 0, sizeof(ep->remote_addr));
		dapl_ep_transition_locked(ep, DAT_EP_STATE_UNCONNECTED);
	} else if (dapl_ep_base_state(ep->state) != DAT_EP_STATE_UNCONNECTED) {
		r = dapl_ep_state_error(ep);
	}
	dapl_ia_unlock(ep->obj.ia);
	if (t.conn)
		iwe_cm_conn_destroy(t.conn);
	if (t.pool) {
		dapl_ep_qp_retire(t.pool);
		dapl_ia_lock(ep->obj.ia);
		r = dapl_ep_qp_create_locked(ep);
		dapl_ia_unlock(ep->obj.ia);
	}
	return r;
}

/* Receive buffers held by the EP: posted to it, or (with an SRQ) taken
 * from the SRQ and not yet completed.  The span is the same count: every
 * buffer the EP holds is one it may still fill.  Outputs are optional. */
DAT_RETURN dapl_ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs,
			      DAT_COUNT *span)
{
	struct ep_status st;
	DAT_RETURN r = ep_status(ep_handle, &st);

	if (r == DAT_SUCCESS && nbufs)
		*nbufs = st.recvs;
	if (r == DAT_SUCCESS && span)
		*span = st.recvs;
	return r;
}

static int watermark_ok(DAT_COUNT w)
{
	return w == DAT_WATERMARK_INFINITE || w >= 0;
}

/* The watermarks bound how many SRQ buffers one EP may hold; they are
 * stored for the data path (next issue), which raises the soft one as an
 * async event and breaks the connection past the hard one.  Accepted on
 * an EP without SRQ too, where they never trigger. */
DAT_RETURN dapl_ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft_hw,
				 DAT_COUNT hard_hw)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (!watermark_ok(soft_hw))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!watermark_ok(hard_hw))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	dapl_ia_lock(ep->obj.ia);
	ep->soft_hw = soft_hw;
	ep->hard_hw = hard_hw;
	dapl_ia_unlock(ep->obj.ia);
	return DAT_SUCCESS;
}
