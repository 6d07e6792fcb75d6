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

/* Engine limits.  They are honest: the engine enforces each of them. */
#define IWE_MAX_QP           4096
#define IWE_MAX_CQ           4096
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
void iwe_device_close(struct iwe_device *dev);
void iwe_device_query(const struct iwe_device *dev,
		      struct iwe_device_attr *attr);

/* Whether a connected socket's local address is reachable through this
 * device's interface (used by SSPs).  Returns 0 when it is, EINVAL when
 * fd is not a TCP stream socket, EADDRNOTAVAIL when it is routed
 * elsewhere. */
int iwe_device_owns_socket(const struct iwe_device *dev, int fd);

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
/* Consume one event from a channel: which CQ fired.  Blocks unless the
 * channel fd was made non-blocking; EAGAIN then. */
int iwe_get_cq_event(struct iwe_comp_channel *ch, struct iwe_cq **cq,
		     void **cq_context);
void iwe_ack_cq_events(struct iwe_cq *cq, unsigned int nevents);
int iwe_cq_overflowed(const struct iwe_cq *cq);
/* Number of completions currently queued. */
int iwe_cq_count(const struct iwe_cq *cq);

/* Engine-internal producer side, used by the QP code (and tests): add a
 * completion; returns ENOSPC (and marks overflow) when the CQ is full.
 * 'solicited' arms a solicited-only notification. */
int iwe_cq_push(struct iwe_cq *cq, const struct ibv_wc *wc, int solicited);

#ifdef __cplusplus
}
#endif

#endif
