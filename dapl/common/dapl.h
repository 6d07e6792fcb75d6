/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What every DAT object of this provider shares, the IA, and the entry
 * points the provider table points to.
 *
 * Object-specific structures live in their own headers (dapl_evd.h,
 * dapl_mem.h, dapl_ep.h); this one holds what crosses them.
 *
 * Locking: ia->lock guards the object graph of one IA (creation, free,
 * usage counts, EP/SP/CR state).  Objects with a queue (EVD) have their own
 * lock, taken after ia->lock when both are needed, never before.  Every
 * function whose name ends in _locked asserts at its top that its caller
 * holds the lock it relies on (dapl_lock.h).
 */
#ifndef DAPL_H
#define DAPL_H

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <netinet/in.h>

#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_iw_extensions.h>

#include "dapl_handle.h"
#include "dapl_lock.h"
#include "iw_engine.h"

/* What a consumer may send in connection private data: MPA allows 512
 * bytes; the engine keeps the rest for IRD/ORD and qualifier mapping. */
#define DAPL_MAX_PRIVATE_DATA 256

/* Largest single message or RDMA transfer: completions report lengths in
 * 32 bits, and 1 GiB keeps every offset arithmetic far from overflow. */
#define DAPL_MAX_MESSAGE (1u << 30)

/* Internal object kinds; also the order in which an abrupt dat_ia_close
 * tears objects down (dependents first). */
enum dapl_kind {
	DAPL_K_CR,
	DAPL_K_SSP,
	DAPL_K_PSP,
	DAPL_K_RSP,
	DAPL_K_CSP,
	DAPL_K_EP,
	DAPL_K_SRQ,
	DAPL_K_RMR,
	DAPL_K_LMR,
	DAPL_K_PZ,
	DAPL_K_EVD,
	DAPL_K_CNO,
	DAPL_K_COUNT
};

struct dapl_ia;

/* Common head of every object handed to the consumer. */
struct dapl_obj {
	enum dapl_kind kind;
	int htype;			/* DAT_HANDLE_TYPE_* of its handle */
	DAT_HANDLE handle;		/* what the consumer holds */
	struct dapl_ia *ia;
	DAT_CONTEXT context;		/* dat_set/get_consumer_context */
	int users;			/* objects that depend on this one */
	struct dapl_obj *prev, *next;	/* ia->objs[kind] list */
	/* Forced teardown (abrupt IA close); frees the object. */
	void (*destroy)(struct dapl_obj *obj);
};

/* Engine knobs from the instance data (doc/instance-data.md). */
struct dapl_config {
	char where[64];			/* netdev name or IPv4 address */
	enum iwe_transport transport;
	int mpa_rev;			/* 1 or 2 */
	int crc;			/* 0 off, 1 on */
	int rtr;			/* 0 none, else IW_RTR_* preference */
	int mpa_timeout_ms;
	int mtu;			/* udp: path MTU, 0 = the netdev's */
	char trp_test[64];		/* udp: test aid spec, "" = off */
	char error[160];		/* non-empty: the instance data is bad */
};

#define DAPL_NAMED_ATTRS 8

/* One per dat.conf line that names this library: a provider instance. */
struct dapl_provider {
	DAT_PROVIDER dat;		/* must stay first */
	char ia_name[DAT_NAME_MAX_LENGTH];
	struct dapl_config cfg;
	char mtu_str[16];
	char stats_socket[64];		/* DAT_IW_ATTR_STATS's value */
	DAT_NAMED_ATTR named[DAPL_NAMED_ATTRS];	/* provider_specific_attr */
	struct dapl_provider *next;
};

struct dapl_evd;

struct dapl_ia {
	struct dapl_obj obj;
	struct dapl_lock lock;
	struct dapl_provider *prov;
	struct iwe_device *dev;
	struct iwe_device_attr dev_attr;
	DAT_SOCK_ADDR6 ia_addr;		/* what dat_ia_query reports */
	struct dapl_evd *async_evd;	/* NULL: DAT_EVD_ASYNC_EXISTS */
	int async_evd_ours;		/* created by dat_ia_open */
	DAT_IA_HANDLE consumer_handle;	/* the registry's index, once known */
	struct dapl_obj *objs[DAPL_K_COUNT];
	uint32_t nobjs[DAPL_K_COUNT];	/* live objects of each kind */
	int closing;
	/* Counters (dapl_stats.h): requests received and rejected here,
	 * plus the totals of freed EPs; under ia->lock. */
	DAT_IW_STATS stats;
	unsigned stats_id;		/* "ia N" in the stats dump */
	struct dapl_ia *stats_next;	/* process-wide list (stats_server.c) */
};

static inline void dapl_ia_lock(struct dapl_ia *ia) { dapl_lock(&ia->lock); }
static inline void dapl_ia_unlock(struct dapl_ia *ia) { dapl_unlock(&ia->lock); }
#define DAPL_ASSERT_IA_LOCKED(ia) DAPL_ASSERT_LOCKED(&(ia)->lock)

/* ---- the object layer (dapl_obj.c) ---- */

/* Register obj with its IA and give it a handle; returns DAT_SUCCESS or
 * DAT_INSUFFICIENT_RESOURCES.  The first takes ia->lock itself. */
DAT_RETURN dapl_obj_init(struct dapl_obj *obj, struct dapl_ia *ia,
			 enum dapl_kind kind, int htype,
			 void (*destroy)(struct dapl_obj *));
DAT_RETURN dapl_obj_init_locked(struct dapl_obj *obj, struct dapl_ia *ia,
				enum dapl_kind kind, int htype,
				void (*destroy)(struct dapl_obj *));
/* Unlink from the IA and release the handle (before freeing memory). */
void dapl_obj_fini_locked(struct dapl_obj *obj);

/* Look up a live object of a type; NULL if the handle is bad, freed or of
 * another type.  The object may be freed concurrently: see below. */
void *dapl_obj_get(DAT_HANDLE handle, int htype);
/* The same, for an object that must belong to 'ia', whose lock the
 * caller holds: the object stays alive until it is released. */
void *dapl_obj_get_locked(struct dapl_ia *ia, DAT_HANDLE handle, int htype);
/* Look up, lock the object's IA and check again under the lock (a
 * concurrent free may have won): the object with its ia->lock held, or
 * NULL with no lock held.  For the calls that change or free it. */
void *dapl_obj_lock(DAT_HANDLE handle, int htype);

/* The checks every dat_*_query makes first, in argument order: the live
 * object of a handle of type htype (else DAT_INVALID_HANDLE | bad_handle),
 * no mask bit outside 'all' (else ARG2), and no 'param_missing' (else
 * ARG3).  NULL with *r set when a check fails. */
void *dapl_obj_query_get(DAT_HANDLE handle, int htype, DAT_RETURN bad_handle,
			 DAT_UINT64 mask, DAT_UINT64 all, int param_missing,
			 DAT_RETURN *r);

/* Count one more dependent of an object of 'ia' (looked up under
 * ia->lock, so its free cannot win in between); NULL (no count) when the
 * handle is bad, freed, of another type or of another IA.  A pinned
 * object cannot be freed (DAT_INVALID_STATE ..._IN_USE). */
void *dapl_obj_pin(struct dapl_ia *ia, DAT_HANDLE handle, int htype);
void dapl_obj_unpin_locked(struct dapl_obj *obj);
void dapl_obj_unpin(struct dapl_obj *obj);	/* takes ia->lock */

/* The IA handle as the consumer knows it (the registry's index). */
DAT_IA_HANDLE dapl_ia_consumer_handle(struct dapl_ia *ia);

/* ---- provider instances (dapl_instance.c) ---- */
void dapl_config_parse(struct dapl_config *cfg, const char *instance_data);
void dapl_provider_add(struct dapl_provider *p);
struct dapl_provider *dapl_provider_find(const char *ia_name);

/* ---- time and sleeping (dapl_wait.c) ---- */
/* Absolute CLOCK_MONOTONIC deadline for a DAT timeout in microseconds;
 * returns 0 for DAT_TIMEOUT_INFINITE (no deadline). */
int dapl_deadline(DAT_TIMEOUT timeout_us, struct timespec *deadline);
/* Time left until deadline; 0 when it has passed. */
int dapl_time_left(const struct timespec *deadline, struct timespec *left);
/* Sleep in ppoll() on fds until one is readable or the deadline passes
 * (bounded == 0: no deadline).  Returns 0 once the deadline has passed
 * before sleeping, 1 otherwise (woken, interrupted or timed out: the
 * caller re-checks its condition and calls again). */
int dapl_fd_sleep(struct pollfd *fds, int nfds, int bounded,
		  const struct timespec *deadline);

/* ---- provider entry points (one per function-table slot) ---- */
DAT_RETURN dapl_ia_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *);
DAT_RETURN dapl_ia_close(DAT_IA_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN dapl_ia_query(DAT_IA_HANDLE, DAT_EVD_HANDLE *, DAT_IA_ATTR_MASK,
			 DAT_IA_ATTR *, DAT_PROVIDER_ATTR_MASK, DAT_PROVIDER_ATTR *);
DAT_RETURN dapl_ia_ha_related(DAT_IA_HANDLE, const DAT_NAME_PTR, DAT_BOOLEAN *);
DAT_RETURN dapl_set_consumer_context(DAT_HANDLE, DAT_CONTEXT);
DAT_RETURN dapl_get_consumer_context(DAT_HANDLE, DAT_CONTEXT *);
DAT_RETURN dapl_get_handle_type(DAT_HANDLE, DAT_HANDLE_TYPE *);

DAT_RETURN dapl_cno_create(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, DAT_CNO_HANDLE *);
DAT_RETURN dapl_cno_modify_agent(DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT);
DAT_RETURN dapl_cno_query(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, DAT_CNO_PARAM *);
DAT_RETURN dapl_cno_free(DAT_CNO_HANDLE);
DAT_RETURN dapl_cno_wait(DAT_CNO_HANDLE, DAT_TIMEOUT, DAT_EVD_HANDLE *);
DAT_RETURN dapl_cno_fd_create(DAT_IA_HANDLE, DAT_FD *, DAT_CNO_HANDLE *);
DAT_RETURN dapl_cno_trigger(DAT_CNO_HANDLE, DAT_EVD_HANDLE *);

DAT_RETURN dapl_cr_query(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, DAT_CR_PARAM *);
DAT_RETURN dapl_cr_accept(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN dapl_cr_reject(DAT_CR_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN dapl_cr_handoff(DAT_CR_HANDLE, DAT_CONN_QUAL);

DAT_RETURN dapl_evd_create(DAT_IA_HANDLE, DAT_COUNT, DAT_CNO_HANDLE, DAT_EVD_FLAGS, DAT_EVD_HANDLE *);
DAT_RETURN dapl_evd_query(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, DAT_EVD_PARAM *);
DAT_RETURN dapl_evd_modify_cno(DAT_EVD_HANDLE, DAT_CNO_HANDLE);
DAT_RETURN dapl_evd_enable(DAT_EVD_HANDLE);
DAT_RETURN dapl_evd_disable(DAT_EVD_HANDLE);
DAT_RETURN dapl_evd_wait(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, DAT_EVENT *, DAT_COUNT *);
DAT_RETURN dapl_evd_resize(DAT_EVD_HANDLE, DAT_COUNT);
DAT_RETURN dapl_evd_post_se(DAT_EVD_HANDLE, const DAT_EVENT *);
DAT_RETURN dapl_evd_dequeue(DAT_EVD_HANDLE, DAT_EVENT *);
DAT_RETURN dapl_evd_free(DAT_EVD_HANDLE);
DAT_RETURN dapl_evd_set_unwaitable(DAT_EVD_HANDLE);
DAT_RETURN dapl_evd_clear_unwaitable(DAT_EVD_HANDLE);

DAT_RETURN dapl_ep_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
			  DAT_EVD_HANDLE, const DAT_EP_ATTR *, DAT_EP_HANDLE *);
DAT_RETURN dapl_ep_create_with_srq(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
				   DAT_EVD_HANDLE, DAT_SRQ_HANDLE, const DAT_EP_ATTR *,
				   DAT_EP_HANDLE *);
DAT_RETURN dapl_ep_query(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, DAT_EP_PARAM *);
DAT_RETURN dapl_ep_modify(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, const DAT_EP_PARAM *);
DAT_RETURN dapl_ep_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_CONN_QUAL, DAT_TIMEOUT,
			   DAT_COUNT, const DAT_PVOID, DAT_QOS, DAT_CONNECT_FLAGS);
DAT_RETURN dapl_ep_common_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_TIMEOUT,
				  DAT_COUNT, const DAT_PVOID);
DAT_RETURN dapl_ep_dup_connect(DAT_EP_HANDLE, DAT_EP_HANDLE, DAT_TIMEOUT, DAT_COUNT,
			       const DAT_PVOID, DAT_QOS);
DAT_RETURN dapl_ep_disconnect(DAT_EP_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN dapl_ep_post_send(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
			     DAT_COMPLETION_FLAGS);
DAT_RETURN dapl_ep_post_send_with_invalidate(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *,
					     DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS,
					     DAT_BOOLEAN, DAT_RMR_CONTEXT);
DAT_RETURN dapl_ep_post_recv(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
			     DAT_COMPLETION_FLAGS);
DAT_RETURN dapl_ep_post_rdma_read(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
				  const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS);
DAT_RETURN dapl_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE, const DAT_RMR_TRIPLET *,
					 DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
					 DAT_COMPLETION_FLAGS);
DAT_RETURN dapl_ep_post_rdma_write(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
				   const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS);
DAT_RETURN dapl_ep_get_status(DAT_EP_HANDLE, DAT_EP_STATE *, DAT_BOOLEAN *, DAT_BOOLEAN *);
DAT_RETURN dapl_ep_free(DAT_EP_HANDLE);
DAT_RETURN dapl_ep_reset(DAT_EP_HANDLE);
DAT_RETURN dapl_ep_recv_query(DAT_EP_HANDLE, DAT_COUNT *, DAT_COUNT *);
DAT_RETURN dapl_ep_set_watermark(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT);

DAT_RETURN dapl_lmr_create(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN,
			   DAT_PZ_HANDLE, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_LMR_HANDLE *,
			   DAT_LMR_CONTEXT *, DAT_RMR_CONTEXT *, DAT_VLEN *, DAT_VADDR *);
DAT_RETURN dapl_lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);
DAT_RETURN dapl_lmr_free(DAT_LMR_HANDLE);
DAT_RETURN dapl_lmr_sync_rdma_read(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
DAT_RETURN dapl_lmr_sync_rdma_write(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);

DAT_RETURN dapl_rmr_create(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN dapl_rmr_create_for_ep(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN dapl_rmr_query(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, DAT_RMR_PARAM *);
DAT_RETURN dapl_rmr_bind(DAT_RMR_HANDLE, DAT_LMR_HANDLE, const DAT_LMR_TRIPLET *,
			 DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_EP_HANDLE, DAT_RMR_COOKIE,
			 DAT_COMPLETION_FLAGS, DAT_RMR_CONTEXT *);
DAT_RETURN dapl_rmr_free(DAT_RMR_HANDLE);

DAT_RETURN dapl_psp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS,
			   DAT_PSP_HANDLE *);
DAT_RETURN dapl_psp_create_any(DAT_IA_HANDLE, DAT_CONN_QUAL *, DAT_EVD_HANDLE, DAT_PSP_FLAGS,
			       DAT_PSP_HANDLE *);
DAT_RETURN dapl_psp_query(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, DAT_PSP_PARAM *);
DAT_RETURN dapl_psp_free(DAT_PSP_HANDLE);
DAT_RETURN dapl_rsp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EP_HANDLE, DAT_EVD_HANDLE,
			   DAT_RSP_HANDLE *);
DAT_RETURN dapl_rsp_query(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, DAT_RSP_PARAM *);
DAT_RETURN dapl_rsp_free(DAT_RSP_HANDLE);
DAT_RETURN dapl_csp_create(DAT_IA_HANDLE, DAT_COMM *, DAT_IA_ADDRESS_PTR, DAT_EVD_HANDLE,
			   DAT_CSP_HANDLE *);
DAT_RETURN dapl_csp_query(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *);
DAT_RETURN dapl_csp_free(DAT_CSP_HANDLE);

DAT_RETURN dapl_pz_create(DAT_IA_HANDLE, DAT_PZ_HANDLE *);
DAT_RETURN dapl_pz_query(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, DAT_PZ_PARAM *);
DAT_RETURN dapl_pz_free(DAT_PZ_HANDLE);

DAT_RETURN dapl_srq_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_SRQ_ATTR *, DAT_SRQ_HANDLE *);
DAT_RETURN dapl_srq_free(DAT_SRQ_HANDLE);
DAT_RETURN dapl_srq_post_recv(DAT_SRQ_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE);
DAT_RETURN dapl_srq_query(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, DAT_SRQ_PARAM *);
DAT_RETURN dapl_srq_resize(DAT_SRQ_HANDLE, DAT_COUNT);
DAT_RETURN dapl_srq_set_lw(DAT_SRQ_HANDLE, DAT_COUNT);

/* dat_extension_op (dapl/ssp/ssp_ext.c) */
DAT_RETURN dapl_extension_op(DAT_HANDLE, DAT_EXTENDED_OP, va_list);

/* Provider-created objects used across modules. */
DAT_RETURN dapl_evd_create_internal(struct dapl_ia *ia, DAT_COUNT qlen,
				    DAT_EVD_FLAGS flags, struct dapl_evd **out);

#endif
