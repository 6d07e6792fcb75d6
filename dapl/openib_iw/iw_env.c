/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Reading IWDAPL_* variables (iw_env.h): parse, range-check, and report
 * a bad value once per variable through the log. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "iw_env.h"
#include "iw_log.h"

/* More than the provider has variables: a full table still reports. */
#define MAX_REPORTED 32

static pthread_mutex_t reported_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *reported[MAX_REPORTED];
static int nreported;

/* 1 the first time 'name' is found bad in this process. */
static int first_time_bad(const char *name)
{
	int i, first = 1;

	pthread_mutex_lock(&reported_lock);
	for (i = 0; i < nreported && first; i++)
		first = strcmp(reported[i], name) != 0;
	if (first && nreported < MAX_REPORTED)
		reported[nreported++] = name;
	pthread_mutex_unlock(&reported_lock);
	return first;
}

static void bad(const char *name, const char *value, const char *expected,
		const char *used)
{
	if (first_time_bad(name))
		iw_log_bad_value(name, value, expected, used);
}

/* The variable's value, or NULL when it is unset or empty. */
static const char *value_of(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? s : NULL;
}

long iw_env_long(const char *name, long def, long lo, long hi)
{
	const char *s = value_of(name);
	char expected[64], used[24];
	char *end;
	long v;

	if (!s)
		return def;
	errno = 0;
	v = strtol(s, &end, 10);
	if (!errno && !*end && v >= lo && v <= hi)
		return v;
	snprintf(expected, sizeof(expected), "not an integer in %ld..%ld",
		 lo, hi);
	snprintf(used, sizeof(used), "%ld", def);
	bad(name, s, expected, used);
	return def;
}

long iw_env_long_once(long *cache, const char *name, long def, long lo,
		      long hi)
{
	long cur = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (cur < 0) {
		cur = iw_env_long(name, def, lo, hi);
		__atomic_store_n(cache, cur, __ATOMIC_RELAXED);
	}
	return cur;
}

/* The index of the variable's value among names (any case): 1 with *idx
 * set, 0 when unset, -1 when it is none of them. */
static int lookup(const char *name, const char *const *names, int n,
		  int *idx)
{
	const char *s = value_of(name);

	if (!s)
		return 0;
	for (int i = 0; i < n; i++)
		if (!strcasecmp(s, names[i])) {
			*idx = i;
			return 1;
		}
	return -1;
}

int iw_env_bool(const char *name, int def)
{
	static const char *const names[] = { "0", "1", "off", "on", "no",
					     "yes" };
	int i, r = lookup(name, names, 6, &i);

	if (r > 0)
		return i & 1;
	if (r < 0)
		bad(name, value_of(name), "not 0, 1, off, on, no or yes",
		    def ? "1" : "0");
	return def;
}

int iw_env_choice(const char *name, const char *const *names, int n,
		  int def)
{
	char expected[128];
	size_t off;
	int i, r = lookup(name, names, n, &i);

	if (r > 0)
		return i;
	if (r == 0)
		return def;
	off = (size_t)snprintf(expected, sizeof(expected), "not one of");
	for (i = 0; i < n && off < sizeof(expected); i++)
		off += (size_t)snprintf(expected + off, sizeof(expected) - off,
					"%s %s", i ? "," : "", names[i]);
	bad(name, value_of(name), expected,
	    def >= 0 && def < n ? names[def] : "the configured value");
	return def;
}

const char *iw_env_str(const char *name, const char *def)
{
	const char *s = value_of(name);

	return s ? s : def;
}

long iw_env_peer_timeout_ms(void)
{
	return iw_env_long("IWDAPL_PEER_TIMEOUT_MS", IW_PEER_TIMEOUT_MS, 0,
			   IW_PEER_TIMEOUT_MAX_MS);
}
