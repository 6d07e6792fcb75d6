/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * dat_iw_extensions.h -- DAT 2.0 iWARP transport extension:
 * Socket Service Points (SSP).
 *
 * A consumer that already owns a connected TCP socket (perhaps after a
 * streaming-mode exchange with its peer) gives it to the provider, which
 * runs the MPA request/reply over that same TCP connection and turns it
 * into an RDMA connection:
 *
 *   passive side: dat_iw_ssp_create()     -> DAT_CONNECTION_REQUEST_EVENT
 *                                            on the SSP's EVD, then
 *                                            dat_cr_accept()/dat_cr_reject()
 *   active side:  dat_iw_socket_connect() -> the usual connection events on
 *                                            the EP's connect EVD
 *
 * Include after, or instead of, <dat2/udat.h>; this header includes it.
 * It can share a translation unit with <dat2/dat_ib_extensions.h>.
 *
 * ------------------------------------------------------------------------
 * Detecting support (dat_ia_query)
 * ------------------------------------------------------------------------
 *   ia_attr.extension_supported == DAT_EXTENSION_IW
 *       (mask DAT_IA_FIELD_IA_EXTENSION)
 *   ia_attr.extension_version   == DAT_IW_EXTENSION_VERSION
 *       (mask DAT_IA_FIELD_IA_EXTENSION_VERSION)
 *   provider_attr.provider_specific_attr contains
 *       { DAT_EXTENSION_ATTR,         "TRUE" }
 *       { DAT_EXTENSION_ATTR_VERSION, DAT_IW_EXTENSION_VERSION_STR }
 *       { DAT_IW_ATTR_SSP,            "TRUE" }
 *       (mask DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR)
 *
 * ------------------------------------------------------------------------
 * Calling convention (for the provider's dispatcher)
 * ------------------------------------------------------------------------
 * Every call below is a macro over
 *     dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
 * which the registry (libdat2) forwards to the provider's
 * handle_extendedop_func(handle, op, va_list).  What the registry does first:
 *   - handle == NULL: returns DAT_INVALID_HANDLE | DAT_INVALID_HANDLE1 and
 *     never calls the provider;
 *   - a consumer IA handle is translated to the provider's own IA handle;
 *     any other handle is passed unchanged, so every object handle the
 *     consumer can pass (the SSP handle included) must begin with its
 *     DAT_PROVIDER pointer;
 *   - if no open IA reported extension support: DAT_NOT_IMPLEMENTED;
 *   - op values with bit 0x1000 (DAT_OPEN_EXTENSION_BASE) or 0x2000
 *     (DAT_CLOSE_EXTENSION_BASE) set are diverted to the registry's own
 *     open/close query paths.  Our op codes are therefore 0x100..0x103.
 *     They are also disjoint from the DAT_IB_OP values (0..29), so a
 *     provider can tell an IB op that was sent to it by mistake.
 *
 * The macros cast each argument to its declared type, so the variadic
 * arguments arrive as below.  "int" entries: DAT_IW_SOCKET and DAT_COUNT are
 * int; an enum travels as its compatible integer type (unsigned int with
 * GCC for DAT_IW_SSP_PARAM_MASK), and va_arg(ap, int) is defined for every
 * value representable in both, which covers every valid mask.  DAT_TIMEOUT
 * is DAT_UINT32 (uint32_t, not promoted) and must be read as DAT_UINT32:
 * DAT_TIMEOUT_INFINITE (0xFFFFFFFF) does not fit an int.  Handles and
 * pointers are read as the pointer type named.
 *
 * DAT_IW_SSP_CREATE_OP (0x100)   handle = DAT_IA_HANDLE (provider's own)
 *     1. va_arg(ap, int)                  socket_id       (DAT_IW_SOCKET)
 *     2. va_arg(ap, DAT_EP_HANDLE)        ep_handle       (may be NULL)
 *     3. va_arg(ap, DAT_EVD_HANDLE)       evd_handle
 *     4. va_arg(ap, DAT_PVOID)            final_sm_msg    (may be NULL)
 *     5. va_arg(ap, int)                  final_sm_msg_len (DAT_COUNT)
 *     6. va_arg(ap, DAT_IW_SSP_HANDLE *)  ssp_handle      (OUT)
 *   returns DAT_SUCCESS, DAT_INSUFFICIENT_RESOURCES,
 *     DAT_INVALID_HANDLE (ia_handle, ep_handle or evd_handle),
 *     DAT_INVALID_PARAMETER (socket_id invalid; also, as logical uses:
 *       ssp_handle NULL, final_sm_msg_len < 0, final_sm_msg NULL with
 *       final_sm_msg_len > 0),
 *     DAT_INVALID_STATE (EP not idle; socket unknown to the provider or
 *       not routed through this IA).
 *
 * DAT_IW_SSP_FREE_OP (0x101)     handle = DAT_IW_SSP_HANDLE
 *     (no variadic arguments)
 *   returns DAT_SUCCESS, DAT_INVALID_HANDLE (ssp_handle).
 *
 * DAT_IW_SSP_QUERY_OP (0x102)    handle = DAT_IW_SSP_HANDLE
 *     1. va_arg(ap, int)                  ssp_param_mask  (DAT_IW_SSP_PARAM_MASK)
 *     2. va_arg(ap, DAT_IW_SSP_PARAM *)   ssp_param       (OUT)
 *   returns DAT_SUCCESS, DAT_INVALID_HANDLE (ssp_handle),
 *     DAT_INVALID_PARAMETER (mask has bits outside DAT_IW_SSP_FIELD_ALL;
 *       ssp_param NULL).
 *   ssp_param->ia_handle must be the consumer's IA handle, not the one
 *   the provider received in DAT_IW_SSP_CREATE_OP (map it back).
 *
 * DAT_IW_SOCKET_CONNECT_OP (0x103)  handle = DAT_EP_HANDLE
 *     1. va_arg(ap, int)                  socket_id       (DAT_IW_SOCKET)
 *     2. va_arg(ap, DAT_UINT32)           timeout         (DAT_TIMEOUT, us)
 *     3. va_arg(ap, int)                  private_data_size (DAT_COUNT)
 *     4. va_arg(ap, const void *)         private_data    (may be NULL
 *                                                          if size is 0)
 *   returns DAT_SUCCESS, DAT_INSUFFICIENT_RESOURCES,
 *     DAT_INVALID_PARAMETER (timeout 0, negative or too large private data
 *       size, private_data NULL with a size > 0, EP parameters conflicting
 *       with the socket),
 *     DAT_INVALID_HANDLE (ep_handle),
 *     DAT_INVALID_STATE (EP not DAT_EP_STATE_UNCONNECTED, EP without PZ or
 *       EVDs, socket unknown to the provider or not routed through the IA).
 *
 * DAT_IW_STATS_QUERY_OP (0x104)  handle = DAT_IA_HANDLE or DAT_EP_HANDLE
 *     1. va_arg(ap, DAT_IW_STATS *)       stats           (OUT)
 *   returns DAT_SUCCESS, DAT_INVALID_HANDLE (neither a live IA nor EP),
 *     DAT_INVALID_PARAMETER (stats NULL).
 *
 * Any other op code: the provider should return DAT_NOT_IMPLEMENTED.
 */
#ifndef DAT_IW_EXTENSIONS_H
#define DAT_IW_EXTENSIONS_H

#include <dat2/udat.h>

/* udat_config.h turns this on; without it dat.h has no extension bases. */
#ifndef DAT_EXTENSIONS
#error "dat_iw_extensions.h needs DAT_EXTENSIONS (see <dat2/udat_config.h>)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Version of this interface, reported by dat_ia_query in
 * DAT_IA_ATTR.extension_version and, as a string, in the
 * DAT_EXTENSION_ATTR_VERSION provider attribute.
 *   200 - Socket Service Points: ssp_create/free/query, socket_connect,
 *         DAT_CONNECTION_EVENT_SOCKET_DOWN.
 */
#define DAT_IW_EXTENSION_VERSION	200
#define DAT_IW_EXTENSION_VERSION_STR	"200"

/*
 * Names of provider_specific_attr entries.  The two generic names are not
 * in Debian's dat_ib_extensions.h; the guards keep both headers usable in
 * one translation unit should another header define them too.
 */
#ifndef DAT_EXTENSION_ATTR
#define DAT_EXTENSION_ATTR		"DAT_EXTENSION_INTERFACE"
#endif
#ifndef DAT_EXTENSION_ATTR_VERSION
#define DAT_EXTENSION_ATTR_VERSION	"DAT_EXTENSION_VERSION"
#endif
#define DAT_IW_ATTR_SSP			"DAT_IW_ATTR_SSP"

/*
 * Socket ID: the host's native socket identifier.  On Linux this is the
 * file descriptor of a connected SOCK_STREAM socket (what socket(2) and
 * accept(2) return).
 */
typedef int DAT_IW_SOCKET;

/* Socket Service Point handle; a DAT object like any other. */
typedef DAT_HANDLE DAT_IW_SSP_HANDLE;

/* Handle type as dat_get_handle_type reports it for an SSP. */
typedef enum dat_handle_iw_ext_type {
	DAT_IW_HANDLE_TYPE_SSP = DAT_HANDLE_TYPE_EXTENSION_BASE
} DAT_HANDLE_IW_EXT_TYPE;

/*
 * An SSP is operational until it has produced its one connection request
 * or its socket went down; a non-operational SSP can only be queried and
 * freed.
 */
typedef enum dat_iw_ssp_state {
	DAT_IW_SSP_STATE_OPERATIONAL,
	DAT_IW_SSP_STATE_NON_OPERATIONAL
} DAT_IW_SSP_STATE;

/* Filled by dat_iw_ssp_query. */
typedef struct dat_iw_ssp_param {
	DAT_IA_HANDLE ia_handle;
	DAT_IW_SOCKET socket_id;	/* -1 when the SSP holds no socket */
	DAT_EVD_HANDLE evd_handle;
	DAT_EP_HANDLE ep_handle;
	DAT_IW_SSP_STATE ssp_state;
} DAT_IW_SSP_PARAM;

typedef enum dat_iw_ssp_param_mask {
	DAT_IW_SSP_FIELD_IA_HANDLE	= 0x01,
	DAT_IW_SSP_FIELD_SOCKET_ID	= 0x02,
	DAT_IW_SSP_FIELD_EVD_HANDLE	= 0x04,
	DAT_IW_SSP_FIELD_EP_HANDLE	= 0x08,
	DAT_IW_SSP_FIELD_SSP_STATE	= 0x10,
	DAT_IW_SSP_FIELD_ALL		= 0x1F
} DAT_IW_SSP_PARAM_MASK;

/*
 * Extension events, numbered from the DAT_EVENT_NUMBER range that dat.h
 * reserves for iWARP (DAT_IW_EXTENSION_RANGE_BASE, 0x80000; that value is
 * itself a DAT_EVENT_NUMBER enumerator, so it fits the event_number field).
 *
 * DAT_CONNECTION_EVENT_SOCKET_DOWN: the SSP's socket was not connected
 * when the SSP was created, or disconnected before a connection request
 * arrived.  It is queued on the EVD given to dat_iw_ssp_create; the SSP is
 * then non-operational.  event_data carries nothing; event_extension_data
 * holds a DAT_IW_SSP_EVENT_DATA (see DAT_IW_SSP_EVENT_DATA_PTR).
 *
 * event_number has type DAT_EVENT_NUMBER, so compare through int (or use
 * DAT_IW_EVENT_IS_SOCKET_DOWN) to stay clear of -Wenum-compare.
 */
typedef enum dat_iw_event_number {
	DAT_CONNECTION_EVENT_SOCKET_DOWN = DAT_IW_EXTENSION_RANGE_BASE
} DAT_IW_EVENT_NUMBER;

#define DAT_IW_EVENT_IS_SOCKET_DOWN(event)				\
	((int)(event)->event_number == (int)DAT_CONNECTION_EVENT_SOCKET_DOWN)

/*
 * Data of DAT_CONNECTION_EVENT_SOCKET_DOWN, in event_extension_data.
 *
 * That array is DAT_UINT64, so using it as this struct is type punning:
 * under -fstrict-aliasing (the default at -O2) GCC may reorder or drop the
 * accesses.  may_alias exempts this type from that analysis.  A compiler
 * without the attribute should memcpy the struct in and out instead.
 */
#if defined(__GNUC__) || defined(__clang__)
#define DAT_IW_MAY_ALIAS_ __attribute__((__may_alias__))
#else
#define DAT_IW_MAY_ALIAS_
#endif
typedef struct DAT_IW_MAY_ALIAS_ dat_iw_ssp_event_data {
	DAT_IW_SSP_HANDLE ssp_handle;	/* the SSP that went down */
	DAT_IW_SOCKET socket_id;	/* the socket it was created with */
} DAT_IW_SSP_EVENT_DATA;
#undef DAT_IW_MAY_ALIAS_

/*
 * DAT_EVENT's event_data union is fixed by dat.h; extension data lives in
 * its DAT_UINT64 event_extension_data[8] (64 bytes, 8-byte aligned).
 * Given a DAT_EVENT *, yields a DAT_IW_SSP_EVENT_DATA * into that array.
 */
#define DAT_IW_SSP_EVENT_DATA_PTR(event)				\
	((DAT_IW_SSP_EVENT_DATA *)(void *)((event)->event_extension_data))

/* The event data must fit the array and need no stronger alignment. */
#if defined(__cplusplus)
#if __cplusplus >= 201103L
static_assert(sizeof(DAT_IW_SSP_EVENT_DATA) <=
	      sizeof(((DAT_EVENT *)0)->event_extension_data),
	      "DAT_IW_SSP_EVENT_DATA exceeds DAT_EVENT.event_extension_data");
static_assert(alignof(DAT_IW_SSP_EVENT_DATA) <= alignof(DAT_UINT64),
	      "DAT_IW_SSP_EVENT_DATA needs more than 8-byte alignment");
#define DAT_IW_HAVE_STATIC_ASSERT_ 1
#endif
#elif defined(__STDC_VERSION__)
#if __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(DAT_IW_SSP_EVENT_DATA) <=
	       sizeof(((DAT_EVENT *)0)->event_extension_data),
	       "DAT_IW_SSP_EVENT_DATA exceeds DAT_EVENT.event_extension_data");
_Static_assert(_Alignof(DAT_IW_SSP_EVENT_DATA) <= _Alignof(DAT_UINT64),
	       "DAT_IW_SSP_EVENT_DATA needs more than 8-byte alignment");
#define DAT_IW_HAVE_STATIC_ASSERT_ 1
#endif
#endif
#ifndef DAT_IW_HAVE_STATIC_ASSERT_
/* Older dialects: an array of negative size stops the build instead. */
typedef char dat_iw_ssp_event_data_fits_[
	(sizeof(DAT_IW_SSP_EVENT_DATA) <=
	 sizeof(((DAT_EVENT *)0)->event_extension_data)) ? 1 : -1];
#endif
#undef DAT_IW_HAVE_STATIC_ASSERT_

/*
 * Extension operation codes (second argument of dat_extension_op).
 * Kept below 0x1000: the registry treats bits 0x1000/0x2000 specially.
 */
typedef enum dat_iw_op {
	DAT_IW_SSP_CREATE_OP		= 0x100,
	DAT_IW_SSP_FREE_OP		= 0x101,
	DAT_IW_SSP_QUERY_OP		= 0x102,
	DAT_IW_SOCKET_CONNECT_OP	= 0x103,
	DAT_IW_STATS_QUERY_OP		= 0x104
} DAT_IW_OP;

/*
 * Counters (doc/dat_iw_extensions.md, "Counters"; dat_iw_stats_query(3)).
 * Every counter counts from the object's creation and is never reset: a
 * consumer takes differences.  An IA's set is the sum over its EPs, live
 * and freed, plus what happens on its Service Points (requests received
 * and rejected).  The layout only grows at its end: the query macros
 * below set `version` and `size` to the caller's header's before the
 * call, the provider fills no more than that (a caller that did not set
 * them gets version 1's fields), and sets them to what it filled.
 */
#define DAT_IW_STATS_VERSION		2
#define DAT_IW_STATS_TERM_CODES		8	/* distinct codes kept */

/* Operation types of the per-operation counters (index of the arrays). */
typedef enum dat_iw_stats_op {
	DAT_IW_STATS_SEND		= 0,	/* Send, with SE / Invalidate */
	DAT_IW_STATS_RDMA_WRITE		= 1,
	DAT_IW_STATS_RDMA_READ_REQ	= 2,	/* no payload: bytes stay 0 */
	DAT_IW_STATS_RDMA_READ_RESP	= 3,
	DAT_IW_STATS_OPS		= 4
} DAT_IW_STATS_OP;

/* One Terminate code: layer << 12 | error type << 8 | error code, the
 * upper 16 bits of the RFC 5040 (4.8) Terminate control field. */
typedef struct dat_iw_term_count {
	DAT_UINT32 code;
	DAT_UINT32 reserved;
	DAT_UINT64 count;
} DAT_IW_TERM_COUNT;

typedef struct dat_iw_stats {
	DAT_UINT32 version;		/* DAT_IW_STATS_VERSION (provider) */
	DAT_UINT32 size;		/* bytes the provider filled */
	/* Connections (an EP counts its own; an IA all of them). */
	DAT_UINT64 conn_requested;	/* active connects started */
	DAT_UINT64 conn_opened;		/* active side: ESTABLISHED */
	DAT_UINT64 conn_accepted;	/* passive side: ESTABLISHED */
	DAT_UINT64 conn_peer_rejected;	/* our request rejected by the peer */
	DAT_UINT64 conn_failed;		/* unreachable, timed out, non-peer
					 * rejected, accept not completed */
	DAT_UINT64 conn_received;	/* requests arrived (IA only) */
	DAT_UINT64 conn_rejected;	/* requests we rejected (IA only) */
	/* Data, by DAT_IW_STATS_OP: messages and payload bytes. */
	DAT_UINT64 tx_msgs[DAT_IW_STATS_OPS];
	DAT_UINT64 tx_bytes[DAT_IW_STATS_OPS];
	DAT_UINT64 rx_msgs[DAT_IW_STATS_OPS];
	DAT_UINT64 rx_bytes[DAT_IW_STATS_OPS];
	DAT_UINT64 tx_segments, rx_segments;	/* DDP segments */
	DAT_UINT64 crc_errors;		/* FPDUs received with a bad CRC */
	DAT_UINT64 retransmits;		/* packets sent again (UDP/TRP) */
	DAT_UINT64 queue_full;		/* posts refused: queue full */
	DAT_UINT64 term_sent, term_rcvd;	/* Terminates, any code */
	DAT_UINT64 eps_open, eps_closed;	/* IA only: EPs alive, freed */
	/* By code: the first DAT_IW_STATS_TERM_CODES distinct codes (count
	 * 0 ends the list); later ones count only in term_sent/term_rcvd. */
	DAT_IW_TERM_COUNT term_sent_code[DAT_IW_STATS_TERM_CODES];
	DAT_IW_TERM_COUNT term_rcvd_code[DAT_IW_STATS_TERM_CODES];
	/* Version 2: Sends that came before a receive was posted and
	 * waited for one (the receiver-not-ready grace, iwdapl(7)
	 * IWDAPL_RNR_MS). */
	DAT_UINT64 rnr_waits;
} DAT_IW_STATS;

/* What this header's DAT_IW_STATS is, for the provider (NULL stays
 * NULL: the provider answers DAT_INVALID_PARAMETER). */
static inline DAT_IW_STATS *dat_iw_stats_this_header(DAT_IW_STATS *s)
{
	if (s) {
		s->version = DAT_IW_STATS_VERSION;
		s->size = (DAT_UINT32)sizeof(*s);
	}
	return s;
}

/*
 * dat_iw_ssp_create: make a Socket Service Point from a connected socket.
 * The SSP produces at most one connection request, delivered to evd_handle
 * and bound to ep_handle (DAT_HANDLE_NULL asks the provider to create the
 * EP).  final_sm_msg, if final_sm_msg_len > 0, is sent on the socket just
 * before the provider starts waiting for the MPA request, so the peer
 * cannot answer it too early.  The socket belongs to the SSP from now on.
 * Synchronous and thread safe.
 *
 *   DAT_RETURN dat_iw_ssp_create(DAT_IA_HANDLE ia_handle,
 *                                DAT_IW_SOCKET socket_id,
 *                                DAT_EP_HANDLE ep_handle,
 *                                DAT_EVD_HANDLE evd_handle,
 *                                DAT_PVOID final_sm_msg,
 *                                DAT_COUNT final_sm_msg_len,
 *                                DAT_IW_SSP_HANDLE *ssp_handle);
 */
#define dat_iw_ssp_create(ia_handle, socket_id, ep_handle, evd_handle,	\
			  final_sm_msg, final_sm_msg_len, ssp_handle)	\
	dat_extension_op((DAT_IA_HANDLE)(ia_handle),			\
			 (DAT_EXTENDED_OP)DAT_IW_SSP_CREATE_OP,		\
			 (DAT_IW_SOCKET)(socket_id),			\
			 (DAT_EP_HANDLE)(ep_handle),			\
			 (DAT_EVD_HANDLE)(evd_handle),			\
			 (DAT_PVOID)(final_sm_msg),			\
			 (DAT_COUNT)(final_sm_msg_len),			\
			 (DAT_IW_SSP_HANDLE *)(ssp_handle))

/*
 * dat_iw_ssp_free: destroy an SSP.  A socket still held by the SSP goes
 * back to the consumer, as does the consumer's EP; a connection request
 * already delivered is not affected.  Synchronous, not thread safe.
 *
 *   DAT_RETURN dat_iw_ssp_free(DAT_IW_SSP_HANDLE ssp_handle);
 */
#define dat_iw_ssp_free(ssp_handle)					\
	dat_extension_op((DAT_IW_SSP_HANDLE)(ssp_handle),		\
			 (DAT_EXTENDED_OP)DAT_IW_SSP_FREE_OP)

/*
 * dat_iw_ssp_query: fill the fields of *ssp_param selected by
 * ssp_param_mask (others may be filled too).  Synchronous, thread safe.
 *
 *   DAT_RETURN dat_iw_ssp_query(DAT_IW_SSP_HANDLE ssp_handle,
 *                               DAT_IW_SSP_PARAM_MASK ssp_param_mask,
 *                               DAT_IW_SSP_PARAM *ssp_param);
 */
#define dat_iw_ssp_query(ssp_handle, ssp_param_mask, ssp_param)	\
	dat_extension_op((DAT_IW_SSP_HANDLE)(ssp_handle),		\
			 (DAT_EXTENDED_OP)DAT_IW_SSP_QUERY_OP,		\
			 (DAT_IW_SSP_PARAM_MASK)(ssp_param_mask),	\
			 (DAT_IW_SSP_PARAM *)(ssp_param))

/*
 * dat_iw_socket_connect: active side.  Sends the MPA request, carrying
 * private_data, over the already connected socket_id; the outcome arrives
 * as DAT_CONNECTION_EVENT_ESTABLISHED / _PEER_REJECTED / _NON_PEER_REJECTED
 * / _UNREACHABLE / _TIMED_OUT on the EP's connect EVD.  On success the
 * socket belongs to the EP; if the connection is not established it goes
 * back to the consumer.  timeout is in microseconds (DAT_TIMEOUT_INFINITE
 * allowed, 0 is invalid).  The seed's code example passes qos and flags as
 * well; the formal synopsis below, with five arguments, is the interface.
 *
 *   DAT_RETURN dat_iw_socket_connect(DAT_EP_HANDLE ep_handle,
 *                                    DAT_IW_SOCKET socket_id,
 *                                    DAT_TIMEOUT timeout,
 *                                    DAT_COUNT private_data_size,
 *                                    const DAT_PVOID private_data);
 *
 * The spec's "const DAT_PVOID" is void *const, a qualifier that means
 * nothing on a value argument (and that g++ -Wextra flags on a cast), so
 * the macro passes private_data as const void *: the provider only reads
 * it, and const buffers need no cast.
 */
#define dat_iw_socket_connect(ep_handle, socket_id, timeout,		\
			      private_data_size, private_data)		\
	dat_extension_op((DAT_EP_HANDLE)(ep_handle),			\
			 (DAT_EXTENDED_OP)DAT_IW_SOCKET_CONNECT_OP,	\
			 (DAT_IW_SOCKET)(socket_id),			\
			 (DAT_TIMEOUT)(timeout),			\
			 (DAT_COUNT)(private_data_size),		\
			 (const void *)(private_data))

/*
 * dat_iw_ia_stats_query / dat_iw_ep_stats_query: the counters of an IA
 * (all its EPs, live and freed) or of one EP, into *stats.  Synchronous,
 * thread safe.
 *
 *   DAT_RETURN dat_iw_ia_stats_query(DAT_IA_HANDLE ia_handle,
 *                                    DAT_IW_STATS *stats);
 *   DAT_RETURN dat_iw_ep_stats_query(DAT_EP_HANDLE ep_handle,
 *                                    DAT_IW_STATS *stats);
 */
#define dat_iw_ia_stats_query(ia_handle, stats)				\
	dat_extension_op((DAT_IA_HANDLE)(ia_handle),			\
			 (DAT_EXTENDED_OP)DAT_IW_STATS_QUERY_OP,		\
			 dat_iw_stats_this_header((DAT_IW_STATS *)(stats)))
#define dat_iw_ep_stats_query(ep_handle, stats)				\
	dat_extension_op((DAT_EP_HANDLE)(ep_handle),			\
			 (DAT_EXTENDED_OP)DAT_IW_STATS_QUERY_OP,		\
			 dat_iw_stats_this_header((DAT_IW_STATS *)(stats)))

/* Named provider attributes (dat_ia_query provider_specific_attr) that
 * say where the counters of a running process can be read. */
#define DAT_IW_ATTR_STATS		"IWDAPL_STATS_SOCKET"

#ifdef __cplusplus
}
#endif

#endif /* DAT_IW_EXTENSIONS_H */
