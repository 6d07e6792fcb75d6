/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Mirrored byte rings; see iw_vring.h. */
#include "iw_vring.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IW_VRING_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define IW_VRING_ASAN 1
#endif

#ifdef IW_VRING_ASAN
/* AddressSanitizer does not see a read past the bytes received in mapped
 * memory, as it does past the end of a malloc'ed buffer: the fuzzers and
 * the ASan tests keep the flat buffer, whose bounds it checks. */
uint8_t *iw_vring_map(uint32_t cap)
{
	(void)cap;
	errno = ENOTSUP;
	return NULL;
}
#else
uint8_t *iw_vring_map(uint32_t cap)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)cap * 2;
	uint8_t *base;
	int fd, err;

	if (!cap || page <= 0 || cap % (uint32_t)page) {
		errno = EINVAL;
		return NULL;
	}
	fd = memfd_create("iwdapl-rx-ring", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	/* Reserve both halves at once, then lay the file over each. */
	base = ftruncate(fd, cap) ? MAP_FAILED :
	       mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base != MAP_FAILED &&
	    (mmap(base, cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		  fd, 0) == MAP_FAILED ||
	     mmap(base + cap, cap, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
	     madvise(base, len, MADV_DONTFORK))) {
		err = errno;
		munmap(base, len);
		errno = err;
		base = MAP_FAILED;
	}
	err = errno;
	close(fd);	/* the mappings keep the memory */
	errno = err;
	return base == MAP_FAILED ? NULL : base;
}
#endif

void iw_vring_unmap(uint8_t *ring, uint32_t cap)
{
	if (ring)
		munmap(ring, (size_t)cap * 2);
}
