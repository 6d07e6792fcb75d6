/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA Request/Reply: building, incremental parsing, every error path,
 * reply checks, negotiation, and the wire layouts the connection manager
 * relies on.  Truncation and garbage tests parse from exact-size heap
 * copies so that AddressSanitizer catches any read past the given length. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iw_mpa.h"
#include "iw_wire.h"
#include "tap.h"

static uint8_t pd512[IW_MPA_MAX_PRIVATE_DATA + 1];

/* Parse from a heap copy of exactly len bytes (status only). */
static int parse_exact(const uint8_t *src, size_t len, enum iw_mpa_expect e,
		       size_t *need)
{
	struct iw_mpa_frame f;
	uint8_t *p = malloc(len ? len : 1);
	int rc;

	if (!p)
		BAIL("malloc");
	memcpy(p, src, len);
	rc = iw_mpa_parse(len ? p : NULL, len, e, &f, need);
	if (rc == IW_MPA_OK && (f.frame_len > len || f.pdata < p ||
				f.pdata + f.pdata_len > p + len))
		rc = 99;	/* a result pointing outside the buffer */
	free(p);
	return rc;
}

static struct iw_mpa_params req_v2_p2p(void)
{
	struct iw_mpa_params p = {
		.rev = 2, .crc = 1, .p2p = 1, .ird = 16, .ord = 8,
		.rtr = IW_RTR_WRITE | IW_RTR_READ,
		.pdata = "hello", .pdata_len = 5,
	};
	return p;
}

static size_t build(uint8_t *buf, int is_reply, const struct iw_mpa_params *p)
{
	ssize_t n = iw_mpa_build(buf, IW_MPA_MAX_RR_LEN, is_reply, p);

	if (n < 0)
		BAIL("iw_mpa_build failed: %zd", n);
	return (size_t)n;
}

/* ------------------------------------------------------------- build */

static void test_build_layout(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_params p = { .rev = 1 };
	struct iw_mpa_params v2 = req_v2_p2p();
	ssize_t n;

	n = iw_mpa_build(b, sizeof(b), 0, &p);
	CHECK(n == 20 && memcmp(b, "MPA ID Req Frame", 16) == 0 &&
	      b[16] == 0 && b[17] == 1 && b[18] == 0 && b[19] == 0,
	      "rev 1 request, no private data: 20 bytes, key, flags 0, rev 1");
	p.crc = 1;
	p.pdata = "abc";
	p.pdata_len = 3;
	n = iw_mpa_build(b, sizeof(b), 1, &p);
	CHECK(n == 23 && memcmp(b, "MPA ID Rep Frame", 16) == 0 &&
	      b[16] == IW_MPA_FLAG_CRC && b[19] == 3 &&
	      memcmp(b + 20, "abc", 3) == 0,
	      "rev 1 reply with CRC and 3 bytes: C flag, BE16 length 3");
	n = iw_mpa_build(b, sizeof(b), 0, &v2);
	CHECK(n == 29 && b[16] == (IW_MPA_FLAG_CRC | IW_MPA_FLAG_ENHANCED) &&
	      b[17] == 2 && b[18] == 0 && b[19] == 9,
	      "rev 2 request: enhanced flag 0x10, length counts the words");
	CHECK(b[20] == 0x80 && b[21] == 16 && b[22] == 0xC0 && b[23] == 8 &&
	      memcmp(b + 24, "hello", 5) == 0,
	      "rev 2 words: IRD 0x8010 (p2p), ORD 0xC008 (Write+Read RTR)");
	v2.rtr = IW_RTR_SEND;
	n = iw_mpa_build(b, sizeof(b), 1, &v2);
	CHECK(n == 29 && b[20] == 0xC0 && b[22] == 0x00,
	      "rev 2 reply choosing Send RTR: IRD word 0xC010");
	p.reject = 1;
	n = iw_mpa_build(b, sizeof(b), 1, &p);
	CHECK(n == 23 && (b[16] & IW_MPA_FLAG_REJECT), "reject sets R");
	CHECK(iw_mpa_frame_size(1, &p) == 23, "frame_size agrees with build");
}

static void test_build_errors(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_params p;

#define BUILD_ERR(field_set, reply, want, what)			\
	do {								\
		p = req_v2_p2p();					\
		field_set;						\
		CHECK(iw_mpa_build(b, sizeof(b), reply, &p) == (want),	\
		      "build refuses %s", what);			\
	} while (0)

	BUILD_ERR(p.rev = 0, 0, -EINVAL, "revision 0");
	BUILD_ERR(p.rev = 3, 0, -EINVAL, "revision 3");
	BUILD_ERR(p.ird = 0x4000, 0, -EINVAL, "IRD above 14 bits");
	BUILD_ERR(p.ord = 0x4000, 0, -EINVAL, "ORD above 14 bits");
	BUILD_ERR(p.rev = 1, 0, -EINVAL, "p2p/RTR in revision 1");
	BUILD_ERR(p.p2p = 0, 0, -EINVAL, "RTR bits without p2p");
	BUILD_ERR(p.rtr = 0, 0, -EINVAL, "a p2p request offering no RTR");
	BUILD_ERR(p.rtr = 0x8, 0, -EINVAL, "unknown RTR bits");
	BUILD_ERR((void)0, 1, -EINVAL, "an accepting reply with two RTRs");
	BUILD_ERR(p.rtr = 0, 1, -EINVAL, "an accepting p2p reply with no RTR");
	BUILD_ERR(p.reject = 1, 0, -EINVAL, "R in a request");
	BUILD_ERR(p.pdata = NULL, 0, -EINVAL, "NULL private data with a length");
#undef BUILD_ERR
	p = req_v2_p2p();
	CHECK(iw_mpa_build(b, sizeof(b), 0, &p) == 29,
	      "the unmodified p2p request builds (29 bytes)");
	CHECK(iw_mpa_build(b, 28, 0, &p) == -ENOBUFS,
	      "build: buffer one byte short gives -ENOBUFS");
	CHECK(iw_mpa_build(b, 29, 0, &p) == 29, "build: exact buffer is enough");
	p.reject = 1;
	p.rtr = 0;
	CHECK(iw_mpa_build(b, sizeof(b), 1, &p) == 29,
	      "a p2p reject may choose no RTR");
}

static void test_pdata_limits(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN + 8];
	struct iw_mpa_params p = { .rev = 1, .pdata = pd512 };
	struct iw_mpa_frame f;

	p.pdata_len = 512;
	CHECK(iw_mpa_build(b, sizeof(b), 0, &p) == 532,
	      "rev 1: 512 bytes of private data fit (532-byte frame)");
	CHECK(iw_mpa_parse(b, 532, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      f.pdata_len == 512 && memcmp(f.pdata, pd512, 512) == 0,
	      "rev 1: 512 bytes parse back intact");
	p.pdata_len = 513;
	CHECK(iw_mpa_build(b, sizeof(b), 0, &p) == -EMSGSIZE,
	      "rev 1: 513 bytes give -EMSGSIZE");
	p.rev = 2;
	p.pdata_len = 508;
	CHECK(iw_mpa_build(b, sizeof(b), 0, &p) == 532,
	      "rev 2: 508 bytes + 4 words fit");
	CHECK(iw_mpa_parse(b, 532, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      f.pdata_len == 508 && memcmp(f.pdata, pd512, 508) == 0,
	      "rev 2: 508 bytes parse back intact");
	p.pdata_len = 509;
	CHECK(iw_mpa_build(b, sizeof(b), 0, &p) == -EMSGSIZE,
	      "rev 2: 509 bytes give -EMSGSIZE");
}

/* -------------------------------------------------------- round trips */

static int same(const struct iw_mpa_params *p, int is_reply,
		const struct iw_mpa_frame *f, size_t n)
{
	int v2 = p->rev == 2;

	return f->is_reply == is_reply && f->rev == p->rev &&
	       f->crc == !!p->crc && f->reject == !!p->reject &&
	       f->enhanced == v2 && f->p2p == (v2 && p->p2p) &&
	       f->ird == (v2 ? p->ird : 0) && f->ord == (v2 ? p->ord : 0) &&
	       f->rtr == (v2 ? p->rtr : 0) && f->markers == 0 &&
	       f->pdata_len == p->pdata_len && f->frame_len == n &&
	       (p->pdata_len == 0 ||
		memcmp(f->pdata, p->pdata, p->pdata_len) == 0);
}

static void round_trip(const char *what, int is_reply,
		       const struct iw_mpa_params *p)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	size_t n = build(b, is_reply, p);
	int rc = iw_mpa_parse(b, n, is_reply ? IW_MPA_EXPECT_REP
					      : IW_MPA_EXPECT_REQ, &f, NULL);

	CHECK(rc == IW_MPA_OK && same(p, is_reply, &f, n), "round trip: %s",
	      what);
}

static void test_round_trips(void)
{
	struct iw_mpa_params p = { .rev = 1, .pdata = "private", .pdata_len = 7 };

	round_trip("rev 1 request", 0, &p);
	p.crc = 1;
	round_trip("rev 1 reply with CRC", 1, &p);
	p.reject = 1;
	round_trip("rev 1 reject", 1, &p);
	p = req_v2_p2p();
	round_trip("rev 2 p2p request", 0, &p);
	p.rtr = IW_RTR_READ;
	p.ird = IW_MPA_V2_IRD_ORD_MASK;
	p.ord = 0;
	round_trip("rev 2 p2p reply, Read RTR, IRD 0x3FFF", 1, &p);
	p.reject = 1;
	p.rtr = 0;
	round_trip("rev 2 p2p reject", 1, &p);
	p = (struct iw_mpa_params){ .rev = 2, .ird = 3, .ord = 5 };
	round_trip("rev 2 non-p2p request, no private data", 0, &p);
}

/* ------------------------------------------------------ parse errors */

static size_t patched(uint8_t *b, uint8_t flags, uint8_t rev, uint16_t pd)
{
	struct iw_mpa_params p = { .rev = 1, .pdata = pd512, .pdata_len = 40 };
	size_t n = build(b, 0, &p);

	b[16] = flags;
	b[17] = rev;
	b[18] = (uint8_t)(pd >> 8);
	b[19] = (uint8_t)pd;
	return n;
}

static void test_parse_errors(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	size_t need = 0;
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

	CHECK(iw_mpa_parse(http, sizeof(http) - 1, IW_MPA_EXPECT_ANY, &f,
			   NULL) == IW_MPA_ERR_BAD_KEY, "HTTP request: bad key");
	CHECK(iw_mpa_parse("G", 1, IW_MPA_EXPECT_ANY, &f, NULL) ==
	      IW_MPA_ERR_BAD_KEY, "bad key detected on the first byte");
	CHECK(iw_mpa_parse("MPA ID Rex Frame....", 20, IW_MPA_EXPECT_ANY, &f,
			   NULL) == IW_MPA_ERR_BAD_KEY, "\"Rex\" key rejected");
	CHECK(iw_mpa_parse("MPA ID Rep", 9, IW_MPA_EXPECT_REQ, &f, &need) ==
	      IW_MPA_NEED_MORE && need == 11,
	      "9 bytes: common key prefix, still undecided (need 11)");
	CHECK(iw_mpa_parse("MPA ID Rep", 10, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_WRONG_KEY, "reply key when a request is expected");
	CHECK(iw_mpa_parse("MPA ID Req", 10, IW_MPA_EXPECT_REP, &f, NULL) ==
	      IW_MPA_ERR_WRONG_KEY, "request key when a reply is expected");
	patched(b, IW_MPA_FLAG_MARKERS, 1, 40);
	CHECK(iw_mpa_parse(b, 20, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_MARKERS && strcmp(iw_mpa_strerror(IW_MPA_ERR_MARKERS),
				      "MPA markers are not supported") == 0,
	      "markers refused: \"MPA markers are not supported\"");
	patched(b, 0, 0, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_REVISION, "revision 0 refused");
	patched(b, 0, 3, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_REVISION, "revision 3 refused");
	patched(b, 0, 1, 513);
	CHECK(iw_mpa_parse(b, 20, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_PD_LEN, "length 513 refused from the header alone");
	patched(b, 0, 1, 0xFFFF);
	CHECK(iw_mpa_parse(b, 20, IW_MPA_EXPECT_REQ, &f, NULL) ==
	      IW_MPA_ERR_PD_LEN, "length 0xFFFF refused from the header alone");
	for (uint16_t pd = 0; pd < 4; pd++) {
		patched(b, IW_MPA_FLAG_ENHANCED, 2, pd);
		CHECK(iw_mpa_parse(b, 20 + pd, IW_MPA_EXPECT_REQ, &f, NULL) ==
		      IW_MPA_ERR_NO_WORDS,
		      "rev 2 enhanced with %u bytes: no room for IRD/ORD", pd);
	}
	CHECK(iw_mpa_parse(NULL, 5, IW_MPA_EXPECT_ANY, &f, NULL) ==
	      IW_MPA_ERR_INVAL, "NULL buffer with a length: invalid");
	CHECK(iw_mpa_parse(NULL, 0, IW_MPA_EXPECT_ANY, &f, &need) ==
	      IW_MPA_NEED_MORE && need == 20, "nothing yet: need 20");
}

static void test_parse_tolerance(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN + 16];
	struct iw_mpa_frame f;
	struct iw_mpa_params p = { .rev = 1, .crc = 1 };
	size_t n;

	patched(b, IW_MPA_FLAG_RESERVED | IW_MPA_FLAG_CRC, 1, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      f.flags == (IW_MPA_FLAG_RESERVED | IW_MPA_FLAG_CRC) && f.crc &&
	      f.pdata_len == 40, "reserved flag bits ignored, kept in flags");
	patched(b, IW_MPA_FLAG_REJECT, 1, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      !f.reject, "R in a request is not checked (RFC 5044)");
	patched(b, IW_MPA_FLAG_ENHANCED, 1, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      !f.enhanced && f.pdata_len == 40 && f.pdata == b + 20,
	      "0x10 in revision 1 is reserved: no IRD/ORD words taken");
	patched(b, 0, 2, 40);
	CHECK(iw_mpa_parse(b, 60, IW_MPA_EXPECT_REQ, &f, NULL) == IW_MPA_OK &&
	      !f.enhanced && f.pdata_len == 40 && f.ird == 0,
	      "rev 2 without the enhanced flag: plain private data");
	n = build(b, 1, &p);
	memset(b + n, 0xAB, 16);	/* the first FPDU right behind it */
	CHECK(iw_mpa_parse(b, n + 16, IW_MPA_EXPECT_ANY, &f, NULL) ==
	      IW_MPA_OK && f.frame_len == n && f.is_reply,
	      "bytes after the frame are left alone (frame_len %zu)", n);
}

/* ------------------------------------------------ partial frames */

/* Every proper prefix must say NEED_MORE (with the exact count once the
 * header is in), never an error, never a read past the prefix. */
static int all_prefixes_need_more(const uint8_t *b, size_t n,
				  enum iw_mpa_expect e)
{
	for (size_t len = 0; len < n; len++) {
		size_t need = 0;
		size_t want = len < 20 ? 20 - len : n - len;

		if (parse_exact(b, len, e, &need) != IW_MPA_NEED_MORE ||
		    need != want)
			return 0;
	}
	return parse_exact(b, n, e, NULL) == IW_MPA_OK;
}

static void test_truncations(void)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_params p = req_v2_p2p();
	size_t n;

	n = build(b, 0, &p);
	CHECK(all_prefixes_need_more(b, n, IW_MPA_EXPECT_REQ),
	      "rev 2 request: all %zu prefixes need more", n);
	p.rtr = IW_RTR_WRITE;
	p.pdata = pd512;
	p.pdata_len = 508;
	n = build(b, 1, &p);
	CHECK(all_prefixes_need_more(b, n, IW_MPA_EXPECT_REP),
	      "532-byte rev 2 reply: all prefixes need more");
	p = (struct iw_mpa_params){ .rev = 1, .reject = 1 };
	n = build(b, 1, &p);
	CHECK(all_prefixes_need_more(b, n, IW_MPA_EXPECT_ANY),
	      "20-byte rev 1 reject: all prefixes need more");
}

/* Bytes arriving one at a time into a growing buffer, as from a socket. */
static void test_byte_at_a_time(void)
{
	uint8_t src[IW_MPA_MAX_RR_LEN], acc[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_params p = req_v2_p2p();
	struct iw_mpa_frame f;
	size_t n, got = 0, calls = 0;
	int rc = IW_MPA_NEED_MORE;

	p.pdata = pd512;
	p.pdata_len = 100;
	n = build(src, 0, &p);
	while (rc == IW_MPA_NEED_MORE && got < n) {
		acc[got] = src[got];
		got++;
		calls++;
		rc = iw_mpa_parse(acc, got, IW_MPA_EXPECT_REQ, &f, NULL);
	}
	CHECK(rc == IW_MPA_OK && got == n && calls == n && same(&p, 0, &f, n),
	      "fed 1 byte at a time: complete exactly at byte %zu", n);
}

/* --------------------------------------------------------- garbage */

static uint64_t rs;
static uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 11);
}

/* One random buffer: pure noise, a good key then noise, or a good header
 * with random flags/revision/length. */
static size_t garbage(uint8_t *b)
{
	size_t len = rnd() % (IW_MPA_MAX_RR_LEN + 40);

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)rnd();
	switch (rnd() % 3) {
	case 0:
		break;
	case 1:
		memcpy(b, rnd() & 1 ? IW_MPA_KEY_REQ : IW_MPA_KEY_REP,
		       len < 16 ? len : 16);
		break;
	default:
		memcpy(b, rnd() & 1 ? IW_MPA_KEY_REQ : IW_MPA_KEY_REP,
		       len < 16 ? len : 16);
		if (len >= 20) {
			b[17] = (uint8_t)(rnd() % 4);
			b[18] = (uint8_t)(rnd() % 3);
		}
		break;
	}
	return len;
}

static uint64_t garbage_run(unsigned *bad, unsigned *ok, unsigned *more)
{
	uint8_t b[IW_MPA_MAX_RR_LEN + 40];
	uint64_t digest = 1469598103934665603ull;

	rs = 0x243F6A8885A308D3ull;
	*bad = *ok = *more = 0;
	for (int i = 0; i < 10000; i++) {
		size_t len = garbage(b), need = 0;
		int rc = parse_exact(b, len, IW_MPA_EXPECT_ANY, &need);

		if (rc == 99 || rc > IW_MPA_NEED_MORE || rc < IW_MPA_ERR_INVAL)
			(*bad)++;
		if (rc == IW_MPA_NEED_MORE &&
		    (need == 0 || len + need > IW_MPA_MAX_RR_LEN))
			(*bad)++;
		*ok += rc == IW_MPA_OK;
		*more += rc == IW_MPA_NEED_MORE;
		digest = (digest ^ (uint64_t)(rc + 100)) * 1099511628211ull;
	}
	return digest;
}

static void test_garbage(void)
{
	unsigned bad1, bad2, ok, more;
	uint64_t d1 = garbage_run(&bad1, &ok, &more);
	uint64_t d2 = garbage_run(&bad2, &ok, &more);

	printf("# garbage: %u parsed, %u incomplete, %u refused\n", ok, more,
	       10000 - ok - more);
	CHECK(ok > 100, "garbage reaches the parsed-frame path (%u times)", ok);

	CHECK(bad1 == 0, "10000 random buffers: only defined results, no "
	      "pointer outside the buffer (%u bad)", bad1);
	CHECK(d1 == d2 && bad2 == 0, "garbage run is deterministic "
	      "(digest %016llx)", (unsigned long long)d1);
}

/* ------------------------------------------------------ check_reply */

/* Build a reply from params, optionally patch its RTR bits, parse it and
 * check it against req. */
static int check_with(const struct iw_mpa_params *req,
		      const struct iw_mpa_params *rep, int force_rtr_bits)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	size_t n = build(b, 1, rep);

	if (force_rtr_bits >= 0) {
		b[20] = (uint8_t)((b[20] & 0xBF) |
				  (force_rtr_bits & IW_RTR_SEND ? 0x40 : 0));
		b[22] = (uint8_t)((b[22] & 0x3F) |
				  (force_rtr_bits & IW_RTR_WRITE ? 0x80 : 0) |
				  (force_rtr_bits & IW_RTR_READ ? 0x40 : 0));
	}
	if (iw_mpa_parse(b, n, IW_MPA_EXPECT_REP, &f, NULL) != IW_MPA_OK)
		return 1000;
	return iw_mpa_check_reply(req, &f);
}

static void test_check_reply(void)
{
	struct iw_mpa_params req = req_v2_p2p(), rep = req_v2_p2p();
	struct iw_mpa_params np = { .rev = 2, .ird = 4, .ord = 4 };
	struct iw_mpa_frame f;
	uint8_t b[IW_MPA_MAX_RR_LEN];

	rep.rtr = IW_RTR_WRITE;
	rep.ord = 16;
	CHECK(check_with(&req, &rep, -1) == IW_MPA_OK,
	      "check: p2p reply choosing an offered RTR is fine");
	CHECK(check_with(&req, &rep, IW_RTR_WRITE | IW_RTR_READ) ==
	      IW_MPA_ERR_RTR_MULTIPLE, "check: reply with two RTRs refused");
	CHECK(check_with(&req, &rep, IW_RTR_SEND) == IW_MPA_ERR_RTR_NOT_OFFERED,
	      "check: reply with an RTR not offered refused");
	CHECK(check_with(&req, &rep, 0) == IW_MPA_ERR_NO_RTR,
	      "check: p2p reply choosing no RTR refused");
	rep.ord = 17;
	CHECK(check_with(&req, &rep, -1) == IW_MPA_ERR_INSUFF_IRD,
	      "check: reply ORD 17 above our IRD 16 refused");
	CHECK(check_with(&req, &np, -1) == IW_MPA_ERR_P2P_MISMATCH,
	      "check: p2p request answered by a non-p2p reply refused");
	CHECK(check_with(&np, &np, IW_RTR_WRITE) == IW_MPA_ERR_RTR_NOT_OFFERED,
	      "check: non-p2p request, reply choosing an RTR refused");
	rep.ord = 4;
	rep.rtr = 0;
	rep.reject = 1;
	CHECK(check_with(&np, &rep, -1) == IW_MPA_OK,
	      "check: p2p reject to a non-p2p request passes (R decides)");
	rep.reject = 0;
	rep.p2p = 0;
	CHECK(check_with(&np, &rep, -1) == IW_MPA_OK,
	      "check: non-p2p exchange passes");
	build(b, 1, &rep);
	b[20] |= 0x80;	/* bare p2p flag, no RTR */
	CHECK(iw_mpa_parse(b, 29, IW_MPA_EXPECT_REP, &f, NULL) == IW_MPA_OK &&
	      iw_mpa_check_reply(&np, &f) == IW_MPA_OK,
	      "check: a bare p2p flag in the reply is tolerated");
	rep = (struct iw_mpa_params){ .rev = 1 };
	CHECK(check_with(&req, &rep, -1) == IW_MPA_OK,
	      "check: rev 1 reply to a rev 2 p2p request accepted (no RTR)");
	req = (struct iw_mpa_params){ .rev = 1 };
	CHECK(check_with(&req, &np, -1) == IW_MPA_ERR_REV_MISMATCH,
	      "check: rev 2 reply to a rev 1 request refused");
	build(b, 0, &req);
	iw_mpa_parse(b, 20, IW_MPA_EXPECT_REQ, &f, NULL);
	CHECK(iw_mpa_check_reply(&req, &f) == IW_MPA_ERR_INVAL,
	      "check: a request frame is not a reply");
}

/* ------------------------------------------------------ negotiation */

/* Run a whole exchange: initiator request -> responder negotiate ->
 * reply -> initiator check.  Returns the negotiate status. */
static int exchange(const struct iw_mpa_params *req,
		    const struct iw_mpa_local *local, struct iw_mpa_conn *ini,
		    struct iw_mpa_conn *resp, int *check)
{
	uint8_t b[IW_MPA_MAX_RR_LEN], r[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame rf, pf;
	struct iw_mpa_params rep;
	int rc;

	memset(ini, 0, sizeof(*ini));
	if (iw_mpa_parse(b, build(b, 0, req), IW_MPA_EXPECT_REQ, &rf, NULL))
		BAIL("request did not parse");
	rc = iw_mpa_negotiate(local, &rf, &rep, resp);
	if (iw_mpa_parse(r, build(r, 1, &rep), IW_MPA_EXPECT_REP, &pf, NULL))
		BAIL("reply did not parse");
	*check = iw_mpa_check_reply(req, &pf);
	if (*check == IW_MPA_OK)
		iw_mpa_initiator_conn(req, &pf, ini);
	return rc;
}

static void test_negotiation(void)
{
	struct iw_mpa_params req = req_v2_p2p();
	struct iw_mpa_local loc = { .rev = 2, .ird = 4, .ord = 32,
				    .rtr_ok = IW_RTR_MASK };
	struct iw_mpa_conn ini, resp;
	int chk, rc;

	req.rtr = IW_RTR_MASK;
	rc = exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(rc == IW_MPA_OK && chk == IW_MPA_OK && resp.rtr == IW_RTR_WRITE &&
	      ini.rtr == IW_RTR_WRITE && ini.p2p && resp.p2p,
	      "no preference, all offered: Write RTR on both sides");
	CHECK(resp.ord == 16 && resp.ird == 4 && ini.ord == 4 && ini.ird == 16,
	      "IRD/ORD: responder ORD 32 -> 16 (initiator IRD), initiator "
	      "ORD 8 -> 4 (responder IRD)");
	CHECK(ini.crc && resp.crc, "CRC on: the initiator asked");
	loc.rtr_pref = IW_RTR_SEND;
	exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(resp.rtr == IW_RTR_SEND && ini.rtr == IW_RTR_SEND,
	      "preferred Send RTR chosen when offered");
	req.rtr = IW_RTR_READ | IW_RTR_SEND;
	loc.rtr_pref = IW_RTR_WRITE;
	exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(resp.rtr == IW_RTR_READ, "preferred Write not offered: Read next");
	loc.ird = 0;
	exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(resp.rtr == IW_RTR_SEND && ini.ord == 0,
	      "responder IRD 0: no Read RTR, Send instead; initiator ORD 0");
	loc.rtr_ok = IW_RTR_WRITE;
	rc = exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(rc == IW_MPA_ERR_NO_RTR && chk == IW_MPA_OK && resp.rtr == 0,
	      "no common RTR: NO_RTR and a well-formed p2p reject");
	CHECK(iw_mpa_term_ecode(rc) == IW_TERM_LLP_NO_RTR,
	      "NO_RTR maps to Terminate LLP code 7 (no matching RTR option)");
	loc = (struct iw_mpa_local){ .rev = 2, .crc = 1, .ird = 8, .ord = 2 };
	req = (struct iw_mpa_params){ .rev = 2, .ird = 8, .ord = 8 };
	rc = exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(rc == IW_MPA_OK && chk == IW_MPA_OK && !resp.p2p && !resp.rtr &&
	      resp.crc && ini.crc && resp.ord == 2 && ini.ord == 8,
	      "non-p2p: no RTR, CRC because the responder asked, ORDs kept");
	loc.rev = 1;
	rc = exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(rc == IW_MPA_OK && chk == IW_MPA_OK && resp.rev == 1 &&
	      ini.rev == 1 && ini.ord == 8, "rev 1 responder answers rev 1");
	loc.rev = 2;
	req.rev = 1;
	rc = exchange(&req, &loc, &ini, &resp, &chk);
	CHECK(rc == IW_MPA_OK && chk == IW_MPA_OK && resp.rev == 1,
	      "rev 1 request gets a rev 1 reply");
	loc.rev = 3;
	CHECK(iw_mpa_negotiate(&loc, &(struct iw_mpa_frame){ .rev = 1 },
			       &req, NULL) == IW_MPA_ERR_INVAL,
	      "negotiate refuses a bad local revision");
}

/* ---------------------------------------------------- strings, codes */

static void test_strings(void)
{
	int distinct = 1, known = 1;

	for (int a = IW_MPA_ERR_INVAL; a <= IW_MPA_NEED_MORE; a++) {
		known &= strcmp(iw_mpa_strerror(a), "unknown MPA status") != 0;
		for (int c = a + 1; c <= IW_MPA_NEED_MORE; c++)
			distinct &= strcmp(iw_mpa_strerror(a),
					   iw_mpa_strerror(c)) != 0;
	}
	CHECK(known && distinct, "every status has its own reason string");
	CHECK(iw_mpa_term_ecode(IW_MPA_ERR_INSUFF_IRD) == IW_TERM_LLP_INSUFF_IRD &&
	      iw_mpa_term_ecode(IW_MPA_ERR_BAD_KEY) == IW_TERM_LLP_BAD_RR,
	      "status -> Terminate codes: insufficient IRD 6, bad frame 4");
}

/* ------------------------------------------- other wire layouts */

static void test_wire_layouts(void)
{
	uint16_t c = iw_ctrl_make(1, 1, IW_OP_WRITE);
	uint8_t bytes[2];
	uint16_t be = iw_be16(c);

	memcpy(bytes, &be, 2);
	CHECK(c == 0xC140 && bytes[0] == 0xC1 && bytes[1] == 0x40,
	      "tagged last Write: bytes c1 40 (T L DV=1 | RV=1 op 0)");
	c = iw_ctrl_make(0, 0, IW_OP_READ_REQ);
	CHECK(!iw_ctrl_tagged(c) && !iw_ctrl_last(c) && iw_ctrl_dv(c) == 1 &&
	      iw_ctrl_rv(c) == 1 && iw_ctrl_opcode(c) == IW_OP_READ_REQ &&
	      iw_ddp_hdr_len(c) == 18 && iw_ddp_hdr_len(0xC140) == 14,
	      "control word accessors and header lengths");
	CHECK(iw_term_ctrl(IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_UNTAGGED,
			   IW_TERM_DDP_UNTAG_NO_BUF,
			   IW_TERM_HDRCT_M | IW_TERM_HDRCT_D) == 0x1202C000u,
	      "Terminate control: DDP/untagged/no buffer, M+D = 0x1202C000");
	CHECK(iw_term_layer(0x2007A000u) == 2 && iw_term_etype(0x2007A000u) == 0 &&
	      iw_term_ecode(0x2007A000u) == 7, "Terminate control accessors");
	CHECK(IW_TERM_MAX_ULPDU == 22 + 2 + 18 + 28,
	      "largest Terminate ULPDU is 70 bytes");
	CHECK(iw_psn_lt(0xFFFFFFF0u, 5) && !iw_psn_lt(5, 0xFFFFFFF0u) &&
	      iw_psn_le(7, 7) && !iw_psn_lt(7, 7) && iw_psn_gt(5, 0xFFFFFFF0u),
	      "PSN order across the wrap (RFC 1982)");
	CHECK(!iw_psn_lt(0, 0x80000000u) && !iw_psn_lt(0x80000000u, 0) &&
	      iw_psn_lt(0, 0x7FFFFFFFu),
	      "PSNs 2^31 apart are unordered; 2^31-1 ahead is greater");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(pd512); i++)
		pd512[i] = (uint8_t)(i * 7 + 1);
	test_build_layout();
	test_build_errors();
	test_pdata_limits();
	test_round_trips();
	test_parse_errors();
	test_parse_tolerance();
	test_truncations();
	test_byte_at_a_time();
	test_garbage();
	test_check_reply();
	test_negotiation();
	test_strings();
	test_wire_layouts();
	return tap_done();
}
