/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What a fuzz target does when an invariant breaks: say which, then
 * abort, so libFuzzer keeps the input as a crash file (a reproducer). */
#ifndef IW_FUZZ_CHECK_H
#define IW_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                             \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s: ",  \
				__FILE__, __LINE__, #cond);               \
			fprintf(stderr, __VA_ARGS__);                     \
			fputc('\n', stderr);                              \
			abort();                                          \
		}                                                         \
	} while (0)

/* Whether the comma-separated list in $FUZZ_ALLOW names id (a string
 * literal; the answer is cached so the fuzzer does not learn the ids). */
static inline int fuzz_allowed(const char *id)
{
	static const char *cached_id;
	static int cached;
	const char *a, *p;
	size_t n;

	if (id == cached_id)
		return cached;
	a = getenv("FUZZ_ALLOW");
	n = strlen(id);
	cached_id = id;
	cached = 0;
	for (p = a; p && (p = strstr(p, id)) != NULL; p += n)
		if ((p == a || p[-1] == ',') && (p[n] == ',' || !p[n]))
			cached = 1;
	return cached;
}

/* The check of an engine bug already found (test/fuzz/known): with id
 * in $FUZZ_ALLOW (run.sh sets it while fuzzing) an input showing it is
 * let through, so a long run can look past a bug already reported. */
#define FUZZ_CHECK_KNOWN(id, cond, ...)                                   \
	do {                                                              \
		if (!(cond) && !fuzz_allowed(id))                         \
			FUZZ_CHECK(cond, "[known finding " id "] "        \
				   __VA_ARGS__);                          \
	} while (0)

/* The libFuzzer entry points (declared for -Wmissing-prototypes). */
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
