/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* dat_ia_query: the IA and provider attributes.  Every limit reported here
 * is one the engine enforces (dapl/openib_iw/iw_engine.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dapl.h"
#include "dapl_evd.h"
#include "dapl_stats.h"
#include <dat2/dat_iw_extensions.h>

/* The provider's version is the package's (configure.ac's AC_INIT, as
 * config.h's PACKAGE_VERSION "major.minor.patch"); the engine is software,
 * so the firmware version is the same.  A part that is not a number
 * reads as 0. */
static void package_version(DAT_UINT32 *major, DAT_UINT32 *minor)
{
	unsigned int ma = 0, mi = 0;

	if (sscanf(PACKAGE_VERSION, "%u.%u", &ma, &mi) < 1)
		ma = 0;
	*major = ma;
	*minor = mi;
}

static void fill_ia_attr(struct dapl_ia *ia, DAT_IA_ATTR *a)
{
	const struct iwe_device_attr *d = &ia->dev_attr;

	memset(a, 0, sizeof(*a));
	snprintf(a->adapter_name, sizeof(a->adapter_name), "iwarp-%s-%s",
		 d->ifname, d->transport == IWE_TRANSPORT_UDP ? "udp" : "tcp");
	snprintf(a->vendor_name, sizeof(a->vendor_name), "iwdapl soft-iWARP");
	a->hardware_version_major = 1;
	package_version(&a->firmware_version_major,
			&a->firmware_version_minor);
	a->ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->ia_addr;
	a->max_eps = (DAT_COUNT)d->max_qp;
	a->max_dto_per_ep = (DAT_COUNT)d->max_qp_wr;
	a->max_rdma_read_per_ep_in = (DAT_COUNT)d->max_ird;
	a->max_rdma_read_per_ep_out = (DAT_COUNT)d->max_ord;
	a->max_evds = (DAT_COUNT)d->max_cq;
	a->max_evd_qlen = (DAT_COUNT)d->max_cqe;
	a->max_iov_segments_per_dto = (DAT_COUNT)d->max_sge;
	a->max_lmrs = (DAT_COUNT)d->max_mr;
	/* DAT_SEG_LENGTH is 32 bits: a 2^40 region limit would wrap to 0. */
	a->max_lmr_block_size = d->max_mr_size > UINT32_MAX ? UINT32_MAX
				: (DAT_SEG_LENGTH)d->max_mr_size;
	a->max_lmr_virtual_address = UINTPTR_MAX;
	a->max_pzs = (DAT_COUNT)d->max_pd;
	a->max_message_size = DAPL_MAX_MESSAGE;
	a->max_rdma_size = DAPL_MAX_MESSAGE;
	a->max_rmrs = (DAT_COUNT)d->max_mw;
	a->max_rmr_target_address = UINTPTR_MAX;
	a->max_srqs = (DAT_COUNT)d->max_qp;
	a->max_ep_per_srq = (DAT_COUNT)d->max_qp;
	a->max_recv_per_srq = (DAT_COUNT)d->max_srq_wr;
	a->max_iov_segments_per_rdma_read = (DAT_COUNT)d->max_sge;
	a->max_iov_segments_per_rdma_write = (DAT_COUNT)d->max_sge;
	a->max_rdma_read_in = (DAT_COUNT)d->max_ird;
	a->max_rdma_read_out = (DAT_COUNT)d->max_ord;
	a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
	a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
	a->zb_supported = DAT_FALSE;
	a->extension_supported = DAT_EXTENSION_IW;
	a->extension_version = DAT_IW_EXTENSION_VERSION;
	a->num_transport_attr = 0;
	a->transport_attr = NULL;
	a->num_vendor_attr = 0;
	a->vendor_attr = NULL;
}

/* The named attributes live in the provider entry, which outlives every
 * IA: consumers may keep the pointers after dat_ia_close. */
static void fill_named_attrs(struct dapl_ia *ia)
{
	struct dapl_provider *p = ia->prov;

	dapl_ia_lock(ia);
	snprintf(p->mtu_str, sizeof(p->mtu_str), "%u", ia->dev_attr.mtu);
	p->named[0] = (DAT_NAMED_ATTR){ DAT_EXTENSION_ATTR, "TRUE" };
	p->named[1] = (DAT_NAMED_ATTR){ DAT_EXTENSION_ATTR_VERSION,
					DAT_IW_EXTENSION_VERSION_STR };
	p->named[2] = (DAT_NAMED_ATTR){ DAT_IW_ATTR_SSP, "TRUE" };
	p->named[3] = (DAT_NAMED_ATTR){ "DAT_IB_RDMA_READ", "TRUE" };
	p->named[4] = (DAT_NAMED_ATTR){ "DAT_IB_TRANSPORT_MTU", p->mtu_str };
	p->named[5] = (DAT_NAMED_ATTR){ "DAT_IW_TRANSPORT",
		ia->dev_attr.transport == IWE_TRANSPORT_UDP ? "UDP" : "TCP" };
	p->named[6] = (DAT_NAMED_ATTR){ "IWDAPL_CRC32C",
					iw_crc32c_impl_name() };
	/* Where iwinfo --stats reads this process's counters. */
	dapl_stats_socket_name(p->stats_socket, sizeof(p->stats_socket));
	p->named[7] = (DAT_NAMED_ATTR){ DAT_IW_ATTR_STATS, p->stats_socket };
	dapl_ia_unlock(ia);
}

static void fill_provider_attr(struct dapl_ia *ia, DAT_PROVIDER_ATTR *a)
{
	DAT_BOOLEAN(*merge)[6];

	memset(a, 0, sizeof(*a));
	snprintf(a->provider_name, sizeof(a->provider_name), "%s",
		 ia->prov->ia_name);
	package_version(&a->provider_version_major,
			&a->provider_version_minor);
	/* The registry finds our dat.conf entry again at close by these. */
	a->dapl_version_major = 2;
	a->dapl_version_minor = 0;
	a->is_thread_safe = DAT_FALSE;
	a->lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR;
	a->iov_ownership_on_return = DAT_IOV_CONSUMER;
	a->dat_qos_supported = DAT_QOS_BEST_EFFORT;
	a->completion_flags_supported =
		DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
		DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG |
		DAT_COMPLETION_EVD_THRESHOLD_FLAG;
	a->max_private_data_size = DAPL_MAX_PRIVATE_DATA;
	a->supports_multipath = DAT_FALSE;
	a->ep_creator = DAT_PSP_CREATES_EP_IFASKED;
	a->pz_support = DAT_PZ_UNIQUE;
	a->optimal_buffer_alignment = 64;
	/* Any streams may share one EVD. */
	merge = (DAT_BOOLEAN(*)[6])(void *)a->evd_stream_merging_supported;
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < 6; j++)
			merge[i][j] = DAT_TRUE;
	a->srq_supported = DAT_TRUE;
	a->srq_watermarks_supported = 1;
	a->srq_ep_pz_difference_supported = DAT_FALSE;
	a->srq_info_supported = 1;
	a->ep_recv_info_supported = 1;
	a->lmr_sync_req = DAT_FALSE;
	a->dto_async_return_guaranteed = DAT_FALSE;
	/* The engine places Read Responses with the local STag: the sink
	 * needs local write access only. */
	a->rdma_write_for_rdma_read_req = DAT_FALSE;
	a->rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
	a->rmr_scope_supported = DAT_RMR_SCOPE_ANY;
	a->is_signal_safe = DAT_FALSE;
	a->ha_supported = DAT_FALSE;
	a->ha_loadbalancing = DAT_HA_LB_NONE;
	fill_named_attrs(ia);
	a->num_provider_specific_attr = DAPL_NAMED_ATTRS;
	a->provider_specific_attr = ia->prov->named;
}

DAT_RETURN dapl_ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd,
			 DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
			 DAT_PROVIDER_ATTR_MASK prov_mask,
			 DAT_PROVIDER_ATTR *prov_attr)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	/* Unknown mask bits are ignored: the registry itself asks with masks
	 * wider than the *_FIELD_ALL values. */
	if (ia_mask && !ia_attr)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (prov_mask && !prov_attr)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG6;
	if (async_evd)
		*async_evd = ia->async_evd ? ia->async_evd->obj.handle
					   : DAT_EVD_OUT_OF_SCOPE;
	if (ia_mask)
		fill_ia_attr(ia, ia_attr);
	if (prov_mask)
		fill_provider_attr(ia, prov_attr);
	return DAT_SUCCESS;
}
