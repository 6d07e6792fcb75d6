/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rig of the receive-path fuzz targets: one real QP (public engine
 * API only) on one end of a socket pair, registered memory at a fixed
 * address so tagged offsets in an input mean the same thing in every
 * run, and the checks made after every input.
 *
 * The device and its PDs are opened once; everything an input can
 * change (CQs, MRs, the window, the SRQ, the QP, its sockets) is created
 * afresh for each input, after the STag table is reset to a new device's
 * (iwe_stag_table_reset), so that STags (index and key) are the same for
 * every input and a crash reproduces from its file alone.
 *
 * Two transports: TCP (the input is the peer's byte stream, FPDUs) and
 * TRP/UDP (the input is the peer's datagrams, each behind a BE16 length;
 * doc/trp.md).
 *
 * Memory: one mapping at FQ_BASE, guard pages around four regions:
 *   RECV   local write only: receive buffers and the Read sink; bytes
 *          outside the posted SGEs must never change
 *   RW     local + remote write + remote read + MW bind; a memory window
 *          is bound over its upper half (remote write + read)
 *   RO     remote read only: must never change
 *   OTHER  all remote rights, but in another PD: must never change
 *
 * An input starts with FQ_HDR_LEN bytes of configuration:
 *   h[0] bit 0: CRC; bit 1: post an RDMA Read first; bit 2: close the
 *        peer's sending side after the input (EOF); bit 3: receives come
 *        from an SRQ; bits 4-5: MULPDU 0 (default) / 128 / 1024 / 4096;
 *        bit 6: with CRC, rewrite the CRC of every FPDU of the input
 *        (so mutated FPDUs get past the CRC check)
 *   h[1] bits 0-2: receives posted (0..7); bits 3-5: IRD - 1 (fuzz_rx
 *        uses the largest IRD when the stream is cut);
 *        bits 6-7: log2 ORD
 *   h[2] bits 0-1: largest write into the stream 1 / 7 / 64 bytes / all
 *        at once (the first 96 writes; then the rest at once); bits
 *        2-7: seed of the write sizes
 * Over TRP h[0] bits 0, 2 and 4-5 are unused, and instead:
 *   h[0] bit 6: number the sequenced datagrams (all but A) in order from
 *        the first PSN the QP expects (so mutated ones get delivered)
 *   h[2] bits 0-1: path MTU 576 / 1500 / 4096 / 9000; bits 2-3: the
 *        first PSN the QP expects (fq_trp_psns); bits 4-6: log2 of the
 *        credits the QP starts with (1..128)
 */
#ifndef IW_FUZZ_QP_H
#define IW_FUZZ_QP_H

#include <stddef.h>
#include <stdint.h>

#include "iw_engine.h"

#define FQ_BASE		((uintptr_t)0x4a5000000000ULL)
#define FQ_PAGE		4096u
#define FQ_REGION	4096u

enum fq_region { FQ_RECV, FQ_RW, FQ_RO, FQ_OTHER, FQ_NREGIONS };

#define FQ_MAP_LEN	(FQ_PAGE + FQ_NREGIONS * (FQ_REGION + FQ_PAGE))

/* Receive i: two SGEs in RECV, at i * FQ_RECV_STRIDE and 256 bytes on. */
#define FQ_RECV_STRIDE	448u
#define FQ_RECV_SGE0	200u
#define FQ_RECV_SGE1	128u
#define FQ_RECV_CAP	(FQ_RECV_SGE0 + FQ_RECV_SGE1)
#define FQ_MAX_RECV	7u
/* The Read posted first: its sink in RECV, its source at the peer. */
#define FQ_READ_SINK	3584u
#define FQ_READ_LEN	256u
#define FQ_PEER_STAG	0x00123401u
#define FQ_PEER_TO	0x1000u
/* The memory window: the upper half of RW. */
#define FQ_MW_OFF	2048u
#define FQ_MW_LEN	2048u

#define FQ_HDR_LEN	3

/* TRP: the PSN of the QP's first packet. */
#define FQ_TRP_TX_PSN	0x00a11ce0u
/* TRP: the first PSNs the QP may expect (h[2] bits 2-3); the last
 * two wrap within a few packets. */
extern const uint32_t fq_trp_psns[4];

/* Work request ids. */
#define FQ_WR_BIND	1u
#define FQ_WR_READ	2u
#define FQ_WR_RECV0	100u

enum fq_transport { FQ_TCP, FQ_TRP };

struct fq_cfg {
	enum fq_transport transport;
	int crc;
	int post_read;
	int close_at_end;
	int srq;
	int fix_crc;
	uint32_t mulpdu;
	unsigned nrecv;
	uint32_t ird, ord;
	unsigned chunk_max;		/* 0: the whole input in one write */
	unsigned chunk_seed;
	/* TRP */
	int fix_psn;
	uint32_t mtu;
	uint32_t rx_psn;		/* the first PSN the QP expects */
	uint32_t peer_credits;
};

void fq_cfg_decode(const uint8_t *h, enum fq_transport t, struct fq_cfg *c);
/* The header bytes that decode to c (c's values must be encodable). */
void fq_cfg_encode(const struct fq_cfg *c, uint8_t *h);

/* What an input did, to compare two deliveries of the same bytes. */
struct fq_outcome {
	int state, err;
	struct iwe_term_info sent, rcvd;
	struct { int status, opcode; uint32_t byte_len; } wc[FQ_WR_RECV0 + FQ_MAX_RECV];
	uint32_t mem_crc;		/* the whole mapping afterwards */
};

struct fq {
	struct fq_cfg cfg;
	struct iwe_device *dev;
	struct iwe_pd *pd, *pd2;
	struct iwe_cq *scq, *rcq;
	struct iwe_srq *srq;
	struct iwe_qp *qp;
	struct iwe_mr *mr[FQ_NREGIONS];
	struct iwe_mw *mw;
	uint32_t mw_rkey;
	int fd, peer;			/* the QP's end, ours */
	int err;			/* first error of a progress call */
	uint32_t rng;
	unsigned cuts;			/* writes made so far */
	/* What the QP sent, parsed as FPDUs or TRP datagrams. */
	uint8_t *out;
	size_t out_len;
	int term_seen;			/* the last Terminate's control word */
	uint32_t term_ctrl;
	/* TRP */
	uint32_t tx_next;		/* the PSN of the QP's next new packet */
	uint32_t fed_contig;		/* PSNs from the first given in order */
	uint32_t fix_next;		/* with fix_psn: the next PSN to give */
	int fatal_seen;			/* it sent a fatal Terminate */
	/* Completions, per work request id. */
	uint8_t done[FQ_WR_RECV0 + FQ_MAX_RECV];
	struct fq_outcome outcome;	/* filled by fq_finish */
};

/* Start of a region of the fixed mapping. */
uint8_t *fq_region(enum fq_region r);
/* Everything up to an established QP with its receives, window and
 * Read posted; aborts (a setup failure is no finding) with a reason. */
void fq_open(struct fq *q, const struct fq_cfg *c);
/* Write data into the stream in chunks, driving the QP after each
 * (after fixing its CRCs if the configuration says so); over TRP send
 * the datagrams, driving the QP after each. */
void fq_feed(struct fq *q, const uint8_t *data, size_t n);
/* EOF if configured, drive the QP to rest, check every invariant. */
void fq_finish(struct fq *q);
void fq_close(struct fq *q);

#endif
