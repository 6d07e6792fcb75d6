/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: MPA Request/Reply frames (iw_mpa.h) from arbitrary
 * bytes, and the negotiation run on whatever parses.
 *
 * Input: a 6-byte prefix that chooses what the parser expects and the
 * two sides' parameters, then the frame bytes.
 *   p[0] bits 0-1: expect REQ / REP / ANY (3 = ANY); bit 2: responder
 *        speaks revision 2; bit 3: responder wants CRC; bits 4-6:
 *        responder's accepted RTR types; bit 7: our request was p2p
 *   p[1] bits 0-1: responder's preferred RTR (none, Send, Write, Read);
 *        bits 2-4: RTR types our request offered; bit 5: our request
 *        was revision 2; bit 6: it asked for CRC
 *   p[2..5]: responder IRD, ORD; our request's IRD, ORD (0xFF = 0x3FFF)
 *
 * Invariants: the parser stays inside the buffer and agrees with itself
 * on prefixes and on trailing bytes; a parsed request negotiates to a
 * reply within both sides' limits that builds, re-parses to the same
 * values and is accepted by the very request it answers, and both sides
 * then agree on the connection; a parsed reply checked against our
 * request yields an outcome within our limits. */
#include <string.h>

#include "fuzz_check.h"
#include "iw_mpa.h"

#define PREFIX 6

struct mpa_case {
	enum iw_mpa_expect expect;
	struct iw_mpa_local local;	/* when the frame is a request */
	struct iw_mpa_params req;	/* the request we sent, for a reply */
};

static unsigned ird_ord(uint8_t b)
{
	return b == 0xFF ? IW_MPA_V2_IRD_ORD_MASK : b;
}

static void decode_case(const uint8_t *p, struct mpa_case *c)
{
	static const unsigned pref[] = { 0, IW_RTR_SEND, IW_RTR_WRITE,
					 IW_RTR_READ };
	static const enum iw_mpa_expect ex[] = {
		IW_MPA_EXPECT_REQ, IW_MPA_EXPECT_REP, IW_MPA_EXPECT_ANY,
		IW_MPA_EXPECT_ANY };

	memset(c, 0, sizeof(*c));
	c->expect = ex[p[0] & 3];
	c->local.rev = p[0] & 4 ? IW_MPA_REV_ENHANCED : IW_MPA_REV_BASIC;
	c->local.crc = !!(p[0] & 8);
	c->local.rtr_ok = (p[0] >> 4) & IW_RTR_MASK;
	c->local.rtr_pref = pref[p[1] & 3];
	c->local.ird = ird_ord(p[2]);
	c->local.ord = ird_ord(p[3]);
	/* Our request is one iw_mpa_build accepts. */
	c->req.rev = p[1] & 0x20 ? IW_MPA_REV_ENHANCED : IW_MPA_REV_BASIC;
	c->req.crc = !!(p[1] & 0x40);
	if (c->req.rev == IW_MPA_REV_ENHANCED) {
		c->req.p2p = !!(p[0] & 0x80);
		c->req.rtr = c->req.p2p ? (p[1] >> 2) & IW_RTR_MASK : 0;
		if (c->req.p2p && !c->req.rtr)
			c->req.rtr = IW_RTR_WRITE;
		c->req.ird = ird_ord(p[4]);
		c->req.ord = ird_ord(p[5]);
	}
}

static int one_bit_or_none(unsigned v)
{
	return (v & (v - 1)) == 0;
}

/* A parsed frame describes exactly the bytes it came from. */
static void check_frame(const uint8_t *buf, size_t len,
			enum iw_mpa_expect expect, const struct iw_mpa_frame *f)
{
	uint16_t pd_be;
	size_t words = f->enhanced ? IW_MPA_V2_WORDS_LEN : 0;

	memcpy(&pd_be, buf + 18, 2);
	FUZZ_CHECK(f->frame_len <= len && f->frame_len >= IW_MPA_RR_HDR_LEN,
		   "frame_len %zu, input %zu", f->frame_len, len);
	FUZZ_CHECK(f->frame_len == IW_MPA_RR_HDR_LEN + iw_be16(pd_be),
		   "frame_len %zu vs header", f->frame_len);
	FUZZ_CHECK(f->pdata == buf + IW_MPA_RR_HDR_LEN + words &&
		   f->pdata + f->pdata_len == buf + f->frame_len,
		   "pdata outside the frame");
	FUZZ_CHECK(f->rev == 1 || f->rev == 2, "rev %u", f->rev);
	FUZZ_CHECK(!f->markers && !(f->flags & IW_MPA_FLAG_MARKERS),
		   "markers accepted");
	FUZZ_CHECK(f->is_reply == !memcmp(buf, IW_MPA_KEY_REP, 16),
		   "is_reply disagrees with the key");
	FUZZ_CHECK(expect == IW_MPA_EXPECT_ANY ||
		   f->is_reply == (expect == IW_MPA_EXPECT_REP),
		   "frame kind not the expected one");
	FUZZ_CHECK(f->crc == !!(buf[16] & IW_MPA_FLAG_CRC), "crc flag");
	FUZZ_CHECK(!f->reject || f->is_reply, "reject in a request");
	FUZZ_CHECK(!f->enhanced || f->rev == IW_MPA_REV_ENHANCED,
		   "enhanced in revision 1");
	FUZZ_CHECK(f->ird <= IW_MPA_V2_IRD_ORD_MASK &&
		   f->ord <= IW_MPA_V2_IRD_ORD_MASK && !(f->rtr & ~IW_RTR_MASK),
		   "ird %u ord %u rtr %#x", f->ird, f->ord, f->rtr);
	FUZZ_CHECK(f->enhanced || (!f->ird && !f->ord && !f->rtr && !f->p2p),
		   "IRD/ORD/RTR without the enhanced words");
}

/* Shorter inputs are NEED_MORE; longer ones parse the same. */
static void check_prefixes(const uint8_t *buf, enum iw_mpa_expect expect,
			   const struct iw_mpa_frame *f)
{
	static const size_t cuts[] = { 1, 16, 19, 20, 23 };
	struct iw_mpa_frame g;
	size_t need, i;
	int rc;

	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		if (cuts[i] >= f->frame_len)
			break;
		need = 0;
		rc = iw_mpa_parse(buf, cuts[i], expect, &g, &need);
		FUZZ_CHECK(rc == IW_MPA_NEED_MORE && need > 0 &&
			   cuts[i] + need <= f->frame_len,
			   "prefix %zu of a good frame: rc %d need %zu",
			   cuts[i], rc, need);
	}
	rc = iw_mpa_parse(buf, f->frame_len, expect, &g, NULL);
	FUZZ_CHECK(rc == IW_MPA_OK && g.frame_len == f->frame_len &&
		   g.pdata_len == f->pdata_len && g.ird == f->ird &&
		   g.ord == f->ord && g.rtr == f->rtr,
		   "exact-length parse differs (rc %d)", rc);
}

/* A frame built from p parses back to p's values. */
static void check_roundtrip(int is_reply, const struct iw_mpa_params *p)
{
	uint8_t out[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame g;
	ssize_t n = iw_mpa_build(out, sizeof(out), is_reply, p);
	int rc;

	FUZZ_CHECK(n > 0 && n == iw_mpa_frame_size(is_reply, p),
		   "build of negotiated params failed: %zd", n);
	rc = iw_mpa_parse(out, (size_t)n, is_reply ? IW_MPA_EXPECT_REP :
						     IW_MPA_EXPECT_REQ,
			  &g, NULL);
	FUZZ_CHECK(rc == IW_MPA_OK && g.frame_len == (size_t)n,
		   "built frame does not parse: %d", rc);
	FUZZ_CHECK(g.rev == p->rev && g.crc == !!p->crc &&
		   g.reject == !!p->reject && g.pdata_len == p->pdata_len &&
		   (!p->pdata_len || !memcmp(g.pdata, p->pdata, p->pdata_len)),
		   "round trip changed the frame");
	if (p->rev == IW_MPA_REV_ENHANCED)
		FUZZ_CHECK(g.enhanced && g.ird == p->ird && g.ord == p->ord &&
			   g.rtr == p->rtr && g.p2p == !!p->p2p,
			   "round trip changed IRD/ORD/RTR");
}

/* The request's own parameters, as its initiator would have built it. */
static void request_params(const struct iw_mpa_frame *f,
			   struct iw_mpa_params *r)
{
	memset(r, 0, sizeof(*r));
	r->rev = f->rev;
	r->crc = f->crc;
	r->p2p = f->p2p;
	r->rtr = f->rtr;
	r->ird = f->ird;
	r->ord = f->ord;
}

static void check_request(const struct mpa_case *c,
			  const struct iw_mpa_frame *f)
{
	struct iw_mpa_params rep, req;
	struct iw_mpa_conn conn, iconn;
	struct iw_mpa_frame g;
	uint8_t out[IW_MPA_MAX_RR_LEN];
	size_t max_pd;
	ssize_t n;
	int rc = iw_mpa_negotiate(&c->local, f, &rep, &conn);

	FUZZ_CHECK(rc == IW_MPA_OK || rc == IW_MPA_ERR_NO_RTR,
		   "negotiate: %d", rc);
	FUZZ_CHECK((rc == IW_MPA_ERR_NO_RTR) == !!rep.reject,
		   "reject without NO_RTR or the reverse");
	FUZZ_CHECK(rep.rev <= f->rev && rep.rev <= c->local.rev,
		   "reply revision %d above a side's", rep.rev);
	FUZZ_CHECK(rep.crc == (c->local.crc || f->crc), "crc");
	FUZZ_CHECK(conn.ird == c->local.ird && conn.ord <= c->local.ord,
		   "responder ird %u ord %u beyond its own", conn.ird,
		   conn.ord);
	FUZZ_CHECK(one_bit_or_none(conn.rtr) && !(conn.rtr & ~f->rtr) &&
		   !(conn.rtr & ~c->local.rtr_ok),
		   "rtr %#x not offered or not accepted", conn.rtr);
	FUZZ_CHECK(!(conn.rtr & IW_RTR_READ) || c->local.ird > 0,
		   "Read RTR with no IRD to serve it");
	if (rep.rev == IW_MPA_REV_ENHANCED)
		FUZZ_CHECK(conn.ord <= f->ird, "responder ORD %u above IRD %u",
			   conn.ord, f->ird);

	/* Answer with the request's own private data, as much as fits. */
	max_pd = rep.rev == IW_MPA_REV_ENHANCED ? IW_MPA_V2_MAX_PDATA
						 : IW_MPA_MAX_PRIVATE_DATA;
	rep.pdata = f->pdata;
	rep.pdata_len = f->pdata_len < max_pd ? f->pdata_len : max_pd;
	check_roundtrip(1, &rep);

	/* The initiator that sent this request accepts the reply. */
	n = iw_mpa_build(out, sizeof(out), 1, &rep);
	FUZZ_CHECK(n > 0 && iw_mpa_parse(out, (size_t)n, IW_MPA_EXPECT_REP,
					 &g, NULL) == IW_MPA_OK,
		   "reply does not build");
	request_params(f, &req);
	rc = iw_mpa_check_reply(&req, &g);
	FUZZ_CHECK(rc == IW_MPA_OK, "our reply refused by its request: %s",
		   iw_mpa_strerror(rc));
	if (g.reject)
		return;
	iw_mpa_initiator_conn(&req, &g, &iconn);
	FUZZ_CHECK(iconn.rev == conn.rev && iconn.crc == conn.crc &&
		   iconn.rtr == conn.rtr && iconn.p2p == conn.p2p,
		   "the two sides disagree: rev %d/%d crc %d/%d rtr %#x/%#x",
		   iconn.rev, conn.rev, iconn.crc, conn.crc, iconn.rtr,
		   conn.rtr);
	if (g.enhanced)
		FUZZ_CHECK(iconn.ord <= conn.ird && conn.ord <= iconn.ird,
			   "ORD above the peer's IRD: %u/%u, %u/%u",
			   iconn.ord, conn.ird, conn.ord, iconn.ird);
}

static void check_reply(const struct mpa_case *c,
			const struct iw_mpa_frame *f)
{
	struct iw_mpa_conn conn;
	int rc;

	check_roundtrip(0, &c->req);
	rc = iw_mpa_check_reply(&c->req, f);
	FUZZ_CHECK(rc <= IW_MPA_OK && rc >= IW_MPA_ERR_INVAL &&
		   rc != IW_MPA_ERR_INVAL, "check_reply: %d", rc);
	FUZZ_CHECK(iw_mpa_term_ecode(rc) >= IW_TERM_LLP_BAD_RR &&
		   iw_mpa_term_ecode(rc) <= IW_TERM_LLP_NO_RTR,
		   "term ecode");
	if (rc != IW_MPA_OK || f->reject)
		return;
	FUZZ_CHECK(f->rev <= c->req.rev, "accepted a higher revision");
	iw_mpa_initiator_conn(&c->req, f, &conn);
	FUZZ_CHECK(one_bit_or_none(conn.rtr) && !(conn.rtr & ~c->req.rtr),
		   "initiator rtr %#x not offered", conn.rtr);
	FUZZ_CHECK(!conn.rtr || conn.p2p, "rtr without p2p");
	FUZZ_CHECK(conn.ird == c->req.ird && conn.ord <= c->req.ord,
		   "initiator ird/ord beyond its own");
	FUZZ_CHECK(conn.crc == (c->req.crc || f->crc), "crc");
	if (f->enhanced) {
		FUZZ_CHECK(conn.ord <= f->ird, "our ORD above the peer IRD");
		FUZZ_CHECK(f->ord <= c->req.ird, "peer ORD above our IRD");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mpa_case c;
	struct iw_mpa_frame f;
	const uint8_t *buf;
	size_t len, need = 0;
	int rc;

	if (size < PREFIX)
		return 0;
	decode_case(data, &c);
	buf = data + PREFIX;
	len = size - PREFIX;
	rc = iw_mpa_parse(buf, len, c.expect, &f, &need);
	FUZZ_CHECK(iw_mpa_strerror(rc) != NULL &&
		   strcmp(iw_mpa_strerror(rc), "unknown MPA status"),
		   "status %d has no reason", rc);
	if (rc == IW_MPA_NEED_MORE) {
		FUZZ_CHECK(need > 0 && len + need <= IW_MPA_MAX_RR_LEN,
			   "need %zu after %zu bytes", need, len);
		return 0;
	}
	FUZZ_CHECK(rc <= IW_MPA_OK && rc > IW_MPA_ERR_INVAL,
		   "parse status %d", rc);
	if (rc != IW_MPA_OK)
		return 0;
	check_frame(buf, len, c.expect, &f);
	check_prefixes(buf, c.expect, &f);
	if (f.is_reply)
		check_reply(&c, &f);
	else
		check_request(&c, &f);
	return 0;
}
