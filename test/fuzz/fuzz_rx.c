/* libFuzzer target: the receive path of an established connection.
 *
 * A real QP with registered memory (fuzz_qp.h) reads the input as the
 * byte stream of its peer, cut into writes whose sizes the input's
 * header chooses; after the input the rig checks that nothing was
 * written outside the memory the QP may write, that every completion is
 * one of a posted WR, that what the QP sent back is well-framed, and
 * that a QP in ERROR either sent or received a Terminate or lost its
 * stream. */
#include "fuzz_check.h"
#include "fuzz_qp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fq_cfg c;
	struct fq q;

	if (size < FQ_HDR_LEN)
		return 0;
	fq_cfg_decode(data, &c);
	fq_open(&q, &c);
	fq_feed(&q, data + FQ_HDR_LEN, size - FQ_HDR_LEN);
	fq_finish(&q);
	fq_close(&q);
	return 0;
}
