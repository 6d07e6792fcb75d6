/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared helpers for the DAT conformance programs: they go through
 * Debian's libdat2 exactly as a consumer does, with DAT_OVERRIDE pointing at
 * the build tree's dat.conf (set by `make check`). */
#ifndef IW_TCOMMON_H
#define IW_TCOMMON_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dat2/udat.h>
#include "tap.h"

#define IA_NAME_DEFAULT "iw-lo"

static inline const char *test_ia_name(void)
{
	const char *n = getenv("IW_TEST_IA");
	return n && *n ? n : IA_NAME_DEFAULT;
}

/* Open the test IA with a provider-created async EVD; bails out on error. */
static inline DAT_IA_HANDLE test_open_ia(DAT_EVD_HANDLE *async_evd)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_RETURN r = dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, &ia);

	if (r != DAT_SUCCESS) {
		const char *maj = "", *min = "";
		dat_strerror(r, &maj, &min);
		BAIL("dat_ia_open(%s) failed: 0x%x %s %s (is DAT_OVERRIDE set?)",
		     test_ia_name(), r, maj, min);
	}
	if (async_evd)
		*async_evd = evd;
	return ia;
}

/* The value of a provider-specific attribute, NULL if it is absent. */
static inline const char *test_named_attr(const DAT_PROVIDER_ATTR *p,
					  const char *name)
{
	for (int i = 0; i < p->num_provider_specific_attr; i++)
		if (strcmp(p->provider_specific_attr[i].name, name) == 0)
			return p->provider_specific_attr[i].value;
	return NULL;
}

/* 1 if the IA runs over udp (its DAT_IW_TRANSPORT attribute): TRP's
 * non-fatal Terminates keep a connection that a bad STag breaks over
 * tcp, and a killed peer is found later (doc/trp.md). */
static inline int test_ia_is_udp(DAT_IA_HANDLE ia)
{
	DAT_PROVIDER_ATTR p;
	const char *t;

	if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &p) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_query");
	t = test_named_attr(&p, "DAT_IW_TRANSPORT");
	return t && !strcmp(t, "UDP");
}

static inline void test_close_ia(DAT_IA_HANDLE ia)
{
	DAT_RETURN r = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	CHECK(r == DAT_SUCCESS, "dat_ia_close(abrupt) at end of test (0x%x)", r);
}

/* The exact DAT_RETURN, with both values on failure. */
#define CHECK_CODE(expr, expected, ...)                                   \
	do {                                                              \
		unsigned code_r_ = (unsigned)(expr);                      \
		CHECK(code_r_ == (unsigned)(expected), __VA_ARGS__);      \
		if (code_r_ != (unsigned)(expected))                      \
			printf("#   got 0x%08x, want 0x%08x\n", code_r_,  \
			       (unsigned)(expected));                     \
	} while (0)

/* Type and subtype only: the registry may add DAT_CLASS_ERROR. */
#define CHECK_CODE_TYPE(expr, want, ...)                                  \
	do {                                                              \
		unsigned c_r_ = (unsigned)(expr);                         \
		unsigned c_m_ = DAT_TYPE_MASK | DAT_SUBTYPE_MASK;         \
		CHECK((c_r_ & c_m_) == ((unsigned)(want) & c_m_),         \
		      __VA_ARGS__);                                       \
		if ((c_r_ & c_m_) != ((unsigned)(want) & c_m_))           \
			printf("#   got 0x%08x, want 0x%08x\n", c_r_,     \
			       (unsigned)(want));                         \
	} while (0)

static inline void test_watchdog_fired(int sig)
{
	static const char m[] = "Bail out! watchdog: a step hung\n";

	(void)sig;
	if (write(1, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

/* A hung step ends the program with a TAP bail-out, not a stuck run. */
static inline void test_watchdog(unsigned seconds)
{
	signal(SIGALRM, test_watchdog_fired);
	alarm(seconds);
}

#endif
