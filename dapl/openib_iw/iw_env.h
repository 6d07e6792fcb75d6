/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The provider's one reader of its IWDAPL_* variables.
 *
 * Unset or empty: the default.  A value that does not parse or is out
 * of range: the default too, and one log line (error level) the first
 * time that variable is found bad in the process, e.g.
 *   iwdapl[PID]: IWDAPL_CRC=maybe: not 0, 1, off, on, no or yes; using 1
 * Names must live as long as the process (string literals).
 * (IWDAPL_LOG and IWDAPL_LOG_DEST are iw_log.c's own.) */
#ifndef IW_ENV_H
#define IW_ENV_H

/* A decimal integer in lo..hi. */
long iw_env_long(const char *name, long def, long lo, long hi);
/* iw_env_long read once per process: *cache starts at -1 (lo must not
 * be negative); threads may race to read it, with the same result. */
long iw_env_long_once(long *cache, const char *name, long def, long lo,
		      long hi);
/* 0|1|off|on|no|yes (any case). */
int iw_env_bool(const char *name, int def);
/* One of the n names (any case): its index.  def may be -1 (no name
 * stands for the default); it is returned as it is. */
int iw_env_choice(const char *name, const char *const *names, int n,
		  int def);

/* The value as it is, or def when unset or empty. */
const char *iw_env_str(const char *name, const char *def);

/* IWDAPL_PEER_TIMEOUT_MS (read at each connection): how long a
 * connection's peer may say nothing before the connection is broken
 * (TRP's idle timeout; TCP's keepalive and user timeout), 0: never. */
#define IW_PEER_TIMEOUT_MS 10000
#define IW_PEER_TIMEOUT_MAX_MS 86400000
long iw_env_peer_timeout_ms(void);

#endif
