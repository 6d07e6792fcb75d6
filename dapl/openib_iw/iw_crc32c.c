/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CRC32c for MPA (RFC 5044; polynomial from RFC 3385).
 *
 * Internally every routine works on the raw CRC register ("state"): the
 * public functions invert on the way in and on the way out, which is what
 * makes chaining work (the finished CRC of a prefix, inverted, is the
 * register after that prefix).
 *
 * Two implementations:
 *  - portable: slicing-by-8, eight 256-entry tables, 8 bytes per step;
 *  - x86-64 SSE4.2: the crc32 instruction, 8 bytes per instruction.  The
 *    instruction has a latency of about 3 cycles but issues every cycle,
 *    so large buffers are cut into blocks of three streams that run
 *    interleaved; the three partial CRCs are then merged with a "shift by
 *    STREAM_LEN zero bytes" operator (CRC is linear over GF(2)), applied
 *    through four 256-entry tables.
 *  - with ISA-L (Debian libisal, found by configure): its crc32_iscsi,
 *    folded with carry-less multiplication, for buffers of ISAL_MIN bytes
 *    and more; below that our instruction loop is faster (no setup).
 */
#include "iw_crc32c.h"

#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>
#ifdef HAVE_ISAL
#include <isa-l/crc.h>
#endif

#if defined(__x86_64__)
#include <nmmintrin.h>
#define IW_CRC_HAVE_X86 1
#else
#define IW_CRC_HAVE_X86 0
#endif

/* x^32 + x^28 + ... Castagnoli polynomial, bit-reflected. */
#define CRC32C_POLY_REFLECTED 0x82F63B78u

/* Bytes per stream in the interleaved fast path (multiple of 8). */
#define STREAM_LEN 512u

typedef uint32_t (*crc_update_fn)(uint32_t state, const uint8_t *p,
				  size_t len);

static uint32_t slice_tab[8][256];	/* slice_tab[k][b]: byte b then k
					 * zero bytes */
static uint32_t shift_tab[4][256];	/* register times x^(8*STREAM_LEN) */
static crc_update_fn best_update;
static const char *best_name = "slicing-by-8";
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* Little-endian loads from any alignment, whatever the host byte order:
 * the reflected CRC consumes the least significant byte first. */
static inline uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint32_t sw_byte(uint32_t state, uint8_t b)
{
	return slice_tab[0][(state ^ b) & 0xFF] ^ (state >> 8);
}

static uint32_t sw_update(uint32_t state, const uint8_t *p, size_t len)
{
	while (len >= 8) {
		uint32_t lo = state ^ load_le32(p);
		uint32_t hi = load_le32(p + 4);

		state = slice_tab[7][lo & 0xFF] ^
			slice_tab[6][(lo >> 8) & 0xFF] ^
			slice_tab[5][(lo >> 16) & 0xFF] ^
			slice_tab[4][lo >> 24] ^
			slice_tab[3][hi & 0xFF] ^
			slice_tab[2][(hi >> 8) & 0xFF] ^
			slice_tab[1][(hi >> 16) & 0xFF] ^
			slice_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		state = sw_byte(state, *p++);
	return state;
}

static void build_slice_tables(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		slice_tab[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			slice_tab[t][i] = (slice_tab[t - 1][i] >> 8) ^
				slice_tab[0][slice_tab[t - 1][i] & 0xFF];
}

/* The register after STREAM_LEN zero bytes is a linear function of the
 * register before: tabulate it per byte of the input register. */
static void build_shift_tables(void)
{
	uint32_t basis[32];

	for (int bit = 0; bit < 32; bit++) {
		uint32_t s = 1u << bit;

		for (unsigned n = 0; n < STREAM_LEN; n++)
			s = sw_byte(s, 0);
		basis[bit] = s;
	}
	for (int k = 0; k < 4; k++)
		for (unsigned b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int j = 0; j < 8; j++)
				if (b & (1u << j))
					v ^= basis[8 * k + j];
			shift_tab[k][b] = v;
		}
}

static inline uint32_t shift_stream(uint32_t s)
{
	return shift_tab[0][s & 0xFF] ^ shift_tab[1][(s >> 8) & 0xFF] ^
	       shift_tab[2][(s >> 16) & 0xFF] ^ shift_tab[3][s >> 24];
}

#if IW_CRC_HAVE_X86
static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));	/* x86 is little endian */
	return v;
}

__attribute__((target("sse4.2")))
static uint32_t hw_three_streams(uint32_t state, const uint8_t *p)
{
	uint64_t a = state, b = 0, c = 0;

	for (unsigned i = 0; i < STREAM_LEN; i += 8) {
		a = _mm_crc32_u64(a, load64(p + i));
		b = _mm_crc32_u64(b, load64(p + STREAM_LEN + i));
		c = _mm_crc32_u64(c, load64(p + 2 * STREAM_LEN + i));
	}
	/* crc(A|B|C) = shift(shift(crc(A)) ^ crc0(B)) ^ crc0(C) */
	return shift_stream(shift_stream((uint32_t)a) ^ (uint32_t)b) ^
	       (uint32_t)c;
}

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t state, const uint8_t *p, size_t len)
{
	uint64_t s;

	while (len >= 3 * STREAM_LEN) {
		state = hw_three_streams(state, p);
		p += 3 * STREAM_LEN;
		len -= 3 * STREAM_LEN;
	}
	s = state;
	while (len >= 8) {
		s = _mm_crc32_u64(s, load64(p));
		p += 8;
		len -= 8;
	}
	state = (uint32_t)s;
	while (len--)
		state = _mm_crc32_u8(state, *p++);
	return state;
}

static int cpu_has_sse42(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2");
}
#endif

#if IW_CRC_HAVE_X86 && defined(HAVE_ISAL)
/* Measured on the CI machine kind: ISA-L wins from a few hundred bytes
 * on (2-2.7x at 4 KiB and above), our loop below. */
#define ISAL_MIN 256u

static uint32_t isal_update(uint32_t state, const uint8_t *p, size_t len)
{
	if (len < ISAL_MIN)
		return hw_update(state, p, len);
	while (len) {
		size_t n = len < (size_t)INT_MAX ? len : (size_t)INT_MAX & ~7u;

		/* crc32_iscsi works on the raw register, as we do. */
		state = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)n,
				    state);
		p += n;
		len -= n;
	}
	return state;
}
#endif

static void crc_init(void)
{
	build_slice_tables();
	build_shift_tables();
	best_update = sw_update;
#if IW_CRC_HAVE_X86
	if (cpu_has_sse42()) {
		best_update = hw_update;
		best_name = "sse4.2";
#ifdef HAVE_ISAL
		best_update = isal_update;
		best_name = "isa-l (sse4.2 below 256 bytes)";
#endif
	}
#endif
}

static crc_update_fn crc_impl(void)
{
	pthread_once(&crc_once, crc_init);
	return best_update;
}

uint32_t iw_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_impl()(~crc, buf, len);
}

uint32_t iw_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt)
{
	crc_update_fn update = crc_impl();
	uint32_t state = ~crc;

	for (int i = 0; i < iovcnt; i++)
		state = update(state, iov[i].iov_base, iov[i].iov_len);
	return ~state;
}

/* Copy in chunks small enough to stay in L1, and CRC each chunk from the
 * destination right after copying it: one pass over the source, and the
 * CRC covers exactly the bytes now in dst, whatever happens to src
 * meanwhile. */
#define COPY_CHUNK (4u * 3u * STREAM_LEN)

/* of_src: the CRC covers the source before the copy, else the
 * destination after it. */
static uint32_t copy_crc(uint32_t crc, void *dst, const void *src,
			 size_t len, int of_src)
{
	crc_update_fn update = crc_impl();
	uint32_t state = ~crc;
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (len) {
		size_t n = len < COPY_CHUNK ? len : COPY_CHUNK;

		if (of_src)
			state = update(state, s, n);
		memcpy(d, s, n);
		if (!of_src)
			state = update(state, d, n);
		d += n;
		s += n;
		len -= n;
	}
	return ~state;
}

uint32_t iw_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	return copy_crc(crc, dst, src, len, 0);
}

/* The same, but the CRC covers the source (a private buffer the bytes
 * were received into) before they go to their destination. */
uint32_t iw_crc32c_copy_src(uint32_t crc, void *dst, const void *src,
			    size_t len)
{
	return copy_crc(crc, dst, src, len, 1);
}

uint32_t iw_crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~sw_update(~crc, buf, len);
}

int iw_crc32c_hw_available(void)
{
	return crc_impl() != sw_update;
}

const char *iw_crc32c_impl_name(void)
{
	crc_impl();
	return best_name;
}

uint32_t iw_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return iw_crc32c(crc, buf, len);
}
