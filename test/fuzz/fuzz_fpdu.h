/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Building FPDUs by hand (RFC 5044 framing around RFC 5041/5040
 * headers), for the seed generator and the Terminate target.
 * Header-only; every function writes at p and returns bytes written. */
#ifndef IW_FUZZ_FPDU_H
#define IW_FUZZ_FPDU_H

#include <stdint.h>
#include <string.h>

#include "iw_crc32c.h"
#include "iw_wire.h"

static inline size_t fp_untagged(uint8_t *p, unsigned opcode, int last,
				 uint32_t inv_stag, uint32_t qn, uint32_t msn,
				 uint32_t mo)
{
	struct iw_untagged_hdr h = {
		.ctrl_be = iw_be16(iw_ctrl_make(0, last, opcode)),
		.inval_stag_be = iw_be32(inv_stag),
		.qn_be = iw_be32(qn),
		.msn_be = iw_be32(msn),
		.mo_be = iw_be32(mo),
	};

	memcpy(p, &h, sizeof(h));
	return sizeof(h);
}

static inline size_t fp_tagged(uint8_t *p, unsigned opcode, int last,
			       uint32_t stag, uint64_t to)
{
	struct iw_tagged_hdr h = {
		.ctrl_be = iw_be16(iw_ctrl_make(1, last, opcode)),
		.stag_be = iw_be32(stag),
		.to_be = iw_be64(to),
	};

	memcpy(p, &h, sizeof(h));
	return sizeof(h);
}

static inline size_t fp_read_req_body(uint8_t *p, uint32_t sink_stag,
				      uint64_t sink_to, uint32_t size,
				      uint32_t src_stag, uint64_t src_to)
{
	struct iw_read_req_body b = {
		.sink_stag_be = iw_be32(sink_stag),
		.sink_to_be = iw_be64(sink_to),
		.size_be = iw_be32(size),
		.src_stag_be = iw_be32(src_stag),
		.src_to_be = iw_be64(src_to),
	};

	memcpy(p, &b, sizeof(b));
	return sizeof(b);
}

static inline size_t fp_be32(uint8_t *p, uint32_t v)
{
	uint32_t be = iw_be32(v);

	memcpy(p, &be, 4);
	return 4;
}

/* Frame a ULPDU: length, the ULPDU, pad, CRC32c (zero when crc is 0).
 * out must hold iw_fpdu_len(n) bytes; n <= IW_FPDU_MAX_ULPDU. */
static inline size_t fp_frame(uint8_t *out, const void *ulpdu, size_t n,
			      int crc)
{
	uint16_t len_be = iw_be16((uint16_t)n);
	size_t body = IW_FPDU_LEN_FIELD + n + iw_fpdu_pad((unsigned)n);

	memcpy(out, &len_be, IW_FPDU_LEN_FIELD);
	memmove(out + IW_FPDU_LEN_FIELD, ulpdu, n);
	memset(out + IW_FPDU_LEN_FIELD + n, 0, iw_fpdu_pad((unsigned)n));
	iw_fpdu_put_crc(out + body, crc ? iw_crc32c(0, out, body) : 0);
	return body + IW_FPDU_CRC_LEN;
}

#endif
