/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The process's descriptor limit (iw_fdlimit.c). */
#ifndef IW_FDLIMIT_H
#define IW_FDLIMIT_H

/* Raise the soft RLIMIT_NOFILE to the hard limit, once per process,
 * unless IWDAPL_RAISE_NOFILE=0. */
void iwe_fd_limit_raise(void);
/* err (an errno) back; EMFILE and ENFILE are logged, once per process,
 * with the limit and what failed ("TCP connect", "accept"). */
int iwe_fd_limit_note(int err, const char *what);

#endif
