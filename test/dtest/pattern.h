/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Data patterns shared by iwdtest and bench/tcp_baseline.
 *
 * A pattern is an endless stream of 64-bit words derived from a seed.  A
 * sender fills one source buffer once per test and sends transfer i from
 * word offset pat_woff(i), so every iteration carries different bytes
 * without regenerating them; the receiver recomputes the stream to check.
 * That keeps validation of every transfer cheap on the sending side. */
#ifndef IWDTEST_PATTERN_H
#define IWDTEST_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Number of distinct start offsets (a prime, so that slot reuse in a ring of
 * any power-of-two size never sees the same offset twice in a row). */
#ifndef PAT_ROT
#define PAT_ROT 61u
#endif
/* Extra bytes a source buffer needs beyond the largest transfer. */
#define PAT_SLACK ((size_t)PAT_ROT * 8u)

static inline uint64_t pat_word(uint64_t seed, uint64_t j)
{
	/* splitmix64 finaliser: cheap, and neighbouring words differ. */
	uint64_t x = seed + (j + 1) * 0x9E3779B97F4A7C15ull;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Word offset at which iteration i starts. */
static inline uint64_t pat_woff(uint64_t i)
{
	return i % PAT_ROT;
}

static inline void pat_fill(void *buf, size_t len, uint64_t seed, uint64_t woff)
{
	unsigned char *p = buf;
	size_t n = len / 8, k;

	for (k = 0; k < n; k++) {
		uint64_t w = pat_word(seed, woff + k);
		memcpy(p + 8 * k, &w, 8);
	}
	if (len % 8) {
		uint64_t w = pat_word(seed, woff + n);
		memcpy(p + 8 * n, &w, len % 8);
	}
}

/* Returns the index of the first wrong byte, or -1 when buf matches. */
static inline long pat_check(const void *buf, size_t len, uint64_t seed, uint64_t woff)
{
	const unsigned char *p = buf;
	size_t n = len / 8, k;

	for (k = 0; k < n; k++) {
		uint64_t w = pat_word(seed, woff + k), got;
		memcpy(&got, p + 8 * k, 8);
		if (got != w)
			return (long)(8 * k);
	}
	if (len % 8) {
		uint64_t w = pat_word(seed, woff + n);
		if (memcmp(p + 8 * n, &w, len % 8))
			return (long)(8 * n);
	}
	return -1;
}

#endif
