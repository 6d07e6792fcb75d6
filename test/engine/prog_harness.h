/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared by the progress-loop tests (t_prog_call.c, t_prog_watch.c):
 * the loopback device's progress thread, and input made
 * with an eventfd.  Header-only (static inline), like qp_harness.h. */
#ifndef IW_TEST_PROG_HARNESS_H
#define IW_TEST_PROG_HARNESS_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "iw_engine.h"
#include "iw_progress.h"

/* Holds a progress thread in a task until released: posted with
 * iwe_prog_post(p, &s.task), then prog_stall_set(&s, 1) waits until the
 * thread is held, prog_stall_set(&s, 0) lets it go. */
struct prog_stall {
	struct iwe_prog_task task;
	pthread_mutex_t mx;
	pthread_cond_t cv;
	int held, release;
};

#define PROG_STALL_INIT { .task.fn = prog_stall_fn, \
			  .mx = PTHREAD_MUTEX_INITIALIZER, \
			  .cv = PTHREAD_COND_INITIALIZER }

static inline void prog_stall_fn(struct iwe_prog_task *t)
{
	struct prog_stall *s = IWE_CONTAINER_OF(t, struct prog_stall, task);

	pthread_mutex_lock(&s->mx);
	s->held = 1;
	pthread_cond_broadcast(&s->cv);
	while (!s->release)
		pthread_cond_wait(&s->cv, &s->mx);
	pthread_mutex_unlock(&s->mx);
}

static inline void prog_stall_set(struct prog_stall *s, int hold)
{
	pthread_mutex_lock(&s->mx);
	if (hold) {
		while (!s->held)
			pthread_cond_wait(&s->cv, &s->mx);
	} else {
		s->release = 1;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mx);
}

/* Make eventfd fd readable (one more event for its watch). */
static inline void prog_poke(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		BAIL("eventfd write: %s", strerror(errno));
}

/* Open the loopback TCP device (into *dev) and start its progress
 * thread; bails out on failure. */
static inline struct iwe_prog *prog_on_lo(struct iwe_device **dev)
{
	struct iwe_prog *p;

	*dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!*dev)
		BAIL("open lo: %s", strerror(errno));
	p = iwe_prog_get(*dev);
	if (!p)
		BAIL("progress thread: %s", strerror(errno));
	return p;
}

#endif
