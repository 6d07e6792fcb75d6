/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The receive-path fuzz rig (see fuzz_qp.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_qp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "fuzz_check.h"
#include "iw_crc32c.h"
#include "iw_trp.h"
#include "iw_wire.h"

#define OUT_CAP (1u << 18)	/* what the QP sends, until parsed */

static const uint32_t mulpdus[] = { 0, 128, 1024, 4096 };
static const unsigned chunk_maxes[] = { 1, 7, 64, 0 };
static const uint32_t trp_mtus[] = { 576, 1500, 4096, 9000 };
const uint32_t fq_trp_psns[4] = { 1, 0xfffffffdu, 0x7ffffffeu, 0 };

/* ------------------------------------------------------ configuration */

void fq_cfg_decode(const uint8_t *h, enum fq_transport t, struct fq_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->transport = t;
	c->post_read = !!(h[0] & 2);
	c->srq = !!(h[0] & 8);
	c->nrecv = h[1] & 7;
	c->ird = 1 + ((h[1] >> 3) & 7);
	c->ord = 1u << ((h[1] >> 6) & 3);
	if (t == FQ_TRP) {
		c->fix_psn = !!(h[0] & 0x40);
		c->mtu = trp_mtus[h[2] & 3];
		c->rx_psn = fq_trp_psns[(h[2] >> 2) & 3];
		c->peer_credits = 1u << ((h[2] >> 4) & 7);
		return;
	}
	c->crc = h[0] & 1;
	c->close_at_end = !!(h[0] & 4);
	c->fix_crc = c->crc && (h[0] & 0x40);
	c->mulpdu = mulpdus[(h[0] >> 4) & 3];
	c->chunk_max = chunk_maxes[h[2] & 3];
	c->chunk_seed = h[2] >> 2;
}

static unsigned index_of(const uint32_t *v, unsigned n, uint32_t x)
{
	unsigned i;

	for (i = 0; i < n && v[i] != x; i++)
		;
	return i < n ? i : 0;
}

void fq_cfg_encode(const struct fq_cfg *c, uint8_t *h)
{
	static const uint32_t cm[] = { 1, 7, 64, 0 };
	unsigned lg = 0, lc = 0;

	while ((1u << lg) < c->ord && lg < 3)
		lg++;
	while ((1u << lc) < c->peer_credits && lc < 7)
		lc++;
	h[1] = (uint8_t)((c->nrecv & 7) | ((c->ird - 1) & 7) << 3 | lg << 6);
	if (c->transport == FQ_TRP) {
		h[0] = (uint8_t)((c->post_read ? 2 : 0) | (c->srq ? 8 : 0) |
				 (c->fix_psn ? 0x40 : 0));
		h[2] = (uint8_t)(index_of(trp_mtus, 4, c->mtu) |
				 index_of(fq_trp_psns, 4, c->rx_psn) << 2 |
				 lc << 4);
		return;
	}
	h[0] = (uint8_t)((c->crc ? 1 : 0) | (c->post_read ? 2 : 0) |
			 (c->close_at_end ? 4 : 0) | (c->srq ? 8 : 0) |
			 (c->fix_crc ? 0x40 : 0) |
			 index_of(mulpdus, 4, c->mulpdu) << 4);
	h[2] = (uint8_t)(index_of(cm, 4, c->chunk_max) | (c->chunk_seed & 63) << 2);
}

/* ------------------------------------------------------------- memory */

/* The reference contents of the whole mapping, and the mapping. */
static uint8_t *g_map;
static uint8_t g_ref[FQ_MAP_LEN];

uint8_t *fq_region(enum fq_region r)
{
	return g_map + FQ_PAGE + (size_t)r * (FQ_REGION + FQ_PAGE);
}

static void map_once(void)
{
	size_t i;

	if (g_map)
		return;
	/* A fixed address makes tagged offsets reproducible; fall back to
	 * any address (then only within one run) if it is taken. */
	g_map = mmap((void *)FQ_BASE, FQ_MAP_LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (g_map == MAP_FAILED || g_map != (uint8_t *)FQ_BASE) {
		fprintf(stderr, "fuzz_qp: cannot map at %#lx, TOs will differ\n",
			(unsigned long)FQ_BASE);
		if (g_map != MAP_FAILED)
			munmap(g_map, FQ_MAP_LEN);
		g_map = mmap(NULL, FQ_MAP_LEN, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FUZZ_CHECK(g_map != MAP_FAILED, "mmap: %s", strerror(errno));
	}
	for (i = 0; i < FQ_MAP_LEN; i++)
		g_ref[i] = (uint8_t)(i * 131 + (i >> 9) + 7);
}

/* ---------------------------------------------------------------- setup */

static void setup_fail(const char *what)
{
	fprintf(stderr, "fuzz_qp: setup failed: %s: %s\n", what,
		strerror(errno));
	abort();
}

/* What lives across inputs, one set per transport: opening a device
 * costs netlink lookups, more than the rest of an input. */
static struct rig_dev {
	struct iwe_device *dev;
	struct iwe_pd *pd, *pd2;
} g_devs[2];
static uint8_t g_out[OUT_CAP];
/* TRP: the sequenced PSNs given to the QP, as offsets from the first
 * it expects (the window is far smaller than FED_SPAN: a PSN further on
 * cannot be acknowledged). */
#define FED_SPAN (1u << 16)
static uint8_t g_fed[FED_SPAN / 8];

static struct rig_dev *rig_dev(enum fq_transport t)
{
	struct rig_dev *d = &g_devs[t];

	if (d->dev)
		return d;
	d->dev = iwe_device_open("lo", t == FQ_TRP ? IWE_TRANSPORT_UDP
						   : IWE_TRANSPORT_TCP);
	if (!d->dev)
		setup_fail("iwe_device_open(lo)");
	d->pd = iwe_alloc_pd(d->dev);
	d->pd2 = iwe_alloc_pd(d->dev);
	if (!d->pd || !d->pd2)
		setup_fail("iwe_alloc_pd");
	return d;
}

static void make_objects(struct fq *q)
{
	static const int access[FQ_NREGIONS] = {
		[FQ_RECV] = IBV_ACCESS_LOCAL_WRITE,
		[FQ_RW] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND,
		[FQ_RO] = IBV_ACCESS_REMOTE_READ,
		[FQ_OTHER] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ,
	};
	struct rig_dev *d = rig_dev(q->cfg.transport);
	struct iwe_qp_init_attr at = { 0 };
	int r;

	q->dev = d->dev;
	q->pd = d->pd;
	q->pd2 = d->pd2;
	/* The previous input's MRs and window are gone: the STags below
	 * come out as on a new device. */
	errno = iwe_stag_table_reset(q->dev);
	if (errno)
		setup_fail("iwe_stag_table_reset");
	if (q->cfg.transport == FQ_TRP && iwe_device_set_mtu(q->dev, q->cfg.mtu))
		setup_fail("iwe_device_set_mtu");
	q->scq = iwe_create_cq(q->dev, 64, NULL, NULL);
	q->rcq = iwe_create_cq(q->dev, 64, NULL, NULL);
	if (!q->scq || !q->rcq)
		setup_fail("cq");
	for (r = 0; r < FQ_NREGIONS; r++) {
		q->mr[r] = iwe_reg_mr(r == FQ_OTHER ? q->pd2 : q->pd,
				      fq_region((enum fq_region)r), FQ_REGION,
				      access[r]);
		if (!q->mr[r])
			setup_fail("iwe_reg_mr");
	}
	q->mw = iwe_alloc_mw(q->pd);
	if (!q->mw)
		setup_fail("iwe_alloc_mw");
	if (q->cfg.srq) {
		struct iwe_srq_init_attr sa = {
			.attr = { .max_wr = 16, .max_sge = 4 } };

		q->srq = iwe_create_srq(q->pd, &sa);
		if (!q->srq)
			setup_fail("iwe_create_srq");
	}
	at.send_cq = q->scq;
	at.recv_cq = q->rcq;
	at.srq = q->srq;
	at.cap = (struct iwe_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16,
				      .max_send_sge = 4, .max_recv_sge = 4 };
	at.sq_sig_all = 1;
	q->qp = iwe_create_qp(q->pd, &at);
	if (!q->qp)
		setup_fail("iwe_create_qp");
}

/* Two UDP sockets on 127.0.0.1 (ports the kernel picks), each connected
 * to the other. */
static void udp_pair(int fd[2])
{
	struct sockaddr_in sa[2];
	socklen_t len;
	int i;

	for (i = 0; i < 2; i++) {
		fd[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       0);
		sa[i] = (struct sockaddr_in){ .sin_family = AF_INET };
		sa[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(sa[i]);
		if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&sa[i], len) ||
		    getsockname(fd[i], (struct sockaddr *)&sa[i], &len))
			setup_fail("udp socket");
	}
	for (i = 0; i < 2; i++)
		if (connect(fd[i], (struct sockaddr *)&sa[1 - i], sizeof(sa[0])))
			setup_fail("udp connect");
}

static void attach_trp(struct fq *q, const struct iwe_stream_params *sp)
{
	struct iwe_trp_start st = { .tx_psn = FQ_TRP_TX_PSN,
				    .rx_psn = q->cfg.rx_psn,
				    .peer_credits = q->cfg.peer_credits };
	int fd[2];

	udp_pair(fd);
	q->fd = fd[0];
	q->peer = fd[1];
	q->tx_next = FQ_TRP_TX_PSN;
	q->fix_next = q->cfg.rx_psn;
	memset(g_fed, 0, sizeof(g_fed));
	if (iwe_modify_qp(q->qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_llp(q->qp, q->fd, sp, NULL, &iwe_llp_trp, &st))
		setup_fail("attach over TRP");
}

static void attach(struct fq *q)
{
	struct iwe_stream_params sp = {
		.crc = q->cfg.crc, .mulpdu = q->cfg.mulpdu,
		.ird = q->cfg.ird, .ord = q->cfg.ord, .mpa_rev = 2,
	};
	int sv[2];

	if (q->cfg.transport == FQ_TRP) {
		attach_trp(q, &sp);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
		setup_fail("socketpair");
	q->fd = sv[0];
	q->peer = sv[1];
	if (iwe_modify_qp(q->qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_stream(q->qp, q->fd, &sp))
		setup_fail("attach");
}

static void post_recvs(struct fq *q)
{
	uint8_t *b = fq_region(FQ_RECV);
	unsigned i;

	for (i = 0; i < q->cfg.nrecv; i++) {
		struct ibv_sge sg[2] = {
			{ .addr = (uintptr_t)(b + i * FQ_RECV_STRIDE),
			  .length = FQ_RECV_SGE0, .lkey = q->mr[FQ_RECV]->lkey },
			{ .addr = (uintptr_t)(b + i * FQ_RECV_STRIDE + 256),
			  .length = FQ_RECV_SGE1, .lkey = q->mr[FQ_RECV]->lkey },
		};
		struct ibv_recv_wr wr = { .wr_id = FQ_WR_RECV0 + i,
					  .sg_list = sg, .num_sge = 2 };
		struct ibv_recv_wr *bad;
		int rc = q->srq ? iwe_post_srq_recv(q->srq, &wr, &bad)
				: iwe_post_recv(q->qp, &wr, &bad);

		if (rc)
			setup_fail("post receive");
	}
}

static void post_send_wr(struct fq *q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (iwe_post_send(q->qp, wr, &bad))
		setup_fail("post send");
}

static void bind_window(struct fq *q)
{
	struct ibv_send_wr wr = { .wr_id = FQ_WR_BIND };
	struct ibv_wc wc;

	iwe_wr_set_bind_mw(&wr, q->mw, q->mr[FQ_RW],
			   (uintptr_t)(fq_region(FQ_RW) + FQ_MW_OFF), FQ_MW_LEN,
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	post_send_wr(q, &wr);
	q->mw_rkey = wr.bind_mw.rkey;
	iwe_qp_progress_tx(q->qp);
	if (iwe_poll_cq(q->scq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.wr_id != FQ_WR_BIND)
		setup_fail("memory window bind");
}

static void post_read(struct fq *q)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(fq_region(FQ_RECV) + FQ_READ_SINK),
		.length = FQ_READ_LEN, .lkey = q->mr[FQ_RECV]->lkey };
	struct ibv_send_wr wr = { .wr_id = FQ_WR_READ, .sg_list = &sg,
				  .num_sge = 1, .opcode = IBV_WR_RDMA_READ };

	wr.wr.rdma.remote_addr = FQ_PEER_TO;
	wr.wr.rdma.rkey = FQ_PEER_STAG;
	post_send_wr(q, &wr);
}

static void drain(struct fq *q);

void fq_open(struct fq *q, const struct fq_cfg *c)
{
	map_once();
	memcpy(g_map, g_ref, FQ_MAP_LEN);
	memset(q, 0, sizeof(*q));
	q->cfg = *c;
	q->fd = q->peer = -1;
	q->rng = c->chunk_seed * 2654435761u + 1;
	q->out = g_out;
	make_objects(q);
	attach(q);
	post_recvs(q);
	bind_window(q);
	if (c->post_read)
		post_read(q);
	iwe_qp_progress_tx(q->qp);
	drain(q);
}

struct prog_barrier {
	struct iwe_prog_task task;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int passed;
};

static void barrier_passed(struct iwe_prog_task *t)
{
	struct prog_barrier *b = IWE_CONTAINER_OF(t, struct prog_barrier, task);

	pthread_mutex_lock(&b->lock);
	b->passed = 1;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* TRP frees a detached QP's state in a task of the progress thread:
 * wait until the tasks posted so far ran, so that an input frees all it
 * allocated (libFuzzer runs an input that seems to leak again, with a
 * leak check: twice the cost). */
static void wait_progress_tasks(struct iwe_device *dev)
{
	struct prog_barrier b = { .task = { .fn = barrier_passed },
				  .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER };
	struct iwe_prog *p = iwe_prog_get(dev);

	if (!p)
		return;
	iwe_prog_post(p, &b.task);
	pthread_mutex_lock(&b.lock);
	while (!b.passed)
		pthread_cond_wait(&b.cond, &b.lock);
	pthread_mutex_unlock(&b.lock);
}

/* Everything but the device and its PDs, which the next input reuses:
 * each must go (the next STag table reset depends on it). */
void fq_close(struct fq *q)
{
	int r, err;

	err = iwe_destroy_qp(q->qp);
	FUZZ_CHECK(!err, "iwe_destroy_qp: %s", strerror(err));
	if (q->cfg.transport == FQ_TRP)
		wait_progress_tasks(q->dev);
	err = q->srq ? iwe_destroy_srq(q->srq) : 0;
	FUZZ_CHECK(!err, "iwe_destroy_srq: %s", strerror(err));
	err = iwe_dealloc_mw(q->mw);
	FUZZ_CHECK(!err, "iwe_dealloc_mw: %s", strerror(err));
	for (r = 0; r < FQ_NREGIONS; r++) {
		err = iwe_dereg_mr(q->mr[r]);
		FUZZ_CHECK(!err, "iwe_dereg_mr: %s", strerror(err));
	}
	err = iwe_destroy_cq(q->scq);
	err = err ? err : iwe_destroy_cq(q->rcq);
	FUZZ_CHECK(!err, "iwe_destroy_cq: %s", strerror(err));
	close(q->fd);
	close(q->peer);
}

/* ------------------------------------------------ what the QP sends */

/* The classes of Terminate TRP does not end the connection for: one
 * request's access error (doc/trp.md, "Terminate"). */
static int trp_user_error(uint32_t ctrl)
{
	unsigned layer = iw_term_layer(ctrl), etype = iw_term_etype(ctrl);

	if (layer == IW_TERM_LAYER_RDMAP)
		return etype == IW_TERM_RDMAP_ETYPE_REMOTE_PROT;
	return layer == IW_TERM_LAYER_DDP && etype == IW_TERM_DDP_ETYPE_TAGGED &&
	       iw_term_ecode(ctrl) != IW_TERM_DDP_TAG_INV_VERSION;
}

/* A Terminate the QP sent.  Over TCP it is the only one.  Over TRP one
 * with quiet time 0 reports a user error (a Write's or Read Request's)
 * and the connection goes on; any other is fatal (a user error's code
 * too, when the segment was, say, a Read Response), carries our quiet
 * time, and is the last packet. */
static void check_out_term(struct fq *q, uint32_t ctrl)
{
	uint32_t quiet = ctrl & IW_TERM_QUIET_MS_MASK;

	if (q->cfg.transport == FQ_TCP) {
		FUZZ_CHECK(!q->term_seen, "two Terminates sent");
	} else if (!quiet) {
		FUZZ_CHECK(trp_user_error(ctrl), "a Terminate (%#x) with no "
			   "quiet time for no user error", ctrl);
	} else {
		FUZZ_CHECK(quiet == TRP_QUIET_MS, "a fatal Terminate (%#x) "
			   "with quiet time %u", ctrl, quiet);
		q->fatal_seen = 1;
	}
	q->term_seen = 1;
	q->term_ctrl = ctrl;
}

/* One DDP segment the QP sent: its headers' versions, a Terminate. */
static void check_out_ulpdu(struct fq *q, const uint8_t *u, unsigned ulen)
{
	uint16_t ctrl_be, ctrl;

	FUZZ_CHECK(ulen >= IW_TAGGED_HDR_LEN, "sent a %u-byte ULPDU", ulen);
	memcpy(&ctrl_be, u, 2);
	ctrl = iw_be16(ctrl_be);
	FUZZ_CHECK(iw_ctrl_dv(ctrl) == IW_DDP_VERSION &&
		   iw_ctrl_rv(ctrl) == IW_RDMAP_VERSION,
		   "sent control word %#x", ctrl);
	FUZZ_CHECK(iw_ctrl_tagged(ctrl) || ulen >= IW_UNTAGGED_HDR_LEN,
		   "sent a %u-byte untagged ULPDU", ulen);
	if (iw_ctrl_opcode(ctrl) == IW_OP_TERMINATE && !iw_ctrl_tagged(ctrl)) {
		uint32_t t;

		FUZZ_CHECK(ulen >= sizeof(struct iw_terminate_hdr),
			   "short Terminate sent");
		memcpy(&t, u + IW_UNTAGGED_HDR_LEN, 4);
		check_out_term(q, iw_be32(t));
	}
}

/* One whole FPDU the QP sent: framing, CRC, MULPDU, then the segment. */
static void check_out_fpdu(struct fq *q, const uint8_t *f, unsigned ulen)
{
	unsigned body = IW_FPDU_LEN_FIELD + ulen + iw_fpdu_pad(ulen);
	uint32_t mulpdu = q->cfg.mulpdu ? q->cfg.mulpdu : IWE_DEFAULT_MULPDU;

	FUZZ_CHECK(ulen <= mulpdu, "sent a %u-byte ULPDU, MULPDU %u", ulen,
		   mulpdu);
	if (q->cfg.crc)
		FUZZ_CHECK(iw_crc32c(0, f, body) == iw_fpdu_get_crc(f + body),
			   "sent an FPDU with a bad CRC");
	check_out_ulpdu(q, f + IW_FPDU_LEN_FIELD, ulen);
}

static void parse_out(struct fq *q)
{
	size_t off = 0;

	while (q->out_len - off >= IW_FPDU_LEN_FIELD) {
		uint16_t len_be;
		unsigned ulen, total;

		memcpy(&len_be, q->out + off, 2);
		ulen = iw_be16(len_be);
		total = iw_fpdu_len(ulen);
		if (q->out_len - off < total)
			break;
		check_out_fpdu(q, q->out + off, ulen);
		off += total;
	}
	memmove(q->out, q->out + off, q->out_len - off);
	q->out_len -= off;
}

static int fed_has(uint32_t off)
{
	return off < FED_SPAN && (g_fed[off / 8] >> (off % 8) & 1);
}

static void note_fed(struct fq *q, const uint8_t *p, size_t len)
{
	struct iw_trp_fields f;
	uint32_t off;

	if (len < IW_TRP_HDR_LEN)
		return;
	iw_trp_get(p, &f);
	off = f.psn - q->cfg.rx_psn;
	if ((f.flags & (IW_TRP_A | IW_TRP_R)) || off >= FED_SPAN)
		return;
	g_fed[off / 8] |= (uint8_t)(1u << (off % 8));
	while (fed_has(q->fed_contig))
		q->fed_contig++;
}

/* Whether the QP may say it has every PSN from its first to psn. */
static int acked_ok(const struct fq *q, uint32_t psn)
{
	return psn - (q->cfg.rx_psn - 1) <= q->fed_contig;
}

/* A pure ack's selective-ack blocks: ranges beyond the ack PSN, in
 * order, of packets the QP was given. */
static void check_out_sack(const struct fq *q, const struct iw_trp_fields *f,
			   const uint8_t *b, size_t n)
{
	uint32_t prev = f->ack, be[2], first, last, psn;
	size_t off;

	FUZZ_CHECK(n % IW_TRP_SACK_BLOCK == 0 &&
		   n / IW_TRP_SACK_BLOCK <= IW_TRP_SACK_MAX,
		   "an ack with a %zu-byte body", n);
	for (off = 0; off < n; off += IW_TRP_SACK_BLOCK) {
		memcpy(be, b + off, sizeof(be));
		first = iw_be32(be[0]);
		last = iw_be32(be[1]);
		FUZZ_CHECK(iw_psn_lt(prev, first) &&
			   last - first < TRP_WINDOW_MAX,
			   "selective ack %u..%u after %u", first, last, prev);
		for (psn = first; psn != last + 1; psn++)
			FUZZ_CHECK(fed_has(psn - q->cfg.rx_psn),
				   "selective ack of PSN %u, never given", psn);
		prev = last;
	}
}

/* One datagram the QP sent: a TRP header it may send, sequence numbers
 * in order (or a retransmission), what it acknowledges, the body. */
static void check_out_datagram(struct fq *q, const uint8_t *b, size_t n)
{
	uint32_t pkt_max = q->cfg.mtu - IW_TRP_IP_UDP_LEN;
	struct iw_trp_fields f;

	FUZZ_CHECK(n >= IW_TRP_HDR_LEN && n <= pkt_max,
		   "sent a %zu-byte datagram (MTU %u)", n, q->cfg.mtu);
	FUZZ_CHECK(!q->fatal_seen, "sent a datagram after a fatal Terminate");
	iw_trp_get(b, &f);
	FUZZ_CHECK(f.flags == 0 || f.flags == IW_TRP_A || f.flags == IW_TRP_F,
		   "sent TRP flags %#x", f.flags);
	FUZZ_CHECK(acked_ok(q, f.ack), "acknowledged PSN %u, first %u, "
		   "%u in order given", f.ack, q->cfg.rx_psn, q->fed_contig);
	if (f.flags == IW_TRP_A) {
		check_out_sack(q, &f, b + IW_TRP_HDR_LEN, n - IW_TRP_HDR_LEN);
		return;
	}
	if (f.psn != q->tx_next) {
		FUZZ_CHECK(iw_psn_lt(f.psn, q->tx_next),
			   "sent PSN %u, next new one %u", f.psn, q->tx_next);
		return;		/* sent again */
	}
	q->tx_next++;
	if (f.flags == IW_TRP_F)
		FUZZ_CHECK(n == IW_TRP_HDR_LEN, "an F with a body");
	else
		check_out_ulpdu(q, b + IW_TRP_HDR_LEN,
				(unsigned)(n - IW_TRP_HDR_LEN));
}

/* Read everything the QP wrote. */
static void drain(struct fq *q)
{
	for (;;) {
		ssize_t n = read(q->peer, q->out + q->out_len,
				 OUT_CAP - q->out_len);

		if (n <= 0)
			return;
		if (q->cfg.transport == FQ_TRP) {
			check_out_datagram(q, q->out, (size_t)n);
			continue;
		}
		q->out_len += (size_t)n;
		parse_out(q);
		FUZZ_CHECK(q->out_len < OUT_CAP, "unframed bytes sent");
	}
}

/* ------------------------------------------------------------- driving */

static void note_err(struct fq *q, int err)
{
	if (err && !q->err)
		q->err = err;
}

static void step(struct fq *q)
{
	note_err(q, iwe_qp_progress_rx(q->qp));
	note_err(q, iwe_qp_progress_tx(q->qp));
	drain(q);
}

/* Writes cut as the header says, up to MAX_CUTS of them (each costs a
 * few system calls); then the rest at once. */
#define MAX_CUTS 96

static size_t next_chunk(struct fq *q, size_t left)
{
	size_t n;

	if (!q->cfg.chunk_max || q->cuts++ >= MAX_CUTS)
		return left;
	q->rng ^= q->rng << 13;
	q->rng ^= q->rng >> 17;
	q->rng ^= q->rng << 5;
	n = 1 + q->rng % q->cfg.chunk_max;
	return n < left ? n : left;
}

/* Walk the bytes as FPDUs and give each whole one a good CRC. */
static void fix_crcs(uint8_t *b, size_t n)
{
	size_t off = 0;

	while (n - off >= IW_FPDU_LEN_FIELD) {
		uint16_t len_be;
		size_t body, total;

		memcpy(&len_be, b + off, 2);
		body = IW_FPDU_LEN_FIELD + iw_be16(len_be) +
		       iw_fpdu_pad(iw_be16(len_be));
		total = body + IW_FPDU_CRC_LEN;
		if (n - off < total)
			return;
		iw_fpdu_put_crc(b + off + body, iw_crc32c(0, b + off, body));
		off += total;
	}
}

/* Over TRP: each datagram behind its BE16 length (the last one gets
 * what is left), numbered in order if the configuration says so. */
static void feed_datagrams(struct fq *q, uint8_t *d, size_t n)
{
	size_t off = 0;

	while (n - off >= 2) {
		size_t len = (size_t)d[off] << 8 | d[off + 1];
		uint8_t *p = d + off + 2;

		off += 2;
		len = len < n - off ? len : n - off;
		off += len;
		if (q->cfg.fix_psn && len >= IW_TRP_HDR_LEN &&
		    !(p[8] & (IW_TRP_A >> 8))) {
			uint32_t be = iw_be32(q->fix_next++);

			memcpy(p, &be, 4);
		}
		if (send(q->peer, p, len, 0) < 0)
			continue;	/* larger than UDP allows */
		note_fed(q, p, len);
		step(q);
	}
}

void fq_feed(struct fq *q, const uint8_t *in, size_t n)
{
	uint8_t *data = malloc(n ? n : 1);
	size_t off = 0;

	FUZZ_CHECK(data != NULL, "malloc");
	memcpy(data, in, n);
	if (q->cfg.fix_crc)
		fix_crcs(data, n);
	if (q->cfg.transport == FQ_TRP)
		feed_datagrams(q, data, n);

	while (q->cfg.transport == FQ_TCP && off < n) {
		size_t k = next_chunk(q, n - off);
		ssize_t w = write(q->peer, data + off, k);

		if (w <= 0)
			break;	/* the QP stopped reading and the pipe is full */
		off += (size_t)w;
		step(q);
	}
	free(data);
}

/* ---------------------------------------------------------------- checks */

/* Compare [from, to) of the mapping with the reference. */
static void check_unchanged(size_t from, size_t to)
{
	size_t i;

	if (from >= to || !memcmp(g_map + from, g_ref + from, to - from))
		return;
	for (i = from; g_map[i] == g_ref[i]; i++)
		;
	FUZZ_CHECK(0, "byte %#zx of the mapping written: region %zd "
		   "offset %zd (-1: a guard page)", i,
		   i % (FQ_REGION + FQ_PAGE) >= FQ_PAGE ?
			   (ssize_t)(i / (FQ_REGION + FQ_PAGE)) : -1,
		   (ssize_t)(i % (FQ_REGION + FQ_PAGE)) - (ssize_t)FQ_PAGE);
}

/* Everything but the RW region, the posted receive SGEs and the Read
 * sink keeps its reference bytes. */
static void check_memory(const struct fq *q)
{
	size_t recv = (size_t)(fq_region(FQ_RECV) - g_map);
	size_t rw = (size_t)(fq_region(FQ_RW) - g_map);
	size_t at = 0, r;

	for (r = 0; r < q->cfg.nrecv; r++) {
		size_t sge0 = recv + r * FQ_RECV_STRIDE, sge1 = sge0 + 256;

		check_unchanged(at, sge0);
		check_unchanged(sge0 + FQ_RECV_SGE0, sge1);
		at = sge1 + FQ_RECV_SGE1;
	}
	if (q->cfg.post_read) {
		check_unchanged(at, recv + FQ_READ_SINK);
		at = recv + FQ_READ_SINK + FQ_READ_LEN;
	}
	check_unchanged(at, rw);
	check_unchanged(rw + FQ_REGION, FQ_MAP_LEN);
}

static int recv_id(uint64_t id, const struct fq *q)
{
	return id >= FQ_WR_RECV0 && id < FQ_WR_RECV0 + q->cfg.nrecv;
}

static void note_wc(struct fq *q, const struct ibv_wc *wc)
{
	q->outcome.wc[wc->wr_id].status = (int)wc->status + 1;
	q->outcome.wc[wc->wr_id].opcode = (int)wc->opcode;
	q->outcome.wc[wc->wr_id].byte_len = wc->byte_len;
}

static void check_completions(struct fq *q)
{
	struct ibv_wc wc;

	while (iwe_poll_cq(q->rcq, 1, &wc) == 1) {
		FUZZ_CHECK(recv_id(wc.wr_id, q) && !q->done[wc.wr_id],
			   "receive completion for wr_id %llu",
			   (unsigned long long)wc.wr_id);
		FUZZ_CHECK(wc.qp_num == q->qp->qp_num, "qp_num");
		FUZZ_CHECK(wc.status != IBV_WC_SUCCESS ||
			   (wc.opcode == IBV_WC_RECV &&
			    wc.byte_len <= FQ_RECV_CAP),
			   "receive of %u bytes, opcode %d", wc.byte_len,
			   (int)wc.opcode);
		q->done[wc.wr_id] = 1;
		note_wc(q, &wc);
	}
	while (iwe_poll_cq(q->scq, 1, &wc) == 1) {
		FUZZ_CHECK(wc.wr_id == FQ_WR_READ && q->cfg.post_read &&
			   !q->done[FQ_WR_READ],
			   "send completion for wr_id %llu",
			   (unsigned long long)wc.wr_id);
		q->done[FQ_WR_READ] = 1;
		note_wc(q, &wc);
	}
	FUZZ_CHECK(!iwe_cq_overflowed(q->scq) && !iwe_cq_overflowed(q->rcq),
		   "CQ overflow");
}

/* In ERROR every WR the QP holds has completed. */
static void check_flushed(const struct fq *q)
{
	unsigned i;

	if (q->cfg.post_read)
		FUZZ_CHECK(q->done[FQ_WR_READ], "Read not completed in ERROR");
	if (q->srq)
		return;		/* the SRQ keeps its WRs */
	for (i = 0; i < q->cfg.nrecv; i++)
		FUZZ_CHECK(q->done[FQ_WR_RECV0 + i],
			   "receive %u not completed in ERROR", i);
}

static int stream_closed(int err)
{
	return err == ENOTCONN || err == ECONNABORTED || err == ECONNRESET ||
	       err == EPIPE;
}

/* Bytes waiting in a socket's receive queue. */
static int unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) ? -1 : n;
}

static int term_matches(const struct iwe_term_info *t, uint32_t ctrl)
{
	return iw_term_layer(ctrl) == t->layer &&
	       iw_term_etype(ctrl) == t->etype &&
	       iw_term_ecode(ctrl) == t->ecode;
}

/* Over TRP a Terminate for a user error leaves the QP running (both
 * ends may send them); anything else fails it with a fatal Terminate
 * sent or received, or the stream ended (the peer's F: ENOTCONN; its
 * port gone: ECONNREFUSED). */
static void check_state_trp(struct fq *q, enum iwe_qp_state st,
			    const struct iwe_term_info *sent,
			    const struct iwe_term_info *rcvd)
{
	if (st != IWE_QPS_ERROR) {
		FUZZ_CHECK(unread(q->fd) == 0, "the QP left a datagram unread "
			   "(state %d)", (int)st);
		FUZZ_CHECK(!q->err, "error %d outside ERROR", q->err);
		FUZZ_CHECK(!q->fatal_seen, "a fatal Terminate sent, QP state "
			   "%d", (int)st);
		FUZZ_CHECK(!sent->valid || trp_user_error(iw_term_ctrl(
			   sent->layer, sent->etype, sent->ecode, 0)),
			   "Terminate %u/%u/%u sent, QP state %d", sent->layer,
			   sent->etype, sent->ecode, (int)st);
		return;
	}
	FUZZ_CHECK(q->fatal_seen || rcvd->valid || stream_closed(q->err) ||
		   q->err == ECONNREFUSED,
		   "ERROR with no fatal Terminate and stream error %d (%s)",
		   q->err, strerror(q->err));
	if (q->fatal_seen)
		FUZZ_CHECK(sent->valid && term_matches(sent, q->term_ctrl),
			   "Terminate %u/%u/%u reported, %#x sent",
			   sent->layer, sent->etype, sent->ecode, q->term_ctrl);
	check_flushed(q);
}

static void check_state(struct fq *q)
{
	struct iwe_term_info sent, rcvd;
	enum iwe_qp_state st = iwe_qp_get_state(q->qp);

	iwe_qp_terminate_info(q->qp, &sent, &rcvd);
	if (q->cfg.transport == FQ_TRP) {
		check_state_trp(q, st, &sent, &rcvd);
		return;
	}
	FUZZ_CHECK(!(sent.valid && rcvd.valid),
		   "a Terminate both sent and received");
	if (st != IWE_QPS_ERROR) {
		FUZZ_CHECK(!q->cfg.close_at_end, "EOF left the QP in state %d",
			   (int)st);
		FUZZ_CHECK(unread(q->fd) == 0, "the QP left %d bytes unread "
			   "in its socket (state %d)", unread(q->fd), (int)st);
		FUZZ_CHECK(!sent.valid && !rcvd.valid && !q->err,
			   "Terminate or error %d outside ERROR", q->err);
		FUZZ_CHECK(!q->term_seen, "Terminate on the wire, QP state %d",
			   (int)st);
		return;
	}
	if (q->err == EPROTO)
		FUZZ_CHECK_KNOWN("term-unrecorded", sent.valid || rcvd.valid,
				 "EPROTO, but no Terminate sent or received");
	else
		FUZZ_CHECK(sent.valid || rcvd.valid || stream_closed(q->err),
			   "ERROR with no Terminate and stream error %d (%s)",
			   q->err, strerror(q->err));
	if (sent.valid)
		FUZZ_CHECK(q->term_seen && term_matches(&sent, q->term_ctrl),
			   "Terminate %u/%u/%u reported, wire %d %#x",
			   sent.layer, sent.etype, sent.ecode, q->term_seen,
			   q->term_ctrl);
	check_flushed(q);
}

#define FINISH_MAX 1000	/* rounds while the QP has bytes to read */

void fq_finish(struct fq *q)
{
	int i;

	if (q->cfg.close_at_end)
		shutdown(q->peer, SHUT_WR);
	/* Enough rounds for a queued Read Response or Terminate to go out;
	 * then on while bytes wait in the QP's socket, or until it fails
	 * after our EOF: a call may read one piece (a short read ends it),
	 * and the FIN shows only to a read after the last byte.  A QP that
	 * stops reading outside ERROR is caught by check_state. */
	for (i = 0; i < 4; i++)
		step(q);
	for (i = 0; i < FINISH_MAX &&
		    iwe_qp_get_state(q->qp) != IWE_QPS_ERROR &&
		    (unread(q->fd) > 0 || q->cfg.close_at_end); i++)
		step(q);
	if (i)
		step(q);	/* what the last read queued goes out */
	check_completions(q);
	check_state(q);
	check_memory(q);
	q->outcome.state = (int)iwe_qp_get_state(q->qp);
	q->outcome.err = q->err;
	iwe_qp_terminate_info(q->qp, &q->outcome.sent, &q->outcome.rcvd);
	q->outcome.mem_crc = iw_crc32c(0, g_map, FQ_MAP_LEN);
}
