/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Copies that touch consumer memory from user space.
 *
 * Registered memory is the consumer's: unmapping it while the engine
 * still places into it or sends from it is the consumer's error, but it
 * must not crash the progress thread.  The kernel's own copies (sendmsg,
 * recvmsg) answer EFAULT; the engine's copies (placing a staged segment,
 * staging a payload for its CRC, small inline payloads) go through
 * iwe_copy_guarded, which turns a SIGSEGV or SIGBUS raised inside the
 * copy into EFAULT.  The handler is installed once, when memory is first
 * registered; a fault anywhere else goes to the handler that was there
 * before (or the default action: the process dies as it would have).
 * An application that installs its own SIGSEGV handler later replaces
 * ours: its faults inside a copy are then its own.
 */
#ifndef IW_GUARD_H
#define IW_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* Install the fault handler (idempotent, thread-safe). */
void iwe_guard_install(void);

enum iwe_copy_kind {
	IWE_COPY_PLAIN,			/* memcpy */
	IWE_COPY_ORDERED,		/* iw_place_ordered */
	IWE_COPY_CRC,			/* iw_crc32c_copy, *crc chained */
};

/* Copy len bytes; 0, or EFAULT when either side was not mapped (dst may
 * then hold part of the bytes). */
int iwe_copy_guarded(void *dst, const void *src, size_t len,
		     enum iwe_copy_kind kind, uint32_t *crc);

#endif
