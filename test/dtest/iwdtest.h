/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest: shared definitions of the option parser/driver (iwdtest.c), the
 * session and transfer protocol (iwd_xfer.c) and the consumer patterns
 * (iwd_patterns.c). */
#ifndef IWDTEST_H
#define IWDTEST_H

#include <stddef.h>
#include <stdint.h>
#include "dat_util.h"
#include "lat_stats.h"

/* The classic modes first: "all" and the default are those. */
enum iwd_mode { M_WRITE, M_READ, M_SEND, M_PINGPONG,
		M_WPP, M_RDV, M_RDVW, M_RDVSTREAM, M_BIBW, M_COUNT };

#define IWD_CLASSIC_MODES ((1u << M_WPP) - 1)
#define IWD_PATTERN_MODES (((1u << M_COUNT) - 1) & ~IWD_CLASSIC_MODES)
#define IWD_SIGNAL_DEFAULT 10		/* wpp: every 10th Write signaled, as dtest -W */
#define IWD_SIGNAL_MAX 64		/* unsignaled Writes must leave room in the queue */

#define IWD_MAX_SIZES 32

struct iwd_opts {
	int server;
	const char *host, *ia;
	DAT_CONN_QUAL qual;
	unsigned modes;			/* bit per enum iwd_mode */
	size_t sizes[IWD_MAX_SIZES];
	int nsizes;
	long iters;			/* 0: use the time budget */
	double budget;			/* seconds per (mode, size) */
	long window;			/* outstanding operations (window.h); 0: default */
	int poll;			/* 0 block, DU_POLL_DEQUEUE or DU_POLL_WAIT0 */
	int csv, verify_all;
	int corrupt;			/* flip a source byte: validation must fail */
	int ssp;			/* upgrade a negotiated TCP socket (the
					 * qualifier is its TCP port) */
	double wait_s;			/* bound on any single wait */
	long signal_every;		/* wpp: every Nth RDMA Write signaled */
	long gap_us;			/* pingpong: the client's pause after
					 * each round trip (a request every so
					 * often, as an RPC's) */
};

struct iwd_result {
	long iters;			/* bibw: messages of both directions */
	double secs;
	long errors;			/* transfers that failed validation */
	long window;			/* the window the test used */
	struct lat_stats lat;		/* ping-pong: one-way (half round trip) */
};

/* Control message: all 64-bit fields, so it goes on the wire as an array
 * of big-endian words and peers need not share byte order. */
enum iwd_msg_type { MSG_HELLO = 1, MSG_BEGIN, MSG_READY, MSG_DONE, MSG_ACK, MSG_QUIT, MSG_BYE,
		    MSG_RDV_RTS, MSG_RDV_CTS, MSG_RDV_FIN };

struct iwd_msg {
	uint64_t magic, type, mode, size, iters, seed;
	uint64_t first, count;		/* DONE: window; ACK: count acknowledged;
					 * RTS, CTS, FIN: first = the message */
	uint64_t errors, window;
	uint64_t addr, len, rmr;	/* HELLO, RTS (rdv), CTS: an RMR triplet */
};

struct iwd_sess;

const char *iwd_mode_name(int mode);
/* 1 for the modes timed per round trip (one-way latency, window 1). */
int iwd_mode_is_pingpong(int mode);
/* Connects (client) or waits for one client (server) and exchanges the RMR
 * triplets; NULL on failure. */
struct iwd_sess *iwd_open(const struct iwd_opts *o);
/* Client: one test of n iterations. Returns 0, or -1 on a transport error
 * (validation failures are counted in r->errors, not returned). */
int iwd_run(struct iwd_sess *s, int mode, size_t size, long n, struct iwd_result *r);
/* Receive buffers each side keeps posted, used in turn. */
int iwd_ring_slots(const struct iwd_sess *s);
/* Server: answer the client's tests until it quits; 1 if any transfer
 * failed validation, -1 on a transport error. */
int iwd_serve(struct iwd_sess *s);
/* Client says goodbye; both sides disconnect and free everything. */
int iwd_close(struct iwd_sess *s, int say_bye);

#endif
