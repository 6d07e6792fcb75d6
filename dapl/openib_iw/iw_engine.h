/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The software iWARP engine's public interface.
 *
 * This is the only header dapl/common and dapl/ssp may include from the
 * engine.  It is shaped like verbs and reuses rdma-core's types where they
 * fit (struct ibv_sge, struct ibv_send_wr, struct ibv_wc, enum ibv_wc_status,
 * IBV_ACCESS_* flags), so a reader who knows verbs can read it.  The engine
 * knows nothing of DAT.
 *
 * Conventions: functions returning int return 0 or a positive errno value;
 * functions returning a pointer return NULL and set errno.  Every create or
 * alloc has its destroy.
 */
#ifndef IW_ENGINE_H
#define IW_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

struct iwe_device;
struct iwe_pd;
struct iwe_mr;
struct iwe_mw;
struct iwe_cq;
struct iwe_comp_channel;

enum iwe_transport {
	IWE_TRANSPORT_TCP = 0,
	IWE_TRANSPORT_UDP = 1,
};

/* Engine limits.  They are honest: the engine enforces each of them.
 * A device reports (and enforces) fewer QPs when IWDAPL_MAX_EPS says so:
 * a test that fills the table need not create 131072 EPs. */
#define IWE_MAX_QP           (1 << 17)
#define IWE_MAX_CQ           (1 << 18)
#define IWE_MAX_CQE          (1 << 20)
#define IWE_MAX_MR           (1 << 20)	/* STag indexes are 24 bits */
#define IWE_MAX_MW           (1 << 16)
#define IWE_MAX_PD           4096
#define IWE_MAX_MR_SIZE      (1ULL << 40)
#define IWE_MAX_SGE          16
#define IWE_MAX_QP_WR        16384
#define IWE_MAX_SRQ_WR       16384
#define IWE_MAX_ORD          128	/* outstanding RDMA reads we issue */
#define IWE_MAX_IRD          128	/* outstanding RDMA reads we serve */
#define IWE_MAX_PRIVATE_DATA 512	/* MPA limit, RFC 5044 */

struct iwe_device_attr {
	char ifname[16];		/* IFNAMSIZ */
	int ifindex;
	struct sockaddr_in addr;	/* the IPv4 address the device binds */
	enum iwe_transport transport;
	uint32_t mtu;			/* link MTU of the interface */
	uint32_t max_qp, max_cq, max_cqe, max_mr, max_mw, max_pd;
	uint64_t max_mr_size;
	uint32_t max_sge, max_qp_wr, max_srq_wr;
	uint32_t max_ord, max_ird;
	uint32_t max_private_data;
};

/* Open the device bound to an interface.  'where' is a netdev name
 * ("lo", "eth0") or a dotted IPv4 address that must belong to a local
 * interface.  ENODEV: no such interface or address; EADDRNOTAVAIL: the
 * interface has no IPv4 address; EINVAL: malformed argument. */
struct iwe_device *iwe_device_open(const char *where,
				   enum iwe_transport transport);
/* Why iwe_device_open(where) failed with err, as words for a log line
 * ("netdev \"eth9\" does not exist"); returns buf. */
char *iwe_device_open_why(const char *where, int err, char *buf,
			  size_t len);
void iwe_device_close(struct iwe_device *dev);
void iwe_device_query(const struct iwe_device *dev,
		      struct iwe_device_attr *attr);
/* A consumer thread inside a call: dispatch now, on this thread, what
 * the device's sockets have ready (connection setup steps, input of any
 * connection), unless the progress thread is at it already. */
void iwe_device_poll(struct iwe_device *dev);
/* A consumer thread begins (on 1) or ends (on 0) a bounded spin of
 * iwe_device_poll looks, which then dispatch what comes: meanwhile the
 * progress thread is not woken as well, unless it places an established
 * connection's input (iw_progress.h).  A begin
 * returns 1 when it counted (the device has a progress thread), and
 * only such a begin is ended. */
int iwe_device_spin(struct iwe_device *dev, int on);
/* A consumer thread polled for connection events (which only the loop
 * makes) and found none: while a connection of the device is in a step
 * only the loop finishes, the progress thread must not wait for a CPU. */
void iwe_device_awaited(struct iwe_device *dev);
/* A consumer thread about to sleep in a wait for fds (its EVD's or CNO's
 * fds): one round of sleep, until one of them is readable, the
 * CLOCK_MONOTONIC deadline (NULL: none), or input of the device comes --
 * which this thread then reads and places itself (doc/architecture.md,
 * "The progress model").  1 after such a round (the caller looks
 * whether what it waits for came, and calls again); 0 when it did not
 * sleep, because another consumer sleeps so: the caller sleeps as usual
 * and the progress thread reads its input.  awake (may be NULL) is
 * called with arg on this thread when the sleep itself is over, before
 * this thread dispatches what woke it: from then on its own posts need
 * not wake it (a write of its fd, and a read back, for each). */
int iwe_device_sleep(struct iwe_device *dev, const int *fds, int nfds,
		     const struct timespec *deadline,
		     void (*awake)(void *arg), void *arg);


/* UDP devices (TRP, doc/trp.md): the path MTU that sizes every datagram
 * (IPv4, UDP and TRP headers included), TRP's 576..65535; by default the
 * interface's MTU.  Applies to QPs attached afterwards; also what
 * iwe_device_query reports.  EINVAL out of range. */
int iwe_device_set_mtu(struct iwe_device *dev, uint32_t mtu);
/* Test aid, off by default: the QPs attached afterwards drop, reorder
 * (hold back behind the next packet) and duplicate that per cent of the
 * packets they send, from a PRNG seeded with seed.  spec is
 * "drop:PCT,reorder:PCT,dup:PCT,seed:N", any subset in any order ("" is
 * off).  EINVAL for a malformed spec.  With dev NULL the spec is only
 * checked. */
int iwe_device_set_trp_test(struct iwe_device *dev, const char *spec);

/* Whether a socket's local address is reachable through this device's
 * interface.  Returns 0 when it is, EINVAL when fd is not an IPv4
 * socket of the device's transport (TCP stream for a tcp device, UDP
 * datagram for a udp one), EADDRNOTAVAIL when it is routed elsewhere
 * (or bound to no address and not connected). */
int iwe_device_owns_socket(const struct iwe_device *dev, int fd);
/* What iwe_device_check_socket learnt of a socket: an adopt given it
 * does not ask the kernel again (four system calls on each side of an
 * upgrade). */
struct iwe_sock_facts {
	int connected;			/* it has a peer */
	struct sockaddr_in local;
	struct sockaddr_in remote;	/* when connected */
};
/* What an SSP must know of a consumer's socket, in one pass: 0 when it
 * may be adopted -- facts->connected tells whether it has a peer (an
 * unconnected one is the consumer's to learn of from SOCKET_DOWN or
 * UNREACHABLE, and its address is not judged); EINVAL when fd is no
 * IPv4 TCP or UDP socket (or none); EPROTOTYPE when it is one of the
 * other transport; EADDRNOTAVAIL when it is connected through another
 * interface. */
int iwe_device_check_socket(const struct iwe_device *dev, int fd,
			    struct iwe_sock_facts *facts);

/* Protection domains. */
struct iwe_pd *iwe_alloc_pd(struct iwe_device *dev);
int iwe_dealloc_pd(struct iwe_pd *pd);	/* EBUSY while MRs/MWs/QPs use it */

/* Memory regions.  The STag is a 24-bit index and an 8-bit key:
 * stag = index << 8 | key.  lkey == rkey == stag.  Index 0 is never
 * handed out (STag 0 is reserved; STag 1 is used by the Write RTR). */
struct iwe_mr {
	struct iwe_pd *pd;
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
	int access;			/* IBV_ACCESS_* */
};
struct iwe_mr *iwe_reg_mr(struct iwe_pd *pd, void *addr, size_t length,
			  int access);
int iwe_dereg_mr(struct iwe_mr *mr);

/* Look up a local or remote access to registered memory: validates index,
 * key, PD, access rights and bounds.  Returns 0 and a pointer to the first
 * byte on success; otherwise an IWE_ACCESS_* error telling which check
 * failed (the Terminate codes are derived from it). */
enum iwe_access_error {
	IWE_ACCESS_OK = 0,
	IWE_ACCESS_BAD_STAG,		/* unknown index or stale key */
	IWE_ACCESS_BAD_PD,
	IWE_ACCESS_BAD_RIGHTS,
	IWE_ACCESS_BAD_BOUNDS,
};
enum iwe_access_error iwe_mr_check(struct iwe_device *dev,
				   const struct iwe_pd *pd, uint32_t stag,
				   uint64_t va, uint64_t len, int access,
				   void **ptr);

/* Memory windows (type 1 semantics: bound by a post on a QP later). */
struct iwe_mw {
	struct iwe_pd *pd;
	uint32_t rkey;			/* 0 while unbound */
};
struct iwe_mw *iwe_alloc_mw(struct iwe_pd *pd);
int iwe_dealloc_mw(struct iwe_mw *mw);

/* Completion channels: a pollable fd that becomes readable when a CQ
 * attached to it has been armed with iwe_req_notify_cq and then receives a
 * completion (solicited only, when so armed). */
struct iwe_comp_channel {
	int fd;
};
struct iwe_comp_channel *iwe_create_comp_channel(struct iwe_device *dev);
int iwe_destroy_comp_channel(struct iwe_comp_channel *ch); /* EBUSY if used */

/* Completion queues.  A CQ that is full when the engine must add a
 * completion is in overflow: it reports it once through its overflow flag
 * and drops nothing silently (iwe_cq_overflowed tells). */
struct iwe_cq {
	struct iwe_device *dev;
	void *cq_context;
	struct iwe_comp_channel *channel;
	int cqe;			/* capacity actually provided */
};
struct iwe_cq *iwe_create_cq(struct iwe_device *dev, int cqe,
			     void *cq_context,
			     struct iwe_comp_channel *channel);
int iwe_destroy_cq(struct iwe_cq *cq);
int iwe_resize_cq(struct iwe_cq *cq, int cqe);	/* EINVAL below count */
/* Returns the number of completions written to wc (0..n), or -errno. */
int iwe_poll_cq(struct iwe_cq *cq, int n, struct ibv_wc *wc);
int iwe_req_notify_cq(struct iwe_cq *cq, int solicited_only);
/* Take back an arm that has not fired: a waiter that woke and reads
 * its input itself needs no signal of what it completes (each would
 * cost a write and a read of the channel). */
void iwe_cq_disarm(struct iwe_cq *cq);
/* Consume one event from a channel: which CQ fired.  Blocks unless the
 * channel fd was made non-blocking; EAGAIN then. */
int iwe_get_cq_event(struct iwe_comp_channel *ch, struct iwe_cq **cq,
		     void **cq_context);
void iwe_ack_cq_events(struct iwe_cq *cq, unsigned int nevents);
/* 1 when a read of the channel's fd would find something (an event or
 * a stale credit): a drain stops without the read that fails. */
int iwe_comp_channel_ready(struct iwe_comp_channel *ch);
int iwe_cq_overflowed(const struct iwe_cq *cq);
/* Number of completions currently queued. */
int iwe_cq_count(const struct iwe_cq *cq);
/* Drive the QPs completing into cq from the calling thread (what
 * iwe_poll_cq does on an empty CQ): read what their sockets have, send
 * what is queued.  Returns IWE_CQ_DRIVE_READ when it read input (a
 * message may be arriving), IWE_CQ_DRIVE_BLOCKED when one of those QPs
 * has data waiting for room in its socket: what completes next waits
 * for the peer, and a spinning waiter would only take CPU time the
 * transfer needs; IWE_CQ_DRIVE_BUSY when it left a QP to another thread
 * running it (the progress thread sending, say). */
enum { IWE_CQ_DRIVE_BLOCKED = 1, IWE_CQ_DRIVE_READ = 2,
       IWE_CQ_DRIVE_BUSY = 4 };
int iwe_cq_drive(struct iwe_cq *cq);
/* iwe_cq_drive for a waiter that would sleep on the sockets of the
 * connections it spins on (iwe_cq_sleep_fds) after a drive found one
 * busy: their input is there, but the thread running that QP reads it,
 * and poll() would return at once, again and again, while it does.
 * This waits for that thread to let go of each of them, in turn, and
 * drives them.  Not under the consumer's locks. */
void iwe_cq_drive_wait(struct iwe_cq *cq);
/* What an empty poll of cq waits for is another's to do: its last drive
 * (iwe_cq_drive, or an empty iwe_poll_cq's) left a QP to another thread
 * running it, or a QP's sends wait for room in its socket (for the peer
 * to read). */
int iwe_cq_waits_elsewhere(struct iwe_cq *cq);
/* A consumer that polled empty for a while gives up its CPU once
 * (sched_yield); when its yields keep coming back late -- it shares the
 * CPU with another busy thread -- it moves once to another CPU of its
 * affinity (iw_poll_cpu.c). */
void iwe_poll_yield(void);
/* How many times the process's pollers moved so (for tests). */
unsigned long iwe_poll_moves(void);
/* A consumer begins (on 1) or ends (on 0) a spin of iwe_cq_drive calls
 * on cq: while it spins, the progress thread is not woken for input of
 * the connections it spins on, which the spin reads itself -- those that
 * completed something into cq since its last spin began, when they are
 * few, else the one that completed last. */
void iwe_cq_spin(struct iwe_cq *cq, int on);
/* While a consumer spins on cq (iwe_cq_spin): the sockets of the
 * connections it spins on that take input now, at most max into fds --
 * a waiter may sleep in poll() on them, and iwe_cq_drive when one is
 * readable; 0 when there is none (sleep otherwise). */
int iwe_cq_sleep_fds(struct iwe_cq *cq, int *fds, int max);
/* The most connections a spin takes the input of (each costs the spin's
 * start and end a system call). */
#define IWE_CQ_SPIN_MAX 8

/* Engine-internal producer side, used by the QP code (and tests): add a
 * completion; returns ENOSPC (and marks overflow) when the CQ is full.
 * 'solicited' arms a solicited-only notification. */
int iwe_cq_push(struct iwe_cq *cq, const struct ibv_wc *wc, int solicited);


/* ------------------------------------------------------------ queue pairs
 *
 * Reliable-connected queue pairs over one byte stream (an MPA connection
 * after its request/reply exchange).  Verbs semantics: work requests are
 * ibv_send_wr / ibv_recv_wr with ibv_sge lists whose lkeys are the STags
 * of iwe_reg_mr; completions are ibv_wc in the CQs given at creation; the
 * send queue completes in posting order.
 *
 * Supported send opcodes: IBV_WR_SEND, IBV_WR_SEND_WITH_INV,
 * IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_BIND_MW (see "Memory
 * window binds" below).  Flags: IBV_SEND_SIGNALED,
 * IBV_SEND_SOLICITED (Send with SE), IBV_SEND_FENCE (wait for earlier
 * RDMA Reads to complete).  An RDMA Read with n SGEs issues n Read
 * Requests (one per sink SGE), each using one ORD slot.  A Read's sink
 * SGE may name an MR with IBV_ACCESS_LOCAL_WRITE or a bound memory window
 * with IBV_ACCESS_REMOTE_WRITE (lkey = the window's STag): iWARP places
 * Read Responses through the sink STag, like a peer's RDMA Write.
 *
 * A Send, Send with Invalidate or RDMA Write completes when its last byte
 * has been handed to the stream (iWARP's local completion semantics); an
 * RDMA Read when its last Read Response byte has been placed.
 */
struct iwe_qp;
struct iwe_srq;

/* Asynchronous events (verbs' ibv_async_event, delivered by callback).
 * A handler is given at create time; the engine calls it with no engine
 * lock held, on the thread whose engine call noticed the event, just
 * before that call returns: the device's progress thread for connections
 * of the connection manager, otherwise the caller of iwe_modify_qp,
 * iwe_post_send, iwe_qp_progress_rx/tx...  A handler may call any engine
 * function except destroying the object it is told about.
 *   IWE_EVENT_SRQ_LIMIT_REACHED: the SRQ's posted receives dropped below
 *     its armed limit; the SRQ is disarmed (srq_limit 0) until re-armed
 *     with iwe_modify_srq.  Reported once per arming.
 *   IWE_EVENT_QP_LAST_WQE_REACHED: a QP attached to an SRQ entered ERROR;
 *     it will take no more receives from the SRQ.  Once per entry into
 *     ERROR.
 *   IWE_EVENT_QP_IDLE: not a verbs event.  A connection of the connection
 *     manager was quiet a while with no work request outstanding, and the
 *     QP gave back the queues it allocated for traffic; its owner may give
 *     back its own per-request state too (it comes back at the next
 *     post).  On the progress thread, at most once per quiet spell. */
enum iwe_event_type {
	IWE_EVENT_SRQ_LIMIT_REACHED = 1,
	IWE_EVENT_QP_LAST_WQE_REACHED,
	IWE_EVENT_QP_IDLE,
};

struct iwe_async_event {
	enum iwe_event_type type;
	union {
		struct iwe_qp *qp;
		struct iwe_srq *srq;
	} element;
	void *context;			/* qp_context or srq_context */
};

typedef void (*iwe_event_handler)(const struct iwe_async_event *ev);

enum iwe_qp_state {
	IWE_QPS_RESET = 0,
	IWE_QPS_INIT,
	IWE_QPS_RTR,
	IWE_QPS_RTS,
	IWE_QPS_SQD,
	IWE_QPS_ERROR,
};

struct iwe_qp_cap {
	uint32_t max_send_wr;		/* 1..IWE_MAX_QP_WR */
	uint32_t max_recv_wr;		/* 1..IWE_MAX_QP_WR */
	uint32_t max_send_sge;		/* 0..IWE_MAX_SGE */
	uint32_t max_recv_sge;		/* 0..IWE_MAX_SGE */
};

struct iwe_qp_init_attr {
	struct iwe_cq *send_cq;
	struct iwe_cq *recv_cq;
	struct iwe_srq *srq;		/* receives come from it (cap's recv
					 * fields are then ignored) */
	struct iwe_qp_cap cap;
	int sq_sig_all;			/* every send WR completes */
	void *qp_context;
	iwe_event_handler event_handler; /* asynchronous events of the QP
					 * (IWE_EVENT_QP_LAST_WQE_REACHED,
					 * IWE_EVENT_QP_IDLE), or NULL */
};

struct iwe_qp {
	struct iwe_pd *pd;
	struct iwe_cq *send_cq;
	struct iwe_cq *recv_cq;
	void *qp_context;
	uint32_t qp_num;		/* reported in every ibv_wc */
	struct iwe_qp_cap cap;		/* as granted */
};

/* What the connection manager negotiated for a stream. */
struct iwe_stream_params {
	int crc;			/* 1: compute and check MPA CRC32c */
	uint32_t mulpdu;		/* largest ULPDU we send: 0 = default
					 * (IWE_DEFAULT_MULPDU), else
					 * IWE_MIN_MULPDU..IW_FPDU_MAX_ULPDU */
	uint32_t ird;			/* Read Requests we serve at once,
					 * 1..IWE_MAX_IRD (0 = 1) */
	uint32_t ord;			/* Read Requests we issue at once,
					 * 1..IWE_MAX_ORD (0 = 1) */
	int mpa_rev;			/* 1 or 2; informational here */
};
#define IWE_MIN_MULPDU     128
#define IWE_DEFAULT_MULPDU 65512	/* FPDU fits in 64 KiB - 16 */

/* EINVAL: bad caps or CQs, or an SRQ of another PD. */
struct iwe_qp *iwe_create_qp(struct iwe_pd *pd,
			     const struct iwe_qp_init_attr *attr);
/* Outstanding work is discarded without completions (as verbs does for a
 * QP destroyed outside ERROR).  The stream fd is not closed: its owner
 * (the connection manager) closes it. */
int iwe_destroy_qp(struct iwe_qp *qp);
/* Verbs transitions: RESET->INIT, INIT->INIT|RTR, RTR->RTS, RTS->RTS|SQD,
 * SQD->SQD|RTS, any->ERROR, any->RESET.  ERROR flushes every outstanding
 * WR with IBV_WC_WR_FLUSH_ERR; RESET discards them silently and detaches
 * the stream.  EINVAL for any other transition. */
int iwe_modify_qp(struct iwe_qp *qp, enum iwe_qp_state state);
enum iwe_qp_state iwe_qp_get_state(struct iwe_qp *qp);

/* Post a chain of WRs.  On error *bad_wr names the first WR not posted
 * and the return is EINVAL (bad opcode, flags, SGE count, lkey, length,
 * or QP state RESET; for receives also INIT is fine) or ENOMEM (queue
 * full).  In ERROR, WRs are accepted and completed at once with
 * IBV_WC_WR_FLUSH_ERR.  A send in RTS is transmitted inline when the
 * transmit path is idle. */
int iwe_post_send(struct iwe_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr);
/* EINVAL on a QP attached to an SRQ: post to the SRQ instead. */
int iwe_post_recv(struct iwe_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);
/* Receives taken from an SRQ by this QP whose completion has not been
 * produced yet (a Send being placed): 0 or 1.  0 without an SRQ. */
uint32_t iwe_qp_srq_held(struct iwe_qp *qp);

/* ------------------------------------------------- shared receive queues
 *
 * An SRQ holds receive WRs for any number of QPs of its PD.  A QP created
 * with attr->srq takes the oldest WR of the SRQ when the first segment of
 * an untagged Send arrives and completes it into its own recv_cq with its
 * own qp_num, exactly as if the WR had been posted to the QP.  No WR
 * available is the same fatal DDP error as an empty receive queue.
 *
 * Flushing: the SRQ's WRs belong to the SRQ.  A QP entering ERROR
 * flushes only the receive it had taken and not completed, then reports
 * IWE_EVENT_QP_LAST_WQE_REACHED; the WRs still in the SRQ stay for the
 * other QPs (and are discarded silently by iwe_destroy_srq).
 *
 * Limit (low watermark), verbs semantics: with srq_limit armed (> 0), the
 * moment a QP takes a WR and fewer than srq_limit WRs remain, the SRQ
 * reports IWE_EVENT_SRQ_LIMIT_REACHED once and disarms.  Arming when the
 * count is already below the limit reports at the next WR taken. */
struct iwe_srq_attr {
	uint32_t max_wr;		/* 1..IWE_MAX_SRQ_WR */
	uint32_t max_sge;		/* 1..IWE_MAX_SGE */
	uint32_t srq_limit;		/* 0: disarmed */
};

struct iwe_srq_init_attr {
	struct iwe_srq_attr attr;
	void *srq_context;
	iwe_event_handler event_handler; /* or NULL */
};

struct iwe_srq {
	struct iwe_pd *pd;
	void *srq_context;
};

enum iwe_srq_attr_mask {
	IWE_SRQ_MAX_WR = 1 << 0,	/* resize, keeping the posted WRs */
	IWE_SRQ_LIMIT = 1 << 1,		/* arm (or disarm with 0) */
};

/* EINVAL: bad attributes (the limit must not exceed max_wr). */
struct iwe_srq *iwe_create_srq(struct iwe_pd *pd,
			       const struct iwe_srq_init_attr *attr);
/* EBUSY while QPs use it. */
int iwe_destroy_srq(struct iwe_srq *srq);
/* EINVAL: max_wr out of range or below the number of WRs posted, or a
 * limit above max_wr. */
int iwe_modify_srq(struct iwe_srq *srq, const struct iwe_srq_attr *attr,
		   int attr_mask);
/* max_wr, max_sge, the armed limit (0 once it fired). */
int iwe_query_srq(struct iwe_srq *srq, struct iwe_srq_attr *attr);
/* WRs posted and not yet taken by a QP. */
uint32_t iwe_srq_count(struct iwe_srq *srq);
/* As iwe_post_recv: EINVAL (SGE count, lkey, length) or ENOMEM (full). */
int iwe_post_srq_recv(struct iwe_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

/* ------------------------------------------------- memory window binds
 *
 * IBV_WR_BIND_MW on the send queue binds a window when the transmit side
 * reaches it, in order with the other WRs (use IBV_SEND_FENCE to wait for
 * earlier RDMA Reads).  The verbs fields carry engine objects:
 * wr->bind_mw.mw is a struct iwe_mw * and bind_info.mr a struct iwe_mr *
 * (use iwe_wr_set_bind_mw); bind_info.length 0 unbinds (mr and addr are
 * then ignored; unbinding an unbound window succeeds).  Access flags:
 * IBV_ACCESS_REMOTE_READ / REMOTE_WRITE / REMOTE_ATOMIC.
 *
 * The new rkey: the engine, which owns the 8-bit keys, chooses it when the
 * WR is posted and writes it to wr->bind_mw.rkey before iwe_post_send
 * returns (as ibv_bind_mw does for type 1 windows), so the consumer can
 * advertise it at once; the window answers to it once the bind has
 * executed (mw->rkey then equals it).  Successive binds of one window get
 * successive keys.  For an unbind, wr->bind_mw.rkey is set to 0.
 *
 * Checks (PD, MR with IBV_ACCESS_MW_BIND, range inside the MR, remote
 * write only over locally writable memory) happen at post time: EINVAL.
 * From post to completion the MR cannot be deregistered and the window
 * cannot be deallocated (EBUSY).  The WR completes with IBV_WC_BIND_MW
 * (signaled by the usual rules).  A bind that is flushed instead of
 * executed leaves its window unbound: the consumer asked to replace the
 * old binding, and revoking is the safe side.
 *
 * Remote invalidation (Send with Invalidate) applies to windows only. */
static inline void iwe_wr_set_bind_mw(struct ibv_send_wr *wr,
				      struct iwe_mw *mw, struct iwe_mr *mr,
				      uint64_t addr, uint64_t length,
				      unsigned int access)
{
	wr->opcode = IBV_WR_BIND_MW;
	wr->num_sge = 0;
	wr->sg_list = NULL;
	wr->bind_mw.mw = (struct ibv_mw *)(void *)mw;
	wr->bind_mw.rkey = 0;
	wr->bind_mw.bind_info.mr = (struct ibv_mr *)(void *)mr;
	wr->bind_mw.bind_info.addr = addr;
	wr->bind_mw.bind_info.length = length;
	wr->bind_mw.bind_info.mw_access_flags = access;
}

/* After MPA: run RDMAP/DDP/MPA framing on the connected, non-blocking
 * stream socket fd with the negotiated parameters; moves the QP from
 * INIT or RTR to RTS.  EINVAL: bad state or parameters. */
int iwe_qp_attach_stream(struct iwe_qp *qp, int fd,
			 const struct iwe_stream_params *p);

/* Do as much non-blocking transmit / receive work as possible.  Return 0
 * (including "nothing to do"), or, when the stream failed, an errno: EPIPE
 * or ECONNRESET from the socket, ECONNRESET when the peer closed in the
 * middle of an FPDU, ENOTCONN when it closed between FPDUs, EPROTO when a
 * Terminate was sent or received.  On failure the QP is in ERROR with its
 * WRs flushed. */
int iwe_qp_progress_tx(struct iwe_qp *qp);
int iwe_qp_progress_rx(struct iwe_qp *qp);

/* Counters of a QP since it was created (reset by nothing: a consumer
 * takes differences).  Messages count the last segment of each; the
 * arrays are indexed by RDMAP opcode (0 Write, 1 Read Request, 2 Read
 * Response, 3-6 the Send family, 7 Terminate). */
/* The CRC32c implementation in use: "isa-l", "sse4.2" or "table". */
const char *iw_crc32c_impl_name(void);

#define IWE_TERM_CODES 8
struct iwe_qp_stats {
	uint64_t tx_msgs[16], tx_bytes[16];	/* payload bytes */
	uint64_t rx_msgs[16], rx_bytes[16];
	uint64_t tx_segments, rx_segments;
	uint64_t tx_syscalls, rx_syscalls;	/* sendmsg / recvmsg calls */
	uint64_t input_wakeups;		/* the progress thread woken for
					 * input */
	uint64_t rnr_waits;		/* Sends that came before a receive
					 * was posted and waited for one */
	uint64_t tx_blocked;		/* the socket was full */
	uint64_t crc_errors;		/* FPDUs with a bad CRC */
	uint64_t rx_moved;		/* bytes of a partly read FPDU moved
					 * to the front of a flat receive
					 * buffer (a mirrored one moves none) */
	uint64_t retransmits;		/* datagrams sent again (udp) */
	uint64_t queue_full;		/* posts refused: SQ or RQ full */
	uint64_t term_sent, term_rcvd;	/* Terminates, by layer: */
	uint64_t term_sent_layer[3], term_rcvd_layer[3];
	/* ... and by code (layer << 12 | etype << 8 | ecode): the first
	 * IWE_TERM_CODES distinct codes, n == 0 marking a free slot. */
	struct iwe_term_count {
		uint32_t code;
		uint64_t n;
	} term_sent_code[IWE_TERM_CODES], term_rcvd_code[IWE_TERM_CODES];
};

/* Count n Terminates of a code in a table of IWE_TERM_CODES slots; a
 * code that finds no slot is not kept (the totals still count it). */
static inline void iwe_term_count_add(struct iwe_term_count *tab,
				      uint32_t code, uint64_t n)
{
	for (int i = 0; i < IWE_TERM_CODES && n; i++) {
		if (tab[i].n && tab[i].code != code)
			continue;
		tab[i].code = code;
		tab[i].n += n;
		return;
	}
}
void iwe_qp_query_stats(struct iwe_qp *qp, struct iwe_qp_stats *st);

/* The last Terminate sent and received (layer/etype/ecode as in RFC 5040
 * 4.8, see iw_wire.h); valid is 0 when there was none. */
struct iwe_term_info {
	int valid;
	uint8_t layer, etype, ecode;
};
void iwe_qp_terminate_info(struct iwe_qp *qp, struct iwe_term_info *sent,
			   struct iwe_term_info *rcvd);


/* ------------------------------------------------------------------
 * Connection manager (iw_cm*.c) and progress (iw_progress.c)
 *
 * Each device runs one progress thread (epoll), started on first use.  It
 * owns every socket's receive side, the MPA exchanges, the timers, and the
 * transmit work a posting thread could not finish inline.  Handlers are
 * called on that thread with no engine lock held; they may call the
 * iwe_cm_* functions below, except iwe_cm_conn_destroy on their own conn.
 *
 * Services: a listener and a connect name a 64-bit service (the DAT
 * connection qualifier).  A service <= 65535 is the TCP port and the MPA
 * private data carries only the consumer's bytes, so the wire is plain
 * RFC 5044/6581.  A larger service maps deterministically onto a port in
 * IWE_CM_SERVICE_PORT_BASE..+IWE_CM_SERVICE_PORTS-1, and the request's
 * private data starts with a service header (magic + the full service),
 * which the listener verifies and strips.
 * ------------------------------------------------------------------ */
#define IWE_CM_SERVICE_PORT_BASE 61000
#define IWE_CM_SERVICE_PORTS     1000
/* Private data the engine may add in front of the consumer's. */
#define IWE_CM_SERVICE_HDR_LEN   16

struct iwe_listener;
struct iwe_conn;

enum iwe_cm_event_type {
	IWE_CM_CONNECT_REQUEST,	/* passive: a valid MPA request arrived */
	IWE_CM_ESTABLISHED,	/* FPDU mode; RTR exchanged if negotiated */
	IWE_CM_REJECTED,	/* active: the peer's consumer rejected */
	IWE_CM_NON_PEER_REJECTED, /* active: the reply was not valid MPA, or
				 * negotiation failed, or no listener took it */
	IWE_CM_UNREACHABLE,	/* active: TCP connect failed, or the
				 * connection reset before the reply */
	IWE_CM_TIMED_OUT,	/* active: no reply within the timeout */
	IWE_CM_DISCONNECTED,	/* after ESTABLISHED: orderly close done */
	IWE_CM_BROKEN,		/* after ESTABLISHED: stream error or
				 * Terminate; the QP is in ERROR */
	IWE_CM_SOCKET_DOWN,	/* adopted passive socket closed or reset
				 * before a request arrived */
	IWE_CM_BAD_REQUEST,	/* adopted passive socket: bytes that are
				 * not an MPA request; none were consumed */
};

struct iwe_cm_event {
	enum iwe_cm_event_type type;
	struct iwe_conn *conn;
	uint64_t service;		/* CONNECT_REQUEST: verified service */
	const void *pdata;		/* consumer private data; valid during
					 * the call only */
	size_t pdata_len;
	struct sockaddr_in local, remote;
	int status;			/* errno behind the event, or 0 */
	const char *reason;		/* short text for logs, or NULL */
};

typedef void (*iwe_cm_handler)(const struct iwe_cm_event *ev, void *ctx);

/* Ready-to-receive message types (RFC 6581), for iwe_cm_params.rtr. */
#define IWE_RTR_SEND  0x1	/* zero-length Send */
#define IWE_RTR_WRITE 0x2	/* zero-length RDMA Write to STag 1 */
#define IWE_RTR_READ  0x4	/* zero-length RDMA Read */

/* Negotiation knobs (from the IA's instance data and the environment). */
struct iwe_cm_params {
	int mpa_rev;			/* 1 or 2 */
	int crc;			/* ask for CRC */
	unsigned rtr;			/* IWE_RTR_* preference (0: none) */
	int mpa_timeout_ms;		/* passive: wait for the request */
	uint32_t ird, ord;		/* of the QP that will be used */
};

/* Listen on the device address for a service.  EADDRINUSE: this service
 * is already listened on in this process, or the port is taken by
 * another socket.  Every CONNECT_REQUEST goes to handler; at most
 * max_requests are delivered (0: unlimited; 1 for reserved points). */
int iwe_cm_listen(struct iwe_device *dev, uint64_t service,
		  const struct iwe_cm_params *params, unsigned max_requests,
		  iwe_cm_handler handler, void *ctx,
		  struct iwe_listener **out);
/* Listen on a port the kernel picks; *service receives it. */
int iwe_cm_listen_any(struct iwe_device *dev, uint64_t *service,
		      const struct iwe_cm_params *params,
		      iwe_cm_handler handler, void *ctx,
		      struct iwe_listener **out);
/* Stop listening.  Requests not yet delivered are refused (the socket is
 * closed); delivered ones are unaffected.  No handler call after return. */
void iwe_cm_listen_destroy(struct iwe_listener *l);

/* Active side: TCP connect to dst:port(service), send the MPA request with
 * pdata (<= IWE_MAX_PRIVATE_DATA - 4 - IWE_CM_SERVICE_HDR_LEN), wait for
 * the reply until timeout_ms (<= 0: infinite), then send the RTR and
 * attach qp to the stream.  qp must be in INIT. */
int iwe_cm_connect(struct iwe_qp *qp, const struct sockaddr_in *dst,
		   uint64_t service, const void *pdata, size_t pdata_len,
		   int timeout_ms, const struct iwe_cm_params *params,
		   iwe_cm_handler handler, void *ctx, struct iwe_conn **out);

/* Passive side, after CONNECT_REQUEST: answer with an MPA reply carrying
 * pdata, attach qp (in INIT), and deliver ESTABLISHED to handler once the
 * RTR (if negotiated) arrived.  Later events of this conn go to handler. */
int iwe_cm_accept(struct iwe_conn *c, struct iwe_qp *qp, const void *pdata,
		  size_t pdata_len, iwe_cm_handler handler, void *ctx);
/* Passive side: answer with a reject reply carrying pdata, then close. */
int iwe_cm_reject(struct iwe_conn *c, const void *pdata, size_t pdata_len);
/* The same, and the conn is the engine's from now on: freed (its socket
 * closed) once the reply is out, no more events; the caller never names
 * it again.  Allowed in the conn's own handler: how a listener's handler
 * refuses a request nobody will answer without holding a descriptor. */
int iwe_cm_reject_forget(struct iwe_conn *c, const void *pdata,
			 size_t pdata_len);

/* Close an established (or pending) connection.  Graceful: finish queued
 * transmits, send FIN, wait for the peer's (bounded), then DISCONNECTED.
 * Abrupt: reset now, then DISCONNECTED.  The QP goes to ERROR and its
 * WRs are flushed. */
int iwe_cm_disconnect(struct iwe_conn *c, int graceful);

/* Free a conn after its final event (REJECTED, NON_PEER_REJECTED,
 * UNREACHABLE, TIMED_OUT, DISCONNECTED, BROKEN, SOCKET_DOWN) or to
 * abandon it at any time (then it is reset).  Closes the socket unless it
 * was released.  No handler call after return; never call it from the
 * conn's own handler. */
void iwe_cm_conn_destroy(struct iwe_conn *c);

/* Socket Service Points: adopt a consumer's connected TCP socket.
 * facts: what iwe_device_check_socket(dev, fd) said of it just before
 * (the socket's transport is not checked again), or NULL.
 * Passive: write final_msg (if any) completely, then watch for the MPA
 * request with MSG_PEEK, consuming bytes only once a whole valid request
 * is there; CONNECT_REQUEST, SOCKET_DOWN or BAD_REQUEST follow. */
int iwe_cm_adopt_passive(struct iwe_device *dev, int fd,
			 const struct iwe_sock_facts *facts,
			 const void *final_msg, size_t final_len,
			 const struct iwe_cm_params *params,
			 iwe_cm_handler handler, void *ctx,
			 struct iwe_conn **out);
/* Active: send the MPA request on fd at once (state MPA_SENT); events as
 * for iwe_cm_connect.  TCP_NODELAY is set; other options are kept. */
int iwe_cm_adopt_active(struct iwe_qp *qp, int fd,
			const struct iwe_sock_facts *facts, const void *pdata,
			size_t pdata_len, int timeout_ms,
			const struct iwe_cm_params *params,
			iwe_cm_handler handler, void *ctx,
			struct iwe_conn **out);
/* Hand an adopted socket back: stop watching it and restore its file
 * status flags; returns the fd, or -1 (EBUSY) once it belongs to an
 * established connection.  The conn is then destroyed with
 * iwe_cm_conn_destroy, which no longer closes the socket. */
int iwe_cm_release_socket(struct iwe_conn *c);

/* Addresses of a conn's socket. */
void iwe_cm_conn_addrs(const struct iwe_conn *c, struct sockaddr_in *local,
		       struct sockaddr_in *remote);

/* Override p's fields from the environment, where set and valid:
 * IWDAPL_MPA_REV (1|2), IWDAPL_CRC (0|1|off|on|no|yes), IWDAPL_RTR
 * (none|write|read|send), IWDAPL_MPA_TIMEOUT_MS (milliseconds). */
void iwe_cm_params_from_env(struct iwe_cm_params *p);

#ifdef __cplusplus
}
#endif

#endif
