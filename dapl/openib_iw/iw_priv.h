/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Engine-internal definitions of the local objects: device, PD, the STag
 * table behind MRs and MWs, CQs and completion channels.
 *
 * Only engine sources (dapl/openib_iw) and engine unit tests include this
 * header; dapl/common and dapl/ssp see iw_engine.h only.
 *
 * Locking: each device has one mutex protecting its counters and its STag
 * table (lookups on the data path take it too: an O(1) array index under an
 * uncontended mutex).  Each CQ has its own mutex for its ring and arm state;
 * each completion channel has one for its queue of fired CQs.  Lock order:
 * CQ before channel; the device lock is never held while taking another.
 */
#ifndef IW_PRIV_H
#define IW_PRIV_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "iw_engine.h"

/* A timespec in nanoseconds. */
static inline uint64_t iwe_ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* Nanoseconds as a timespec. */
static inline struct timespec iwe_ns_ts(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	return ts;
}

/* CLOCK_MONOTONIC in nanoseconds: the engine's one clock (timers,
 * leases, bursts, retransmission). */
static inline uint64_t iwe_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return iwe_ts_ns(&ts);
}

#define IWE_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A mutex that knows its holder, so functions named *_locked can assert
 * what they promise (IWE_ASSERT_LOCKED; off with NDEBUG). */
struct iwe_lock {
	pthread_mutex_t m;
	pthread_t owner;
};

static inline void iwe_lock_init(struct iwe_lock *l)
{
	pthread_mutex_init(&l->m, NULL);
	l->owner = (pthread_t)0;
}

static inline void iwe_lock(struct iwe_lock *l)
{
	pthread_mutex_lock(&l->m);
	l->owner = pthread_self();
}

static inline void iwe_unlock(struct iwe_lock *l)
{
	l->owner = (pthread_t)0;
	pthread_mutex_unlock(&l->m);
}

#ifdef NDEBUG
#define IWE_ASSERT_LOCKED(l) ((void)(l))
#else
#define IWE_ASSERT_LOCKED(l) \
	assert(pthread_equal((l)->owner, pthread_self()))
#endif

/* ------------------------------------------------------------ STags */

#define IWE_STAG_INDEX(stag)      ((uint32_t)(stag) >> 8)
#define IWE_STAG_KEY(stag)        ((uint8_t)((stag) & 0xffu))
#define IWE_STAG_MAKE(index, key) (((uint32_t)(index) << 8) | (uint8_t)(key))
/* Largest index a 24-bit field can name; index 0 is never handed out. */
#define IWE_STAG_MAX_INDEX        0xffffffu
/* A freed index goes to the tail of a FIFO and is reused only when at least
 * this many freed indexes wait (or the index space is exhausted), so that a
 * stale STag meets an invalid entry rather than a new owner. */
#define IWE_STAG_REUSE_DELAY      1024u

enum iwe_stag_kind {
	IWE_STAG_FREE = 0,
	IWE_STAG_MR,
	IWE_STAG_MW,
};

struct iwe_stag_entry {
	uint64_t base;			/* first VA the STag covers */
	uint64_t length;		/* bytes covered */
	char *host;			/* host address of 'base' */
	const struct iwe_pd *pd;
	void *obj;			/* struct iwe_mr_priv or iwe_mw_priv */
	int access;			/* IBV_ACCESS_* granted */
	uint32_t next_free;		/* FIFO link while free, 0 = none */
	uint8_t key;			/* current 8-bit key of the index */
	uint8_t kind;			/* enum iwe_stag_kind */
	uint8_t valid;			/* resolvable by iwe_mr_check */
};

struct iwe_stag_table {
	struct iwe_stag_entry *ent;	/* ent[0] is the reserved index */
	uint32_t cap;			/* entries allocated */
	uint32_t next_fresh;		/* first never-used index */
	uint32_t free_head, free_tail;	/* FIFO of freed indexes */
	uint32_t nfree;
	uint32_t reuse_delay;
	uint32_t nmr, nmw;		/* live objects, for the IWE_MAX_* caps */
	/* Bumped (under the device lock) by every change that can fail a
	 * check that passed before: a free, a key change, an unbind or a
	 * rebind.  Checks cached against it skip the lock. */
	atomic_uint gen;
};

/* A tagged placement check that passed, kept by one QP (under its lock):
 * the segments of a transfer to one STag skip the device lock -- taken
 * once per segment, at MTU 1500 it was a tenth of a receiver's time --
 * while the table's gen has not moved. */
struct iwe_mr_cache {
	uint32_t stag;			/* 0: empty */
	unsigned gen;
	struct iwe_stag_entry e;	/* the entry as it was then */
};

/* ----------------------------------------------------------- device */

/* TRP's test aid (iw_trp_tx.c): per cent of the packets each QP sends
 * that are dropped, held back behind the next one, or sent twice, from a
 * seeded PRNG.  All 0 (off) unless a test or the IA's instance data sets
 * them (iwe_device_set_trp_test). */
struct iwe_trp_test {
	uint8_t drop, reorder, dup;
	uint32_t seed;
};

#define IWE_TX_SPARES 4

struct iwe_device {
	struct iwe_lock lock;		/* counters and the STag table */
	struct iwe_device_attr attr;	/* immutable after open */
	int is_loopback;		/* interface has IFF_LOOPBACK */
	struct iwe_stag_table stags;
	uint32_t npd, ncq, nqp;
	/* Progress thread, once started: set once under lock, read without
	 * it (every DTO sleep asks for it). */
	struct iwe_prog *_Atomic prog;
	struct iwe_cm_dev *cm;		/* CM state: progress thread only */
	/* Conns in a step whose next event only the loop makes (a
	 * consumer polling for it waits on the loop): iw_cm_conn.c. */
	atomic_int cm_awaited;
	struct iwe_trp_test trp_test;	/* set before QPs attach */
	int gro_hold;			/* udp: trp_gro_key_hold(), or -1 */
	/* Transmit batches no connection holds (iw_mpa_tx.c). */
	_Atomic(void *) tx_spare[IWE_TX_SPARES];
};

struct iwe_prog;
struct iwe_cm_dev;
/* Free what the connection manager still holds (iw_cm.c); called by
 * iwe_device_close before the progress thread stops. */
void iwe_cm_dev_fini(struct iwe_device *dev);
/* The transport of a TCP stream or UDP datagram socket; -1 for any
 * other socket, or no socket at all (ENOTSOCK, EBADF).  Inline: the
 * device's check and the CM's adopt ask it, and the CM may not call
 * into iw_device.c, which calls into the CM (test/layers.sh). */
static inline int iwe_socket_transport(int fd)
{
	int type, proto;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -1;
	len = sizeof(proto);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) < 0)
		return -1;
	if (type == SOCK_STREAM && proto == IPPROTO_TCP)
		return IWE_TRANSPORT_TCP;
	if (type == SOCK_DGRAM && proto == IPPROTO_UDP)
		return IWE_TRANSPORT_UDP;
	return -1;
}

struct iwe_pd {
	struct iwe_device *dev;
	uint32_t users;			/* MRs, MWs, QPs; under dev->lock */
};

/* Take and drop a use of a PD (QPs do, so dealloc returns EBUSY). */
void iwe_pd_get(struct iwe_pd *pd);
void iwe_pd_put(struct iwe_pd *pd);

/* Tests set a short reuse delay (0: reuse a freed index at once) to watch
 * the key change on reuse. */
void iwe_stag_set_reuse_delay(struct iwe_device *dev, uint32_t delay);
int iwe_stag_table_reset(struct iwe_device *dev);	/* iw_mr.c, fuzz rig */

/* ---------------------------------------------------------- MR / MW */

struct iwe_mr_priv {
	struct iwe_mr pub;
	uint32_t index;
	uint32_t binds;			/* windows bound to it; under dev->lock */
};

struct iwe_mw_priv {
	struct iwe_mw pub;
	uint32_t index;
	struct iwe_mr_priv *mr;		/* NULL while unbound */
	uint32_t pending;		/* bind WRs posted, not yet done */
	uint8_t last_key;		/* last key handed out for a bind */
};

/* Bind a window to [addr, addr+len) of mr with remote rights 'access'
 * (IBV_ACCESS_REMOTE_READ|WRITE|ATOMIC).  A bound window is first
 * unbound.  Each bind bumps the window's key; mw->rkey is the new STag.
 * EINVAL: PD mismatch, range outside the MR, MR without MW_BIND, bad
 * rights, or remote write over an MR without local write. */
int iwe_mw_bind(struct iwe_mw *mw, struct iwe_mr *mr, uint64_t addr,
		uint64_t len, int access);
/* Invalidate the window's STag; rkey becomes 0.  EINVAL if not bound. */
int iwe_mw_unbind(struct iwe_mw *mw);

/* A bind (len > 0) or unbind (len == 0) posted on a send queue of PD pd,
 * in three steps.  Reserve checks what iwe_mw_bind checks, pins the
 * window and the MR (dealloc/dereg return EBUSY) and chooses the new
 * STag (*rkey; 0 for an unbind).  Execute performs it with that STag and
 * drops the pins.  Cancel (the WR was flushed or discarded) drops the
 * pins and leaves the window unbound. */
int iwe_mw_bind_reserve(const struct iwe_pd *pd, struct iwe_mw *mw,
			struct iwe_mr *mr, uint64_t addr, uint64_t len,
			int access, uint32_t *rkey);
void iwe_mw_bind_execute(struct iwe_mw *mw, struct iwe_mr *mr,
			 uint64_t addr, uint64_t len, int access,
			 uint32_t rkey);
void iwe_mw_bind_cancel(struct iwe_mw *mw, struct iwe_mr *mr);

/* Remote invalidation (Send with Invalidate) of an STag of PD pd: only
 * memory windows may be invalidated this way (an MR from iwe_reg_mr is
 * not remotely invalidatable, as in verbs).  IWE_ACCESS_OK, or BAD_STAG
 * (unknown or stale), BAD_PD, BAD_RIGHTS (not a window). */
enum iwe_access_error iwe_stag_invalidate(struct iwe_device *dev,
					  const struct iwe_pd *pd,
					  uint32_t stag);

/* iwe_mr_check through a QP's cache (NULL: none), which it fills when
 * the check passes. */
enum iwe_access_error iwe_mr_check_cached(struct iwe_device *dev,
					  struct iwe_mr_cache *c,
					  const struct iwe_pd *pd,
					  uint32_t stag, uint64_t va,
					  uint64_t len, int access,
					  void **ptr);

/* The sink of an RDMA Read: an MR granting local write, or a memory
 * window granting remote write (iWARP places Read Responses through the
 * sink STag, as it places a peer's RDMA Write).  Same results as
 * iwe_mr_check. */
enum iwe_access_error iwe_read_sink_check(struct iwe_device *dev,
					  const struct iwe_pd *pd,
					  uint32_t stag, uint64_t va,
					  uint64_t len, void **ptr);

/* An SGE resolved against the STag table when it was posted. */
struct iwe_sge_res {
	char *addr;
	uint32_t length;
	uint32_t lkey;
};

/* How an SGE list is resolved against the STag table (iw_mr.c): the
 * lkey must name memory of pd covering the range, with the rights the
 * use needs.  0 or EINVAL; *total: the bytes of the list. */
enum iwe_sge_use {
	IWE_SGE_SOURCE = 0,		/* read locally: any MR of the PD */
	IWE_SGE_SINK,			/* written locally: MR, local write */
	IWE_SGE_READ_SINK,		/* RDMA Read sink: iwe_read_sink_check */
};
int iwe_sgl_resolve(const struct iwe_pd *pd, const struct ibv_sge *sg,
		    int n, enum iwe_sge_use use, struct iwe_sge_res *out,
		    uint64_t *total);

/* ------------------------------------------------------ CQ / channel */

enum iwe_cq_arm {
	IWE_CQ_DISARMED = 0,
	IWE_CQ_ARM_SOLICITED,
	IWE_CQ_ARM_NEXT,
};

struct iwe_cq_priv;

struct iwe_channel_priv {
	struct iwe_comp_channel pub;	/* eventfd, EFD_SEMAPHORE */
	struct iwe_device *dev;
	pthread_mutex_t lock;
	struct iwe_cq_priv *head, *tail; /* CQs with unretrieved events */
	uint64_t stale;			/* tokens of retracted events */
	uint32_t ncq;			/* CQs attached */
};

struct iwe_cq_priv {
	struct iwe_cq pub;
	pthread_mutex_t lock;		/* ring, arm state, overflow */
	struct ibv_wc *ring;		/* pub.cqe slots */
	uint32_t head, count;
	int overflow;			/* sticky */
	int armed;			/* enum iwe_cq_arm */
	uint32_t users;			/* QPs using it; under lock */
	/* Hooks of the QPs completing into it (iwe_cq_add_hook), under
	 * hooks_lock, which comes before any QP lock. */
	pthread_mutex_t hooks_lock;
	struct iwe_cq_hook **hooks;
	uint32_t nhooks, hooks_cap;
	uint32_t hook_next;		/* where the next poll starts */
	struct iwe_cq_hook *hot;	/* the last hook that completed */
	uint32_t hot_run;		/* 0: polls ask the epoll first */
	/* A wait takes the input of the connections that completed
	 * something during the CQ's last waits, when they are few
	 * (iw_cq_hook.c): */
	struct iwe_cq_hook *spun[IWE_CQ_SPIN_MAX];	/* told of it */
	uint32_t nspun;
	/* Under lock (iwe_cq_push_from): those hooks, and the last wait
	 * during which there were more. */
	struct iwe_cq_hook *active[IWE_CQ_SPIN_MAX];
	uint32_t nactive;
	uint32_t wait_gen;		/* waits begun */
	uint32_t over_gen;		/* too many active during that wait */
	int over;			/* over_gen is set */
	int read_input;			/* a hook's poll read some */
	int found_busy;			/* and one found its QP busy */
	/* Past a few hooks, an epoll of their sockets says which to look
	 * at (iw_cq_hook.c).  watch_lock is a leaf lock: it covers pollfd
	 * and each hook's fd and readable, and the want lists. */
	pthread_mutex_t watch_lock;
	int pollfd;			/* -1 until there are many hooks */
	/* Hooks asking the next poll (want[0]) and the next arm (want[1]) */
	struct iwe_cq_hook *want[2];
	/* Hooks that completed into it since they were added or last went
	 * quiet (joined): in the epoll, and when few, looked at directly */
	struct iwe_cq_hook *joined_head;
	uint32_t njoined;
	atomic_uint tx_blocked;		/* hooks whose sends wait for room */
	/* Under the channel's lock: */
	struct iwe_cq_priv *next_fired;
	int queued;			/* on the channel's fired list */
	uint32_t pending;		/* fired, not yet retrieved */
	uint32_t retrieved, acked;
};

static inline struct iwe_cq_priv *iwe_cq_priv(const struct iwe_cq *cq)
{
	/* The object itself is never const; only callers' views are. */
	return IWE_CONTAINER_OF((struct iwe_cq *)(uintptr_t)cq,
				struct iwe_cq_priv, pub);
}

/* Take and drop a use of a CQ (QPs do, so destroy returns EBUSY). */
void iwe_cq_get(struct iwe_cq *cq);
void iwe_cq_put(struct iwe_cq *cq);
/* What a CQ lets the QPs completing into it know: a consumer polled it
 * empty (poll: the consumer, inside its call, drives them itself) or
 * armed it before sleeping (arm: what they held for the consumer's next
 * look -- a burst of posts, an acknowledgement -- goes now).  The CQ
 * knows no QP. */
struct iwe_cq_hook {
	/* Drive the hook's QP from this thread; IWE_CQ_HOOK_* flags.  A
	 * QP busy on another thread is left to it, or with wait, driven
	 * once that thread lets go of it. */
	int (*poll)(struct iwe_cq_hook *h, int wait);
	void (*arm)(struct iwe_cq_hook *h);
	/* A consumer spins on the CQ for this hook's QP (on 1) or stopped
	 * (on 0); hooks_lock held. */
	void (*spin)(struct iwe_cq_hook *h, int on);
	/* The CQ's, under its watch_lock: */
	int attached;			/* between add and del */
	int fd;				/* the QP's socket, or -1 */
	int readable;			/* input wanted from fd */
	int blocked;			/* counted in tx_blocked */
	int wanted;			/* IWE_CQ_WANT_* lists it is on */
	int joined;			/* completed into the CQ since it was
					 * added or went quiet: its socket
					 * is in the CQ's epoll */
	uint32_t done_gen;		/* the CQ's wait_gen when it last
					 * completed (the CQ's lock) */
	int active_idx;			/* in the CQ's active, or -1 */
	/* Its links on the want lists and the joined list (doubly: a want
	 * met elsewhere leaves at once) */
	struct iwe_cq_hook *list_next[3], **list_pprev[3];
	uint32_t idx;			/* in the CQ's table (hooks_lock) */
};
#define IWE_CQ_HOOK_INIT(p, a, s) \
	((struct iwe_cq_hook){ .poll = (p), .arm = (a), .spin = (s), .fd = -1, \
			       .active_idx = -1 })
enum { IWE_CQ_WANT_POLL = 1, IWE_CQ_WANT_ARM = 2 };
enum { IWE_CQ_HOOK_READ = 1, IWE_CQ_HOOK_BUSY = 2 };
/* Add / remove a hook; removing waits for a poller running it. */
void iwe_cq_add_hook(struct iwe_cq *cq, struct iwe_cq_hook *h);
void iwe_cq_del_hook(struct iwe_cq *cq, struct iwe_cq_hook *h);
/* The QP's socket, whose input asks for a poll's look (fd -1: none; the
 * hook's QP closes it only after that).  readable 0: the QP reads
 * nothing meanwhile.  Any thread, with or without the QP's lock. */
void iwe_cq_hook_watch(struct iwe_cq *cq, struct iwe_cq_hook *h, int fd,
		       int readable);
/* The next poll and/or arm (IWE_CQ_WANT_*) looks at this hook whatever
 * its socket says: a burst of posts waits, an ack is held. */
void iwe_cq_hook_want(struct iwe_cq *cq, struct iwe_cq_hook *h, int what);
/* What the hook wanted was done by another thread (the burst went): off
 * those lists, so that no poll or arm looks at it for nothing. */
void iwe_cq_hook_unwant(struct iwe_cq *cq, struct iwe_cq_hook *h, int what);
/* A wait takes the input of the hooks that completed during the CQ's
 * last this many waits (iw_cq_hook.c). */
#define IWE_CQ_ACTIVE_WAITS (2 * IWE_CQ_SPIN_MAX)
/* iwe_cq_push for a hook's QP: the completion also counts the hook as
 * one a wait takes (IWE_CQ_ACTIVE_WAITS). */
int iwe_cq_push_from(struct iwe_cq *cq, struct iwe_cq_hook *h,
		     const struct ibv_wc *wc, int solicited);
/* The hook's sends wait for room in its socket (or no longer). */
void iwe_cq_hook_blocked(struct iwe_cq *cq, struct iwe_cq_hook *h,
			 int blocked);
/* iw_cq.c's side: an empty poll, an arm, a destroy. */
int iwe_cq_hooks_poll(struct iwe_cq_priv *q);
void iwe_cq_hooks_wait(struct iwe_cq_priv *q);
void iwe_cq_hooks_arm(struct iwe_cq_priv *q);
void iwe_cq_hooks_spin(struct iwe_cq_priv *q, int on);
int iwe_cq_hooks_sleep_fds(struct iwe_cq_priv *q, int *fds, int max);
/* Under the CQ's lock: the hook completed (iwe_cq_push_from), or goes. */
void iwe_cq_hooks_note_done(struct iwe_cq_priv *q, struct iwe_cq_hook *h);
/* Not under the CQ's lock: the hook's first completion puts its socket
 * in the CQ's epoll (iw_cq_hook.c); a QP quiet a while takes it out. */
void iwe_cq_hook_join(struct iwe_cq_priv *q, struct iwe_cq_hook *h);
void iwe_cq_hook_leave(struct iwe_cq *cq, struct iwe_cq_hook *h);
void iwe_cq_hooks_forget_locked(struct iwe_cq_priv *q, struct iwe_cq_hook *h);
void iwe_cq_hooks_init(struct iwe_cq_priv *q);
void iwe_cq_hooks_fini(struct iwe_cq_priv *q);

#endif
