/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* tcp_baseline's handoff mode: a ping-pong in which each side's consumer
 * spins on memory for the next message while a helper thread of its
 * process, asleep in epoll, reads the message from the socket into the
 * buffer, in pieces of at most 64 KiB -- the arrangement of an RDMA
 * Write ping-pong polling memory (iwdtest -m wpp) over the provider,
 * whose progress thread places the data a consumer spinning on memory
 * does not read, with plain TCP and no protocol of ours.  It shows what
 * handing each message to a second thread costs while the consumer holds
 * a CPU: the floor under wpp, next to TCP's blocking ping-pong, in which
 * the consumer itself sleeps in recv().  The helper asks the scheduler
 * for what the provider's progress thread asks (iw_prog_cpu.c): a 100 us
 * slice, with which a waking thread preempts a spinner at once on Linux
 * 6.12 and later, and nice -10 where the process may; without them it
 * waited for the spinner's slice to end, milliseconds now and then. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tcp_handoff.h"

/* As the provider reads an FPDU at a time (64 KiB at most over tcp). */
#define HANDOFF_PIECE 65536

struct sched_attr_v1 {		/* struct sched_attr, as the kernel has it */
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

/* Best effort, as the provider's: an older kernel ignores the slice. */
static void claim_cpu(void)
{
	struct sched_attr_v1 a = { .size = sizeof(a), .runtime = 100000 };

	(void)syscall(SYS_sched_setattr, 0, &a, 0u);
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10);
}

static void *helper_main(void *arg)
{
	struct handoff *h = arg;
	struct epoll_event ev;

	claim_cpu();
	for (long m = 0; m < h->n; m++) {
		size_t off = 0;

		while (off < h->size) {
			size_t want = h->size - off < HANDOFF_PIECE ? h->size - off : HANDOFF_PIECE;
			ssize_t k = recv(h->fd, h->buf + off, want, MSG_DONTWAIT);

			if (k > 0) {
				off += (size_t)k;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
				if (epoll_wait(h->ep, &ev, 1, -1) >= 0 || errno == EINTR)
					continue;
			}
			fprintf(stderr, "tcp_baseline: handoff: %s\n",
				k ? strerror(errno) : "peer closed");
			atomic_store(&h->failed, 1);
			return NULL;
		}
		atomic_store_explicit(&h->arrived, m + 1, memory_order_release);
	}
	return NULL;
}

int handoff_start(struct handoff *h, int fd, unsigned char *buf, size_t size, long n)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	h->fd = fd;
	h->buf = buf;
	h->size = size;
	h->n = n;
	atomic_init(&h->arrived, 0);
	atomic_init(&h->failed, 0);
	h->ep = epoll_create1(EPOLL_CLOEXEC);
	if (h->ep < 0 || epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev)) {
		perror("tcp_baseline: handoff: epoll");
		if (h->ep >= 0)
			close(h->ep);
		return -1;
	}
	if (pthread_create(&h->th, NULL, helper_main, h)) {
		fprintf(stderr, "tcp_baseline: handoff: cannot start the helper\n");
		close(h->ep);
		return -1;
	}
	return 0;
}

int handoff_wait(struct handoff *h, long i)
{
	while (atomic_load_explicit(&h->arrived, memory_order_acquire) <= i)
		if (atomic_load_explicit(&h->failed, memory_order_relaxed))
			return -1;
	return 0;
}

int handoff_stop(struct handoff *h)
{
	pthread_join(h->th, NULL);
	close(h->ep);
	return atomic_load(&h->failed) ? -1 : 0;
}
