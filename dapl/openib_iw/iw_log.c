/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The provider's one logging path (see iw_log.h): the level and the
 * destination, read once from the environment, and whole lines written
 * with one call.
 *
 * The two variables are read here with getenv rather than through
 * iw_env.c: that reader reports bad values through this file, so this
 * file cannot depend on it.  A bad value of them is reported with the
 * same line, once (the reading happens once). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "iw_log.h"
#include "iw_wire.h"

#define LINE_MAX_LEN 512

int iw_log_level_ = -1;
static int to_syslog;
static pthread_once_t vars_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = { "none", "error", "warn", "info",
					   "debug" };
#define NLEVELS ((int)(sizeof(level_names) / sizeof(level_names[0])))

/* A level's name or its number; -1 for anything else. */
static int parse_level(const char *s)
{
	for (int i = 0; i < NLEVELS; i++)
		if (!strcasecmp(s, level_names[i]) ||
		    (s[0] == '0' + i && !s[1]))
			return i;
	return -1;
}

static void read_vars(void)
{
	const char *lvl = getenv("IWDAPL_LOG");
	const char *dbg = getenv("IWDAPL_DEBUG");
	const char *dest = getenv("IWDAPL_LOG_DEST");
	int level = dbg && *dbg && *dbg != '0' ? IW_LOG_DEBUG : IW_LOG_ERROR;
	int bad_level = 0, bad_dest = 0;

	if (lvl && *lvl) {
		bad_level = parse_level(lvl) < 0;
		if (!bad_level)
			level = parse_level(lvl);
	}
	if (dest && *dest) {
		if (!strcasecmp(dest, "syslog"))
			to_syslog = 1;
		else
			bad_dest = strcasecmp(dest, "stderr") != 0;
	}
	/* Set before reporting: iw_log must not come back here. */
	__atomic_store_n(&iw_log_level_, level, __ATOMIC_RELEASE);
	if (bad_level)
		iw_log_bad_value("IWDAPL_LOG", lvl,
				 "not none, error, warn, info, debug or 0..4",
				 level_names[level]);
	if (bad_dest)
		iw_log_bad_value("IWDAPL_LOG_DEST", dest,
				 "not stderr or syslog", "stderr");
}

int iw_log_init(void)
{
	pthread_once(&vars_once, read_vars);
	return __atomic_load_n(&iw_log_level_, __ATOMIC_ACQUIRE);
}

static void emit(enum iw_log_level level, char *line, size_t len)
{
	static const int prio[] = { LOG_ERR, LOG_ERR, LOG_WARNING, LOG_INFO,
				    LOG_DEBUG };

	if (to_syslog) {
		/* No openlog(): the consumer's ident and options stay;
		 * the line names the provider itself. */
		syslog(LOG_USER | prio[level], "%.*s", (int)len - 1, line);
		return;
	}
	/* One write: a line shorter than PIPE_BUF is never split. */
	while (write(STDERR_FILENO, line, len) < 0 && errno == EINTR)
		;
}

void iw_logv(enum iw_log_level level, const char *object, const char *fmt,
	     va_list ap)
{
	char line[LINE_MAX_LEN];
	int saved = errno, n, m;

	if (level <= IW_LOG_NONE || !iw_log_on(level))
		return;
	n = snprintf(line, sizeof(line) / 2, "iwdapl[%d]: %s%s", (int)getpid(),
		     object ? object : "", object ? ": " : "");
	if (n < 0 || (size_t)n >= sizeof(line) / 2)
		n = (int)sizeof(line) / 2 - 1;	/* a long object is cut */
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	if ((size_t)(n + m) > sizeof(line) - 2)
		m = (int)sizeof(line) - 2 - n;	/* cut: the newline fits */
	line[n + m] = '\n';
	emit(level, line, (size_t)(n + m + 1));
	errno = saved;
}

void iw_log(enum iw_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	iw_logv(level, NULL, fmt, ap);
	va_end(ap);
}

void iw_log_bad_value(const char *name, const char *value,
		      const char *expected, const char *used)
{
	char shown[65];
	size_t i;

	/* The value as text on one line, whatever it holds. */
	for (i = 0; value[i] && i < sizeof(shown) - 1; i++)
		shown[i] = value[i] >= 0x20 && value[i] < 0x7f ? value[i] : '?';
	shown[i] = '\0';
	iw_log(IW_LOG_ERROR, "%s=%s%s: %s; using %s", name, shown,
	       value[i] ? "..." : "", expected, used);
}

/* ----------------------------------------------------------- objects */

static void addr_text(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	if (!a || a->sin_family != AF_INET ||
	    !inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip)))
		snprintf(buf, len, "?");
	else if (a->sin_port)
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
	else
		snprintf(buf, len, "%s", ip);
}

char *iw_log_addrs(const struct sockaddr_in *local,
		   const struct sockaddr_in *remote, char *buf, size_t len)
{
	char l[IW_LOG_ADDRS_LEN / 2], r[IW_LOG_ADDRS_LEN / 2];

	addr_text(local, l, sizeof(l));
	addr_text(remote, r, sizeof(r));
	snprintf(buf, len, "%s->%s", l, r);
	return buf;
}

char *iw_log_sock_addrs(int fd, char *buf, size_t len)
{
	struct sockaddr_in l, r;
	socklen_t sl = sizeof(l), rl = sizeof(r);

	buf[0] = '\0';
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&l, &sl) < 0 ||
	    l.sin_family != AF_INET)
		return buf;
	if (getpeername(fd, (struct sockaddr *)&r, &rl) < 0)
		memset(&r, 0, sizeof(r));
	return iw_log_addrs(&l, &r, buf, len);
}

static const char *layer_name(unsigned layer)
{
	switch (layer) {
	case IW_TERM_LAYER_RDMAP:
		return "RDMAP";
	case IW_TERM_LAYER_DDP:
		return "DDP";
	case IW_TERM_LAYER_LLP:
		return "LLP";
	default:
		return "unknown";
	}
}

void iw_log_terminate(int sent, unsigned qp_num, const char *addrs,
		      unsigned layer, unsigned etype, unsigned ecode)
{
	iw_log(IW_LOG_ERROR,
	       "qp %u%s%s: %s Terminate: layer %u (%s), type %u, code 0x%02x",
	       qp_num, addrs[0] ? " " : "", addrs, sent ? "sent" : "received",
	       layer, layer_name(layer), etype, ecode);
}
