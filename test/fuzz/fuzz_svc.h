/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine's service header (IWE_CM_SERVICE_HDR_LEN bytes in front of
 * the private data of a request for a service above 65535): its layout
 * is private to the engine, so it is learned the way a peer sees it. */
#ifndef IW_FUZZ_SVC_H
#define IW_FUZZ_SVC_H

#include <stdint.h>

#include "iw_engine.h"

#define FUZZ_SVC_MAGIC_LEN 8	/* then the service, BE64 */
/* The first service fuzz_cm tries to listen on above 65535. */
#define FUZZ_CM_HASHED_SVC ((uint64_t)0xF0221u << 20)

/* Send one real request (iwe_cm_connect) to a socket of ours on a port
 * of the shared range and copy the magic that starts its service
 * header.  Returns 0, or an errno. */
int fuzz_learn_svc_magic(struct iwe_device *dev,
			 uint8_t magic[FUZZ_SVC_MAGIC_LEN]);

#endif
