/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Ordered placement; see iw_place.h. */
#include "iw_place.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

/* Forward 16-byte stores only: x86 makes stores visible in program order,
 * so the destination fills from low to high addresses.  The last store may
 * overlap the one before it (rewriting equal bytes), which keeps short
 * tails to one instruction. */
static void copy_forward(uint8_t *d, const uint8_t *s, size_t len)
{
	size_t i = 0;

	for (; i + 64 <= len; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));

		_mm_storeu_si128((__m128i *)(d + i), a);
		_mm_storeu_si128((__m128i *)(d + i + 16), b);
		_mm_storeu_si128((__m128i *)(d + i + 32), c);
		_mm_storeu_si128((__m128i *)(d + i + 48), e);
	}
	for (; i + 16 <= len; i += 16)
		_mm_storeu_si128((__m128i *)(d + i),
				 _mm_loadu_si128((const __m128i *)(s + i)));
	if (i == len)
		return;
	if (len >= 16) {
		_mm_storeu_si128((__m128i *)(d + len - 16),
				 _mm_loadu_si128((const __m128i *)(s + len - 16)));
		return;
	}
	/* Under 16 bytes: 8, 4, 2, 1, low addresses first. */
	if (len - i >= 8) {
		uint64_t v;

		memcpy(&v, s + i, 8);
		memcpy(d + i, &v, 8);
		i += 8;
	}
	if (len - i >= 4) {
		uint32_t v;

		memcpy(&v, s + i, 4);
		memcpy(d + i, &v, 4);
		i += 4;
	}
	for (; i < len; i++)
		d[i] = s[i];
}

/* Beyond this, the bulk goes through memcpy (much faster than 16-byte
 * stores on CPUs with wide or string-instruction copies), then an sfence
 * (memcpy may use non-temporal stores, which x86 does not order), then the
 * last bytes forward: nothing of the tail is visible before the bulk. */
#define PLACE_TAIL 64
/* Up to 8 KiB (the slot sizes of MPI's fast path) all goes forward. */
#define PLACE_BULK_MIN (8192 + 1)

void iw_place_ordered(void *dst, const void *src, size_t len)
{
	size_t head;

	if (len < PLACE_BULK_MIN) {
		copy_forward(dst, src, len);
		return;
	}
	head = len - PLACE_TAIL;
	memcpy(dst, src, head);
	_mm_sfence();
	copy_forward((uint8_t *)dst + head, (const uint8_t *)src + head,
		     PLACE_TAIL);
}
#else
/* Weakly ordered CPUs: everything but the last 8 bytes in any order, then
 * a release fence, then the tail. */
void iw_place_ordered(void *dst, const void *src, size_t len)
{
	size_t head = len > 8 ? len - 8 : 0;

	memcpy(dst, src, head);
	atomic_thread_fence(memory_order_release);
	memcpy((char *)dst + head, (const char *)src + head, len - head);
}
#endif

void iw_place_fence(void)
{
	atomic_thread_fence(memory_order_release);
}
