/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Registry entry points: libdat2 calls dat_provider_init once for every
 * dat.conf line naming this library, and dat_provider_fini at unload. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"

static void fill_table(DAT_PROVIDER *p)
{
	p->extension = NULL;
	p->ia_open_func = dapl_ia_open;
	p->ia_query_func = dapl_ia_query;
	p->ia_close_func = dapl_ia_close;
	p->set_consumer_context_func = dapl_set_consumer_context;
	p->get_consumer_context_func = dapl_get_consumer_context;
	p->get_handle_type_func = dapl_get_handle_type;
	p->cno_create_func = dapl_cno_create;
	p->cno_modify_agent_func = dapl_cno_modify_agent;
	p->cno_query_func = dapl_cno_query;
	p->cno_free_func = dapl_cno_free;
	p->cno_wait_func = dapl_cno_wait;
	p->cr_query_func = dapl_cr_query;
	p->cr_accept_func = dapl_cr_accept;
	p->cr_reject_func = dapl_cr_reject;
	p->cr_handoff_func = dapl_cr_handoff;
	p->evd_create_func = dapl_evd_create;
	p->evd_query_func = dapl_evd_query;
	p->evd_modify_cno_func = dapl_evd_modify_cno;
	p->evd_enable_func = dapl_evd_enable;
	p->evd_disable_func = dapl_evd_disable;
	p->evd_wait_func = dapl_evd_wait;
	p->evd_resize_func = dapl_evd_resize;
	p->evd_post_se_func = dapl_evd_post_se;
	p->evd_dequeue_func = dapl_evd_dequeue;
	p->evd_free_func = dapl_evd_free;
	p->ep_create_func = dapl_ep_create;
	p->ep_query_func = dapl_ep_query;
	p->ep_modify_func = dapl_ep_modify;
	p->ep_connect_func = dapl_ep_connect;
	p->ep_dup_connect_func = dapl_ep_dup_connect;
	p->ep_disconnect_func = dapl_ep_disconnect;
	p->ep_post_send_func = dapl_ep_post_send;
	p->ep_post_recv_func = dapl_ep_post_recv;
	p->ep_post_rdma_read_func = dapl_ep_post_rdma_read;
	p->ep_post_rdma_write_func = dapl_ep_post_rdma_write;
	p->ep_get_status_func = dapl_ep_get_status;
	p->ep_free_func = dapl_ep_free;
	p->lmr_create_func = dapl_lmr_create;
	p->lmr_query_func = dapl_lmr_query;
	p->lmr_free_func = dapl_lmr_free;
	p->rmr_create_func = dapl_rmr_create;
	p->rmr_query_func = dapl_rmr_query;
	p->rmr_bind_func = dapl_rmr_bind;
	p->rmr_free_func = dapl_rmr_free;
	p->psp_create_func = dapl_psp_create;
	p->psp_query_func = dapl_psp_query;
	p->psp_free_func = dapl_psp_free;
	p->rsp_create_func = dapl_rsp_create;
	p->rsp_query_func = dapl_rsp_query;
	p->rsp_free_func = dapl_rsp_free;
	p->pz_create_func = dapl_pz_create;
	p->pz_query_func = dapl_pz_query;
	p->pz_free_func = dapl_pz_free;
	p->psp_create_any_func = dapl_psp_create_any;
	p->ep_reset_func = dapl_ep_reset;
	p->evd_set_unwaitable_func = dapl_evd_set_unwaitable;
	p->evd_clear_unwaitable_func = dapl_evd_clear_unwaitable;
	p->lmr_sync_rdma_read_func = dapl_lmr_sync_rdma_read;
	p->lmr_sync_rdma_write_func = dapl_lmr_sync_rdma_write;
	p->ep_create_with_srq_func = dapl_ep_create_with_srq;
	p->ep_recv_query_func = dapl_ep_recv_query;
	p->ep_set_watermark_func = dapl_ep_set_watermark;
	p->srq_create_func = dapl_srq_create;
	p->srq_free_func = dapl_srq_free;
	p->srq_post_recv_func = dapl_srq_post_recv;
	p->srq_query_func = dapl_srq_query;
	p->srq_resize_func = dapl_srq_resize;
	p->srq_set_lw_func = dapl_srq_set_lw;
	p->csp_create_func = dapl_csp_create;
	p->csp_query_func = dapl_csp_query;
	p->csp_free_func = dapl_csp_free;
	p->ep_common_connect_func = dapl_ep_common_connect;
	p->rmr_create_for_ep_func = dapl_rmr_create_for_ep;
	p->ep_post_send_with_invalidate_func = dapl_ep_post_send_with_invalidate;
	p->ep_post_rdma_read_to_rmr_func = dapl_ep_post_rdma_read_to_rmr;
	p->cno_fd_create_func = dapl_cno_fd_create;
	p->cno_trigger_func = dapl_cno_trigger;
	p->ia_ha_related_func = dapl_ia_ha_related;
	p->handle_extendedop_func = dapl_extension_op;
}

void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data);
void dat_provider_fini(const DAT_PROVIDER_INFO *info);

void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data)
{
	struct dapl_provider *p;

	if (!info)
		return;
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	snprintf(p->ia_name, sizeof(p->ia_name), "%s", info->ia_name);
	p->dat.device_name = p->ia_name;
	fill_table(&p->dat);
	/* A bad line is reported by each dat_ia_open that meets it. */
	dapl_config_parse(&p->cfg, instance_data);
	if (dat_registry_add_provider(&p->dat, info) != DAT_SUCCESS) {
		free(p);
		return;
	}
	dapl_provider_add(p);
}

void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
	struct dapl_provider *p;

	if (!info)
		return;
	/* Stale handle slots may still point at p->dat, so the entry stays
	 * allocated (and listed) after removal. */
	p = dapl_provider_find(info->ia_name);
	if (p)
		dat_registry_remove_provider(&p->dat, info);
}
