/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: the receive path of an established connection.
 *
 * A real QP with registered memory (fuzz_qp.h) reads the input as the
 * byte stream of its peer, cut into writes whose sizes the input's
 * header chooses; after the input the rig checks that nothing was
 * written outside the memory the QP may write, that every completion is
 * one of a posted WR, that what the QP sent back is well-framed, and
 * that a QP in ERROR either sent or received a Terminate or lost its
 * stream; and that the same bytes written at once do exactly the same. */
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_qp.h"

static void run(const struct fq_cfg *c, const uint8_t *d, size_t n,
		struct fq_outcome *out)
{
	struct fq q;

	fq_open(&q, c);
	fq_feed(&q, d, n);
	fq_finish(&q);
	*out = q.outcome;
	fq_close(&q);
}

/* The same bytes in one write must do exactly what they did in pieces:
 * a stream may be cut anywhere.  (Not what the QP sent: a Read Response
 * queued before an error arrives may or may not have left by then.) */
static void check_cut_invariance(const struct fq_outcome *cut,
				 const struct fq_outcome *whole)
{
	unsigned i;

	FUZZ_CHECK(cut->state == whole->state && cut->err == whole->err,
		   "cut stream: state %d err %d, whole: state %d err %d",
		   cut->state, cut->err, whole->state, whole->err);
	FUZZ_CHECK(!memcmp(&cut->sent, &whole->sent, sizeof(cut->sent)) &&
		   !memcmp(&cut->rcvd, &whole->rcvd, sizeof(cut->rcvd)),
		   "cut stream: Terminates differ from the whole stream's");
	for (i = 0; i < sizeof(cut->wc) / sizeof(cut->wc[0]); i++)
		FUZZ_CHECK(!memcmp(&cut->wc[i], &whole->wc[i],
				   sizeof(cut->wc[i])),
			   "cut stream: wr_id %u completed with status %d "
			   "len %u, whole: status %d len %u", i,
			   cut->wc[i].status - 1, cut->wc[i].byte_len,
			   whole->wc[i].status - 1, whole->wc[i].byte_len);
	FUZZ_CHECK(cut->mem_crc == whole->mem_crc,
		   "cut stream: memory differs from the whole stream's");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fq_outcome cut, whole;
	struct fq_cfg c;

	if (size < FQ_HDR_LEN)
		return 0;
	fq_cfg_decode(data, FQ_TCP, &c);
	if (!c.chunk_max) {
		run(&c, data + FQ_HDR_LEN, size - FQ_HDR_LEN, &whole);
		return 0;
	}
	/* Whether a Read Request finds the IRD full depends on whether the
	 * response to the one before has gone out yet: timing, which the
	 * comparison must not see.  No input holds more Requests than
	 * this. */
	c.ird = IWE_MAX_IRD;
	run(&c, data + FQ_HDR_LEN, size - FQ_HDR_LEN, &cut);
	c.chunk_max = 0;
	run(&c, data + FQ_HDR_LEN, size - FQ_HDR_LEN, &whole);
	check_cut_invariance(&cut, &whole);
	return 0;
}
