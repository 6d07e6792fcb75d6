/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket Service Points (iWARP Transport Specific Extensions for DAT 2.0, section 3.1).
 *
 * An SSP adopts a consumer's connected TCP socket and produces at most one
 * Connection Request from the MPA request that arrives on it.  Ownership of
 * the socket moves with the protocol:
 *   SSP (operational)  -- valid MPA request -->  CR  -- accept -->  EP
 *                                                   -- reject -->  closed
 * and dat_iw_ssp_free hands a socket the SSP still holds back to the
 * consumer untouched (file status flags restored, no byte consumed).
 */
#ifndef DAPL_SSP_H
#define DAPL_SSP_H

#include "dapl.h"
#include <dat2/dat_iw_extensions.h>

struct dapl_ssp {
	struct dapl_obj obj;
	struct dapl_evd *evd;		/* pinned: CR and SOCKET_DOWN events */
	DAT_EP_HANDLE ep_handle;	/* the consumer's EP (reserved), or NULL:
					 * kept as a handle, the EP may go */
	int provider_ep;		/* no EP given: the request gets a
					 * provider-created one */
	int fd;				/* the socket while associated, else -1 */
	int consumer_fd;		/* the socket given at create */
	struct iwe_conn *conn;		/* adoption, owned until a CR takes it */
	int conn_given;			/* a CR took the conn */
	DAT_IW_SSP_STATE state;
	int dead;			/* being freed: handlers stay away */
};

DAT_RETURN dapl_ssp_create(struct dapl_ia *ia, int fd, DAT_EP_HANDLE ep,
			   DAT_EVD_HANDLE evd, const void *final_msg,
			   DAT_COUNT final_len, DAT_IW_SSP_HANDLE *out);
DAT_RETURN dapl_ssp_free(DAT_IW_SSP_HANDLE ssp);
DAT_RETURN dapl_ssp_query(DAT_IW_SSP_HANDLE ssp, int mask,
			  DAT_IW_SSP_PARAM *param);
DAT_RETURN dapl_ssp_socket_connect(DAT_EP_HANDLE ep, int fd,
				   DAT_TIMEOUT timeout, DAT_COUNT pd_size,
				   const void *pd);

/* Socket checks shared by both sides: DAT_INVALID_PARAMETER for what is
 * not an open TCP/IPv4 stream socket, DAT_INVALID_STATE for a connected
 * socket not routed through the IA's interface.  facts->connected tells
 * whether the socket has a peer; the adopt takes the rest. */
DAT_RETURN dapl_ssp_check_socket(struct dapl_ia *ia, int fd,
				 struct iwe_sock_facts *facts);

#endif
