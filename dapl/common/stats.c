/* Counters of IAs and EPs: summing, the consumer's query, printing
 * (dapl_stats.h says where each counter is counted). */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_stats.h"

/* The plain counters form one run of DAT_UINT64 from conn_requested up to
 * the Terminate code tables: summed as an array. */
#define SCALAR_FIRST offsetof(DAT_IW_STATS, conn_requested)
#define SCALAR_END offsetof(DAT_IW_STATS, term_sent_code)
#define SCALAR_COUNT ((SCALAR_END - SCALAR_FIRST) / sizeof(DAT_UINT64))
_Static_assert((SCALAR_END - SCALAR_FIRST) % sizeof(DAT_UINT64) == 0,
	       "DAT_IW_STATS counters are not a run of DAT_UINT64");

static DAT_UINT64 *scalars(DAT_IW_STATS *s)
{
	return (DAT_UINT64 *)(void *)((char *)s + SCALAR_FIRST);
}

static const DAT_UINT64 *cscalars(const DAT_IW_STATS *s)
{
	return (const DAT_UINT64 *)(const void *)((const char *)s +
						  SCALAR_FIRST);
}

static void term_code_add(DAT_IW_TERM_COUNT *tab, DAT_UINT32 code,
			  DAT_UINT64 n)
{
	for (int i = 0; i < DAT_IW_STATS_TERM_CODES && n; i++) {
		if (tab[i].count && tab[i].code != code)
			continue;
		tab[i].code = code;
		tab[i].count += n;
		return;
	}
}

void dapl_stats_add(DAT_IW_STATS *to, const DAT_IW_STATS *from)
{
	DAT_UINT64 *t = scalars(to);
	const DAT_UINT64 *f = cscalars(from);

	for (size_t i = 0; i < SCALAR_COUNT; i++)
		t[i] += f[i];
	for (int i = 0; i < DAT_IW_STATS_TERM_CODES; i++) {
		term_code_add(to->term_sent_code, from->term_sent_code[i].code,
			      from->term_sent_code[i].count);
		term_code_add(to->term_rcvd_code, from->term_rcvd_code[i].code,
			      from->term_rcvd_code[i].count);
	}
}

/* The DAT operation type of an RDMAP opcode (RFC 5040 4.3); -1 for the
 * Terminate, which has counters of its own. */
static int op_of_rdmap(int opcode)
{
	switch (opcode) {
	case 0:
		return DAT_IW_STATS_RDMA_WRITE;
	case 1:
		return DAT_IW_STATS_RDMA_READ_REQ;
	case 2:
		return DAT_IW_STATS_RDMA_READ_RESP;
	case 3: case 4: case 5: case 6:
		return DAT_IW_STATS_SEND;
	default:
		return -1;
	}
}

void dapl_stats_add_qp(DAT_IW_STATS *to, const struct iwe_qp_stats *q)
{
	for (int opc = 0; opc < 16; opc++) {
		int op = op_of_rdmap(opc);

		if (op < 0)
			continue;
		to->tx_msgs[op] += q->tx_msgs[opc];
		to->tx_bytes[op] += q->tx_bytes[opc];
		to->rx_msgs[op] += q->rx_msgs[opc];
		to->rx_bytes[op] += q->rx_bytes[opc];
	}
	to->tx_segments += q->tx_segments;
	to->rx_segments += q->rx_segments;
	to->crc_errors += q->crc_errors;
	to->retransmits += q->retransmits;
	to->queue_full += q->queue_full;
	to->term_sent += q->term_sent;
	to->term_rcvd += q->term_rcvd;
	for (int i = 0; i < IWE_TERM_CODES; i++) {
		term_code_add(to->term_sent_code, q->term_sent_code[i].code,
			      q->term_sent_code[i].n);
		term_code_add(to->term_rcvd_code, q->term_rcvd_code[i].code,
			      q->term_rcvd_code[i].n);
	}
}

void dapl_stats_qp_retired_locked(struct dapl_ep *ep, struct iwe_qp *qp)
{
	struct iwe_qp_stats q;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (!qp)
		return;
	iwe_qp_query_stats(qp, &q);
	dapl_stats_add_qp(&ep->stats, &q);
}

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

DAT_RETURN dapl_stats_query(DAT_HANDLE handle, DAT_IW_STATS *out)
{
	int type = dapl_handle_type(handle);
	struct dapl_obj *o;

	if (type != DAT_HANDLE_TYPE_IA && type != DAT_HANDLE_TYPE_EP)
		return DAT_INVALID_HANDLE;
	if (!out)	/* the second argument of dat_iw_*_stats_query */
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	o = dapl_obj_lock(handle, type);
	if (!o)
		return DAT_INVALID_HANDLE;
	if (type == DAT_HANDLE_TYPE_IA)
		dapl_stats_ia_locked(o->ia, out);
	else
		dapl_stats_ep_locked((const struct dapl_ep *)o, out);
	dapl_ia_unlock(o->ia);
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
