/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CRC32c: published test vectors, both implementations against a bitwise
 * reference written from the definition, chaining, gather lists, and an
 * MPA FPDU checked byte for byte. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iw_crc32c.h"
#include "iw_wire.h"
#include "tap.h"

/* Straight from the definition (RFC 3385 polynomial, reflected, init and
 * final xor ~0), one bit at a time: slow and obviously right. */
static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

/* Deterministic xorshift, so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rng();
}

/* ------------------------------------------------ first use in threads */

#define NTHREADS 4
static uint8_t thread_buf[4096];
static uint32_t thread_out[NTHREADS];

static void *thread_main(void *arg)
{
	uint32_t *out = arg;

	*out = iw_crc32c(0, thread_buf, sizeof(thread_buf));
	return NULL;
}

/* The tables are built on first use: several threads racing to that first
 * use must all get the right answer. */
static void test_first_use_threads(void)
{
	pthread_t th[NTHREADS];
	int ok = 1;

	fill_random(thread_buf, sizeof(thread_buf));
	for (int i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, thread_main, &thread_out[i]))
			BAIL("pthread_create");
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NTHREADS; i++)
		ok &= thread_out[i] ==
		      ref_crc32c(0, thread_buf, sizeof(thread_buf));
	CHECK(ok, "%d threads racing to first use agree with the reference",
	      NTHREADS);
}

/* ------------------------------------------------------------ vectors */

static void check_vector(const char *name, const uint8_t *p, size_t n,
			 uint32_t want)
{
	CHECK(iw_crc32c(0, p, n) == want, "%s: 0x%08X (fast)", name, want);
	CHECK(iw_crc32c_portable(0, p, n) == want, "%s: 0x%08X (portable)",
	      name, want);
	CHECK(ref_crc32c(0, p, n) == want, "%s: 0x%08X (bitwise reference)",
	      name, want);
}

/* RFC 3720 B.4 (repeated in RFC 7143): the CRC bytes shown there, e.g.
 * "aa 36 91 8a" for 32 zero bytes, are the value's bytes least
 * significant first. */
static void test_rfc3720_vectors(void)
{
	static const uint8_t iscsi_read[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
		0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t zeros_wire[4] = { 0xaa, 0x36, 0x91, 0x8a };
	uint8_t buf[32], wire[4];

	memset(buf, 0, sizeof(buf));
	check_vector("32 bytes of zeros", buf, 32, 0x8A9136AAu);
	iw_fpdu_put_crc(wire, iw_crc32c(0, buf, 32));
	CHECK(memcmp(wire, zeros_wire, 4) == 0,
	      "32 zeros: wire bytes aa 36 91 8a as in RFC 3720 B.4");
	CHECK(iw_fpdu_get_crc(zeros_wire) == 0x8A9136AAu,
	      "iw_fpdu_get_crc reads the CRC field back");
	memset(buf, 0xFF, sizeof(buf));
	check_vector("32 bytes of 0xFF", buf, 32, 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	check_vector("incrementing 0..31", buf, 32, 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	check_vector("decrementing 31..0", buf, 32, 0x113FDB5Cu);
	check_vector("iSCSI read command PDU", iscsi_read, 48, 0xD9963A56u);
	check_vector("\"123456789\"", (const uint8_t *)"123456789", 9,
		     0xE3069283u);
	CHECK(iw_crc32c(0, NULL, 0) == 0 && iw_crc32c_portable(0, NULL, 0) == 0,
	      "empty input gives 0 and accepts NULL");
	CHECK(iw_crc32c(0x12345678u, NULL, 0) == 0x12345678u,
	      "empty input leaves a running CRC unchanged");
}

/* ------------------------------------------------ every length/offset */

#define MAXLEN 4096
static uint8_t big[MAXLEN + 8];

static void test_lengths_alignments(void)
{
	unsigned bad_fast = 0, bad_ref = 0;

	fill_random(big, sizeof(big));
	for (size_t align = 0; align < 8; align++) {
		for (size_t len = 0; len <= MAXLEN; len++) {
			const uint8_t *p = big + align;
			uint32_t port = iw_crc32c_portable(0, p, len);

			bad_fast += iw_crc32c(0, p, len) != port;
			bad_fast += iw_crc32c_hw(0, p, len) != port;
			/* The bitwise reference is slow: sample it. */
			if (align == (len & 7) || len < 64)
				bad_ref += ref_crc32c(0, p, len) != port;
		}
	}
	CHECK(bad_fast == 0, "fast == portable, lengths 0..%d x alignments "
	      "0..7 (%u mismatches)", MAXLEN, bad_fast);
	CHECK(bad_ref == 0, "portable == bitwise reference on the same "
	      "buffers (%u mismatches)", bad_ref);
	printf("# crc32c instruction %s\n",
	       iw_crc32c_hw_available() ? "in use" : "not available");
}

static void test_large_buffer(void)
{
	size_t n = (1u << 20) + 13;
	uint8_t *p = malloc(n);

	if (!p)
		BAIL("malloc");
	fill_random(p, n);
	CHECK(iw_crc32c(0, p, n) == iw_crc32c_portable(0, p, n),
	      "1 MiB + 13: fast == portable (interleaved streams)");
	CHECK(iw_crc32c(0, p + 3, 4999) == ref_crc32c(0, p + 3, 4999),
	      "4999 bytes at offset 3: fast == reference");
	free(p);
}

/* ------------------------------------------------------------ chaining */

static void test_incremental(void)
{
	enum { N = 2000 };
	static uint8_t buf[N];
	unsigned bad2 = 0, bad3 = 0, badp = 0;
	uint32_t whole;

	fill_random(buf, N);
	whole = iw_crc32c(0, buf, N);
	for (size_t cut = 0; cut <= N; cut++) {
		bad2 += iw_crc32c(iw_crc32c(0, buf, cut), buf + cut,
				  N - cut) != whole;
		badp += iw_crc32c_portable(iw_crc32c_portable(0, buf, cut),
					   buf + cut, N - cut) != whole;
	}
	for (size_t a = 0; a <= N; a += 37)
		for (size_t b = a; b <= N; b += 53) {
			uint32_t c = iw_crc32c(0, buf, a);

			c = iw_crc32c(c, buf + a, b - a);
			bad3 += iw_crc32c(c, buf + b, N - b) != whole;
		}
	CHECK(bad2 == 0, "two pieces == one shot at every cut of %d bytes", N);
	CHECK(badp == 0, "portable: two pieces == one shot at every cut");
	CHECK(bad3 == 0, "three pieces == one shot");
}

static void test_iov(void)
{
	uint8_t buf[3000];
	struct iovec iov[5];
	uint32_t whole;

	fill_random(buf, sizeof(buf));
	whole = iw_crc32c(0, buf, sizeof(buf));
	iov[0] = (struct iovec){ buf, 2 };
	iov[1] = (struct iovec){ buf + 2, 0 };
	iov[2] = (struct iovec){ buf + 2, 1700 };
	iov[3] = (struct iovec){ buf + 1702, 1 };
	iov[4] = (struct iovec){ buf + 1703, sizeof(buf) - 1703 };
	CHECK(iw_crc32c_iov(0, iov, 5) == whole,
	      "iovec of 5 (one empty) == one shot");
	CHECK(iw_crc32c_iov(0, iov, 0) == 0, "empty iovec gives 0");
	CHECK(iw_crc32c_iov(iw_crc32c(0, buf, 2), iov + 1, 4) == whole,
	      "iovec chains after a plain call");
}

/* ------------------------------------------------------------ an FPDU */

/* A Send of "hello" as one FPDU, laid out by hand from RFC 5044 and
 * RFC 5041/5040: length 23 (18-byte untagged header + 5), 3 pad bytes,
 * CRC over length + ULPDU + pad.  The expected CRC was computed by an
 * independent bitwise implementation. */
static void test_mpa_fpdu(void)
{
	static const uint8_t want[32] = {
		0x00, 0x17,			/* ULPDU length 23 */
		0x41, 0x43,			/* L, DV 1, RV 1, Send */
		0x00, 0x00, 0x00, 0x00,		/* RsvdULP / inval STag */
		0x00, 0x00, 0x00, 0x00,		/* QN 0 */
		0x00, 0x00, 0x00, 0x01,		/* MSN 1 */
		0x00, 0x00, 0x00, 0x00,		/* MO 0 */
		'h', 'e', 'l', 'l', 'o',
		0x00, 0x00, 0x00,		/* pad */
		0xb9, 0x90, 0xb1, 0x0c,		/* CRC 0x0CB190B9, LE */
	};
	uint8_t fpdu[32];
	struct iw_untagged_hdr h;
	uint16_t len_be = iw_be16(23);
	uint32_t crc;

	memset(fpdu, 0, sizeof(fpdu));
	h.ctrl_be = iw_be16(iw_ctrl_make(0, 1, IW_OP_SEND));
	h.inval_stag_be = 0;
	h.qn_be = iw_be32(IW_QN_SEND);
	h.msn_be = iw_be32(1);
	h.mo_be = 0;
	memcpy(fpdu, &len_be, 2);
	memcpy(fpdu + 2, &h, sizeof(h));
	memcpy(fpdu + 20, "hello", 5);
	CHECK(iw_fpdu_pad(23) == 3 && iw_fpdu_len(23) == 32,
	      "FPDU of a 23-byte ULPDU: 3 pad bytes, 32 bytes in all");
	/* Chained the way the transmit path will do it. */
	crc = iw_crc32c(0, fpdu, 2);
	crc = iw_crc32c(crc, fpdu + 2, 23);
	crc = iw_crc32c(crc, fpdu + 25, iw_fpdu_pad(23));
	CHECK(crc == ref_crc32c(0, fpdu, 28),
	      "FPDU CRC chained == bitwise reference over length+ULPDU+pad");
	CHECK(crc == 0x0CB190B9u, "FPDU CRC is 0x0CB190B9");
	iw_fpdu_put_crc(fpdu + 28, crc);
	CHECK(memcmp(fpdu, want, sizeof(want)) == 0,
	      "FPDU bytes match the hand-made frame");
	CHECK(iw_crc32c(0, fpdu, sizeof(fpdu)) == 0x48674BC7u,
	      "CRC over the FPDU including its CRC is the CRC32c residue");
	fpdu[21] ^= 0x01;
	CHECK(iw_crc32c(0, fpdu, 28) != iw_fpdu_get_crc(fpdu + 28),
	      "a flipped payload bit is detected");
}

int main(void)
{
	test_first_use_threads();
	test_rfc3720_vectors();
	test_lengths_alignments();
	test_large_buffer();
	test_incremental();
	test_iov();
	test_mpa_fpdu();
	return tap_done();
}
