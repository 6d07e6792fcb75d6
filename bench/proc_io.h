/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helpers of the bench programs that fork their peer: whole reads and
 * writes over the pipes between the two, and reaping the child. */
#ifndef BENCH_PROC_IO_H
#define BENCH_PROC_IO_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

/* All len bytes to (wr) or from fd; -1 on an error or end of file. */
static inline int io_full(int fd, void *p, size_t len, int wr)
{
	char *c = p;

	while (len) {
		ssize_t k = wr ? write(fd, c, len) : read(fd, c, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Waits for child pid, ending it first when the parent failed (it may be
 * waiting for a peer that gave up).  Returns 0 if it exited with status 0. */
static inline int reap_child(pid_t pid, int parent_failed)
{
	int st;

	if (parent_failed)
		kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st) != 0;
}

#endif
