/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress thread's claim on a CPU (iw_prog_cpu.h).
 *
 * Weight.  Input the thread is woken for and that no consumer reads must
 * be placed now, not when a consumer spinning on the same CPU (on
 * memory, as dtest -W and MPI eager rings do) has used up its time slice
 * -- so the thread asks for a short slice (100 us: on Linux 6.12 and
 * later a waking task with a shorter slice preempts at once; any process
 * may ask) and, where the process may, for a high weight (nice
 * IWDAPL_PROGRESS_NICE, default -10; root, CAP_SYS_NICE or RLIMIT_NICE).
 * But a consumer that polls reads its input itself, inside its calls,
 * and a thread woken for that input anyway must not take its CPU: on 2
 * CPUs with two pollers each such preemption cost an 8-byte ping-pong
 * 5-10 us a round trip.  Nor must it take theirs for the work of
 * connections being made (requests, replies): the consumers that make
 * and accept them do most of it, in their calls and waits, and an
 * urgent thread preempted them (3,000 connections set up 256 at a
 * time, median of 8 runs: 2,750 a second with the thread urgent
 * throughout, 6,530 with it polite after the first 16 of their
 * wake-ups).  So the weight follows what the thread finds to do:
 * wake-ups that find the input already taken by a consumer's call, or a
 * connection's work, 16 in a row, make the thread polite (nice 19: it
 * runs when the CPU is free), one that finds input nobody read makes it
 * urgent again, and so does a consumer about to sleep in a wait (nobody
 * reads then but the thread), or one that polls a connection EVD empty
 * while a connection is in a step whose next event only the loop makes
 * (a connect, an RTR awaited, a disconnect: iwe_device_awaited).  Polite
 * means starved by a poller that never sleeps: at nice 19 against nice
 * 0 the thread waits about 68 times as long as it ran, and Debian's
 * dtestcm server, polling for 1000 ESTABLISHED, got its last RTRs 20-40
 * ms late -- after the client had begun closing, so it counted a close
 * as an ESTABLISHED (1 run in 6 on loopback).  A connection's RTR is
 * neither: not a consumer's input.  Only a process that may lower its
 * nice again switches.
 *
 * Place.  A thread woken for input is queued on the CPU the kernel picks
 * for it -- the waker's when that CPU runs nothing else (the sender of
 * the data, on loopback), else mostly its previous one.  Queued behind
 * its own consumer spinning on memory, it waits until the kernel
 * preempts that consumer; where a busy CPU is preempted only at its next
 * tick (seen on virtual machines: 1-4 ms), every such message waited
 * that long, while a thread queued on another CPU ran at once.  So,
 * while consumers leave their input to the thread (from the first input
 * it finds unread until polls take the input 16 times in a row, as for
 * its weight), it keeps off the CPU its consumers last called from (a
 * post or a poll notes it, from the CPU number the kernel keeps for the
 * calling thread), when the process may run on another: its affinity is
 * the one it started with less that CPU.  It has every CPU again once
 * polls take the input (kept off pollers' CPUs, two polling ping-pong
 * pairs on 2 CPUs took 2-4 times as long) and while the consumer sleeps
 * in a wait, leaving its CPU free (a stream's receiver: 64 KiB Writes
 * lost a fifth of their bandwidth when its thread kept off a sleeper's
 * CPU).  Changed at most once a millisecond when consumers move, and
 * never by the thread while it runs on the CPU it leaves: that migrates
 * it at once, runnable, and a migration is no wake-up -- the thread
 * then waited on the other CPU, holding the loop, for the tick of the
 * consumer spinning there (3 ms, perf sched).  The consumer's next post
 * or poll makes that move instead, while the thread sleeps.
 * IWDAPL_PROGRESS_AFFINITY=0 leaves the affinity alone (for a job that
 * places its threads itself).
 *
 * The thread never spins: it takes CPU time only for the work it is
 * woken for. */
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "iw_env.h"
#include "iw_priv.h"
#include "iw_prog_cpu.h"

#define PROG_SLICE_NS 100000u
#define PROG_NICE_POLITE 19
#define PROG_POLITE_AFTER 16
#define PROG_MOVE_NS 1000000u

struct prog_sched_attr {	/* struct sched_attr, as the kernel has it */
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static int prog_nice_urgent(void)
{
	static long v = -1;

	return (int)iw_env_long_once(&v, "IWDAPL_PROGRESS_NICE", -10, -20,
				     19);
}

static int prog_may_move(void)
{
	static long v = -1;

	return (int)iw_env_long_once(&v, "IWDAPL_PROGRESS_AFFINITY", 1, 0, 1);
}

void iwe_prog_cpu_init(struct iwe_prog_cpu *c)
{
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->avoided, -1);
	atomic_init(&c->consumer_cpu, -1);
	atomic_init(&c->move_off, -1);
}

void iwe_prog_cpu_destroy(struct iwe_prog_cpu *c)
{
	pthread_mutex_destroy(&c->lock);
}

void iwe_prog_cpu_claim(struct iwe_prog_cpu *c)
{
	struct prog_sched_attr a = { .size = sizeof(a), .policy = 0,
				     .runtime = PROG_SLICE_NS };
	int nice = prog_nice_urgent();

	c->tid = (pid_t)syscall(SYS_gettid);
	/* Best effort: an older kernel ignores the slice. */
	(void)syscall(SYS_sched_setattr, 0, &a, 0u);
	/* Going polite and back needs the right to lower nice again. */
	c->may_renice = nice < PROG_NICE_POLITE &&
			setpriority(PRIO_PROCESS, (id_t)c->tid, nice) == 0;
	atomic_store(&c->may_move,
		     prog_may_move() &&
		     sched_getaffinity(0, sizeof(c->allowed), &c->allowed) == 0 &&
		     CPU_COUNT(&c->allowed) > 1);
}

/* The thread polite (1) or urgent (0). */
static void set_polite(struct iwe_prog_cpu *c, int polite)
{
	if (!c->may_renice || atomic_load(&c->polite) == polite)
		return;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->polite) != polite) {
		atomic_store(&c->polite, polite);
		(void)setpriority(PRIO_PROCESS, (id_t)c->tid,
				  polite ? PROG_NICE_POLITE :
					   prog_nice_urgent());
	}
	pthread_mutex_unlock(&c->lock);
}

void iwe_prog_cpu_input(struct iwe_prog_cpu *c, int unread)
{
	/* Polite only once polls took the input PROG_POLITE_AFTER times in
	 * a row: a consumer that polls now and then but mostly spins on
	 * memory (dtest -W over udp polls for every tenth Write's
	 * completion) must keep an urgent thread. */
	if (unread) {
		c->taken_in_row = 0;
		c->keep_off = 1;
		set_polite(c, 0);
	} else if (++c->taken_in_row >= PROG_POLITE_AFTER) {
		c->keep_off = 0;
		set_polite(c, 1);
	}
}

void iwe_prog_cpu_conn(struct iwe_prog_cpu *c)
{
	iwe_prog_cpu_input(c, 0);	/* the consumers' work, as their input */
}

void iwe_prog_cpu_awaited(struct iwe_prog_cpu *c)
{
	set_polite(c, 0);
}

void iwe_prog_cpu_urgent(struct iwe_prog_cpu *c)
{
	set_polite(c, 0);
	/* A consumer that sleeps leaves its CPU free. */
	atomic_store_explicit(&c->consumer_cpu, -1, memory_order_relaxed);
}

/* The thread's affinity: the CPUs it started with less `cpu` (-1:
 * none), set by the thread itself or by a consumer.  Under c->lock. */
static void set_avoided(struct iwe_prog_cpu *c, int cpu, uint64_t now)
{
	cpu_set_t set = c->allowed;

	if (cpu >= 0)
		CPU_CLR(cpu, &set);
	if (sched_setaffinity(c->tid, sizeof(set), &set)) {
		/* The process's CPUs shrank under us (a cpuset): stay put
		 * rather than try at every turn of the loop. */
		atomic_store(&c->may_move, 0);
		return;
	}
	atomic_store(&c->avoided, cpu);
	c->moved_at = now;
}

void iwe_prog_cpu_note_consumer(struct iwe_prog_cpu *c)
{
	int cpu = sched_getcpu();	/* the kernel's rseq word: no call */

	if (cpu >= 0 &&
	    atomic_load_explicit(&c->consumer_cpu, memory_order_relaxed) != cpu)
		atomic_store_explicit(&c->consumer_cpu, cpu,
				      memory_order_relaxed);
	/* A move the thread left to us (iwe_prog_cpu_follow): the thread
	 * sleeps or runs on another CPU now, so the kernel only notes the
	 * new mask.  A move off a CPU we have left since is dropped: the
	 * thread decides again at its next turn. */
	if (atomic_load_explicit(&c->move_off, memory_order_relaxed) >= 0 &&
	    pthread_mutex_trylock(&c->lock) == 0) {
		int off = atomic_exchange(&c->move_off, -1);

		if (off >= 0 && off == cpu &&
		    off != atomic_load(&c->avoided) &&
		    atomic_load(&c->may_move))
			set_avoided(c, off, iwe_now_ns());
		pthread_mutex_unlock(&c->lock);
	}
}

/* Under c->lock: the CPU to leave out changed to `cpu`. */
static void follow_locked(struct iwe_prog_cpu *c, int cpu)
{
	uint64_t now = iwe_now_ns();

	if (atomic_load(&c->avoided) >= 0 && now - c->moved_at < PROG_MOVE_NS)
		return;
	if (cpu >= CPU_SETSIZE || (cpu >= 0 && !CPU_ISSET(cpu, &c->allowed)))
		return;		/* a consumer the job placed elsewhere */
	if (cpu >= 0 && sched_getcpu() == cpu) {
		/* Leaving the CPU we run on migrates us now, runnable, and a
		 * migration is no wake-up: our short slice does not preempt
		 * what runs there -- often the peer's consumer spinning on
		 * memory for the answer we then place only after its tick
		 * (perf sched: 3 ms, the loop held).  The consumer's next
		 * post or poll moves us while we sleep. */
		atomic_store(&c->move_off, cpu);
		return;
	}
	atomic_store(&c->move_off, -1);
	set_avoided(c, cpu, now);
}

void iwe_prog_cpu_follow(struct iwe_prog_cpu *c)
{
	int cpu = c->keep_off ? atomic_load_explicit(&c->consumer_cpu,
						     memory_order_relaxed) : -1;

	if (!atomic_load(&c->may_move) || cpu == atomic_load(&c->avoided)) {
		if (atomic_load_explicit(&c->move_off, memory_order_relaxed) >= 0)
			atomic_store(&c->move_off, -1);
		return;
	}
	pthread_mutex_lock(&c->lock);
	follow_locked(c, cpu);
	pthread_mutex_unlock(&c->lock);
}
