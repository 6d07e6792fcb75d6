/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Every byte layout the engine puts on, or takes off, the wire.
 *
 * One header for all of them, so that a reader can check the engine against
 * RFC 5040 (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA), RFC 6581 (enhanced MPA
 * connection setup), RFC 7306 (RDMAP extensions) and doc/trp.md (TRP over UDP)
 * in one place.
 *
 * Conventions:
 *  - Structures are packed and their sizes are checked with _Static_assert,
 *    so they can be laid over a receive buffer at any alignment.  Never take
 *    the address of a member (it may be unaligned): read and write members
 *    by value through the accessors below.
 *  - Multi-byte integer fields are stored in network byte order (big
 *    endian) unless a comment says otherwise.  Fields named *_be hold the
 *    network-order value; convert with iw_be16()/iw_be32()/iw_be64() (the
 *    conversion is its own inverse, so one helper serves both directions).
 *    The one little-endian field is the MPA CRC (see "FPDU" below).
 *  - Bit masks are given on the host-order value of the field they belong
 *    to, numbered as the RFC figures draw them: bit 0 of a 16-bit word is
 *    its most significant bit, mask 0x8000.
 */
#ifndef IW_WIRE_H
#define IW_WIRE_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IW_PACKED __attribute__((packed))

static inline uint16_t iw_be16(uint16_t v) { return htobe16(v); }
static inline uint32_t iw_be32(uint32_t v) { return htobe32(v); }
static inline uint64_t iw_be64(uint64_t v) { return htobe64(v); }

/* ================================================================== MPA
 * MPA Request / Reply frame (RFC 5044 connection setup, RFC 6581):
 *
 *   key[16] | flags | rev | pd_len (BE16) | private data [pd_len]
 */
#define IW_MPA_KEY_LEN		16
#define IW_MPA_KEY_REQ		"MPA ID Req Frame"
#define IW_MPA_KEY_REP		"MPA ID Rep Frame"

/* Flags byte. */
#define IW_MPA_FLAG_MARKERS	0x80	/* M: receiver wants markers */
#define IW_MPA_FLAG_CRC		0x40	/* C: CRC used if set in either frame */
#define IW_MPA_FLAG_REJECT	0x20	/* R: reply rejects the connection;
					 * not checked in a request */
#define IW_MPA_FLAG_ENHANCED	0x10	/* revision 2: the private data starts
					 * with the IRD/ORD words below */
#define IW_MPA_FLAG_RESERVED	0x0F	/* sent as 0, ignored on receive */

#define IW_MPA_REV_BASIC	1	/* RFC 5044 */
#define IW_MPA_REV_ENHANCED	2	/* RFC 6581 */

/* RFC 5044: a receiver closes the connection on a longer private data. */
#define IW_MPA_MAX_PRIVATE_DATA	512

struct iw_mpa_rr {
	char key[IW_MPA_KEY_LEN];	/* IW_MPA_KEY_REQ or IW_MPA_KEY_REP,
					 * no terminating NUL on the wire */
	uint8_t flags;			/* IW_MPA_FLAG_* */
	uint8_t rev;			/* 1 or 2 */
	uint16_t pd_len_be;		/* BE16: private data length, including
					 * the enhanced words when present */
} IW_PACKED;
_Static_assert(sizeof(struct iw_mpa_rr) == 20, "MPA req/rep header");

#define IW_MPA_RR_HDR_LEN	20
#define IW_MPA_MAX_RR_LEN	(IW_MPA_RR_HDR_LEN + IW_MPA_MAX_PRIVATE_DATA)

/* RFC 6581 enhanced connection setup data: the first 4 bytes of the
 * private data of a revision-2 frame that has IW_MPA_FLAG_ENHANCED. */
struct iw_mpa_v2_words {
	uint16_t ird_be;		/* BE16: IW_MPA_V2_P2P | _SEND_RTR | IRD */
	uint16_t ord_be;		/* BE16: _WRITE_RTR | _READ_RTR | ORD */
} IW_PACKED;
_Static_assert(sizeof(struct iw_mpa_v2_words) == 4, "MPA v2 IRD/ORD words");

#define IW_MPA_V2_WORDS_LEN	4
#define IW_MPA_V2_MAX_PDATA	(IW_MPA_MAX_PRIVATE_DATA - IW_MPA_V2_WORDS_LEN)

/* IRD word */
#define IW_MPA_V2_P2P		0x8000	/* A: peer-to-peer connection model */
#define IW_MPA_V2_SEND_RTR	0x4000	/* B: zero-length Send (FULPDU) RTR */
/* ORD word */
#define IW_MPA_V2_WRITE_RTR	0x8000	/* C: zero-length RDMA Write RTR */
#define IW_MPA_V2_READ_RTR	0x4000	/* D: zero-length RDMA Read RTR */
/* both words */
#define IW_MPA_V2_IRD_ORD_MASK	0x3FFF	/* 14-bit IRD or ORD */

/* ================================================================= FPDU
 * FPDU (RFC 5044, without markers):
 *
 *   ULPDU length (BE16) | ULPDU | pad to a multiple of 4 | CRC32c
 *
 * The CRC covers the length field, the ULPDU and the pad.  It is always
 * present (zero when CRC was not negotiated).  It is the CRC32c
 * (Castagnoli, reflected, init and final xor ~0) value written least
 * significant byte first: the byte order the RFC 3385 / RFC 7143 test
 * vectors show and the x86 crc32 instruction produces.  E.g. the CRC of
 * 32 zero bytes is 0x8A9136AA and appears as aa 36 91 8a on the wire.
 */
struct iw_fpdu_hdr {
	uint16_t ulpdu_len_be;		/* BE16: DDP header + payload length */
} IW_PACKED;
_Static_assert(sizeof(struct iw_fpdu_hdr) == 2, "FPDU length field");

#define IW_FPDU_LEN_FIELD	2
#define IW_FPDU_CRC_LEN		4
#define IW_FPDU_MAX_ULPDU	0xFFFF	/* the length field is 16 bits */

/* Pad bytes after a ULPDU of ulpdu_len bytes (length field + ULPDU + pad
 * is a multiple of 4). */
static inline unsigned iw_fpdu_pad(unsigned ulpdu_len)
{
	return (4u - ((IW_FPDU_LEN_FIELD + ulpdu_len) & 3u)) & 3u;
}

/* Bytes of a whole FPDU carrying ulpdu_len bytes of ULPDU. */
static inline unsigned iw_fpdu_len(unsigned ulpdu_len)
{
	return IW_FPDU_LEN_FIELD + ulpdu_len + iw_fpdu_pad(ulpdu_len) +
	       IW_FPDU_CRC_LEN;
}

/* The CRC field is little endian, whatever the host. */
static inline void iw_fpdu_put_crc(uint8_t *p, uint32_t crc)
{
	p[0] = (uint8_t)crc;
	p[1] = (uint8_t)(crc >> 8);
	p[2] = (uint8_t)(crc >> 16);
	p[3] = (uint8_t)(crc >> 24);
}

static inline uint32_t iw_fpdu_get_crc(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ======================================================== DDP / RDMAP
 * Control word: the first two bytes of every DDP segment.  Byte 0 is DDP's
 * (RFC 5041 section 4: T, L, Rsvd, DV), byte 1 is the ULP-reserved byte
 * that RDMAP uses (RFC 5040 section 4: RV, Rsvd, Opcode).  Masks on the
 * host-order value of the BE16 word: */
#define IW_CTRL_T		0x8000	/* tagged buffer model */
#define IW_CTRL_L		0x4000	/* last segment of the message */
#define IW_CTRL_DDP_RSVD	0x3C00	/* sent as 0 */
#define IW_CTRL_DV_MASK		0x0300	/* DDP version (low 2 bits, byte 0) */
#define IW_CTRL_DV_SHIFT	8
#define IW_CTRL_RV_MASK		0x00C0	/* RDMAP version (high 2 bits, byte 1)*/
#define IW_CTRL_RV_SHIFT	6
#define IW_CTRL_RDMAP_RSVD	0x0030	/* sent as 0 */
#define IW_CTRL_OPCODE_MASK	0x000F

#define IW_DDP_VERSION		1
#define IW_RDMAP_VERSION	1

/* RDMAP opcodes (RFC 5040 section 4; 8-11 from RFC 7306). */
enum iw_opcode {
	IW_OP_WRITE		= 0,	/* tagged */
	IW_OP_READ_REQ		= 1,	/* untagged, QN 1 */
	IW_OP_READ_RESP		= 2,	/* tagged */
	IW_OP_SEND		= 3,	/* untagged, QN 0 */
	IW_OP_SEND_INV		= 4,	/* untagged, QN 0, invalidate STag */
	IW_OP_SEND_SE		= 5,	/* untagged, QN 0, solicited event */
	IW_OP_SEND_SE_INV	= 6,	/* untagged, QN 0, SE + invalidate */
	IW_OP_TERMINATE		= 7,	/* untagged, QN 2 */
	IW_OP_IMM_DATA		= 8,	/* RFC 7306 Immediate Data */
	IW_OP_IMM_DATA_SE	= 9,	/* RFC 7306 Immediate Data + SE */
	IW_OP_ATOMIC_REQ	= 10,	/* RFC 7306 Atomic Request */
	IW_OP_ATOMIC_RESP	= 11,	/* RFC 7306 Atomic Response */
};

/* Untagged queue numbers (RFC 5040). */
enum iw_qn {
	IW_QN_SEND		= 0,	/* Send family */
	IW_QN_READ_REQ		= 1,	/* RDMA Read Requests */
	IW_QN_TERMINATE		= 2,	/* Terminate */
};

/* STag 1 is the sink of a zero-length Write RTR (STag 0 is reserved). */
#define IW_RTR_WRITE_STAG	1

/* Build a control word (host order) with DV = RV = 1. */
static inline uint16_t iw_ctrl_make(int tagged, int last, unsigned opcode)
{
	return (uint16_t)((tagged ? IW_CTRL_T : 0) | (last ? IW_CTRL_L : 0) |
			  IW_DDP_VERSION << IW_CTRL_DV_SHIFT |
			  IW_RDMAP_VERSION << IW_CTRL_RV_SHIFT |
			  (opcode & IW_CTRL_OPCODE_MASK));
}

static inline int iw_ctrl_tagged(uint16_t c) { return !!(c & IW_CTRL_T); }
static inline int iw_ctrl_last(uint16_t c) { return !!(c & IW_CTRL_L); }
static inline unsigned iw_ctrl_dv(uint16_t c)
{
	return (c & IW_CTRL_DV_MASK) >> IW_CTRL_DV_SHIFT;
}
static inline unsigned iw_ctrl_rv(uint16_t c)
{
	return (c & IW_CTRL_RV_MASK) >> IW_CTRL_RV_SHIFT;
}
static inline unsigned iw_ctrl_opcode(uint16_t c)
{
	return c & IW_CTRL_OPCODE_MASK;
}

/* Tagged buffer header (RFC 5041 section 4): Write, Read Response. */
struct iw_tagged_hdr {
	uint16_t ctrl_be;		/* BE16 control word */
	uint32_t stag_be;		/* BE32 data sink STag */
	uint64_t to_be;			/* BE64 data sink tagged offset */
} IW_PACKED;
_Static_assert(sizeof(struct iw_tagged_hdr) == 14, "DDP tagged header");

/* Untagged buffer header (RFC 5041 section 4, RFC 5040 section 4). */
struct iw_untagged_hdr {
	uint16_t ctrl_be;		/* BE16 control word */
	uint32_t inval_stag_be;		/* BE32 STag to invalidate for Send with
					 * Invalidate, else 0 (RsvdULP) */
	uint32_t qn_be;			/* BE32 queue number, enum iw_qn */
	uint32_t msn_be;		/* BE32 message sequence number; starts
					 * at 1 per queue and direction */
	uint32_t mo_be;			/* BE32 message offset */
} IW_PACKED;
_Static_assert(sizeof(struct iw_untagged_hdr) == 18, "DDP untagged header");

#define IW_TAGGED_HDR_LEN	14
#define IW_UNTAGGED_HDR_LEN	18

/* Header length of a segment from its control word. */
static inline unsigned iw_ddp_hdr_len(uint16_t ctrl)
{
	return iw_ctrl_tagged(ctrl) ? IW_TAGGED_HDR_LEN : IW_UNTAGGED_HDR_LEN;
}

/* RDMA Read Request body (RFC 5040 4.4): the untagged payload on QN 1. */
struct iw_read_req_body {
	uint32_t sink_stag_be;		/* BE32 requester's sink STag */
	uint64_t sink_to_be;		/* BE64 requester's sink TO */
	uint32_t size_be;		/* BE32 RDMA Read message size */
	uint32_t src_stag_be;		/* BE32 responder's source STag */
	uint64_t src_to_be;		/* BE64 responder's source TO */
} IW_PACKED;
_Static_assert(sizeof(struct iw_read_req_body) == 28, "Read Request body");

struct iw_read_req {
	struct iw_untagged_hdr hdr;
	struct iw_read_req_body body;
} IW_PACKED;
_Static_assert(sizeof(struct iw_read_req) == 46, "Read Request segment");

/* ============================================================ Terminate
 * Terminate (RFC 5040 4.8), sent untagged on QN 2 with L set:
 *
 *   untagged hdr | term ctrl (BE32) | [DDP segment length (BE16), if M]
 *   | [terminated DDP header, 14 or 18 bytes, if D]
 *   | [terminated RDMAP header (Read Request body, 28 bytes), if R]
 *
 * Terminate control word (host-order masks on the BE32):
 *   Layer(4) | EType(4) | Error code(8) | HdrCt M D R (3) | Reserved(13)
 * TRP (doc/trp.md) carries the quiet time of a fatal Terminate, in ms, in
 * the 13 reserved bits.
 */
#define IW_TERM_LAYER_MASK	0xF0000000u
#define IW_TERM_LAYER_SHIFT	28
#define IW_TERM_ETYPE_MASK	0x0F000000u
#define IW_TERM_ETYPE_SHIFT	24
#define IW_TERM_ECODE_MASK	0x00FF0000u
#define IW_TERM_ECODE_SHIFT	16
#define IW_TERM_HDRCT_M		0x00008000u /* DDP segment length present */
#define IW_TERM_HDRCT_D		0x00004000u /* DDP header present */
#define IW_TERM_HDRCT_R		0x00002000u /* RDMAP header present */
#define IW_TERM_RSVD_MASK	0x00001FFFu
#define IW_TERM_QUIET_MS_MASK	IW_TERM_RSVD_MASK	/* TRP only */

struct iw_terminate_hdr {
	struct iw_untagged_hdr hdr;
	uint32_t term_ctrl_be;		/* BE32 terminate control word */
} IW_PACKED;
_Static_assert(sizeof(struct iw_terminate_hdr) == 22, "Terminate header");

#define IW_TERM_SEGLEN_LEN	2	/* the optional DDP segment length */
/* The longest Terminate ULPDU: segment length, untagged header, Read
 * Request body. */
#define IW_TERM_MAX_ULPDU	(sizeof(struct iw_terminate_hdr) + \
				 IW_TERM_SEGLEN_LEN + IW_UNTAGGED_HDR_LEN + \
				 sizeof(struct iw_read_req_body))

static inline uint32_t iw_term_ctrl(unsigned layer, unsigned etype,
				    unsigned ecode, uint32_t hdrct)
{
	return (uint32_t)(layer & 0xF) << IW_TERM_LAYER_SHIFT |
	       (uint32_t)(etype & 0xF) << IW_TERM_ETYPE_SHIFT |
	       (uint32_t)(ecode & 0xFF) << IW_TERM_ECODE_SHIFT |
	       (hdrct & (IW_TERM_HDRCT_M | IW_TERM_HDRCT_D | IW_TERM_HDRCT_R));
}
static inline unsigned iw_term_layer(uint32_t t)
{
	return (t & IW_TERM_LAYER_MASK) >> IW_TERM_LAYER_SHIFT;
}
static inline unsigned iw_term_etype(uint32_t t)
{
	return (t & IW_TERM_ETYPE_MASK) >> IW_TERM_ETYPE_SHIFT;
}
static inline unsigned iw_term_ecode(uint32_t t)
{
	return (t & IW_TERM_ECODE_MASK) >> IW_TERM_ECODE_SHIFT;
}

/* Layers */
enum iw_term_layer {
	IW_TERM_LAYER_RDMAP	= 0x0,
	IW_TERM_LAYER_DDP	= 0x1,
	IW_TERM_LAYER_LLP	= 0x2,	/* MPA for TCP (RFC 5044 section 8) */
};

/* RDMAP error types and codes (RFC 5040 section 7, IANA "RDMAP Errors"). */
enum iw_term_rdmap_etype {
	IW_TERM_RDMAP_ETYPE_CATASTROPHIC	= 0x0, /* local catastrophic */
	IW_TERM_RDMAP_ETYPE_REMOTE_PROT		= 0x1, /* remote protection */
	IW_TERM_RDMAP_ETYPE_REMOTE_OP		= 0x2, /* remote operation */
};
enum iw_term_rdmap_ecode {
	/* with ETYPE_CATASTROPHIC, the only code */
	IW_TERM_RDMAP_CATASTROPHIC		= 0x00,
	/* with ETYPE_REMOTE_PROT: */
	IW_TERM_RDMAP_INV_STAG			= 0x00, /* invalid STag */
	IW_TERM_RDMAP_BASE_BOUNDS		= 0x01, /* base/bounds violation */
	IW_TERM_RDMAP_ACCESS			= 0x02, /* access rights */
	IW_TERM_RDMAP_STAG_NOT_ASSOC		= 0x03, /* STag not of stream */
	IW_TERM_RDMAP_TO_WRAP			= 0x04, /* tagged offset wrap */
	/* with ETYPE_REMOTE_OP: */
	IW_TERM_RDMAP_INV_VERSION		= 0x05, /* invalid RDMAP version */
	IW_TERM_RDMAP_UNEXP_OPCODE		= 0x06, /* unexpected opcode */
	IW_TERM_RDMAP_CATA_STREAM		= 0x07, /* catastrophic, stream */
	IW_TERM_RDMAP_CATA_GLOBAL		= 0x08, /* catastrophic, global */
	/* with ETYPE_REMOTE_PROT or ETYPE_REMOTE_OP: */
	IW_TERM_RDMAP_CANT_INVALIDATE		= 0x09, /* STag can't be invalidated */
	IW_TERM_RDMAP_UNSPECIFIED		= 0xFF, /* unspecified error */
};

/* DDP error types and codes (RFC 5041 section 7, IANA "DDP Errors"). */
enum iw_term_ddp_etype {
	IW_TERM_DDP_ETYPE_CATASTROPHIC		= 0x0, /* local catastrophic */
	IW_TERM_DDP_ETYPE_TAGGED		= 0x1, /* tagged buffer error */
	IW_TERM_DDP_ETYPE_UNTAGGED		= 0x2, /* untagged buffer error */
};
enum iw_term_ddp_ecode {
	/* with ETYPE_CATASTROPHIC, the only code */
	IW_TERM_DDP_CATASTROPHIC		= 0x00,
	/* with ETYPE_TAGGED: */
	IW_TERM_DDP_TAG_INV_STAG		= 0x00, /* invalid STag */
	IW_TERM_DDP_TAG_BASE_BOUNDS		= 0x01, /* base/bounds violation */
	IW_TERM_DDP_TAG_STAG_NOT_ASSOC		= 0x02, /* STag not of stream */
	IW_TERM_DDP_TAG_TO_WRAP			= 0x03, /* tagged offset wrap */
	IW_TERM_DDP_TAG_INV_VERSION		= 0x04, /* invalid DDP version */
	/* with ETYPE_UNTAGGED: */
	IW_TERM_DDP_UNTAG_INV_QN		= 0x01, /* invalid queue number */
	IW_TERM_DDP_UNTAG_NO_BUF		= 0x02, /* invalid MSN: no buffer
							 * (no receive posted) */
	IW_TERM_DDP_UNTAG_INV_MSN		= 0x03, /* MSN out of range */
	IW_TERM_DDP_UNTAG_INV_MO		= 0x04, /* invalid message offset */
	IW_TERM_DDP_UNTAG_TOO_LONG		= 0x05, /* message too long for
							 * the buffer */
	IW_TERM_DDP_UNTAG_INV_VERSION		= 0x06, /* invalid DDP version */
};

/* LLP (MPA) error type and codes (RFC 5044 section 8; 0x05-0x07 from
 * RFC 6581; IANA "MPA Errors"). */
enum iw_term_llp_etype {
	IW_TERM_LLP_ETYPE_MPA			= 0x0,
};
enum iw_term_llp_ecode {
	IW_TERM_LLP_TCP_LOST			= 0x01, /* TCP connection closed,
							 * terminated or lost */
	IW_TERM_LLP_CRC				= 0x02, /* MPA CRC error */
	IW_TERM_LLP_MARKER			= 0x03, /* marker and ULPDU length
							 * field mismatch */
	IW_TERM_LLP_BAD_RR			= 0x04, /* invalid MPA request or
							 * reply frame */
	IW_TERM_LLP_CATASTROPHIC		= 0x05, /* local catastrophic */
	IW_TERM_LLP_INSUFF_IRD			= 0x06, /* insufficient IRD */
	IW_TERM_LLP_NO_RTR			= 0x07, /* no matching RTR option */
};

/* ================================================================== TRP
 * TRP, the trivial reliability protocol between UDP and DDP (doc/trp.md;
 * doc/trp.md is the protocol document).  Every UDP datagram is one TRP
 * packet: this 10-byte header (network byte order), then its body.
 *
 *   offset 0  PSN (BE32)       this packet's sequence number
 *   offset 4  ack PSN (BE32)   the highest PSN received in order
 *   offset 8  flags + credits (BE16): I A F R | credits(12)
 *
 * Flags:
 *   I (init)  a connection packet: its body is an MPA request (from the
 *             initiator) or reply (from the responder) frame, exactly as
 *             MPA sends it on TCP (RFC 5044/6581).  Sequenced.
 *   A (ack)   a pure acknowledgement: not sequenced (its PSN is the
 *             sender's next unused PSN and is not acknowledged); its body
 *             is empty or a selective-ack list of up to IW_TRP_SACK_MAX
 *             blocks (as many as fit in a packet of the path MTU), each
 *             BE32 first PSN, BE32 last PSN (inclusive), of packets held
 *             beyond the ack PSN, lowest first.
 *   F (fin)   the sender's end of the connection.  Sequenced, empty body.
 *   R         reserved: sent as 0; a packet with R set is a protocol
 *             error.
 *   none      a data packet: its body is one DDP segment (RFC 5041/5040
 *             headers and payload, no MPA framing, no CRC).  Sequenced.
 * I, A and F are exclusive.  Every packet (the initiator's first I packet
 * aside, whose ack field is 0 and ignored) acknowledges with its ack PSN
 * and credits: the receiver may send sequenced packets up to
 * ack PSN + credits.
 */
struct iw_trp_hdr {
	uint32_t psn_be;		/* BE32 this packet's sequence number */
	uint32_t ack_psn_be;		/* BE32 acknowledgement PSN */
	uint16_t flags_be;		/* BE16 IW_TRP_* flags | credits */
} IW_PACKED;
_Static_assert(sizeof(struct iw_trp_hdr) == 10, "TRP header");

#define IW_TRP_HDR_LEN		10
#define IW_TRP_I		0x8000	/* init: connection setup */
#define IW_TRP_A		0x4000	/* ack / selective ack */
#define IW_TRP_F		0x2000	/* fin */
#define IW_TRP_R		0x1000	/* reserved, sent as 0 */
#define IW_TRP_FLAGS_MASK	0xF000
#define IW_TRP_CREDITS_MASK	0x0FFF	/* 12-bit credit count */
#define IW_TRP_SACK_MAX		128	/* blocks in one ack, at most (fewer
					 * if the path MTU is smaller) */
#define IW_TRP_SACK_BLOCK	8	/* BE32 first, BE32 last */
/* IPv4 and UDP headers in front of every TRP packet. */
#define IW_TRP_IP_UDP_LEN	28

/* A decoded TRP header. */
struct iw_trp_fields {
	uint32_t psn, ack;
	uint16_t flags;			/* IW_TRP_I/A/F/R */
	uint16_t credits;
};

static inline void iw_trp_put(uint8_t *p, uint32_t psn, uint32_t ack,
			      uint16_t flags, uint32_t credits)
{
	struct iw_trp_hdr h = {
		.psn_be = iw_be32(psn),
		.ack_psn_be = iw_be32(ack),
		.flags_be = iw_be16((uint16_t)((flags & IW_TRP_FLAGS_MASK) |
			(credits > IW_TRP_CREDITS_MASK ? IW_TRP_CREDITS_MASK
						       : credits))),
	};

	memcpy(p, &h, sizeof(h));
}

static inline void iw_trp_get(const uint8_t *p, struct iw_trp_fields *f)
{
	struct iw_trp_hdr h;
	uint16_t fl;

	memcpy(&h, p, sizeof(h));
	fl = iw_be16(h.flags_be);
	f->psn = iw_be32(h.psn_be);
	f->ack = iw_be32(h.ack_psn_be);
	f->flags = fl & IW_TRP_FLAGS_MASK;
	f->credits = fl & IW_TRP_CREDITS_MASK;
}

/* PSN order, RFC 1982 serial-number arithmetic with SERIAL_BITS = 32.
 * Two PSNs exactly 2^31 apart are unordered (neither is less than the
 * other), as the RFC leaves that comparison undefined. */
static inline int iw_psn_lt(uint32_t a, uint32_t b)
{
	uint32_t d = b - a;

	return d != 0 && d < 0x80000000u;
}
static inline int iw_psn_le(uint32_t a, uint32_t b)
{
	return a == b || iw_psn_lt(a, b);
}
static inline int iw_psn_gt(uint32_t a, uint32_t b) { return iw_psn_lt(b, a); }
static inline int iw_psn_ge(uint32_t a, uint32_t b) { return iw_psn_le(b, a); }

#endif
