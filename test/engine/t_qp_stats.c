/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine's per-QP counters (iwe_qp_query_stats) that the DAT
 * counters are built from: messages and payload bytes by RDMAP opcode on
 * both sides, a refused post counted as queue-full, and a byte flipped in
 * transit counted as one CRC error with its Terminate by code on both
 * sides (t_stats checks the DAT view over real connections). */
#include "qp_harness.h"

#define LLP_CRC_CODE ((IW_TERM_LAYER_LLP << 12) | \
		      (IW_TERM_LLP_ETYPE_MPA << 8) | IW_TERM_LLP_CRC)

static void test_counts(void)
{
	struct opts o = { .crc = 1, .mulpdu = 1000 };
	struct iwe_qp_stats sa, sb;
	struct pair p;
	int ok = 1;

	pair_open(&p, &o);
	for (int i = 0; i < 3; i++)
		ok &= post_recv1(&p.b, (uint64_t)i, (size_t)i * 4096, 4096) == 0;
	for (int i = 0; i < 3; i++)	/* 2500 bytes: 3 FPDUs each */
		ok &= post_send1(&p.a, 10u + (unsigned)i, IBV_WR_SEND, 0, 2500,
				 0, 0, IBV_SEND_SIGNALED) == 0;
	ok &= post_send1(&p.a, 20, IBV_WR_RDMA_WRITE, 0, 4096,
			 (uintptr_t)p.b.buf + 65536, p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0;
	ok &= post_send1(&p.a, 21, IBV_WR_RDMA_READ, 8192, 512,
			 (uintptr_t)p.b.buf + 65536, p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0;
	CHECK(ok && pump_cq(&p, p.a.scq, 5) && pump_cq(&p, p.b.rcq, 3),
	      "3 Sends, 1 Write, 1 Read complete");
	iwe_qp_query_stats(p.a.qp, &sa);
	iwe_qp_query_stats(p.b.qp, &sb);
	CHECK(sa.tx_msgs[IW_OP_SEND] == 3 && sa.tx_bytes[IW_OP_SEND] == 7500 &&
	      sb.rx_msgs[IW_OP_SEND] == 3 && sb.rx_bytes[IW_OP_SEND] == 7500,
	      "Sends: 3 messages, 7500 bytes each way");
	CHECK(sa.tx_msgs[IW_OP_WRITE] == 1 && sa.tx_bytes[IW_OP_WRITE] == 4096 &&
	      sb.rx_msgs[IW_OP_WRITE] == 1 && sb.rx_bytes[IW_OP_WRITE] == 4096,
	      "Write: 1 message, 4096 bytes");
	CHECK(sa.tx_msgs[IW_OP_READ_REQ] == 1 && sb.rx_msgs[IW_OP_READ_REQ] == 1 &&
	      sb.tx_msgs[IW_OP_READ_RESP] == 1 &&
	      sb.tx_bytes[IW_OP_READ_RESP] == 512 &&
	      sa.rx_msgs[IW_OP_READ_RESP] == 1 &&
	      sa.rx_bytes[IW_OP_READ_RESP] == 512,
	      "Read: 1 request, 1 response of 512 bytes");
	CHECK(sa.crc_errors == 0 && sb.crc_errors == 0 && sa.term_sent == 0 &&
	      sb.term_sent == 0 && sa.queue_full == 0,
	      "no CRC error, Terminate or refusal");
	pair_close(&p);
}

static void test_queue_full(void)
{
	struct opts o = { .crc = 1 };
	struct iwe_qp_stats s;
	struct pair p;
	int refused = 0;

	pair_open(&p, &o);
	/* The receive queue holds 32: the 33rd and 34th posts are refused. */
	for (int i = 0; i < 34; i++)
		refused += post_recv1(&p.b, (uint64_t)i, 0, 16) != 0;
	iwe_qp_query_stats(p.b.qp, &s);
	CHECK(refused == 2 && s.queue_full == 2,
	      "2 refused receive posts count 2 queue-full (%d, %llu)", refused,
	      (unsigned long long)s.queue_full);
	pair_close(&p);
}

static void test_crc_error(void)
{
	struct opts o = { .crc = 1, .relay = 1 };
	struct iwe_qp_stats sa, sb;
	struct pair p;

	pair_open(&p, &o);
	p.flip_at = 30;		/* inside the first FPDU's payload */
	post_recv1(&p.b, 1, 0, 1000);
	post_send1(&p.a, 2, IBV_WR_SEND, 0, 100, 0, 0, IBV_SEND_SIGNALED);
	pump(&p, 5000);
	iwe_qp_query_stats(p.a.qp, &sa);
	iwe_qp_query_stats(p.b.qp, &sb);
	CHECK(sb.crc_errors == 1 && sa.crc_errors == 0,
	      "a flipped byte: 1 CRC error at the receiver");
	CHECK(sb.term_sent == 1 && sb.term_sent_code[0].code == LLP_CRC_CODE &&
	      sb.term_sent_code[0].n == 1 && sb.term_sent_code[1].n == 0,
	      "the receiver sent 1 Terminate, code 0x%04x",
	      (unsigned)LLP_CRC_CODE);
	CHECK(sa.term_rcvd == 1 && sa.term_rcvd_code[0].code == LLP_CRC_CODE &&
	      sa.term_rcvd_code[0].n == 1,
	      "the sender received it, by code");
	CHECK(sb.rx_msgs[IW_OP_SEND] == 0, "the bad FPDU is no message");
	pair_close(&p);
}

static void test_code_table(void)
{
	struct iwe_term_count t[IWE_TERM_CODES];

	memset(t, 0, sizeof(t));
	for (uint32_t c = 0; c < IWE_TERM_CODES + 2; c++)
		iwe_term_count_add(t, 0x100 + c, 1);
	iwe_term_count_add(t, 0x100, 2);
	CHECK(t[0].code == 0x100 && t[0].n == 3 &&
	      t[IWE_TERM_CODES - 1].code == 0x100 + IWE_TERM_CODES - 1 &&
	      t[IWE_TERM_CODES - 1].n == 1,
	      "codes keep their slot; codes past the table are dropped");
}

int main(void)
{
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_counts();
	test_queue_full();
	test_crc_error();
	test_code_table();
	iwe_device_close(g_dev);
	return tap_done();
}
