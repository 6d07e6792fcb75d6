/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* tcp_baseline: plain TCP over 127.0.0.1 doing the transfers iwdtest does,
 * as the yardstick for the provider's numbers.  One invocation forks a
 * server; the client measures
 *   stream:   one send() per message, at most W messages that the server
 *             has not acknowledged (it acknowledges every W/2: the window
 *             rule of test/dtest/window.h, the same as iwdtest's), timed
 *             until the server has acknowledged them all: bandwidth and
 *             message rate;
 *   pingpong: n round trips of each size, each one timed up to the
 *             answer's arrival (the client checks it after): latency is half
 *             a round trip, as the mean (the whole run's time per round
 *             trip, checks included), median, 99th percentile and max;
 *             with --gap US the client pauses US microseconds after each
 *             (a request now and then, as iwdtest --gap: the pauses are
 *             in the mean, not in the median, p99 or max);
 *   bidir:    stream both ways at once, each side sending n messages with
 *             the stream's window while it receives and acknowledges the
 *             other side's: one thread per direction, each direction on a
 *             connection of its own (the client opens two), so each is a
 *             plain stream; MB/s and iters count both directions;
 *   bidir1:   both ways on one connection, as an iWARP connection carries
 *             them: one thread per side sends and receives without
 *             blocking, in poll() when neither moved (as a QP's
 *             connection is driven), TCP's own window the only limit;
 *             counted as bidir;
 *   handoff:  pingpong, but each side's messages are read by a helper
 *             thread, asleep in epoll, while the consumer spins on memory
 *             (tcp_handoff.c): an RDMA Write ping-pong polling memory
 *             with plain TCP, the floor under iwdtest -m wpp (not in
 *             "all");
 * all with TCP_NODELAY and the provider's congestion control.  Blocking
 * by default: send()/recv() sleep in the kernel, as dat_evd_wait does.
 * With -p both sides busy-poll instead (MSG_DONTWAIT in a loop), as a
 * consumer spinning on dat_evd_dequeue does.
 * Data is the same pattern stream as iwdtest's (test/dtest/pattern.h),
 * checked on receipt: every message by default, only the last one with
 * --no-verify, exactly as iwdtest does.
 *
 *   tcp_baseline [-m stream,pingpong,bidir,bidir1,handoff|all] [-S sizes] [-n iters | -t secs]
 *                [-p] [--window W] [--gap US] [--csv] [--no-verify]
 * Output rows (--csv), as iwdtest's: mode,size,iters,seconds,MBps,lat_us,
 * valid,window,msgs_per_s,lat_median_us,lat_p99_us,lat_max_us */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtest/lat_stats.h"
#include "dtest/pattern.h"
#include "dtest/result_row.h"
#include "dtest/window.h"
#include "tcp_handoff.h"

#define MAX_SIZES 32
#define MAX_ITERS (1L << 26)
#define WARMUP_MAX 1000
#define PONG_SEED 0x5a5a5a5a00000000ull

enum { T_STREAM, T_PINGPONG, T_BIDIR, T_BIDIR1, T_HANDOFF, T_QUIT };
#define T_ALL ((1 << T_HANDOFF) - 1)	/* "all" and the default */
#define T_IS_PINGPONG(m) ((m) == T_PINGPONG || (m) == T_HANDOFF)

struct hdr {			/* client -> server, before each test */
	uint64_t mode, size, iters, seed, verify_all, window;
};

struct opts {
	int modes, csv, verify_all;		/* modes: bit per T_* */
	size_t sizes[MAX_SIZES];
	int nsizes;
	long iters, window, gap_us;
	double budget;
};

struct result {
	long n, errs, window;
	double secs;
	struct lat_stats lat;
};

static unsigned char *src, *buf;	/* source pattern, receive buffer; a
					 * bidir test has one thread of each */
static int spin;			/* -p: busy-poll instead of blocking */

/* One send or recv of what is left of len bytes at p + *off (flags:
 * MSG_DONTWAIT or 0): 1 if bytes moved, 0 if the call found no room or
 * nothing to read (or was interrupted), -1 on an error or a closed peer,
 * said on stderr. */
static int io_step(int fd, unsigned char *p, size_t *off, size_t len, int wr, int flags)
{
	ssize_t k = wr ? send(fd, p + *off, len - *off, MSG_NOSIGNAL | flags)
		       : recv(fd, p + *off, len - *off, flags);

	if (k > 0) {
		*off += (size_t)k;
		return 1;
	}
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	fprintf(stderr, "tcp_baseline: %s: %s\n", wr ? "send" : "recv",
		k ? strerror(errno) : "peer closed");
	return -1;
}

/* All len bytes: blocking, or busy-polling with -p. */
static int io_all(int fd, void *p, size_t len, int wr)
{
	size_t off = 0;

	while (off < len)
		if (io_step(fd, p, &off, len, wr, spin ? MSG_DONTWAIT : 0) < 0)
			return -1;
	return 0;
}

static long check(const struct hdr *h, uint64_t seed, long i)
{
	if (!h->verify_all && i != (long)h->iters - 1)
		return 0;
	return pat_check(buf, h->size, seed, pat_woff((uint64_t)i)) >= 0;
}

/* A test's receiver: this thread's recv() (*ho NULL), or with handoff
 * the helper in hs, started for the test's messages.  0 or -1. */
static int receiver_start(int fd, const struct hdr *h, struct handoff *hs, struct handoff **ho)
{
	*ho = NULL;
	if (h->mode != T_HANDOFF)
		return 0;
	if (handoff_start(hs, fd, buf, h->size, (long)h->iters))
		return -1;
	*ho = hs;
	return 0;
}

/* Message i whole in buf. */
static int receive(int fd, const struct hdr *h, struct handoff *ho, long i)
{
	return ho ? handoff_wait(ho, i) : io_all(fd, buf, h->size, 0);
}

/* The end of a test that stopped after `done` of its messages: errs, or
 * -1 when it stopped early or the helper failed (an early stop shuts the
 * socket down, so that the helper sees the end). */
static long receiver_stop(int fd, const struct hdr *h, struct handoff *ho, long done,
			  long errs)
{
	int early = done < (long)h->iters;

	if (ho && early)
		shutdown(fd, SHUT_RDWR);
	if (ho && handoff_stop(ho))
		return -1;
	return early ? -1 : errs;
}

/* The server side of one test; returns its error count or -1. */
static long serve_test(int fd, const struct hdr *h)
{
	long i, errs = 0, n = (long)h->iters, every = win_ack_every((long)h->window);
	struct handoff hs, *ho;

	if (receiver_start(fd, h, &hs, &ho))
		return -1;
	if (T_IS_PINGPONG(h->mode))
		pat_fill(src, h->size + PAT_SLACK, h->seed ^ PONG_SEED, 0);
	for (i = 0; i < n; i++) {
		if (receive(fd, h, ho, i))
			break;
		errs += check(h, h->seed, i);
		if (T_IS_PINGPONG(h->mode)) {
			if (io_all(fd, src + pat_woff((uint64_t)i) * 8, h->size, 1))
				break;
		} else if ((i + 1) % every == 0 || i == n - 1) {
			uint64_t acked = (uint64_t)(i + 1);
			if (io_all(fd, &acked, sizeof acked, 1))
				break;
		}
	}
	return receiver_stop(fd, h, ho, i, errs);
}

/* stream: message i as soon as fewer than w are unacknowledged. */
static int client_stream(int fd, const struct hdr *h)
{
	long n = (long)h->iters, w = (long)h->window, acked = 0, i;
	uint64_t a;

	for (i = 0; i <= n; i++) {
		while (acked < n && (i - acked >= w || i == n)) {
			if (io_all(fd, &a, sizeof a, 0))
				return -1;
			acked = (long)a;
		}
		if (i < n && io_all(fd, src + pat_woff((uint64_t)i) * 8, h->size, 1))
			return -1;
	}
	return 0;
}

/* One direction of a bidir test, on a thread of its own. */
struct sender {
	int fd;
	const struct hdr *h;
	int rc;
};

static void *sender_run(void *arg)
{
	struct sender *t = arg;

	t->rc = client_stream(t->fd, t->h);
	return NULL;
}

/* bidir, either side: send the source (filled by the caller) on send_fd
 * from a thread while this one receives on recv_fd the peer's data of
 * seed recv_seed.  Returns the receiver's error count, or -1. */
static long both_ways(int send_fd, int recv_fd, const struct hdr *h, uint64_t recv_seed)
{
	struct hdr in = *h;
	struct sender t = { send_fd, h, -1 };
	pthread_t th;
	long errs;

	in.seed = recv_seed;
	if (pthread_create(&th, NULL, sender_run, &t)) {
		fprintf(stderr, "tcp_baseline: cannot start the sending thread\n");
		return -1;
	}
	errs = serve_test(recv_fd, &in);
	pthread_join(th, NULL);
	return t.rc ? -1 : errs;
}

/* bidir1, either side: send n messages of the source (filled by the
 * caller) and receive the peer's n of seed recv_seed on the one
 * connection fd.  Returns the receiver's error count, or -1. */
static long one_connection(int fd, const struct hdr *h, uint64_t recv_seed)
{
	long n = (long)h->iters, sent = 0, got = 0, errs = 0;
	size_t soff = 0, roff = 0;

	while (sent < n || got < n) {
		int s = 0, r = 0;

		if (sent < n && (s = io_step(fd, src + pat_woff((uint64_t)sent) * 8, &soff,
					    h->size, 1, MSG_DONTWAIT)) > 0 && soff == h->size) {
			soff = 0;
			sent++;
		}
		if (got < n && (r = io_step(fd, buf, &roff, h->size, 0, MSG_DONTWAIT)) > 0 && roff == h->size) {
			roff = 0;
			errs += check(h, recv_seed, got++);
		}
		if (s < 0 || r < 0)
			return -1;
		if (!s && !r && !spin) {
			struct pollfd p = { fd, (short)((got < n ? POLLIN : 0) |
							(sent < n ? POLLOUT : 0)), 0 };
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -1;
		}
	}
	return errs;
}

/* TCP_NODELAY, and the congestion control the provider's sockets run
 * (IWDAPL_TCP_CONGESTION, default cubic, else reno; "system" leaves the
 * system's): both sides of a comparison at the same one. */
static void tune_socket(int fd)
{
	const char *cc = getenv("IWDAPL_TCP_CONGESTION");
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (!cc || !*cc)
		cc = "cubic";
	if (strcmp(cc, "system") &&
	    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
}

/* Connection 0 carries the tests and the client's data, 1 the server's
 * data of a bidir test. */
static int server(int lfd)
{
	int fd[2] = { accept(lfd, NULL, NULL), accept(lfd, NULL, NULL) };
	struct hdr h;

	if (fd[0] < 0 || fd[1] < 0)
		return 1;
	tune_socket(fd[0]);
	tune_socket(fd[1]);
	while (!io_all(fd[0], &h, sizeof h, 0) && h.mode != T_QUIT) {
		int64_t errs;

		if (h.mode == T_BIDIR || h.mode == T_BIDIR1) {
			pat_fill(src, h.size + PAT_SLACK, h.seed ^ PONG_SEED, 0);
			errs = h.mode == T_BIDIR ? both_ways(fd[1], fd[0], &h, h.seed)
						 : one_connection(fd[0], &h, h.seed);
		} else {
			errs = serve_test(fd[0], &h);
		}
		if (errs < 0 || io_all(fd[0], &errs, sizeof errs, 1))
			return 1;
	}
	close(fd[0]);
	close(fd[1]);
	return 0;
}

/* pingpong and handoff: every round trip timed into lat (cap samples);
 * errors or -1. */
static long client_pingpong(int fd, const struct hdr *h, uint64_t *lat, long cap,
			    long gap_us)
{
	long n = (long)h->iters, i, errs = 0;
	struct handoff hs, *ho;

	if (receiver_start(fd, h, &hs, &ho))
		return -1;
	for (i = 0; i < n; i++) {
		uint64_t t0 = lat_now_ns();
		if (io_all(fd, src + pat_woff((uint64_t)i) * 8, h->size, 1) ||
		    receive(fd, h, ho, i))
			break;
		if (i < cap)
			lat[i] = lat_now_ns() - t0;
		errs += check(h, h->seed ^ PONG_SEED, i);
		if (gap_us)
			usleep((useconds_t)gap_us);
	}
	return receiver_stop(fd, h, ho, i, errs);
}

/* One test of n iterations, timed from the first byte to the server's
 * verdict.  Returns 0, or -1 on a transport error. */
static int run_test(const int *fd, const struct opts *o, int mode, size_t size, long n,
		    struct result *r)
{
	static uint64_t tests;
	struct hdr h = { (uint64_t)mode, size, (uint64_t)n, pat_word(7, ++tests),
			 (uint64_t)o->verify_all, 1 };
	long cap = T_IS_PINGPONG(mode) ? (n < LAT_MAX_SAMPLES ? n : LAT_MAX_SAMPLES) : 0;
	uint64_t *lat = cap ? malloc((size_t)cap * sizeof *lat) : NULL, t0;
	int64_t perrs = 0;
	long errs = 0;

	if (cap && !lat)
		return -1;
	memset(r, 0, sizeof *r);
	/* bidir1 has no window of its own: TCP's is the limit. */
	if (!T_IS_PINGPONG(mode))
		h.window = mode == T_BIDIR1 ? 0 : (uint64_t)win_for_size(size, o->window);
	pat_fill(src, size + PAT_SLACK, h.seed, 0);
	t0 = lat_now_ns();
	if (io_all(fd[0], &h, sizeof h, 1))
		errs = -1;
	else if (mode == T_STREAM)
		errs = client_stream(fd[0], &h);
	else if (mode == T_BIDIR)
		errs = both_ways(fd[0], fd[1], &h, h.seed ^ PONG_SEED);
	else if (mode == T_BIDIR1)
		errs = one_connection(fd[0], &h, h.seed ^ PONG_SEED);
	else
		errs = client_pingpong(fd[0], &h, lat, cap, o->gap_us);
	if (errs < 0 || io_all(fd[0], &perrs, sizeof perrs, 0)) {
		free(lat);
		return -1;
	}
	r->secs = (double)(lat_now_ns() - t0) / 1e9;
	r->n = mode == T_BIDIR || mode == T_BIDIR1 ? 2 * n : n;
	r->errs = errs + (long)perrs;
	r->window = (long)h.window;
	lat_summarize(lat, cap, 0.5, &r->lat);
	free(lat);
	return 0;
}

/* A fixed count runs a tenth of it first, unmeasured (as iwdtest does);
 * a time budget grows the count until a run takes a tenth of the budget,
 * then runs for the budget.  Errors of every run count. */
static int run_budget(const int *fd, const struct opts *o, int mode, size_t size,
		      struct result *r)
{
	long n = o->iters ? o->iters / 10 : 16, errs = 0;

	if (n > WARMUP_MAX && o->iters)
		n = WARMUP_MAX;
	while (n > 0) {
		if (run_test(fd, o, mode, size, n, r))
			return -1;
		errs += r->errs;
		if (o->iters || r->secs >= o->budget / 10 || n >= MAX_ITERS)
			break;
		n *= r->secs < o->budget / 100 ? 8 : 2;
	}
	n = o->iters ? o->iters : (long)((double)n * o->budget / (r->secs > 1e-6 ? r->secs : 1e-6));
	n = n < 1 ? 1 : n > MAX_ITERS ? MAX_ITERS : n;
	if (run_test(fd, o, mode, size, n, r))
		return -1;
	r->errs += errs;
	return 0;
}

static const char *const mode_names[T_QUIT] = { "stream", "pingpong", "bidir", "bidir1",
						 "handoff" };

static void print_row(const struct opts *o, int mode, size_t size, const struct result *r)
{
	int pp = T_IS_PINGPONG(mode);
	struct result_row row = {
		.mode = mode_names[mode], .size = size, .iters = r->n,
		.window = r->window, .secs = r->secs,
		.mbps = (double)size * (double)r->n / r->secs / 1e6,
		.rate = (double)r->n / r->secs,
		.lat_mean_us = pp ? r->secs * 1e6 / (double)r->n / 2 : -1,
		.lat = pp ? &r->lat : NULL, .ok = !r->errs,
	};

	row_print(o->csv, &row);
}

static int dial(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof *sin)) {
		perror("tcp_baseline: connect");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	tune_socket(fd);
	return fd;
}

static int client(const struct opts *o, struct sockaddr_in *sin)
{
	/* In order: the server accepts them in this order. */
	int fd[2] = { dial(sin), -1 }, mode, k, fails = 0;
	struct hdr quit = { .mode = T_QUIT };

	if (fd[0] >= 0)
		fd[1] = dial(sin);
	if (fd[1] < 0) {
		if (fd[0] >= 0)
			close(fd[0]);
		return 1;
	}
	row_header(o->csv);
	for (mode = T_STREAM; mode < T_QUIT; mode++) {
		if (!(o->modes & (1 << mode)))
			continue;
		for (k = 0; k < o->nsizes; k++) {
			struct result r;
			if (run_budget(fd, o, mode, o->sizes[k], &r)) {
				fails = 1;
				goto out;
			}
			print_row(o, mode, o->sizes[k], &r);
			fails += r.errs != 0;
		}
	}
	io_all(fd[0], &quit, sizeof quit, 1);
out:
	close(fd[0]);
	close(fd[1]);
	return fails != 0;
}

static int parse_modes(struct opts *o, char *list)
{
	char *tok, *save = NULL;
	int m;

	for (o->modes = 0, tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (m = 0; m < T_QUIT && strcmp(tok, mode_names[m]); m++)
			;
		if (m == T_QUIT && strcmp(tok, "all"))
			return -1;
		o->modes |= m == T_QUIT ? T_ALL : 1 << m;
	}
	return o->modes ? 0 : -1;
}

static int parse_sizes(struct opts *o, char *list)
{
	char *tok, *save = NULL;

	for (o->nsizes = 0, tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v = strtoull(tok, &end, 10);
		v <<= *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : 0;
		if (o->nsizes == MAX_SIZES || v < 1 || v > (1u << 30))
			return -1;
		o->sizes[o->nsizes++] = (size_t)v;
	}
	return 0;
}

static int parse(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "csv", no_argument, NULL, 'c' },
		{ "no-verify", no_argument, NULL, 'V' },
		{ "window", required_argument, NULL, 'W' },
		{ "gap", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 }
	};
	static const size_t def[] = { 64, 4096, 65536, 1048576 };
	int c;

	memset(o, 0, sizeof *o);
	o->modes = T_ALL;
	o->verify_all = 1;
	o->budget = 0.25;
	memcpy(o->sizes, def, sizeof def);
	o->nsizes = 4;
	while ((c = getopt_long(argc, argv, "m:S:n:t:pW:", lo, NULL)) != -1) {
		switch (c) {
		case 'm': if (parse_modes(o, optarg)) return -1; break;
		case 'S': if (parse_sizes(o, optarg)) return -1; break;
		case 'n': o->iters = strtol(optarg, NULL, 0); if (o->iters < 1) return -1; break;
		case 't': o->budget = strtod(optarg, NULL); if (!(o->budget > 0)) return -1; break;
		case 'p': spin = 1; break;
		case 'W':
			o->window = strtol(optarg, NULL, 0);
			if (o->window < 1 || o->window > WIN_LIMIT)
				return -1;
			break;
		case 'g':
			o->gap_us = strtol(optarg, NULL, 0);
			if (o->gap_us < 0 || o->gap_us > 1000000)
				return -1;
			break;
		case 'c': o->csv = 1; break;
		case 'V': o->verify_all = 0; break;
		default: return -1;
		}
	}
	return optind == argc && o->nsizes ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof sin;
	size_t max = 8;
	struct opts o;
	int lfd, k, rc, st;
	pid_t pid;

	if (parse(&o, argc, argv)) {
		fprintf(stderr, "usage: tcp_baseline [-m stream,pingpong,bidir,bidir1,handoff|all] [-S sizes] "
				"[-n iters | -t secs] [-p] [--window W] [--gap US] [--csv] [--no-verify]\n");
		return 2;
	}
	for (k = 0; k < o.nsizes; k++)
		max = o.sizes[k] > max ? o.sizes[k] : max;
	src = malloc(max + PAT_SLACK);
	buf = malloc(max);
	/* Listen before forking, so the client can never connect too early. */
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (!src || !buf || lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof sin) ||
	    listen(lfd, 2) || getsockname(lfd, (struct sockaddr *)&sin, &sl)) {
		perror("tcp_baseline: setup");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("tcp_baseline: fork");
		return 1;
	}
	if (pid == 0) {
		rc = server(lfd);
		free(src);
		free(buf);
		_exit(rc);
	}
	close(lfd);
	rc = client(&o, &sin);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		rc = 1;
	free(src);
	free(buf);
	return rc;
}
