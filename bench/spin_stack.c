/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* spin_stack: how often this machine's scheduler leaves two processes
 * that spin on memory on one CPU, with no provider involved.
 *
 * A trial forks two processes that ping-pong a counter through shared
 * memory, each spinning until the other's value lands (the shape of a
 * wpp ping-pong or an MPI eager ring).  Alone on two CPUs they run one
 * per CPU and answer in well under a microsecond.  Should the kernel
 * leave both on one CPU, each answer waits for that CPU's next tick (1-4
 * ms): the trial's median one-way time jumps a thousand-fold, and stays
 * there until the kernel moves one of them.  Three kinds of trial:
 *
 *   plain    the two spinners only;
 *   helper   each process also has a thread that sleeps in read() on an
 *            eventfd and is woken by the peer at every message, as a
 *            provider's progress thread is woken by its socket;
 *   pinned   the same, the helpers pinned to the last CPU (as a progress
 *            thread keeps off its consumer's CPU, iw_prog_cpu.c).
 *
 * A trial is "stacked" when its median one-way time is over 100 us.
 * What iwdapl's wpp shows beside these (bench/spin_stack.sh) is then the
 * kernel's doing or the provider's.
 *
 *   spin_stack [-r trials] [-t seconds] [-m plain,helper,pinned] [--csv]
 *
 * --csv: "kind,trials,stacked,median_of_medians_us". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 200000
#define STACKED_NS 100000u

enum kind { K_PLAIN, K_HELPER, K_PINNED, K_COUNT };
static const char *const kind_names[K_COUNT] = { "plain", "helper", "pinned" };

/* The shared page: the client's counter, the server's answer (apart, on
 * cache lines of their own), the stop flag. */
struct shared {
	volatile uint64_t ping __attribute__((aligned(64)));
	volatile uint64_t pong __attribute__((aligned(64)));
	volatile int stop __attribute__((aligned(64)));
};

struct helper {
	int efd;
	int cpu;		/* -1: anywhere */
	atomic_int quit;
	pthread_t th;
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sleeps until woken, until told to quit (the server's: until its
 * process exits). */
static void *helper_run(void *arg)
{
	struct helper *h = arg;
	uint64_t v;

	if (h->cpu >= 0) {
		cpu_set_t s;

		CPU_ZERO(&s);
		CPU_SET(h->cpu, &s);
		pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
	}
	while (!atomic_load(&h->quit))
		if (read(h->efd, &v, sizeof(v)) < 0)
			break;
	return NULL;
}

static int start_helper(struct helper *h)
{
	return pthread_create(&h->th, NULL, helper_run, h) ? -1 : 0;
}

static void poke(int efd)
{
	uint64_t one = 1;

	if (efd >= 0 && write(efd, &one, sizeof(one)) < 0)
		return;
}

/* The answering side; exits when told to stop. */
static void serve(struct shared *sh, int go_fd, struct helper *mine, int peer_efd)
{
	char c;

	if (mine && start_helper(mine))
		_exit(1);
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	for (uint64_t i = 1;; i++) {
		while (sh->ping != i) {
			if (sh->stop)
				_exit(0);
			relax();
		}
		poke(peer_efd);
		sh->pong = i;
	}
}

/* One trial: the median one-way time in ns, or 0 on failure. */
static uint64_t trial(enum kind k, double secs, uint64_t *lat)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int helpers = k != K_PLAIN, cpu = -1, go[2], efd[2] = { -1, -1 };
	struct helper hc = { .efd = -1 }, hs = { .efd = -1 };
	uint64_t end, med = 0;
	int client_helper = 0;
	long n = 0, last = sysconf(_SC_NPROCESSORS_ONLN) - 1;
	pid_t pid;

	if (sh == MAP_FAILED || pipe(go))
		return 0;
	if (k == K_PINNED && last > 0)
		cpu = (int)last;
	if (helpers) {
		efd[0] = eventfd(0, EFD_CLOEXEC);
		efd[1] = eventfd(0, EFD_CLOEXEC);
	}
	hc.efd = efd[0];
	hs.efd = efd[1];
	hc.cpu = hs.cpu = cpu;
	pid = fork();
	if (pid == 0)
		serve(sh, go[0], helpers ? &hs : NULL, efd[0]);
	if (pid < 0 || (helpers && start_helper(&hc)))
		goto out;
	client_helper = helpers;
	/* The server is asleep until now: its wake-up is where the kernel
	 * places it, as a server's first message wakes it in a test. */
	usleep(20000);
	if (write(go[1], "g", 1) != 1)
		goto out;
	end = now_ns() + (uint64_t)(secs * 1e9);
	for (uint64_t i = 1; n < MAX_SAMPLES && now_ns() < end; i++) {
		uint64_t t0 = now_ns();

		poke(efd[1]);
		sh->ping = i;
		while (sh->pong != i)
			relax();
		lat[n++] = (now_ns() - t0) / 2;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	med = n ? lat[n / 2] : 0;
out:
	sh->stop = 1;
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (client_helper) {
		atomic_store(&hc.quit, 1);
		poke(hc.efd);
		pthread_join(hc.th, NULL);
	}
	for (int i = 0; i < 2; i++)
		if (efd[i] >= 0)
			close(efd[i]);
	close(go[0]);
	close(go[1]);
	munmap(sh, sizeof(*sh));
	return med;
}

/* A trial in a process of its own, as a test starts both sides afresh:
 * where the kernel places a new process and its first child is part of
 * what is measured (a trial run from one long-lived process never
 * stacked, 0 of 100, where fresh ones did).  The median in ns, or 0. */
static uint64_t fresh_trial(enum kind k, double secs, uint64_t *lat)
{
	uint64_t med = 0;
	int p[2];
	pid_t pid;

	if (pipe(p))
		return 0;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		med = trial(k, secs, lat);
		_exit(write(p[1], &med, sizeof(med)) == sizeof(med) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &med, sizeof(med)) != sizeof(med))
		med = 0;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return med;
}

static int parse_kinds(const char *s, int *want)
{
	char *dup = strdup(s), *tok, *save = NULL;
	int ok = dup != NULL;

	for (tok = dup ? strtok_r(dup, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < K_COUNT && strcmp(tok, kind_names[k]); k++)
			;
		if (k == K_COUNT)
			ok = 0;
		else
			want[k] = 1;
	}
	free(dup);
	return ok;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "csv", no_argument, NULL, 'c' }, { 0 } };
	static uint64_t lat[MAX_SAMPLES];
	int want[K_COUNT] = { 0 }, csv = 0, trials = 50, c, any = 0;
	double secs = 0.1;

	while ((c = getopt_long(argc, argv, "r:t:m:", lo, NULL)) != -1) {
		switch (c) {
		case 'r': trials = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'm':
			if (!parse_kinds(optarg, want))
				goto usage;
			break;
		case 'c': csv = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc || trials < 1 || secs <= 0)
		goto usage;
	for (int k = 0; k < K_COUNT; k++)
		any |= want[k];
	if (!any)
		want[K_PLAIN] = want[K_HELPER] = want[K_PINNED] = 1;
	if (csv)
		printf("kind,trials,stacked,median_of_medians_us\n");
	else
		printf("spin_stack: %d trials of %.2f s each; stacked: median one-way "
		       "over %u us\n", trials, secs, STACKED_NS / 1000);
	for (int k = 0; k < K_COUNT; k++) {
		uint64_t *meds = calloc((size_t)trials, sizeof(*meds));
		int stacked = 0, done = 0;

		if (!want[k])
			continue;
		if (!meds)
			return 1;
		for (int t = 0; t < trials; t++) {
			uint64_t m = fresh_trial((enum kind)k, secs, lat);

			if (!m)
				continue;
			meds[done++] = m;
			stacked += m > STACKED_NS;
		}
		qsort(meds, (size_t)done, sizeof(*meds), cmp_u64);
		if (csv)
			printf("%s,%d,%d,%.3f\n", kind_names[k], done, stacked,
			       done ? meds[done / 2] / 1e3 : 0.0);
		else
			printf("%-7s %3d trials, %3d stacked, median one-way %.3f us\n",
			       kind_names[k], done, stacked, done ? meds[done / 2] / 1e3 : 0.0);
		free(meds);
	}
	return 0;
usage:
	fprintf(stderr, "usage: spin_stack [-r trials] [-t seconds] "
			"[-m plain,helper,pinned] [--csv]\n");
	return 2;
}
