/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counters of IAs and EPs, the top half: an EP's and an IA's totals, the
 * consumer's query (DAT_IW_STATS_QUERY_OP) and the text that iwinfo
 * --stats and IWDAPL_STATS=1 print. */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_stats.h"

void dapl_stats_ep_locked(const struct dapl_ep *ep, DAT_IW_STATS *out)
{
	struct iwe_qp *qp = dapl_ep_qp(ep->pool);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	*out = ep->stats;
	if (qp) {
		struct iwe_qp_stats q;

		iwe_qp_query_stats(qp, &q);
		dapl_stats_add_qp(out, &q);
	}
	out->queue_full += dapl_ep_pool_queue_full(ep->pool);
	out->version = DAT_IW_STATS_VERSION;
	out->size = sizeof(*out);
}

void dapl_stats_ep_freed_locked(struct dapl_ep *ep)
{
	struct dapl_ia *ia = ep->obj.ia;
	DAT_IW_STATS s;

	DAPL_ASSERT_IA_LOCKED(ia);
	dapl_stats_ep_locked(ep, &s);
	dapl_stats_add(&ia->stats, &s);
	ia->stats.eps_closed++;
}

void dapl_stats_ia_locked(struct dapl_ia *ia, DAT_IW_STATS *out)
{
	DAPL_ASSERT_IA_LOCKED(ia);
	*out = ia->stats;
	for (struct dapl_obj *o = ia->objs[DAPL_K_EP]; o; o = o->next) {
		DAT_IW_STATS s;

		dapl_stats_ep_locked((const struct dapl_ep *)o, &s);
		dapl_stats_add(out, &s);
		out->eps_open++;
	}
	out->version = DAT_IW_STATS_VERSION;
	out->size = sizeof(*out);
}

/* Version 1 ended with the Terminate code tables. */
#define STATS_V1_SIZE offsetof(DAT_IW_STATS, rnr_waits)

DAT_RETURN dapl_stats_query(DAT_HANDLE handle, DAT_IW_STATS *out)
{
	int type = dapl_handle_type(handle);
	DAT_IW_STATS all;
	struct dapl_obj *o;

	if (type != DAT_HANDLE_TYPE_IA && type != DAT_HANDLE_TYPE_EP)
		return DAT_INVALID_HANDLE;
	if (!out)	/* the second argument of dat_iw_*_stats_query */
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	o = dapl_obj_lock(handle, type);
	if (!o)
		return DAT_INVALID_HANDLE;
	if (type == DAT_HANDLE_TYPE_IA)
		dapl_stats_ia_locked(o->ia, &all);
	else
		dapl_stats_ep_locked((const struct dapl_ep *)o, &all);
	dapl_ia_unlock(o->ia);
	/* No more than the caller's header has (dat_iw_extensions.h). */
	if (out->version >= 2 && out->size >= sizeof(all)) {
		*out = all;
	} else {
		memcpy(out, &all, STATS_V1_SIZE);
		out->version = 1;
		out->size = STATS_V1_SIZE;
	}
	return DAT_SUCCESS;
}

/* ------------------------------------------------------------ printing */

static const char *const op_names[DAT_IW_STATS_OPS] = {
	"send", "rdma_write", "rdma_read_req", "rdma_read_resp"
};

static void print_ops(FILE *f, const char *indent, const char *what,
		      const DAT_UINT64 *v)
{
	for (int op = 0; op < DAT_IW_STATS_OPS; op++)
		fprintf(f, "%s%s.%s %llu\n", indent, what, op_names[op],
			(unsigned long long)v[op]);
}

static void print_codes(FILE *f, const char *indent, const char *what,
			const DAT_IW_TERM_COUNT *tab)
{
	for (int i = 0; i < DAT_IW_STATS_TERM_CODES && tab[i].count; i++)
		fprintf(f, "%s%s.0x%04x %llu\n", indent, what,
			(unsigned)tab[i].code,
			(unsigned long long)tab[i].count);
}

#define PRINT(field) \
	fprintf(f, "%s%s %llu\n", indent, #field, \
		(unsigned long long)s->field)

void dapl_stats_print(FILE *f, const char *indent, const DAT_IW_STATS *s)
{
	PRINT(conn_requested);
	PRINT(conn_opened);
	PRINT(conn_accepted);
	PRINT(conn_peer_rejected);
	PRINT(conn_failed);
	PRINT(conn_received);
	PRINT(conn_rejected);
	print_ops(f, indent, "tx_msgs", s->tx_msgs);
	print_ops(f, indent, "tx_bytes", s->tx_bytes);
	print_ops(f, indent, "rx_msgs", s->rx_msgs);
	print_ops(f, indent, "rx_bytes", s->rx_bytes);
	PRINT(tx_segments);
	PRINT(rx_segments);
	PRINT(crc_errors);
	PRINT(rnr_waits);
	PRINT(retransmits);
	PRINT(queue_full);
	PRINT(term_sent);
	PRINT(term_rcvd);
	print_codes(f, indent, "term_sent", s->term_sent_code);
	print_codes(f, indent, "term_rcvd", s->term_rcvd_code);
}

#undef PRINT

void dapl_stats_print_ia(FILE *f, struct dapl_ia *ia)
{
	DAT_IW_STATS s;

	dapl_ia_lock(ia);
	dapl_stats_ia_locked(ia, &s);
	fprintf(f, "ia %u %s\n", ia->stats_id, ia->prov->ia_name);
	fprintf(f, "  eps_open %llu\n  eps_closed %llu\n",
		(unsigned long long)s.eps_open,
		(unsigned long long)s.eps_closed);
	dapl_stats_print(f, "  ", &s);
	for (struct dapl_obj *o = ia->objs[DAPL_K_EP]; o; o = o->next) {
		dapl_stats_ep_locked((const struct dapl_ep *)o, &s);
		fprintf(f, "ep %p ia %u\n", (void *)o->handle, ia->stats_id);
		dapl_stats_print(f, "  ", &s);
	}
	dapl_ia_unlock(ia);
}
