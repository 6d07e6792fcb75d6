/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counters of IAs and EPs (DAT_IW_STATS, <dat2/dat_iw_extensions.h>).
 *
 * Where they are counted: the engine counts the data path per QP (plain
 * increments under the QP lock it holds anyway); cm.c and cr.c count
 * connection outcomes in ep->stats and ia->stats under ia->lock.  When a
 * QP is retired its counters are folded into ep->stats, and when an EP
 * is freed ep->stats is folded into ia->stats, so nothing is lost:
 *   EP total = ep->stats + its live QP
 *   IA total = ia->stats + the totals of its live EPs.
 * stats.c sums them (below ep_qp.c, which keeps a retiring QP's counts),
 * stats_query.c totals and prints them, stats_server.c serves them to
 * iwinfo over the abstract unix socket "\0iwdapl-stats-<pid>". */
#ifndef DAPL_STATS_H
#define DAPL_STATS_H

#include <stdio.h>

#include "dapl.h"

struct dapl_ep;

/* to += from, every counter; Terminate codes merged by code. */
void dapl_stats_add(DAT_IW_STATS *to, const DAT_IW_STATS *from);
/* to += a QP's engine counters, by DAT operation type. */
void dapl_stats_add_qp(DAT_IW_STATS *to, const struct iwe_qp_stats *q);

/* The QP of the EP is being detached: keep its counters in ep->stats. */
void dapl_stats_qp_retired_locked(struct dapl_ep *ep, struct iwe_qp *qp);
/* The EP is being freed: its total goes to its IA. */
void dapl_stats_ep_freed_locked(struct dapl_ep *ep);

/* Totals of an EP / an IA (caller holds ia->lock). */
void dapl_stats_ep_locked(const struct dapl_ep *ep, DAT_IW_STATS *out);
void dapl_stats_ia_locked(struct dapl_ia *ia, DAT_IW_STATS *out);

/* DAT_IW_STATS_QUERY_OP on an IA or EP handle. */
DAT_RETURN dapl_stats_query(DAT_HANDLE handle, DAT_IW_STATS *out);

/* Print one counter set as "<indent><name> <value>" lines. */
void dapl_stats_print(FILE *f, const char *indent, const DAT_IW_STATS *s);
/* Print an IA and each of its EPs (takes ia->lock). */
void dapl_stats_print_ia(FILE *f, struct dapl_ia *ia);

/* An IA opened / is closing (no lock held): the process-wide list that
 * the stats server walks, the server's start and stop, and the dump at
 * close that IWDAPL_STATS=1 asks for (stats_server.c). */
void dapl_stats_ia_opened(struct dapl_ia *ia);
void dapl_stats_ia_closing(struct dapl_ia *ia);
/* The name of this process's stats socket, "@iwdapl-stats-<pid>" ('@'
 * standing for the leading NUL of an abstract name). */
void dapl_stats_socket_name(char *buf, size_t len);

#endif
