/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: received Terminates.  The input after its first
 * byte is the body of a Terminate (RFC 5040 4.8: control word, then the
 * echoed DDP segment length, DDP header and RDMAP header as its HdrCt
 * bits say) behind a valid untagged header on QN 2, framed with a good
 * CRC, so the fuzzer's time goes into the Terminate parser rather than
 * into finding the framing.
 *
 * data[0]: bit 0 CRC; bit 1 an RDMA Read outstanding (a Terminate may
 * name it); bit 2 EOF after the FPDU; bit 3 the L bit cleared (a
 * Terminate must be one whole segment); bit 4 written in small pieces.
 *
 * Beyond the receive-path checks (fuzz_qp.c): a complete Terminate with
 * L set ends the QP in ERROR and is never answered with a Terminate. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_fpdu.h"
#include "fuzz_qp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t max_body = IW_FPDU_MAX_ULPDU - IW_UNTAGGED_HDR_LEN;
	struct fq_cfg c = { .nrecv = 2, .ird = 4, .ord = 4 };
	struct iwe_term_info sent, rcvd;
	size_t body, ulen, n;
	uint8_t *f;
	struct fq q;
	int last;

	if (size < 1)
		return 0;
	c.crc = data[0] & 1;
	c.post_read = !!(data[0] & 2);
	c.close_at_end = !!(data[0] & 4);
	last = !(data[0] & 8);
	c.chunk_max = data[0] & 0x10 ? 7 : 0;
	c.chunk_seed = data[0] >> 5;
	body = size - 1 < max_body ? size - 1 : max_body;
	ulen = IW_UNTAGGED_HDR_LEN + body;
	f = malloc(iw_fpdu_len((unsigned)ulen));
	if (!f)
		return 0;
	fp_untagged(f + IW_FPDU_LEN_FIELD, IW_OP_TERMINATE, last, 0,
		    IW_QN_TERMINATE, 1, 0);
	memcpy(f + IW_FPDU_LEN_FIELD + IW_UNTAGGED_HDR_LEN, data + 1, body);
	n = fp_frame(f, f + IW_FPDU_LEN_FIELD, ulen, c.crc);

	fq_open(&q, &c);
	fq_feed(&q, f, n);
	fq_finish(&q);
	iwe_qp_terminate_info(q.qp, &sent, &rcvd);
	if (last) {
		FUZZ_CHECK(iwe_qp_get_state(q.qp) == IWE_QPS_ERROR,
			   "a Terminate left the QP in state %d",
			   (int)iwe_qp_get_state(q.qp));
		FUZZ_CHECK(!sent.valid && !q.term_seen,
			   "a Terminate answered with one (%u/%u/%u)",
			   sent.layer, sent.etype, sent.ecode);
	}
	fq_close(&q);
	free(f);
	return 0;
}
