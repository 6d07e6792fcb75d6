/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* wake_probe: what handing a message to a waiting thread costs on this
 * machine, by the way the waiter waits -- the floor under a blocking
 * ping-pong, and the measure of a design choice of the provider's waits
 * (doc/performance.md, "What a hand-off costs").  Threads of one process
 * ping-pong 32 bytes over a loopback TCP connection; each side also has
 * a "progress" thread parked in an epoll of its own that watches the
 * same socket, as the provider's progress thread does, and the probe
 * counts how often it is woken.  Ways of waiting:
 *   block  recv() that sleeps: plain TCP's receiver; no parked watch.
 *   excl   epoll_wait() on the waiter's epoll, where the socket was
 *          registered EPOLLEXCLUSIVE before the parked thread's own
 *          exclusive registration: the kernel hands an arrival to the
 *          first exclusive epoll that has a thread waiting, so the
 *          parked thread sleeps on, with no system call to arrange it;
 *          then one recv().
 *   own    the provider's sleeping wait: an epoll_ctl MOD takes input
 *          interest from the parked thread's watch, ppoll() on the
 *          socket and an eventfd, recv() until a short read, another
 *          MOD gives the interest back.
 *   spin   the provider's spinning wait: the same two MODs around
 *          recv(MSG_DONTWAIT) and sched_yield() until a message.
 *   bare   that spin with no parked watch and no MOD: the floor of a
 *          spin that needs no hand-over.
 *   lowat  that spin with the parked watch left as it is, its wake-ups
 *          kept off by SO_RCVLOWAT instead (set above any message for
 *          the spin, back to 1 after: the kernel signals no input below
 *          the mark; doc/performance.md says why the provider does not).
 * Each way runs with one pair of threads, then with two pairs at once
 * (four waiters: more than this machine's CPUs, as two ping-pong pairs
 * of processes on 2 CPUs).
 *
 *   wake_probe [-n ROUNDTRIPS] [-r RUNS] [--csv]
 *
 * Prints per way and pair count the one-way time (half a round trip; the
 * median of RUNS runs' means, runs alternating between the ways) and the
 * parked threads' wake-ups per message.  --csv: "way,pairs,runs,
 * one_way_us,min_us,max_us,parked_wakeups_per_msg".
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

enum way { WAY_BLOCK, WAY_EXCL, WAY_OWN, WAY_SPIN, WAY_BARE, WAY_LOWAT, WAY_COUNT };

static const char *const way_names[WAY_COUNT] = { "block", "excl", "own", "spin", "bare",
							   "lowat" };

#define MSG_LEN 32
#define MAX_RUNS 64

/* One end of a connection and what watches it. */
struct side {
	int fd;
	int mine;	/* the waiter's epoll (excl) */
	int parked_ep;	/* the parked thread's epoll */
	int evfd;	/* own: the eventfd a ppoll also waits on */
	atomic_long *wakeups;
	pthread_t parked;
};

struct pair {
	struct side a, b;
	enum way way;
	long n;
	pthread_t pong;
	uint64_t ns;
};

static atomic_long parked_wakeups;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "wake_probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void connected_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0 || bind(l, (struct sockaddr *)&sa, len) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&sa, &len))
		die("listen");
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, len))
		die("connect");
	*b = accept(l, NULL, NULL);
	if (*b < 0)
		die("accept");
	close(l);
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The parked thread: woken only by what its epoll reports; it reads
 * nothing (the waiter does) and goes back to sleep.  Edge-triggered, as
 * the provider's watch of a connection, so that input it leaves does not
 * wake it again and again. */
static void *parked_main(void *arg)
{
	struct side *s = arg;
	struct epoll_event ev;

	for (;;) {
		int n = epoll_wait(s->parked_ep, &ev, 1, -1);

		if (n > 0 && ev.data.fd < 0)
			return NULL;	/* the stop eventfd */
		if (n > 0)
			atomic_fetch_add(s->wakeups, 1);
	}
}

static void epoll_add(int ep, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		die("epoll_ctl");
}

static void side_open(struct side *s, int fd, enum way way)
{
	struct epoll_event stop = { .events = EPOLLIN, .data.fd = -1 };

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->wakeups = &parked_wakeups;
	s->mine = epoll_create1(EPOLL_CLOEXEC);
	s->parked_ep = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->mine < 0 || s->parked_ep < 0 || s->evfd < 0)
		die("epoll_create1");
	/* The order is the point: the waiter's registration first. */
	if (way == WAY_EXCL) {
		epoll_add(s->mine, fd, EPOLLIN | EPOLLEXCLUSIVE);
		epoll_add(s->parked_ep, fd, EPOLLIN | EPOLLET | EPOLLEXCLUSIVE);
	} else if (way != WAY_BLOCK && way != WAY_BARE) {
		epoll_add(s->parked_ep, fd, EPOLLIN | EPOLLET);
	}
	if (epoll_ctl(s->parked_ep, EPOLL_CTL_ADD, s->evfd, &stop))
		die("epoll_ctl");
	if (pthread_create(&s->parked, NULL, parked_main, s))
		die("pthread_create");
}

static void side_close(struct side *s)
{
	uint64_t one = 1;

	if (write(s->evfd, &one, sizeof(one)) != sizeof(one))
		die("eventfd write");
	pthread_join(s->parked, NULL);
	close(s->evfd);
	close(s->parked_ep);
	close(s->mine);
	close(s->fd);
}

/* The parked thread's input interest: off while this side waits. */
static void watch_input(struct side *s, int on)
{
	struct epoll_event ev = { .events = EPOLLET | (on ? EPOLLIN : 0),
				  .data.fd = s->fd };

	if (epoll_ctl(s->parked_ep, EPOLL_CTL_MOD, s->fd, &ev))
		die("epoll_ctl MOD");
}

/* recv() until a short read: the message, and the socket known empty. */
static void drain(struct side *s)
{
	char buf[4096];
	ssize_t n;

	do
		n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
	while (n == (ssize_t)sizeof(buf));
}

static void spin_recv(struct side *s, char *buf, size_t len)
{
	while (recv(s->fd, buf, len, MSG_DONTWAIT) < 1)
		sched_yield();
}

static void lowat(struct side *s, int bytes)
{
	if (setsockopt(s->fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)))
		die("setsockopt SO_RCVLOWAT");
}

static void wait_msg(struct side *s, enum way way)
{
	char buf[MSG_LEN];
	struct epoll_event ev;

	switch (way) {
	case WAY_BLOCK:
		if (recv(s->fd, buf, sizeof(buf), MSG_WAITALL) != MSG_LEN)
			die("recv");
		return;
	case WAY_EXCL:
		while (epoll_wait(s->mine, &ev, 1, -1) < 1)
			;
		drain(s);
		return;
	case WAY_OWN: {
		struct pollfd p[2] = { { .fd = s->fd, .events = POLLIN },
				       { .fd = s->evfd, .events = POLLIN } };

		watch_input(s, 0);
		while (ppoll(p, 2, NULL, NULL) < 1 || !(p[0].revents & POLLIN))
			;
		drain(s);
		watch_input(s, 1);
		return;
	}
	case WAY_SPIN:
		watch_input(s, 0);
		spin_recv(s, buf, sizeof(buf));
		watch_input(s, 1);
		return;
	case WAY_BARE:
		spin_recv(s, buf, sizeof(buf));
		return;
	case WAY_LOWAT:
		lowat(s, 1 << 20);
		spin_recv(s, buf, sizeof(buf));
		lowat(s, 1);
		return;
	default:
		return;
	}
}

static void send_msg(struct side *s)
{
	static const char msg[MSG_LEN];

	if (send(s->fd, msg, sizeof(msg), MSG_NOSIGNAL) != MSG_LEN)
		die("send");
}

static void *pong_main(void *arg)
{
	struct pair *p = arg;

	for (long i = 0; i < p->n; i++) {
		wait_msg(&p->b, p->way);
		send_msg(&p->b);
	}
	return NULL;
}

static void *ping_main(void *arg)
{
	struct pair *p = arg;
	uint64_t t0 = now_ns();

	for (long i = 0; i < p->n; i++) {
		send_msg(&p->a);
		wait_msg(&p->a, p->way);
	}
	p->ns = now_ns() - t0;
	return NULL;
}

/* One run: npairs pairs at once; the mean one-way time of the pairs. */
static double run_once(enum way way, int npairs, long n)
{
	struct pair pairs[2];
	pthread_t ping[2];
	double us = 0;
	int fa, fb;

	for (int i = 0; i < npairs; i++) {
		connected_pair(&fa, &fb);
		pairs[i] = (struct pair){ .way = way, .n = n };
		side_open(&pairs[i].a, fa, way);
		side_open(&pairs[i].b, fb, way);
	}
	for (int i = 0; i < npairs; i++)
		if (pthread_create(&pairs[i].pong, NULL, pong_main, &pairs[i]) ||
		    pthread_create(&ping[i], NULL, ping_main, &pairs[i]))
			die("pthread_create");
	for (int i = 0; i < npairs; i++) {
		pthread_join(ping[i], NULL);
		pthread_join(pairs[i].pong, NULL);
		us += (double)pairs[i].ns / 1e3 / (double)n / 2 / npairs;
		side_close(&pairs[i].a);
		side_close(&pairs[i].b);
	}
	return us;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "csv", no_argument, NULL, 'c' }, { NULL, 0, NULL, 0 } };
	double us[WAY_COUNT][2][MAX_RUNS];
	long wakeups[WAY_COUNT][2] = { { 0 } }, n = 20000;
	int runs = 5, csv = 0, c;

	while ((c = getopt_long(argc, argv, "n:r:", longopts, NULL)) != -1) {
		if (c == 'n')
			n = atol(optarg);
		else if (c == 'r')
			runs = atoi(optarg);
		else if (c == 'c')
			csv = 1;
		else
			goto usage;
	}
	if (optind != argc || n < 1 || runs < 1 || runs > MAX_RUNS)
		goto usage;
	for (int r = 0; r < runs; r++)
		for (int pairs = 1; pairs <= 2; pairs++)
			for (int w = 0; w < WAY_COUNT; w++) {
				long before = atomic_load(&parked_wakeups);

				us[w][pairs - 1][r] = run_once((enum way)w, pairs, n);
				wakeups[w][pairs - 1] += atomic_load(&parked_wakeups) - before;
			}
	if (csv)
		printf("way,pairs,runs,one_way_us,min_us,max_us,parked_wakeups_per_msg\n");
	else
		printf("%-6s %-5s %-28s %s\n", "way", "pairs", "one way, us: median [min-max]",
		       "parked thread woken per message");
	for (int pairs = 1; pairs <= 2; pairs++)
		for (int w = 0; w < WAY_COUNT; w++) {
			double *v = us[w][pairs - 1];
			double per = (double)wakeups[w][pairs - 1] / ((double)runs * (double)n * 2 * pairs);

			qsort(v, (size_t)runs, sizeof(*v), cmp_double);
			if (csv)
				printf("%s,%d,%d,%.2f,%.2f,%.2f,%.4f\n", way_names[w], pairs, runs,
				       v[runs / 2], v[0], v[runs - 1], per);
			else
				printf("%-6s %-5d %6.2f [%.2f-%.2f]%-9s %.4f\n", way_names[w], pairs,
				       v[runs / 2], v[0], v[runs - 1], "", per);
		}
	return 0;
usage:
	fprintf(stderr, "usage: wake_probe [-n ROUNDTRIPS] [-r RUNS] [--csv]\n");
	return 2;
}
