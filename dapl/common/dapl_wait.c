/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Time and sleeping: DAT timeouts as CLOCK_MONOTONIC deadlines, and the
 * one place where waiters (dat_evd_wait, dat_cno_wait) sleep.  Blocking
 * uses file descriptors only, so one ppoll() covers every source. */
#include "config.h"

#include <poll.h>
#include <time.h>

#include "dapl.h"

int dapl_deadline(DAT_TIMEOUT timeout_us, struct timespec *deadline)
{
	if (timeout_us == DAT_TIMEOUT_INFINITE)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += timeout_us / 1000000;
	deadline->tv_nsec += (long)(timeout_us % 1000000) * 1000;
	if (deadline->tv_nsec >= 1000000000L) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000L;
	}
	return 1;
}

int dapl_time_left(const struct timespec *deadline, struct timespec *left)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left->tv_sec = deadline->tv_sec - now.tv_sec;
	left->tv_nsec = deadline->tv_nsec - now.tv_nsec;
	if (left->tv_nsec < 0) {
		left->tv_sec--;
		left->tv_nsec += 1000000000L;
	}
	return left->tv_sec > 0 || (left->tv_sec == 0 && left->tv_nsec > 0);
}

int dapl_fd_sleep(struct pollfd *fds, int nfds, int bounded,
		  const struct timespec *deadline)
{
	struct timespec left;

	if (bounded && !dapl_time_left(deadline, &left))
		return 0;
	/* EINTR and timeouts alike: the caller loops and re-checks. */
	(void)ppoll(fds, (nfds_t)nfds, bounded ? &left : NULL, NULL);
	return 1;
}
