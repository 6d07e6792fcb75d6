/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* ssp_example.h -- what the two SSP examples (ssp_upgrade, ssp_handoff)
 * share: line I/O on a plain socket (TCP, or connected UDP for a udp IA:
 * one line per datagram), one side of an RDMA connection
 * (IA, PZ, EVDs, a registered buffer, an EP), the two upgrade calls and a
 * short RDMA conversation.  Header-only so each example stays one program.
 *
 * Every DAT failure is reported as "<who>: <call>: 0x... <major> <minor>"
 * on stderr; the functions return 0 on success and -1 on failure. */
#ifndef SSP_EXAMPLE_H
#define SSP_EXAMPLE_H

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <dat2/udat.h>
#include <dat2/dat_iw_extensions.h>

#define EX_BUF_SIZE	65536
#define EX_SLOT		4096		/* one message slot of the buffer */
#define EX_WAIT_US	10000000	/* any one event: 10 s at most */
#define EX_LINE_MAX	256

/* Buffer layout: two receive slots, a send slot, the RDMA write area. */
enum { SLOT_RECV0 = 0, SLOT_RECV1 = 1, SLOT_SEND = 2, SLOT_WRITE = 4 };

struct ex_rdma {
	const char *who;		/* "server" / "client", for messages */
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async, req, rcv, conn, cr;
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lctx;
	DAT_RMR_CONTEXT rctx;
	unsigned char *buf;
	DAT_EP_HANDLE ep;
};

/* What the first RDMA message tells the peer: where it may write. */
struct ex_region {
	char text[64];
	uint64_t addr;
	uint32_t rmr_context;
	uint32_t length;
};

/* --------------------------------------------------------- reporting */

static inline int ex_dat_fail(const char *who, const char *call, DAT_RETURN r)
{
	const char *maj = "?", *min = "?";

	dat_strerror(r, &maj, &min);
	fprintf(stderr, "%s: %s failed: 0x%08x %s %s\n", who, call,
		(unsigned)r, maj, min);
	return -1;
}

/* Evaluate a DAT call; report and return -1 from the caller on failure. */
#define EX_TRY(who, call)						\
	do {								\
		DAT_RETURN ex_r_ = (call);				\
		if (ex_r_ != DAT_SUCCESS)				\
			return ex_dat_fail((who), #call, ex_r_);	\
	} while (0)

static inline const char *ex_ia_name(void)
{
	const char *n = getenv("IWDAPL_IA");

	return n && *n ? n : "iw-lo";
}

/* ---------------------------------------------------------- line I/O */

/* Write one line (over UDP: one datagram).  The protocol is line based
 * and every line is short, so a short write means the peer is gone. */
static inline int ex_line_write(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int ex_line_write(int fd, const char *fmt, ...)
{
	char line[EX_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1)
		return -1;
	line[n++] = '\n';
	return send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* A UDP socket: each line is one datagram. */
static inline int ex_is_dgram(int fd)
{
	int type = 0;
	socklen_t l = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 &&
	       type == SOCK_DGRAM;
}

/* One datagram, one line (a datagram is read whole, so nothing that
 * follows it is taken: the next one is the provider's TRP request). */
static inline int ex_dgram_line_read(int fd, char *line, size_t size)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t got;

	do {
		if (poll(&p, 1, 10000) <= 0)
			return -1;
		got = recv(fd, line, size - 1, MSG_TRUNC);
	} while (got < 0 && errno == EINTR);
	if (got <= 0 || (size_t)got > size - 1 || line[got - 1] != '\n')
		return -1;
	line[got - 1] = '\0';
	return 0;
}

/* Read one line (without its '\n') within 10 s.  One byte at a time on
 * purpose: a buffered reader could swallow bytes that follow the line,
 * and after the last streaming message the next bytes are the MPA frames
 * that belong to the provider. */
static inline int ex_line_read(int fd, char *line, size_t size)
{
	size_t n = 0;

	if (ex_is_dgram(fd))
		return ex_dgram_line_read(fd, line, size);
	while (n + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char c;
		ssize_t got;

		if (poll(&p, 1, 10000) <= 0)
			return -1;
		got = recv(fd, &c, 1, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		if (c == '\n') {
			line[n] = '\0';
			return 0;
		}
		line[n++] = c;
	}
	return -1;
}

/* ------------------------------------------------------------ the IA */

/* The provider behind this IA implements Socket Service Points: the
 * extension is DAT_EXTENSION_IW and DAT_IW_ATTR_SSP is advertised. */
static inline int ex_ia_has_ssp(const char *who, DAT_IA_HANDLE ia)
{
	DAT_IA_ATTR ia_attr;
	DAT_PROVIDER_ATTR pr;
	DAT_EVD_HANDLE async;

	EX_TRY(who, dat_ia_query(ia, &async, DAT_IA_FIELD_IA_EXTENSION, &ia_attr,
				 DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pr));
	if (ia_attr.extension_supported != DAT_EXTENSION_IW) {
		fprintf(stderr, "%s: IA has no iWARP extension\n", who);
		return -1;
	}
	for (int i = 0; i < pr.num_provider_specific_attr; i++)
		if (!strcmp(pr.provider_specific_attr[i].name, DAT_IW_ATTR_SSP) &&
		    !strcmp(pr.provider_specific_attr[i].value, "TRUE"))
			return 0;
	fprintf(stderr, "%s: IA does not advertise %s\n", who, DAT_IW_ATTR_SSP);
	return -1;
}

/* Open the IA and check it can do SSPs; closes it again if not. */
static inline int ex_ia_open(struct ex_rdma *r, const char *who)
{
	DAT_RETURN ret;

	memset(r, 0, sizeof(*r));
	r->who = who;
	ret = dat_ia_open((DAT_NAME_PTR)ex_ia_name(), 8, &r->async, &r->ia);
	if (ret != DAT_SUCCESS) {
		ex_dat_fail(who, "dat_ia_open", ret);
		fprintf(stderr, "%s: (IA %s; is DAT_OVERRIDE set?)\n", who,
			ex_ia_name());
		return -1;
	}
	if (ex_ia_has_ssp(who, r->ia) == 0)
		return 0;
	dat_ia_close(r->ia, DAT_CLOSE_ABRUPT_FLAG);
	r->ia = DAT_HANDLE_NULL;
	return -1;
}

static inline int ex_evd(struct ex_rdma *r, DAT_EVD_FLAGS f, DAT_EVD_HANDLE *h)
{
	EX_TRY(r->who, dat_evd_create(r->ia, 16, DAT_HANDLE_NULL, f, h));
	return 0;
}

/* PZ, EVDs, the registered buffer and an EP on an open IA. */
static inline int ex_setup(struct ex_rdma *r)
{
	DAT_REGION_DESCRIPTION rd;
	DAT_VLEN rsize;
	DAT_VADDR raddr;

	EX_TRY(r->who, dat_pz_create(r->ia, &r->pz));
	if (ex_evd(r, DAT_EVD_DTO_FLAG, &r->req) ||
	    ex_evd(r, DAT_EVD_DTO_FLAG, &r->rcv) ||
	    ex_evd(r, DAT_EVD_CONNECTION_FLAG, &r->conn) ||
	    ex_evd(r, DAT_EVD_CR_FLAG, &r->cr))
		return -1;
	r->buf = aligned_alloc(4096, EX_BUF_SIZE);
	if (!r->buf) {
		fprintf(stderr, "%s: out of memory\n", r->who);
		return -1;
	}
	memset(r->buf, 0, EX_BUF_SIZE);
	rd.for_va = r->buf;
	/* Remote write access: the peer RDMA-writes into SLOT_WRITE. */
	EX_TRY(r->who, dat_lmr_create(r->ia, DAT_MEM_TYPE_VIRTUAL, rd, EX_BUF_SIZE,
				      r->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
				      &r->lmr, &r->lctx, &r->rctx, &rsize, &raddr));
	EX_TRY(r->who, dat_ep_create(r->ia, r->pz, r->rcv, r->req, r->conn, NULL,
				     &r->ep));
	return 0;
}

/* Closing the IA abruptly frees every object on it, the EP included,
 * and the EP closes the socket it owns. */
static inline void ex_close(struct ex_rdma *r)
{
	if (r->ia)
		dat_ia_close(r->ia, DAT_CLOSE_ABRUPT_FLAG);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ events */

/* The next event on evd within EX_WAIT_US; event_number 0 if none. */
static inline DAT_EVENT ex_wait(DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev;
	DAT_COUNT more;

	memset(&ev, 0, sizeof(ev));
	if (dat_evd_wait(evd, EX_WAIT_US, 1, &ev, &more) != DAT_SUCCESS)
		ev.event_number = 0;
	return ev;
}

static inline int ex_want_conn_event(struct ex_rdma *r, DAT_EVENT_NUMBER want,
				     const char *what)
{
	DAT_EVENT ev = ex_wait(r->conn);

	if (ev.event_number == want)
		return 0;
	fprintf(stderr, "%s: waiting for %s, got event 0x%x\n", r->who, what,
		(unsigned)ev.event_number);
	return -1;
}

/* One DTO completion with success; its length in *len if asked. */
static inline int ex_dto(struct ex_rdma *r, DAT_EVD_HANDLE evd, const char *what,
			 DAT_COUNT *len)
{
	DAT_EVENT ev = ex_wait(evd);
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	if (ev.event_number != DAT_DTO_COMPLETION_EVENT ||
	    d->status != DAT_DTO_SUCCESS) {
		fprintf(stderr, "%s: %s did not complete (event 0x%x, status %d)\n",
			r->who, what, (unsigned)ev.event_number,
			ev.event_number == DAT_DTO_COMPLETION_EVENT ? (int)d->status : -1);
		return -1;
	}
	if (len)
		*len = (DAT_COUNT)d->transfered_length;
	return 0;
}

/* ----------------------------------------------------------- the DTOs */

static inline DAT_LMR_TRIPLET ex_iov(struct ex_rdma *r, int slot, size_t len)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)(r->buf + slot * EX_SLOT),
				(DAT_SEG_LENGTH)len, r->lctx };

	return iov;
}

static inline int ex_post_recv(struct ex_rdma *r, int slot)
{
	DAT_LMR_TRIPLET iov = ex_iov(r, slot, EX_SLOT);
	DAT_DTO_COOKIE c = { .as_64 = (DAT_UINT64)slot };

	EX_TRY(r->who, dat_ep_post_recv(r->ep, 1, &iov, c,
					DAT_COMPLETION_DEFAULT_FLAG));
	return 0;
}

/* Send len bytes of SLOT_SEND and wait for the send to complete. */
static inline int ex_send(struct ex_rdma *r, size_t len)
{
	DAT_LMR_TRIPLET iov = ex_iov(r, SLOT_SEND, len);
	DAT_DTO_COOKIE c = { .as_64 = SLOT_SEND };

	EX_TRY(r->who, dat_ep_post_send(r->ep, 1, &iov, c,
					DAT_COMPLETION_DEFAULT_FLAG));
	return ex_dto(r, r->req, "send", NULL);
}

static inline int ex_send_text(struct ex_rdma *r, const char *text)
{
	size_t len = strlen(text) + 1;

	memcpy(r->buf + SLOT_SEND * EX_SLOT, text, len);
	return ex_send(r, len);
}

/* Wait for the receive posted on slot; print it as text. */
static inline int ex_recv_print(struct ex_rdma *r, int slot)
{
	DAT_COUNT len = 0;
	char *text = (char *)r->buf + slot * EX_SLOT;

	if (ex_dto(r, r->rcv, "receive", &len) < 0)
		return -1;
	text[EX_SLOT - 1] = '\0';
	printf("%s: RDMA recv (%d bytes): %s\n", r->who, (int)len, text);
	return 0;
}

/* ----------------------------------------------------------- upgrades */

/* Passive side: the SSP, its one connection request, accept.  The
 * socket belongs to the SSP from a successful create on, then to the CR,
 * then to the EP; the caller must not use or close it any more. */
static inline int ex_upgrade_passive(struct ex_rdma *r, int fd,
				     const char *final_msg)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_EVENT ev;
	int ret;

	EX_TRY(r->who, dat_iw_ssp_create(r->ia, fd, r->ep, r->cr, final_msg,
					 (DAT_COUNT)strlen(final_msg), &ssp));
	ev = ex_wait(r->cr);
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT) {
		/* SOCKET_DOWN or NON_PEER_REJECTED: the socket stays with
		 * the SSP until the free below hands it back. */
		fprintf(stderr, "%s: no connection request (event 0x%x%s)\n",
			r->who, (unsigned)ev.event_number,
			DAT_IW_EVENT_IS_SOCKET_DOWN(&ev) ? ", SOCKET_DOWN" : "");
		dat_iw_ssp_free(ssp);
		return -1;
	}
	/* Receives first, so the peer's first send has a place to land. */
	ret = ex_post_recv(r, SLOT_RECV0) || ex_post_recv(r, SLOT_RECV1) ? -1 : 0;
	if (ret == 0) {
		DAT_RETURN a = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
					     DAT_HANDLE_NULL, 0, NULL);

		ret = a == DAT_SUCCESS ? 0 : ex_dat_fail(r->who, "dat_cr_accept", a);
	}
	/* The SSP already gave its socket to the CR: freeing it now
	 * touches neither the request nor the connection. */
	dat_iw_ssp_free(ssp);
	if (ret == 0)
		ret = ex_want_conn_event(r, DAT_CONNECTION_EVENT_ESTABLISHED,
					 "ESTABLISHED");
	return ret;
}

/* Active side: the MPA request over the socket.  On success the EP owns
 * the socket; it would come back (open) only if the connection failed. */
static inline int ex_upgrade_active(struct ex_rdma *r, int fd)
{
	/* Receives first, as on the passive side: the connection may be
	 * established, and the peer's first Send here, before the call
	 * returns (a client worker on a loaded machine posted them too
	 * late once: the Send found no buffer). */
	if (ex_post_recv(r, SLOT_RECV0) || ex_post_recv(r, SLOT_RECV1))
		return -1;
	EX_TRY(r->who, dat_iw_socket_connect(r->ep, fd, EX_WAIT_US, 0, NULL));
	return ex_want_conn_event(r, DAT_CONNECTION_EVENT_ESTABLISHED,
				  "ESTABLISHED");
}

/* ------------------------------------------------- the conversation */

/* Server: tell the client where it may write, wait for its note, show
 * what the RDMA write left in our buffer. */
static inline int ex_talk_server(struct ex_rdma *r)
{
	struct ex_region reg;

	memset(&reg, 0, sizeof(reg));
	snprintf(reg.text, sizeof(reg.text), "hello from the %s over RDMA send",
		 r->who);
	reg.addr = (uint64_t)(uintptr_t)(r->buf + SLOT_WRITE * EX_SLOT);
	reg.rmr_context = r->rctx;
	reg.length = EX_SLOT;
	memcpy(r->buf + SLOT_SEND * EX_SLOT, &reg, sizeof(reg));
	if (ex_send(r, sizeof(reg)) < 0 || ex_recv_print(r, SLOT_RECV0) < 0)
		return -1;
	/* The note was sent after the write on the same connection, so the
	 * written bytes are in place by the time the note is received. */
	printf("%s: RDMA write area now holds: %s\n", r->who,
	       (char *)r->buf + SLOT_WRITE * EX_SLOT);
	snprintf(reg.text, sizeof(reg.text), "bye from the %s", r->who);
	return ex_send_text(r, reg.text);
}

/* RDMA-write text into the region the peer described. */
static inline int ex_rdma_write(struct ex_rdma *r, const struct ex_region *reg,
				const char *text)
{
	size_t len = strlen(text) + 1;
	DAT_LMR_TRIPLET iov = ex_iov(r, SLOT_WRITE, len);
	DAT_RMR_TRIPLET dst = { reg->addr, (DAT_SEG_LENGTH)len, reg->rmr_context };
	DAT_DTO_COOKIE c = { .as_64 = SLOT_WRITE };

	if (len > reg->length) {
		fprintf(stderr, "%s: peer region too small\n", r->who);
		return -1;
	}
	memcpy(r->buf + SLOT_WRITE * EX_SLOT, text, len);
	EX_TRY(r->who, dat_ep_post_rdma_write(r->ep, 1, &iov, c, &dst,
					      DAT_COMPLETION_DEFAULT_FLAG));
	return ex_dto(r, r->req, "RDMA write", NULL);
}

/* Client: read the server's region, write into it, then tell it so. */
static inline int ex_talk_client(struct ex_rdma *r)
{
	struct ex_region reg;

	if (ex_dto(r, r->rcv, "receive", NULL) < 0)
		return -1;
	memcpy(&reg, r->buf + SLOT_RECV0 * EX_SLOT, sizeof(reg));
	reg.text[sizeof(reg.text) - 1] = '\0';
	printf("%s: RDMA recv: %s (may write %" PRIu32 " bytes at 0x%" PRIx64 ")\n",
	       r->who, reg.text, reg.length, reg.addr);
	if (ex_rdma_write(r, &reg, "written by the client with RDMA write") < 0 ||
	    ex_send_text(r, "the client wrote your buffer") < 0)
		return -1;
	return ex_recv_print(r, SLOT_RECV1);
}

/* The client ends the connection; both wait for DISCONNECTED. */
static inline int ex_finish(struct ex_rdma *r, int initiator)
{
	if (initiator)
		EX_TRY(r->who, dat_ep_disconnect(r->ep, DAT_CLOSE_GRACEFUL_FLAG));
	return ex_want_conn_event(r, DAT_CONNECTION_EVENT_DISCONNECTED,
				  "DISCONNECTED");
}

#endif
