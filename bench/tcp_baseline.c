/* tcp_baseline: plain TCP over 127.0.0.1 doing the transfers iwdtest does,
 * as the yardstick for the provider's numbers.  One invocation forks a
 * server; the client measures
 *   stream:   one-way streaming bandwidth, n messages of each size, timed
 *             until the server confirms it has read them all;
 *   pingpong: n round trips of each size, latency = half a round trip;
 * both with TCP_NODELAY.  Data is the same pattern stream as iwdtest's
 * (test/dtest/pattern.h), checked on receipt: every message by default,
 * only the last one with --no-verify, exactly as iwdtest does.
 *
 *   tcp_baseline [-m stream|pingpong|all] [-S sizes] [-n iters | -t secs]
 *                [--csv] [--no-verify]
 * Output rows (--csv): mode,size,iters,seconds,MBps,lat_us,valid */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dtest/pattern.h"

#define MAX_SIZES 32
#define MAX_ITERS (1L << 26)
#define PONG_SEED 0x5a5a5a5a00000000ull

enum { T_STREAM, T_PINGPONG, T_QUIT };

struct hdr {			/* client -> server, before each test */
	uint64_t mode, size, iters, seed, verify_all;
};

struct opts {
	int stream, pingpong, csv, verify_all;
	size_t sizes[MAX_SIZES];
	int nsizes;
	long iters;
	double budget;
};

static unsigned char *src, *buf;	/* source pattern, receive buffer */

static int io_all(int fd, void *p, size_t len, int wr)
{
	char *c = p;

	while (len) {
		ssize_t k = wr ? send(fd, c, len, MSG_NOSIGNAL) : recv(fd, c, len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "tcp_baseline: %s: %s\n", wr ? "send" : "recv",
				k ? strerror(errno) : "peer closed");
			return -1;
		}
		c += k;
		len -= (size_t)k;
	}
	return 0;
}

static long check(const struct hdr *h, uint64_t seed, long i)
{
	if (!h->verify_all && i != (long)h->iters - 1)
		return 0;
	return pat_check(buf, h->size, seed, pat_woff((uint64_t)i)) >= 0;
}

/* The server side of one test; returns its error count or -1. */
static long serve_test(int fd, const struct hdr *h)
{
	long i, errs = 0;

	if (h->mode == T_PINGPONG)
		pat_fill(src, h->size + PAT_SLACK, h->seed ^ PONG_SEED, 0);
	for (i = 0; i < (long)h->iters; i++) {
		if (io_all(fd, buf, h->size, 0))
			return -1;
		errs += check(h, h->seed, i);
		if (h->mode == T_PINGPONG &&
		    io_all(fd, src + pat_woff((uint64_t)i) * 8, h->size, 1))
			return -1;
	}
	return errs;
}

static int server(int lfd)
{
	int fd = accept(lfd, NULL, NULL), one = 1;
	struct hdr h;

	if (fd < 0)
		return 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	while (!io_all(fd, &h, sizeof h, 0) && h.mode != T_QUIT) {
		int64_t errs = serve_test(fd, &h);
		if (errs < 0 || io_all(fd, &errs, sizeof errs, 1))
			return 1;
	}
	close(fd);
	return 0;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One test of n iterations; *secs from the first byte to the server's
 * verdict (stream) or the last pong (ping-pong).  Returns errors or -1. */
static long run_test(int fd, const struct opts *o, int mode, size_t size, long n, double *secs)
{
	static uint64_t tests;
	struct hdr h = { (uint64_t)mode, size, (uint64_t)n, pat_word(7, ++tests),
			 (uint64_t)o->verify_all };
	int64_t perrs = 0;
	long i, errs = 0;
	double t0;

	pat_fill(src, size + PAT_SLACK, h.seed, 0);
	if (io_all(fd, &h, sizeof h, 1))
		return -1;
	t0 = now_s();
	for (i = 0; i < n; i++) {
		if (io_all(fd, src + pat_woff((uint64_t)i) * 8, size, 1))
			return -1;
		if (mode == T_PINGPONG) {
			if (io_all(fd, buf, size, 0))
				return -1;
			errs += check(&h, h.seed ^ PONG_SEED, i);
		}
	}
	if (io_all(fd, &perrs, sizeof perrs, 0))
		return -1;
	*secs = now_s() - t0;
	return errs + perrs;
}

/* Same budget rule as iwdtest: grow until a run takes a tenth of the
 * budget, then run for the budget. */
static long run_budget(int fd, const struct opts *o, int mode, size_t size, long *n, double *secs)
{
	long errs = 0, e;

	*n = o->iters ? o->iters : 16;
	while (!o->iters) {
		if ((e = run_test(fd, o, mode, size, *n, secs)) < 0)
			return -1;
		errs += e;
		if (*secs >= o->budget / 10 || *n >= MAX_ITERS)
			break;
		*n *= *secs < o->budget / 100 ? 8 : 2;
	}
	if (!o->iters) {
		*n = (long)((double)*n * o->budget / (*secs > 1e-6 ? *secs : 1e-6));
		*n = *n < 1 ? 1 : *n > MAX_ITERS ? MAX_ITERS : *n;
	}
	if ((e = run_test(fd, o, mode, size, *n, secs)) < 0)
		return -1;
	return errs + e;
}

static void print_row(const struct opts *o, int mode, size_t size, long n, double secs, long errs)
{
	double mbps = (double)size * (double)n / secs / 1e6;
	const char *name = mode == T_STREAM ? "stream" : "pingpong";

	if (o->csv && mode == T_PINGPONG)
		printf("%s,%zu,%ld,%.6f,%.2f,%.3f,%s\n", name, size, n, secs, mbps,
		       secs * 1e6 / (double)n / 2, errs ? "FAIL" : "OK");
	else if (o->csv)
		printf("%s,%zu,%ld,%.6f,%.2f,,%s\n", name, size, n, secs, mbps, errs ? "FAIL" : "OK");
	else if (mode == T_PINGPONG)
		printf("%-9s %10zu %10ld %12.2f %10.2f  %s\n", name, size, n, mbps,
		       secs * 1e6 / (double)n / 2, errs ? "FAIL" : "OK");
	else
		printf("%-9s %10zu %10ld %12.2f %10s  %s\n", name, size, n, mbps, "-",
		       errs ? "FAIL" : "OK");
	fflush(stdout);
}

static int client(const struct opts *o, struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, mode, k, fails = 0;
	struct hdr quit = { .mode = T_QUIT };

	if (fd < 0 || connect(fd, (struct sockaddr *)sin, sizeof *sin)) {
		perror("tcp_baseline: connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	printf(o->csv ? "mode,size,iters,seconds,MBps,lat_us,valid\n"
		      : "mode            size      iters         MB/s    lat(us)  valid\n");
	for (mode = T_STREAM; mode <= T_PINGPONG; mode++) {
		if (!(mode == T_STREAM ? o->stream : o->pingpong))
			continue;
		for (k = 0; k < o->nsizes; k++) {
			long n;
			double secs;
			long errs = run_budget(fd, o, mode, o->sizes[k], &n, &secs);
			if (errs < 0)
				return 1;
			print_row(o, mode, o->sizes[k], n, secs, errs);
			fails += errs != 0;
		}
	}
	io_all(fd, &quit, sizeof quit, 1);
	close(fd);
	return fails != 0;
}

static int parse(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "csv", no_argument, NULL, 'c' },
		{ "no-verify", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	static const size_t def[] = { 64, 4096, 65536, 1048576 };
	char *tok, *save = NULL;
	int c;

	memset(o, 0, sizeof *o);
	o->stream = o->pingpong = o->verify_all = 1;
	o->budget = 0.25;
	memcpy(o->sizes, def, sizeof def);
	o->nsizes = 4;
	while ((c = getopt_long(argc, argv, "m:S:n:t:", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			o->stream = !strcmp(optarg, "stream") || !strcmp(optarg, "all");
			o->pingpong = !strcmp(optarg, "pingpong") || !strcmp(optarg, "all");
			if (!o->stream && !o->pingpong)
				return -1;
			break;
		case 'S':
			for (o->nsizes = 0, tok = strtok_r(optarg, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				char *end;
				unsigned long long v = strtoull(tok, &end, 10);
				v <<= *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : 0;
				if (o->nsizes == MAX_SIZES || v < 1 || v > (1u << 30))
					return -1;
				o->sizes[o->nsizes++] = (size_t)v;
			}
			break;
		case 'n': o->iters = strtol(optarg, NULL, 0); if (o->iters < 1) return -1; break;
		case 't': o->budget = strtod(optarg, NULL); if (!(o->budget > 0)) return -1; break;
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
		fprintf(stderr, "usage: tcp_baseline [-m stream|pingpong|all] [-S sizes] "
				"[-n iters | -t secs] [--csv] [--no-verify]\n");
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
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&sin, &sl)) {
		perror("tcp_baseline: setup");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("tcp_baseline: fork");
		return 1;
	}
	if (pid == 0)
		_exit(server(lfd));
	close(lfd);
	rc = client(&o, &sin);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		rc = 1;
	return rc;
}
