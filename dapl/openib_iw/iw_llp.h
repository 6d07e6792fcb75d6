/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The transport boundary under DDP: what a lower-layer protocol (LLP)
 * does for RDMAP/DDP.
 *
 * RDMAP/DDP (iw_tx.c, iw_rx.c) know segments, never the wire under them.
 * Two transports implement this table:
 *   - MPA over a TCP stream (iw_mpa_tx.c, iw_mpa_rx.c; RFC 5044): each
 *     segment becomes an FPDU (length, ULPDU, pad, CRC32c);
 *   - TRP over UDP datagrams (iw_trp_tx.c, iw_trp_rx.c; doc/trp.md): one
 *     segment per datagram behind a 10-byte TRP header, a segment done
 *     once the peer acknowledged it.
 *
 * Transmit: the TX side offers segments while tx_room says yes, each
 * with its header bytes and a gather list of payload in registered
 * memory that stays valid until the transport reports the segment done;
 * tx_write pushes them out and reports, in order, how many are done
 * (MPA: handed to the socket; TRP: acknowledged).
 *
 * Receive: rx_progress takes what the socket has and delivers whole,
 * verified segments to iwe_rx_begin / iwe_rx_place / iwe_rx_end in
 * order, stopping while iwe_rx_may_take says no.  A damaged segment (bad
 * CRC) is never delivered: the transport reports it with
 * iwe_rx_llp_error.
 *
 * All calls run with the QP lock held.
 */
#ifndef IW_LLP_H
#define IW_LLP_H

#include <stdint.h>
#include <sys/uio.h>

struct iwe_qp;
struct iwe_qp_priv;
struct iwe_stream_params;

/* A segment offered for transmission. */
struct iwe_llp_seg {
	const uint8_t *hdr;		/* DDP header + RDMAP body */
	uint32_t hdr_len;
	const struct iovec *pay;	/* payload pieces */
	int npay;
	uint32_t pay_len;
	int more;			/* more segments of this message follow */
};

struct iwe_llp_ops {
	const char *name;
	/* Set up (and free) the transport's state of a QP: 0 or ENOMEM. */
	int (*attach)(struct iwe_qp_priv *q);
	/* Optional: attach with the transport's own start state (TRP: the
	 * PSNs and credits the connection exchange agreed on). */
	int (*attach_with)(struct iwe_qp_priv *q, const void *start);
	void (*detach)(struct iwe_qp_priv *q);
	/* Largest DDP segment (header + payload) per wire unit. */
	uint32_t (*max_ulpdu)(const struct iwe_qp_priv *q);
	/* Most segments that may be in the transport at once. */
	uint32_t (*max_inflight)(const struct iwe_qp_priv *q);
	/* Whether a segment with pay_len payload bytes in npay pieces may
	 * join the batch now. */
	int (*tx_room)(const struct iwe_qp_priv *q, uint32_t pay_len,
		       int npay);
	void (*tx_add)(struct iwe_qp_priv *q, const struct iwe_llp_seg *s);
	/* Write what is queued.  *done: segments finished since the last
	 * call.  0 (nothing left to write), EAGAIN (no room in the socket),
	 * or the socket's errno. */
	int (*tx_write)(struct iwe_qp_priv *q, uint32_t *done);
	/* Bytes of a started segment are waiting for room in the socket. */
	int (*tx_blocked)(const struct iwe_qp_priv *q);
	/* The WRs are being flushed and their memory goes back to the
	 * consumer: keep a copy of the unsent rest of a started segment
	 * (the peer's framing needs it), drop the segments not started.
	 * Returns how many segments are still in the transport (0 or 1,
	 * the oldest ones). */
	uint32_t (*tx_detach)(struct iwe_qp_priv *q);
	/* Take what the socket has.  0 (would block, or held), or the
	 * stream's errno / EPROTO (rx state tells why). */
	int (*rx_progress)(struct iwe_qp_priv *q);
	/* Optional: the consumer armed its CQ and may sleep, so it is not
	 * answering what came (TRP: send an ack held for the answer). */
	void (*rx_idle)(struct iwe_qp_priv *q);
	/* Optional: the connection has been quiet a while (iw_qp_idle.c):
	 * give back the buffers it can do without until its next read.  1
	 * while one that could go later still holds bytes. */
	int (*trim)(struct iwe_qp_priv *q);
};

extern const struct iwe_llp_ops iwe_llp_mpa;
/* MPA's start state (attach_with): the stream's first bytes, which the
 * connection manager read together with the MPA frame before them. */
struct iwe_mpa_start {
	const uint8_t *early;
	uint32_t len;
};
struct iwe_device;
/* Free the spare transmit batches of a closing device (iw_mpa_tx.c). */
void iwe_mpa_tx_spares_free(struct iwe_device *dev);
extern const struct iwe_llp_ops iwe_llp_trp;

/* iw_qp.c: iwe_qp_attach_stream with the connection manager's roles (o;
 * NULL: the initiator without RTR), a transport (NULL: the device's) and
 * its start state (NULL: the transport's defaults). */
struct iwe_qp_cm_opts;
int iwe_qp_attach_llp(struct iwe_qp *qp, int fd,
		      const struct iwe_stream_params *p,
		      const struct iwe_qp_cm_opts *o,
		      const struct iwe_llp_ops *llp, const void *start);

/* The receive half of MPA (iw_mpa_rx.c), for the table in iw_mpa_tx.c. */
int iwe_mpa_rx_attach(struct iwe_qp_priv *q);
/* Input read before the QP had the socket: 0 or ENOMEM. */
int iwe_mpa_rx_prefill(struct iwe_qp_priv *q, const uint8_t *b, uint32_t n);
void iwe_mpa_rx_detach(struct iwe_qp_priv *q);
int iwe_mpa_rx_progress(struct iwe_qp_priv *q);
int iwe_mpa_rx_trim(struct iwe_qp_priv *q);

#endif
