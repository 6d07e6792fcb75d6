/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Thin helpers over the DAT 2.0 API for iwdtest: open an IA with its event
 * queues, register memory, create an endpoint, connect or accept, and wait
 * for events either blocking (dat_evd_wait) or spinning (dat_evd_dequeue).
 * Every helper prints what failed and returns -1, so callers only unwind. */
#ifndef IWDTEST_DAT_UTIL_H
#define IWDTEST_DAT_UTIL_H

#include <stddef.h>
#include <dat2/udat.h>

/* How du_wait spins on the DTO EVD when struct du's poll is set. */
enum { DU_POLL_DEQUEUE = 1, DU_POLL_WAIT0 = 2 };

struct du_region {
	void *buf;
	size_t len;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lctx;
	DAT_RMR_CONTEXT rctx;
};

struct du_ep_sizes {
	int max_recv, max_req, rdma_read;
};

struct du {
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async_evd, dto_evd, conn_evd, cr_evd;
	DAT_PZ_HANDLE pz;
	DAT_EP_HANDLE ep;
	DAT_PSP_HANDLE psp;
	struct du_ep_sizes sizes;
	int connected;		/* ESTABLISHED seen: disconnect at the end */
	int poll;		/* DTO events: 0 block in dat_evd_wait, or spin */
	int conn_qlen;		/* du_open: connection and CR EVD depth (0: 8) */
	DAT_TIMEOUT tmo_us;	/* bound on every wait */
};

/* The name that starts every message printed here (default "iwdtest"). */
extern const char *du_prog;

/* "DAT_MAJOR DAT_MINOR" for r (static buffer). */
const char *du_err(DAT_RETURN r);
/* Prints "PROG: what: <error>" and returns -1 unless r is success. */
int du_check(DAT_RETURN r, const char *what);
/* The event's name without its DAT_ prefix ("ESTABLISHED", "BROKEN"...). */
const char *du_event_name(DAT_EVENT_NUMBER n);

int du_open(struct du *d, const char *ia_name, int dto_qlen);
int du_reg(struct du *d, struct du_region *r, size_t len);
/* The attributes du_ep_create gives an EP of these sizes (one IOV each
 * way); for callers that create EPs on EVDs of their own. */
void du_ep_attr(const struct du_ep_sizes *s, DAT_EP_ATTR *a);
int du_ep_create(struct du *d, const struct du_ep_sizes *s);

/* Passive side: listen on qual, wait up to wait_us for one request and copy
 * at most pdmax bytes of its private data; *pdlen gets the real size. */
int du_listen(struct du *d, DAT_CONN_QUAL qual);
int du_wait_cr(struct du *d, DAT_TIMEOUT wait_us, DAT_CR_HANDLE *cr,
	       void *pd, int pdmax, int *pdlen);
/* du_wait_cr in two steps: the next event of the CR EVD within wait_us,
 * then the request it must be, taken as du_wait_cr does. */
int du_wait_cr_event(struct du *d, DAT_TIMEOUT wait_us, DAT_EVENT *ev);
int du_take_cr(const DAT_EVENT *ev, DAT_CR_HANDLE *cr, void *pd, int pdmax,
	       int *pdlen);
int du_accept(struct du *d, DAT_CR_HANDLE cr);

/* Active side: connect, retrying refusals for retry_ms (the server may not
 * be listening yet); recreates the EP between attempts. */
int du_connect(struct du *d, const char *host, DAT_CONN_QUAL qual,
	       const void *pd, int pdlen, int retry_ms);

/* ESTABLISHED on the connection EVD, or -1 (printed). */
int du_wait_established(struct du *d);

/* host's IPv4 address into *sin (port 0), or -1 (printed). */
struct sockaddr_in;
int du_resolve(const char *host, struct sockaddr_in *sin);

/* 1 when d's IA runs iWARP over UDP (its DAT_IW_TRANSPORT attribute). */
int du_ia_is_udp(struct du *d);

/* --ssp (iwd_ssp.c): a socket negotiated in streaming mode, then upgraded;
 * TCP on a tcp IA, a connected UDP socket on a udp IA.  dial/answer
 * return the connected socket or -1. */
int du_ssp_dial(struct du *d, const char *host, unsigned port, int retry_ms);
int du_ssp_answer(struct du *d, unsigned port, int wait_ms);
int du_ssp_wait_cr(struct du *d, int fd, DAT_TIMEOUT wait_us, DAT_CR_HANDLE *cr,
		   void *pd, int pdmax, int *pdlen);
int du_ssp_connect(struct du *d, int fd, const void *pd, int pdlen);
/* Server, tcp IA, for callers that wait for the request themselves (many
 * upgrades at once): an SSP on fd for d->ep with d->cr_evd, offering the
 * upgrade that du_ssp_await_offer reads; the request comes to d->cr_evd,
 * its sp_handle.psp_handle the SSP (DAT_IW_SSP_HANDLE, a DAT_HANDLE). */
int du_ssp_offer(struct du *d, int fd, DAT_HANDLE *ssp);
/* du_ssp_connect in two steps: read the server's upgrade offer (the SSP's
 * final streaming message), then dat_iw_socket_connect and ESTABLISHED.
 * Both close fd on failure before the upgrade call. */
int du_ssp_await_offer(struct du *d, int fd);
int du_ssp_upgrade(struct du *d, int fd, const void *pd, int pdlen);
/* Plain TCP: a listening socket on port (all addresses), one accepted
 * connection within wait_ms, a connection to host:port retried for
 * retry_ms; each returns the socket or -1. */
int du_tcp_listen(unsigned port, int backlog);
int du_tcp_accept(int lfd, int wait_ms);
int du_tcp_dial(const char *host, unsigned port, int retry_ms);

/* One event from evd within the wait bound; spins when d->poll and evd is
 * the DTO EVD (on dat_evd_dequeue, or dat_evd_wait with timeout 0).  Returns 0, or -1 (printed) on error or timeout. */
int du_wait(struct du *d, DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *what);

/* Waits for and prints the connection event ending a broken EP. */
void du_report_end(struct du *d);
void du_disconnect(struct du *d);
void du_close(struct du *d, struct du_region *regs, int nregs);

#endif
