/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The per-connection object allocator (iw_slab.c): objects zeroed, apart
 * and aligned, reused, their chunks given back once empty (one spare kept
 * per size), sizes past its caches and past its largest object served,
 * and two threads making and freeing objects at once (ThreadSanitizer
 * checks the locking). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iw_slab.h"
#include "tap.h"

#define QP_LIKE   2736	/* the size of an engine QP today; any will do */
#define MANY      1000	/* several chunks of them */

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void test_apart_and_zeroed(void)
{
	static uint8_t *o[MANY];
	int zero = 1, aligned = 1, intact = 1, made = 1;

	for (int i = 0; i < MANY; i++) {
		o[i] = iw_slab_zalloc(QP_LIKE);
		if (!o[i]) {
			made = 0;
			break;
		}
		zero &= all_zero(o[i], QP_LIKE);
		aligned &= ((uintptr_t)o[i] % 16) == 0;
		memset(o[i], i & 0xff, QP_LIKE);
	}
	CHECK(made, "%d objects of %d bytes made", MANY, QP_LIKE);
	if (!made)
		return;
	CHECK(zero, "each comes zeroed");
	CHECK(aligned, "each is aligned to 16 bytes");
	for (int i = 0; i < MANY; i++)
		for (int k = 0; k < QP_LIKE; k++)
			if (o[i][k] != (uint8_t)(i & 0xff))
				intact = 0;
	CHECK(intact, "no object overlaps another (each kept its own pattern)");
	if (!iw_slab_direct())
		CHECK(iw_slab_chunks() >= 2, "they fill several chunks (%zu)",
		      iw_slab_chunks());
	/* Free every other one, then make them again: the freed ones come
	 * back zeroed although they were written. */
	for (int i = 0; i < MANY; i += 2)
		iw_slab_free(o[i], QP_LIKE);
	zero = 1;
	for (int i = 0; i < MANY; i += 2) {
		o[i] = iw_slab_zalloc(QP_LIKE);
		zero &= o[i] && all_zero(o[i], QP_LIKE);
	}
	CHECK(zero, "a reused object comes zeroed");
	intact = 1;
	for (int i = 1; i < MANY; i += 2)
		for (int k = 0; k < QP_LIKE; k++)
			if (o[i][k] != (uint8_t)(i & 0xff))
				intact = 0;
	CHECK(intact, "reusing freed objects left the live ones alone");
	for (int i = 0; i < MANY; i++)
		iw_slab_free(o[i], QP_LIKE);
}

static void test_chunks_given_back(void)
{
	static void *o[MANY];
	size_t before = iw_slab_chunks(), peak;

	for (int i = 0; i < MANY; i++)
		o[i] = iw_slab_zalloc(1376);
	peak = iw_slab_chunks();
	for (int i = 0; i < MANY; i++)
		iw_slab_free(o[i], 1376);
	if (iw_slab_direct()) {
		CHECK(peak == 0 && iw_slab_chunks() == 0,
		      "under a memory checker no chunk is mapped");
		return;
	}
	CHECK(peak > before + 1, "%d objects took chunks (%zu -> %zu)", MANY,
	      before, peak);
	CHECK(iw_slab_chunks() <= before + 1,
	      "once all are freed one chunk stays at most (%zu, had %zu)",
	      iw_slab_chunks(), before);
	/* The spare gave back what it had faulted in past its first
	 * pages: made again, every object comes zeroed and apart. */
	{
		int zero = 1, intact = 1;

		for (int i = 0; i < MANY; i++) {
			o[i] = iw_slab_zalloc(1376);
			zero &= o[i] && all_zero(o[i], 1376);
			if (o[i])
				memset(o[i], i & 0xff, 1376);
		}
		for (int i = 0; i < MANY; i++)
			intact &= o[i] && ((uint8_t *)o[i])[0] ==
					  (uint8_t)(i & 0xff) &&
				  ((uint8_t *)o[i])[1375] == (uint8_t)(i & 0xff);
		CHECK(zero && intact, "made again after all went: each "
		      "zeroed, none overlapping");
		for (int i = 0; i < MANY; i++)
			iw_slab_free(o[i], 1376);
	}
	/* Made and freed over and over: the spare serves it. */
	peak = iw_slab_chunks();
	for (int i = 0; i < 1000; i++)
		iw_slab_free(iw_slab_zalloc(1376), 1376);
	CHECK(iw_slab_chunks() == peak, "a cycle of make and free maps "
	      "nothing (%zu chunks, had %zu)", iw_slab_chunks(), peak);
}

/* A spare chunk used deep, then shallow, then deep again: what its first
 * life wrote must not come back in the third (a spare once forgot it). */
#define SPARE_SIZE 1232		/* a size no other test uses */
#define DEEP       10		/* within the spare's first 16 KiB */

static int lives_zeroed(int n)
{
	void *o[DEEP];
	int zero = 1;

	for (int i = 0; i < n; i++) {
		o[i] = iw_slab_zalloc(SPARE_SIZE);
		zero &= o[i] && all_zero(o[i], SPARE_SIZE);
		if (o[i])
			memset(o[i], 0xa5, SPARE_SIZE);
	}
	for (int i = 0; i < n; i++)
		iw_slab_free(o[i], SPARE_SIZE);
	return zero;
}

static void test_spare_lives(void)
{
	int a = lives_zeroed(DEEP), b = lives_zeroed(3), c = lives_zeroed(DEEP);

	CHECK(a && b && c, "a spare chunk used deep, shallow, then deep "
	      "again: every object zeroed (%d %d %d)", a, b, c);
}

#define SIZES 100	/* more than the slab's caches (64) */

static size_t odd_size(int i)
{
	return 32 + 48 * (size_t)i;
}

static void test_odd_sizes(void)
{
	void *big = iw_slab_zalloc(1u << 20), *tiny = iw_slab_zalloc(0);
	void *o[SIZES];
	int ok = 1, intact = 1;

	CHECK(big && all_zero(big, 1u << 20), "an object past the largest "
	      "a chunk serves comes zeroed (from calloc)");
	CHECK(tiny != NULL, "size 0 gives an object");
	iw_slab_free(big, 1u << 20);
	iw_slab_free(tiny, 0);
	iw_slab_free(NULL, 64);
	/* More sizes than there are caches: the rest go to calloc. */
	for (int i = 0; i < SIZES; i++) {
		o[i] = iw_slab_zalloc(odd_size(i));
		ok &= o[i] && all_zero(o[i], odd_size(i));
		if (o[i])
			memset(o[i], i, odd_size(i));
	}
	CHECK(ok, "%d sizes, more than the caches: each object zeroed", SIZES);
	for (int i = 0; i < SIZES; i++)
		intact &= o[i] && ((uint8_t *)o[i])[odd_size(i) - 1] == (uint8_t)i;
	CHECK(intact, "...and apart");
	for (int i = 0; i < SIZES; i++)
		iw_slab_free(o[i], odd_size(i));
}

#define ROUNDS 20000

static void *churn(void *arg)
{
	size_t size = (size_t)(uintptr_t)arg;
	void *keep[64] = { 0 };
	uintptr_t bad = 0;

	for (int i = 0; i < ROUNDS; i++) {
		int k = i % 64;

		if (keep[k]) {
			if (*(size_t *)keep[k] != size)
				bad++;
			iw_slab_free(keep[k], size);
		}
		keep[k] = iw_slab_zalloc(size);
		if (!keep[k] || !all_zero(keep[k], size))
			bad++;
		else
			*(size_t *)keep[k] = size;
	}
	for (int k = 0; k < 64; k++)
		iw_slab_free(keep[k], size);
	return (void *)bad;
}

static void test_threads(void)
{
	pthread_t t[2];
	void *bad[2] = { (void *)1, (void *)1 };

	pthread_create(&t[0], NULL, churn, (void *)(uintptr_t)QP_LIKE);
	pthread_create(&t[1], NULL, churn, (void *)(uintptr_t)QP_LIKE);
	pthread_join(t[0], &bad[0]);
	pthread_join(t[1], &bad[1]);
	CHECK(!bad[0] && !bad[1], "two threads making and freeing objects "
	      "of one size: each got its own, zeroed (%lu, %lu bad)",
	      (unsigned long)(uintptr_t)bad[0],
	      (unsigned long)(uintptr_t)bad[1]);
}

int main(void)
{
	test_apart_and_zeroed();
	test_chunks_given_back();
	test_spare_lives();
	test_odd_sizes();
	test_threads();
	return tap_done();
}
