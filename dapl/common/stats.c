/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counters of IAs and EPs, the bottom half: sums of counter sets and a
 * retiring QP's counters kept in its EP (dapl_stats.h says where each
 * counter is counted; stats_query.c reads and prints them). */
#include "config.h"

#include <stddef.h>

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
	to->rnr_waits += from->rnr_waits;
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
	to->rnr_waits += q->rnr_waits;
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
