/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Minimal TAP producer shared by every test program.
 * Each CHECK is one TAP test point, so the Automake TAP driver counts
 * cases individually and a failure names the exact behaviour. */
#ifndef IW_TEST_TAP_H
#define IW_TEST_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int tap_count;
static int tap_failed;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		int tap_ok_ = !!(cond);                                   \
		printf("%s %d - ", tap_ok_ ? "ok" : "not ok", ++tap_count); \
		printf(__VA_ARGS__);                                      \
		printf("\n");                                             \
		if (!tap_ok_) {                                           \
			tap_failed++;                                     \
			printf("#   failed at %s:%d: %s\n", __FILE__,     \
			       __LINE__, #cond);                          \
		}                                                         \
		fflush(stdout);                                           \
	} while (0)

/* CHECK_RET: compare a DAT_RETURN's type (DAT_GET_TYPE) to an expected one. */
#define CHECK_RET(expr, expected, ...)                                    \
	do {                                                              \
		unsigned tap_r_ = (unsigned)(expr);                       \
		CHECK(DAT_GET_TYPE(tap_r_) == DAT_GET_TYPE(expected),     \
		      __VA_ARGS__);                                       \
		if (DAT_GET_TYPE(tap_r_) != DAT_GET_TYPE(expected))       \
			printf("#   got 0x%08x, want type 0x%08x\n",      \
			       tap_r_, (unsigned)DAT_GET_TYPE(expected)); \
	} while (0)

#define BAIL(...)                                                         \
	do {                                                              \
		printf("Bail out! ");                                     \
		printf(__VA_ARGS__);                                      \
		printf("\n");                                             \
		exit(1);                                                  \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
