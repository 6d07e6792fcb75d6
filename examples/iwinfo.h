/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwinfo's parts: the IA query (iwinfo.c), the dat.conf entries
 * (iwinfo_conf.c) and a running process's counters (iwinfo_stats.c). */
#ifndef IWINFO_H
#define IWINFO_H

/* List the dat.conf entries that name libdaploiw and whether each one's
 * netdev or address resolves here; the number that do not. */
int iwinfo_conf(void);

/* Print the counters of process pid (its stats socket): 0, or 1 with a
 * message on stderr. */
int iwinfo_stats_pid(long pid);
/* List the processes that serve counters; 0. */
int iwinfo_stats_list(void);

#endif
