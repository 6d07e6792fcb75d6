/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwa2a: an all-to-all job over DAT, one process per rank (doc/cluster.md).
 *
 * Every rank listens on one PSP, qualifier base + rank, and connects to
 * every lower rank (its private data names the connecting rank), so each
 * pair has one connection and both sides know who dials.  Over each
 * connection both sides walk the same list of stages in lockstep:
 *   stage 0        HELLO: the RMR triplets of our Write target and Read
 *                  source; the connecting side speaks first (the listener
 *                  posted its receives before it accepted, the connecting
 *                  side posts them at ESTABLISHED);
 *   stage 1..K     step j = stage - 1: a Send, an RDMA Write (and a NOTE
 *                  after it: RDMAP delivers the Send after the Write is
 *                  placed) or an RDMA Read (and a NOTE), of the job's
 *                  sizes in turn, every byte checked by the side that
 *                  receives or reads it;
 *   stage K+1      DONE, sent to every live peer once every pair is past
 *                  its last step: when a rank holds a DONE from every live
 *                  peer, every rank is done (the barrier).
 * A stage is complete when our requests of it completed and the peer's
 * message of it arrived; the next stage starts only then.  So a peer is at
 * most one stage ahead (two messages unconsumed: A2A_RECV_SLOTS covers
 * them) and RDMA Writes alternate between two target halves, each checked
 * before the peer may write it again.
 * A connection that ends (BROKEN, DISCONNECTED) before the peer's DONE
 * loses that rank; the others finish.  Exit status: 0 every pair finished
 * and validated, 2 finished but a peer was lost, 1 failure. */
#ifndef IWA2A_H
#define IWA2A_H

#include <stddef.h>
#include <stdint.h>

#include "dat_util.h"

#define A2A_MAX_SIZES 16
#define A2A_RECV_SLOTS 3	/* two messages a peer may be ahead, and one spare */
#define A2A_CTL_LEN 64		/* room of a control message (HELLO, NOTE, DONE) */
#define A2A_MAX_REQ 2		/* requests of one stage: a Write or Read and its NOTE */

enum a2a_exit { A2A_OK = 0, A2A_FAILED = 1, A2A_LOST = 2, A2A_USAGE = 64 };
enum a2a_op { OP_SEND, OP_WRITE, OP_READ, OP_COUNT };

struct a2a_opts {
	const char *ia;
	int rank, nranks;
	char **addr;			/* each rank's IPv4 address */
	unsigned base;			/* rank r listens on qualifier base + r */
	size_t sizes[A2A_MAX_SIZES];
	int nsizes, rounds;		/* each (operation, size) `rounds` times */
	size_t max;			/* the largest size */
	double connect_s;		/* every pair connected within this */
	double stall_s;			/* no event at all for this long: failure */
	double limit_s;			/* the whole job */
	int free_lost;			/* free a lost peer's EP once it has settled */
	int sigkill_halfway;		/* test aid: SIGKILL ourselves halfway */
};

enum pair_state {
	PS_IDLE,		/* waiting: to dial, or for the peer's request */
	PS_CONNECTING,		/* dat_ep_connect or dat_cr_accept called */
	PS_RETRY,		/* refused (nobody listening yet): dial again at retry_ms */
	PS_UP,			/* ESTABLISHED */
	PS_ENDED,		/* DISCONNECTED or BROKEN seen */
};

struct a2a_pair {
	int rank;			/* the peer's */
	int active;			/* we dial (our rank is the higher) */
	enum pair_state st;
	DAT_EP_HANDLE ep;
	unsigned gen;			/* EP generation: completions of an earlier EP are stale */
	double retry_ms;
	double last_ms;			/* its latest event (a2a_now_ms) */
	int attempts;
	struct du_region *mem;		/* target halves, landing, receive slots, outgoing control */
	DAT_RMR_TRIPLET peer_tgt, peer_src;
	int stage;			/* ours; -1 before HELLO */
	int pending;			/* our requests of this stage not completed */
	int peer_msgs;			/* the peer's messages consumed = its stages seen */
	int recvs_out;
	int stuck;			/* a post was refused: no more stages */
	int reported;			/* its end has been reported */
	long posted, completed, flushed, errors, bad;
	long checked[OP_COUNT];		/* transfers we validated, by operation */
	uint64_t bytes;			/* bytes we validated */
	const char *end_event;		/* set when the connection ended */
	int end_stage;
	int64_t end_real_ns;		/* CLOCK_REALTIME when we saw the end */
	int unreached;			/* never connected within connect_s */
};

struct a2a_job {
	const struct a2a_opts *o;
	struct du d;			/* IA, PZ, EVDs, PSP */
	/* Our Send/Write source, our Read source, then each pair's region. */
	struct du_region *regs;
	struct a2a_pair *pairs;		/* one per other rank, in rank order */
	int npeers, steps, stages;	/* stages = steps + 2 */
	int steps_done;			/* every pair past its last step, or ended */
	int failed;
};

/* a2a_xfer.c: memory, the stages and their completions. */
int a2a_xfer_setup(struct a2a_job *j);
int a2a_pair_mem(struct a2a_job *j, struct a2a_pair *p);
int a2a_post_recvs(struct a2a_job *j, struct a2a_pair *p);
void a2a_advance(struct a2a_job *j, struct a2a_pair *p);
void a2a_dto_event(struct a2a_job *j, const DAT_EVENT *ev);
/* Our last stage and the peer's DONE done (the pair takes part in no
 * more of the job). */
int a2a_pair_finished(const struct a2a_job *j, const struct a2a_pair *p);
/* Past its last step (or ended): DONE may go once every pair is. */
int a2a_pair_past_steps(const struct a2a_job *j, const struct a2a_pair *p);
/* Ended, and every request and receive posted has completed. */
int a2a_pair_settled(const struct a2a_pair *p);
int a2a_pair_lost(const struct a2a_job *j, const struct a2a_pair *p);
/* Its state in words, for a report of what hangs. */
void a2a_pair_describe(const struct a2a_job *j, const struct a2a_pair *p, char *buf, size_t n);

/* a2a_conn.c: the PSP, dialing, accepting, the connection events. */
int a2a_listen(struct a2a_job *j);
void a2a_dial_due(struct a2a_job *j, double now_ms, double deadline_ms);
void a2a_conn_event(struct a2a_job *j, const DAT_EVENT *ev);
void a2a_cr_event(struct a2a_job *j, const DAT_EVENT *ev);
void a2a_disconnect_all(struct a2a_job *j);
/* Frees p's EP (none: nothing); its completions still to come are stale. */
void a2a_free_ep(struct a2a_pair *p);
void a2a_free_eps(struct a2a_job *j);

/* iwa2a.c */
double a2a_now_ms(void);
int64_t a2a_real_ns(void);

#endif
