/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* TRP's wire format (doc/trp.md, iw_wire.h): the 10-byte header byte for
 * byte, flags and the 12-bit credit field, PSN serial-number arithmetic
 * (RFC 1982) across the 2^32 wrap, the test-aid spec, and which
 * Terminates are non-fatal. */
#include <string.h>

#include "iw_trp.h"
#include "iw_wire.h"
#include "tap.h"

static void header_layout(void)
{
	static const uint8_t want[10] = { 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b,
					  0x0c, 0x0d, 0xc1, 0x23 };
	uint8_t b[10];
	struct iw_trp_fields f;

	iw_trp_put(b, 0x01020304u, 0x0a0b0c0du, IW_TRP_I | IW_TRP_A, 0x123);
	CHECK(!memcmp(b, want, sizeof(want)),
	      "header: PSN, ack PSN, I A flags and credits in network order");
	iw_trp_get(b, &f);
	CHECK(f.psn == 0x01020304u && f.ack == 0x0a0b0c0du &&
	      f.flags == (IW_TRP_I | IW_TRP_A) && f.credits == 0x123,
	      "header decodes to what was encoded");
	iw_trp_put(b, 7, 6, IW_TRP_F, 5000);
	iw_trp_get(b, &f);
	CHECK(f.credits == IW_TRP_CREDITS_MASK && f.flags == IW_TRP_F,
	      "credits saturate at 4095 and never leak into the flags");
	CHECK(b[8] == 0x2f && b[9] == 0xff, "F is bit 2 of the flags nibble");
	b[8] |= 0x10;
	iw_trp_get(b, &f);
	CHECK((f.flags & IW_TRP_R) && f.credits == IW_TRP_CREDITS_MASK,
	      "R decodes as its own flag");
	iw_trp_put(b, 1, 1, IW_TRP_R | 0x0fff, 0);
	iw_trp_get(b, &f);
	CHECK(f.flags == IW_TRP_R && f.credits == 0,
	      "flag argument bits below the flags are not credits");
	CHECK(sizeof(struct iw_trp_hdr) == IW_TRP_HDR_LEN, "header is 10 bytes");
}

static void serial_arithmetic(void)
{
	CHECK(iw_psn_lt(0xfffffffeu, 0xffffffffu) &&
	      iw_psn_lt(0xffffffffu, 0) && iw_psn_lt(0xfffffff0u, 0x10),
	      "PSNs just below 2^32 are before those just after the wrap");
	CHECK(!iw_psn_lt(0, 0xffffffffu) && iw_psn_gt(0, 0xffffffffu),
	      "0 is after 2^32-1");
	CHECK(iw_psn_lt(5, 5 + 0x7fffffffu) && !iw_psn_lt(5 + 0x7fffffffu, 5),
	      "half the space minus one ahead is after");
	CHECK(!iw_psn_lt(5, 5 + 0x80000000u) && !iw_psn_lt(5 + 0x80000000u, 5),
	      "exactly 2^31 apart: unordered (RFC 1982 leaves it undefined)");
	CHECK(iw_psn_le(9, 9) && iw_psn_ge(9, 9) && !iw_psn_lt(9, 9),
	      "equal PSNs: le and ge, not lt");
	CHECK(iw_psn_le(0xffffffffu, 0) && iw_psn_ge(1, 0xffffffffu),
	      "le/ge across the wrap");
}

static void test_spec(void)
{
	struct iwe_trp_test t;

	CHECK(iwe_trp_test_parse("reorder:10,dup:5,seed:42,drop:1", &t) == 0 &&
	      t.reorder == 10 && t.dup == 5 && t.seed == 42 && t.drop == 1,
	      "test-aid spec parsed, any order");
	CHECK(iwe_trp_test_parse("", &t) == 0 && !t.drop && !t.reorder &&
	      !t.dup, "empty spec: off");
	CHECK(iwe_trp_test_parse("drop:101", &t) == EINVAL &&
	      iwe_trp_test_parse("loss:3", &t) == EINVAL &&
	      iwe_trp_test_parse("drop", &t) == EINVAL &&
	      iwe_trp_test_parse("seed:x", &t) == EINVAL,
	      "bad percent, unknown key, missing value refused");
}

static void terminate_classes(void)
{
	CHECK(trp_term_nonfatal(IW_TERM_LAYER_RDMAP,
				IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
				IW_TERM_RDMAP_INV_STAG) &&
	      trp_term_nonfatal(IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
				IW_TERM_DDP_TAG_BASE_BOUNDS),
	      "bad STag / bounds of one request: non-fatal");
	CHECK(!trp_term_nonfatal(IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_UNTAGGED,
				 IW_TERM_DDP_UNTAG_NO_BUF) &&
	      !trp_term_nonfatal(IW_TERM_LAYER_RDMAP,
				 IW_TERM_RDMAP_ETYPE_REMOTE_OP,
				 IW_TERM_RDMAP_UNEXP_OPCODE) &&
	      !trp_term_nonfatal(IW_TERM_LAYER_LLP, 0, IW_TERM_LLP_TCP_LOST) &&
	      !trp_term_nonfatal(IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
				 IW_TERM_DDP_TAG_INV_VERSION),
	      "no receive posted, bad opcode, LLP, bad version: fatal");
}

static void incoming_terminates(void)
{
	struct iw_terminate_hdr h = {
		.hdr = { .ctrl_be = iw_be16(iw_ctrl_make(0, 1,
							 IW_OP_TERMINATE)),
			 .qn_be = iw_be32(IW_QN_TERMINATE) },
	};
	uint32_t quiet = 99;

	h.term_ctrl_be = iw_be32(iw_term_ctrl(IW_TERM_LAYER_DDP,
		IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_INV_STAG, 0));
	CHECK(trp_term_incoming((uint8_t *)&h, sizeof(h), &quiet) == 0 &&
	      quiet == 0, "a bad-STag Terminate without quiet time: non-fatal");
	h.term_ctrl_be = iw_be32(iw_term_ctrl(IW_TERM_LAYER_DDP,
		IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_INV_STAG, 0) | 300);
	CHECK(trp_term_incoming((uint8_t *)&h, sizeof(h), &quiet) == 1 &&
	      quiet == 300, "the same with a quiet time: fatal, 300 ms");
	CHECK(trp_term_incoming((uint8_t *)&h, sizeof(h) - 1, &quiet) == -1,
	      "too short to be a Terminate");
	h.hdr.ctrl_be = iw_be16(iw_ctrl_make(0, 1, IW_OP_SEND));
	CHECK(trp_term_incoming((uint8_t *)&h, sizeof(h), &quiet) == -1,
	      "a Send is no Terminate");
}

/* The selective-ack blocks of a receive window holding PSNs nxt+2,
 * nxt+3 and nxt+7 out of order (nothing at nxt, nxt+1, nxt+4..6). */
static void sack_blocks_at(uint32_t nxt)
{
	static uint8_t pkt[1];
	uint8_t *slots[64] = { 0 };
	struct trp t;
	uint8_t body[IW_TRP_SACK_MAX * IW_TRP_SACK_BLOCK];
	uint32_t want[4] = { nxt + 2, nxt + 3, nxt + 7, nxt + 7 }, got[4];
	uint32_t n;

	memset(&t, 0, sizeof(t));
	t.rx = slots;
	t.rx_cap = 64;
	t.pkt_max = 1500;
	t.rcv_dlv = t.rcv_nxt = t.rcv_high = nxt;
	CHECK(trp_sack_blocks(&t, body) == 0,
	      "sack at %#x: nothing held, no blocks", nxt);
	slots[(nxt + 2) & 63] = slots[(nxt + 3) & 63] = pkt;
	slots[(nxt + 7) & 63] = pkt;
	t.rcv_high = nxt + 8;	/* as the receive path keeps it */
	n = trp_sack_blocks(&t, body);
	for (int i = 0; i < 4; i++) {
		memcpy(&got[i], body + 4 * i, 4);
		got[i] = iw_be32(got[i]);
	}
	CHECK(n == 2 * IW_TRP_SACK_BLOCK && !memcmp(got, want, sizeof(want)),
	      "sack at %#x: blocks [+2,+3] [+7,+7] (%u bytes)", nxt, n);
	/* Filled up to the last one held: no hole left, no block. */
	t.rcv_nxt = nxt + 8;
	t.rcv_high = nxt + 8;
	CHECK(trp_sack_blocks(&t, body) == 0,
	      "sack at %#x: the holes filled, no blocks", nxt);
}

int main(void)
{
	header_layout();
	serial_arithmetic();
	test_spec();
	terminate_classes();
	incoming_terminates();
	sack_blocks_at(1000);
	sack_blocks_at(0xfffffffcu);	/* across the 2^32 wrap */
	return tap_done();
}
