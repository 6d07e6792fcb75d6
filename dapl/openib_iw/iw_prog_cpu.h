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

struct iwe_prog_cpu {
	pthread_mutex_t lock;		/* a change of weight */
	pid_t tid;
	int may_renice;
	atomic_int polite;
	unsigned taken_in_row;		/* the thread's: input found taken */
	/* Where it runs: the CPUs it started with, less the one its
	 * consumers last called from (iwe_prog_cpu_follow). */
	cpu_set_t allowed;
	atomic_int may_move;
	int keep_off;			/* the thread's: input nobody read
					 * came since polls last took it */
	atomic_int avoided;		/* the CPU left out now, or -1;
					 * changed under lock */
	uint64_t moved_at;		/* under lock */
	atomic_int consumer_cpu;	/* -1: none seen */
	atomic_int move_off;		/* a CPU the thread asks a consumer
					 * to move it off, or -1 */
};

void iwe_prog_cpu_init(struct iwe_prog_cpu *c);
void iwe_prog_cpu_destroy(struct iwe_prog_cpu *c);
/* On the thread, at its start. */
void iwe_prog_cpu_claim(struct iwe_prog_cpu *c);
/* On the thread: an input wake-up found input nobody read (1) or input
 * a consumer's call took (0). */
void iwe_prog_cpu_input(struct iwe_prog_cpu *c, int unread);
/* On the loop: a connection's work (the CM's), which counts as input a
 * consumer took. */
void iwe_prog_cpu_conn(struct iwe_prog_cpu *c);
/* Any thread: a consumer polls for what the loop, busy on the thread,
 * makes (its input, connection events) -- the thread must not wait for
 * a free CPU, but the consumer keeps its own. */
void iwe_prog_cpu_awaited(struct iwe_prog_cpu *c);
/* Any thread: a consumer goes to sleep in a wait -- nobody but the
 * thread reads input for a while, and the consumer's CPU is free. */
void iwe_prog_cpu_urgent(struct iwe_prog_cpu *c);
/* A consumer's thread, in a post or a poll. */
void iwe_prog_cpu_note_consumer(struct iwe_prog_cpu *c);
/* On the thread, before it waits: keep off the consumers' CPU. */
void iwe_prog_cpu_follow(struct iwe_prog_cpu *c);

#endif
