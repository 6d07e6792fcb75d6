/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress thread's claim on a CPU: how urgently the scheduler runs
 * it, and which CPUs it may run on.  A software adapter has no
 * processor of its own; the thread that places input must get a CPU the
 * moment input comes, also while consumers spin on every CPU, and must
 * not take CPUs from consumers that read their input themselves.  Part
 * of the progress thread (iw_progress.c embeds it); see iw_prog_cpu.c. */
#ifndef IW_PROG_CPU_H
#define IW_PROG_CPU_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

/* The thread's weight: the nice it was born with, urgent (placing
 * input nobody reads) or polite (consumers' polls take the input). */
enum { PROG_PLAIN, PROG_URGENT, PROG_POLITE };

struct iwe_prog_cpu {
	pthread_mutex_t lock;		/* a change of weight */
	pid_t tid;
	int may_renice;
	int nice_plain;
	atomic_int weight;		/* PROG_* */
	/* Under the loop's run lock (the thread, or a borrower of the
	 * loop): wake-ups in a row that found input taken, and that did a
	 * connection's work and found no consumer's input; what the
	 * current wake-up noted. */
	unsigned taken_in_row, conn_in_row;
	int input_seen, conn_seen;
	/* Where it runs: the CPUs it started with, less the one its
	 * consumers last called from (iwe_prog_cpu_follow). */
	cpu_set_t allowed;
	int may_move;
	int keep_off;			/* the thread's: input nobody read
					 * came since polls last took it */
	int avoided;			/* the CPU left out now, or -1 */
	uint64_t moved_at;
	atomic_int consumer_cpu;	/* -1: none seen */
};

void iwe_prog_cpu_init(struct iwe_prog_cpu *c);
void iwe_prog_cpu_destroy(struct iwe_prog_cpu *c);
/* On the thread, at its start. */
void iwe_prog_cpu_claim(struct iwe_prog_cpu *c);
/* On the thread: an input wake-up found input nobody read (1) or input
 * a consumer's call took (0). */
void iwe_prog_cpu_input(struct iwe_prog_cpu *c, int unread);
/* On the loop: the wake-up did a connection's work (the CM's). */
void iwe_prog_cpu_conn(struct iwe_prog_cpu *c);
/* On the thread, after each wake-up's work: one that did a connection's
 * work and noted no input counts toward the plain weight. */
void iwe_prog_cpu_woken(struct iwe_prog_cpu *c);
/* Any thread: a consumer goes to sleep in a wait -- nobody but the
 * thread reads input for a while, and the consumer's CPU is free. */
void iwe_prog_cpu_urgent(struct iwe_prog_cpu *c);
/* A consumer's thread, in a post or a poll. */
void iwe_prog_cpu_note_consumer(struct iwe_prog_cpu *c);
/* On the thread, before it waits: keep off the consumers' CPU. */
void iwe_prog_cpu_follow(struct iwe_prog_cpu *c);

#endif
