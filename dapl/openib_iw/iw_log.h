/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The provider's one logging path (engine, dapl/common and dapl/ssp).
 *
 * A line is "iwdapl[PID]: OBJECT: CAUSE", written with one write(2) so
 * lines of several threads never interleave.  IWDAPL_LOG picks how much:
 * none|error|warn|info|debug (or 0..4), default error; IWDAPL_DEBUG=1 is
 * an old spelling of debug (IWDAPL_LOG wins when both are set).
 * IWDAPL_LOG_DEST=stderr|syslog picks where (syslog: facility user, the
 * level as priority).  Both are read once per process.
 *
 * Levels: error is what the consumer caused or must know (bad instance
 * data, refused, rejected and timed-out connections, MPA errors,
 * Terminates); warn, what ends a connection otherwise; info, routine
 * connection events; debug, state changes.
 *
 * Cost when a level is off: iw_log_on() is one load and one compare;
 * anything near the data path tests it before building a message. */
#ifndef IW_LOG_H
#define IW_LOG_H

#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>

enum iw_log_level {
	IW_LOG_NONE = 0,
	IW_LOG_ERROR = 1,
	IW_LOG_WARN = 2,
	IW_LOG_INFO = 3,
	IW_LOG_DEBUG = 4,
};

/* The level in force; -1 until the variables are read. */
extern int iw_log_level_;
int iw_log_init(void);

static inline int iw_log_on(enum iw_log_level level)
{
	/* Acquire: the destination was set before the level. */
	int cur = __atomic_load_n(&iw_log_level_, __ATOMIC_ACQUIRE);

	if (__builtin_expect(cur < 0, 0))
		cur = iw_log_init();
	return (int)level <= cur;
}

/* One line at 'level' (the newline is added; a long one is cut). */
void iw_log(enum iw_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same about an object: "OBJECT: " goes before the message. */
void iw_logv(enum iw_log_level level, const char *object, const char *fmt,
	     va_list ap) __attribute__((format(printf, 3, 0)));

/* NAME=VALUE is not usable: the one line that says why and what is used
 * instead (callers make sure it is said once per variable). */
void iw_log_bad_value(const char *name, const char *value,
		      const char *expected, const char *used);

/* "a.b.c.d:port->e.f.g.h:port" into buf (a port of 0 is left out, an
 * address of another family or none is "?"); returns buf. */
char *iw_log_addrs(const struct sockaddr_in *local,
		   const struct sockaddr_in *remote, char *buf, size_t len);
/* The same for a socket's own two ends ("" when it has none). */
char *iw_log_sock_addrs(int fd, char *buf, size_t len);
#define IW_LOG_ADDRS_LEN 48

/* A Terminate sent or received by a QP (addrs: its iw_log_sock_addrs,
 * or ""): layer, type and code. */
void iw_log_terminate(int sent, unsigned qp_num, const char *addrs,
		      unsigned layer, unsigned etype, unsigned ecode);

#endif
