/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: the receive path of a connection over TRP/UDP
 * (doc/trp.md).
 *
 * A real QP with registered memory (fuzz_qp.h) attached over TRP to a
 * connected UDP socket on 127.0.0.1 reads the input as its peer's
 * datagrams: after FQ_HDR_LEN bytes of configuration, each datagram is
 * a BE16 length and that many bytes (a TRP header, then a DDP segment,
 * an ack's selective-ack blocks, ...).  The rig drives the QP after each
 * one and checks, after the input, that nothing was written outside the
 * memory the QP may write, that every completion is one of a posted WR,
 * that every datagram the QP sent is one TRP allows (flags, sequence
 * numbers, acknowledgements of nothing it was not given, DDP segments,
 * no Terminate for a user error that ends the connection and nothing
 * after a fatal one), and that a QP in ERROR sent or received a fatal
 * Terminate or lost its peer. */
#include "fuzz_check.h"
#include "fuzz_qp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fq_cfg c;
	struct fq q;

	if (size < FQ_HDR_LEN)
		return 0;
	fq_cfg_decode(data, FQ_TRP, &c);
	fq_open(&q, &c);
	fq_feed(&q, data + FQ_HDR_LEN, size - FQ_HDR_LEN);
	fq_finish(&q);
	fq_close(&q);
	return 0;
}
