/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CRC32c (Castagnoli, RFC 3385), the MPA FPDU checksum (RFC 5044).
 *
 * All functions chain: pass 0 to start, pass the previous result to
 * continue, and the result of the last call is the CRC of everything fed
 * so far.  So the CRC of an FPDU can be computed in pieces:
 *
 *   crc = iw_crc32c(0, &len_be, 2);
 *   crc = iw_crc32c(crc, ulpdu, n);
 *   crc = iw_crc32c(crc, pad, iw_fpdu_pad(n));
 *
 * The value returned is the finished CRC (reflected, init and final xor
 * ~0): iw_crc32c(0, "123456789", 9) == 0xE3069283.  Put it on the wire
 * with iw_fpdu_put_crc() (least significant byte first).
 *
 * iw_crc32c uses ISA-L's crc32_iscsi for long buffers when the library was
 * found at build time, the SSE4.2 crc32 instruction when the CPU has it,
 * else a portable slicing-by-8 table.  Both are thread-safe; the tables are built
 * once, on first use.
 */
#ifndef IW_CRC32C_H
#define IW_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The fastest implementation this CPU has. */
uint32_t iw_crc32c(uint32_t crc, const void *buf, size_t len);

/* Same, over a gather list (iovcnt entries; zero-length entries are fine). */
uint32_t iw_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt);

/* Copy len bytes from src to dst and return the CRC, chained from crc, of
 * the bytes written to dst (each chunk is CRCed from dst right after it
 * was copied, while it is in cache).  If src changes during the copy, the
 * CRC still matches what dst holds.  The buffers must not overlap. */
uint32_t iw_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* Copy and CRC the source: for bytes received into a private buffer and
 * then delivered to memory the consumer may be writing to. */
uint32_t iw_crc32c_copy_src(uint32_t crc, void *dst, const void *src,
			    size_t len);

/* The portable table implementation, whatever the CPU (for tests and for
 * checking the fast path). */
uint32_t iw_crc32c_portable(uint32_t crc, const void *buf, size_t len);

/* Whether iw_crc32c uses the crc32 instruction. */
int iw_crc32c_hw_available(void);

/* What iw_crc32c runs on this machine, for tools ("sse4.2", ...). */
const char *iw_crc32c_impl_name(void);

/* The instruction-based implementation; falls back to the portable one
 * when the CPU lacks SSE4.2 (so it is always safe to call). */
uint32_t iw_crc32c_hw(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
