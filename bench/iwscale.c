/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: many connections between two processes through the provider
 * (via libdat2), on loopback.
 *
 *   iwscale [-n conns] [--ssp] [-d depth] [-k inflight] [-s size]
 *           [-i pp_iters] [-t busy_secs] [-L per_listener] [-q qual]
 *           [-P ia] [-w wait_secs] [-T watchdog_secs] [--no-tcp]
 *           [--no-use] [--corrupt] [--csv] [-v]
 *
 * Forks the passive side; the parent is the active side.  In order:
 *   1. plain TCP: conns-1 connections by socket/connect/accept, up to
 *      `inflight` (256) connects outstanding, between the same two
 *      processes -- the baseline of the setup rate (row tcp_setup);
 *   2. each side opens the IA: one request EVD, one receive EVD and one
 *      connection EVD (requests too) for all its EPs, and one registered
 *      region for all their buffers; one connection is made and torn
 *      down (what the provider starts at the first connection and keeps
 *      is then in every snapshot); each side also opens a second IA
 *      with the same resources for one connection, "lone", made now
 *      (scale_lone.c; qualifier or TCP port qual+64); then each side
 *      takes its snapshot;
 *   3. connection 0 alone, "first" (scale_busy.c): empty polls of the
 *      receive EVD, the 8 B polling ping-pong (pp_iters round trips, or
 *      busy_secs of them) and busy_secs of 64 KiB RDMA Writes (rows
 *      poll_first, pingpong_first, write_first);
 *   4. connections 1..conns-1, up to `inflight` connects outstanding:
 *      to Public Service Points (qualifiers qual, qual+1, ...), or with
 *      --ssp plain TCP connections upgraded by SSPs (TCP ports qual,
 *      qual+1, ...); rows setup (the rate, each connect's time to
 *      ESTABLISHED) and setup_tenth (the rate in each tenth);
 *   5. every connection used: an RDMA Write, a Read back, a Send each way,
 *      `size` (128) bytes each, every byte checked (row use;
 *      scale_use.c); --no-use skips it (a provider too slow to use them
 *      all can still be measured otherwise);
 *   6. memory per connected EP, both sides' own growth since step 2 --
 *      resident set and its anonymous part (/proc/self/statm), malloc
 *      heap in use -- and the kernel's, machine-wide: TCP's buffer pages
 *      in /proc/net/sockstat ("mem") and /proc/meminfo's Slab (rows
 *      mem_connected, after the setup, and mem_idle, after the use and
 *      SCALE_REST_MS of quiet; sides
 *      active, passive, kernel);
 *   7. step 3 again with the others connected and idle, in 3 turns
 *      with the lone connection (lone, busy, lone, busy...; each turn a
 *      third of the round trips and seconds), each kind's turns pooled:
 *      rows poll_lone, pingpong_lone, write_lone and poll_busy,
 *      pingpong_busy, write_busy;
 *   8. teardown: the active side disconnects all, each side frees an EP
 *      on its DISCONNECTED; timed to the last EP freed (row teardown);
 *   9. leaks: each side's descriptors, threads, heap in use and anonymous
 *      resident set (after malloc_trim) against step 2's, all EPs freed
 *      (rows leak_freed), and against before the IA opened, all closed
 *      (leak_closed); valid when descriptors, threads and heap are flat
 *      (scale_run.c says within what; the resident set is reported).
 * A connection's index travels in its private data.  At most per_listener
 * connections (default 16384; the ephemeral port range bounds it) go to
 * one address and port: more connections take more listeners.
 *
 * depth 0 (default): EPs with the provider's default attributes; else
 * `depth` DTOs each way, one IOV, one RDMA Read.  RLIMIT_NOFILE is raised
 * for the run when conns need it, the hard limit too as root, and the
 * program says so.  Every wait is bounded (-w, default 30 s), the whole
 * run too (-T, default 300 s + 10 ms a connection).  --corrupt flips a
 * byte of one Write: the use must then fail.  -v logs the phases and
 * their progress (each tenth) on stderr.
 *
 * Output: a row per figure (scale_report.c: the columns), CSV with --csv.
 * Exit status 0 when every row is valid, 1 otherwise, 2 on usage. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iwscale.h"
#include "proc_io.h"
#include "scale_report.h"

#define DEFAULT_QUAL 64100	/* above the ephemeral port range */

static void usage(void)
{
	fprintf(stderr, "usage: iwscale [-n conns] [--ssp] [-d depth] [-k inflight] [-s size]\n"
			"               [-i pp_iters] [-t busy_secs] [-L per_listener] [-q qual]\n"
			"               [-P ia] [-w wait_secs] [-T watchdog_secs] [--no-tcp]\n"
			"               [--no-use] [--corrupt] [--csv] [-v]\n");
}

static long positive(const char *s)
{
	char *end;
	long v = strtol(s, &end, 0);

	return *end || v < 1 ? -1 : v;
}

static int parse(struct scale_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "csv", no_argument, NULL, 'c' }, { "ssp", no_argument, NULL, 'S' },
		{ "corrupt", no_argument, NULL, 'C' }, { "no-tcp", no_argument, NULL, 'N' },
		{ "no-use", no_argument, NULL, 'U' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	*o = (struct scale_opts){ .ia = "iw-lo", .qual = DEFAULT_QUAL, .n = 1000, .inflight = 256,
				  .per_listener = 16384, .size = 128, .pp_iters = 20000,
				  .busy_s = 1, .wait_s = 30 };
	while ((c = getopt_long(argc, argv, "n:d:k:s:i:t:L:q:P:w:T:v", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o->n = positive(optarg); break;
		case 'd': o->depth = (int)strtol(optarg, NULL, 0); break;
		case 'k': o->inflight = positive(optarg); break;
		case 's': o->size = (size_t)positive(optarg); break;
		case 'i': o->pp_iters = positive(optarg); break;
		case 't': o->busy_s = strtod(optarg, NULL); break;
		case 'L': o->per_listener = positive(optarg); break;
		case 'q': o->qual = strtoull(optarg, NULL, 0); break;
		case 'P': o->ia = optarg; break;
		case 'w': o->wait_s = strtod(optarg, NULL); break;
		case 'T': o->watchdog_s = (int)positive(optarg); break;
		case 'c': o->csv = 1; break;
		case 'S': o->ssp = 1; break;
		case 'C': o->corrupt = 1; break;
		case 'N': o->no_tcp = 1; break;
		case 'U': o->no_use = 1; break;
		case 'v': o->verbose = 1; break;
		default: return -1;
		}
	}
	if (optind != argc || o->n < 1 || o->inflight < 1 || o->per_listener < 1 ||
	    o->size < 1 || (long)o->size < 0 || o->pp_iters < 1 || o->depth < 0 ||
	    (o->depth && o->depth < 4) || !(o->busy_s > 0) || !(o->wait_s > 0) ||
	    o->watchdog_s < 0)
		return -1;
	o->listeners = (int)((o->n + o->per_listener - 1) / o->per_listener);
	if (o->listeners > SCALE_MAX_LISTENERS) {
		fprintf(stderr, "iwscale: %ld connections need %d listeners of %ld (at most %d)\n",
			o->n, o->listeners, o->per_listener, SCALE_MAX_LISTENERS);
		return -1;
	}
	if (!o->watchdog_s)
		o->watchdog_s = 300 + (int)(o->n / 100);
	return 0;
}

static void on_watchdog(int sig)
{
	static const char msg[] = "iwscale: the run took longer than -T allows; ended\n";

	(void)sig;
	(void)!write(2, msg, sizeof msg - 1);
	_exit(1);
}

/* The machine's load, for people reading figures taken on a shared one. */
static void print_load(const char *when)
{
	char buf[64] = "?";
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	printf("         load average %s: %s\n", when, buf);
	fflush(stdout);
}

static void intro(const struct scale_opts *o)
{
	long ports = ephemeral_ports();

	if (o->per_listener > ports)
		fprintf(stderr, "iwscale: warning: %ld connections to one port, but only %ld ephemeral ports\n",
			o->per_listener, ports);
	if (o->csv)
		return;
	printf("iwscale: %ld connections over %s (%s), %s, %ld connects in flight, %d listener%s\n",
	       o->n, o->ssp ? "SSPs (TCP connections upgraded)" : "PSPs", o->ia,
	       o->depth ? "small EP queues" : "default EP attributes", o->inflight, o->listeners,
	       o->listeners > 1 ? "s" : "");
	if (o->depth)
		printf("         EP queues: %d DTOs each way, 1 IOV, 1 RDMA Read\n", o->depth);
	printf("         use: %zu B Write, Read, Send each way; memory: growth since the IA opened;\n"
	       "         kernel: machine-wide TCP buffers (sockstat) and Slab; first = connection 0\n"
	       "         before the others connected; lone = a connection on an IA of its own,\n"
	       "         measured in turns with the busy one\n", o->size);
	print_load("at the start");
}

int main(int argc, char **argv)
{
	struct scale_opts o;
	int sv[2], rc;
	pid_t pid;

	if (parse(&o, argc, argv)) {
		usage();
		return 2;
	}
	o.t0 = lat_now_ns();
	/* A peer gone is an error return, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	/* A socket per connection and side, for the TCP baseline too (its
	 * sockets are gone before the EPs come), and some to spare. */
	nofile_raise(o.n + 256);
	intro(&o);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("iwscale: socketpair");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("iwscale: fork");
		return 1;
	}
	if (pid == 0) {
		/* Ends with the active side, whatever ends it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		alarm((unsigned)o.watchdog_s);
		_exit(passive_run(&o, sv[1]));
	}
	close(sv[1]);
	signal(SIGALRM, on_watchdog);
	alarm((unsigned)o.watchdog_s);
	scale_row_header(&o);
	rc = active_run(&o, sv[0]);
	close(sv[0]);
	rc |= reap_child(pid, rc);
	if (!o.csv)
		print_load("at the end");
	return rc ? 1 : 0;
}
