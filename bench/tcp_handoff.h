/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* tcp_baseline's hand-off (tcp_handoff.c): a helper thread reads a
 * connection's messages into a buffer while the consumer spins on memory
 * for each. */
#ifndef BENCH_TCP_HANDOFF_H
#define BENCH_TCP_HANDOFF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

struct handoff {
	int fd, ep;
	unsigned char *buf;
	size_t size;
	long n;
	atomic_long arrived;	/* messages whole in buf */
	atomic_int failed;
	pthread_t th;
};

/* Starts the helper for n messages of size bytes on fd into buf; 0 or
 * -1 (said on stderr). */
int handoff_start(struct handoff *h, int fd, unsigned char *buf, size_t size, long n);
/* Spins until message i (from 0) is whole in buf; 0, or -1 when the
 * helper failed. */
int handoff_wait(struct handoff *h, long i);
/* Joins the helper; 0, or -1 when it failed. */
int handoff_stop(struct handoff *h);

#endif
