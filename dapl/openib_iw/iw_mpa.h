/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA Request / Reply frames (RFC 5044, RFC 6581): build, parse,
 * check and negotiate.  Pure functions: no I/O, no allocation, no state.
 *
 * The connection manager accumulates received bytes and calls
 * iw_mpa_parse() on everything received so far; the parser says how many
 * more bytes it needs, or hands back the parsed frame, or an error with a
 * reason (iw_mpa_strerror).  It never reads past the given length and
 * checks the private-data length before waiting for the private data.
 *
 * Decisions (see also the function comments):
 *  - Reserved flag bits (0x0F; 0x10 in revision 1; R in a request) are
 *    ignored on receive, as RFC 5044 says; they are kept in frame.flags.
 *  - Markers are refused: a frame with M set is an error
 *    ("MPA markers are not supported").
 *  - Revision 2 frames that we build always carry the RFC 6581 IRD/ORD
 *    words and the enhanced flag (0x10).  A received revision-2 frame
 *    carries them only when it has the enhanced flag.
 *  - RTR choice: the responder's preferred type if the initiator offers
 *    it, else Write, then Read, then Send (cheapest first: a zero-length
 *    Write consumes nothing at the responder; a Read needs an IRD slot
 *    and a response; a Send consumes one of the consumer's receives).
 *  - IRD/ORD: each side's ORD must not exceed the peer's IRD.  The
 *    responder lowers its ORD to the initiator's IRD and advertises its
 *    own IRD; the initiator lowers its ORD to the responder's IRD.
 */
#ifndef IW_MPA_H
#define IW_MPA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iw_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RTR types (a mask in a request, exactly one in a reply). */
#define IW_RTR_SEND	0x1	/* zero-length Send */
#define IW_RTR_WRITE	0x2	/* zero-length RDMA Write to STag 1 */
#define IW_RTR_READ	0x4	/* zero-length RDMA Read, answered by a
				 * zero-length Read Response */
#define IW_RTR_MASK	0x7

/* What to put in a frame. */
struct iw_mpa_params {
	int rev;		/* 1 or 2 */
	int crc;		/* set C */
	int reject;		/* set R (replies only) */
	int p2p;		/* revision 2: peer-to-peer model */
	unsigned ird, ord;	/* revision 2: 0..0x3FFF (ignored in rev 1) */
	unsigned rtr;		/* revision 2 with p2p: IW_RTR_* offered
				 * (request) or chosen, exactly one (reply) */
	const void *pdata;	/* consumer private data */
	size_t pdata_len;	/* <= 512, or <= 508 in revision 2 */
};

/* A parsed frame.  pdata points into the caller's buffer. */
struct iw_mpa_frame {
	int is_reply;
	uint8_t flags;		/* the raw flags byte, reserved bits too */
	uint8_t rev;
	int crc, reject;
	int markers;		/* always 0: frames with M are refused */
	int enhanced;		/* IRD/ORD words were present */
	int p2p;
	unsigned ird, ord;	/* 14-bit values; 0 when !enhanced */
	unsigned rtr;		/* IW_RTR_* bits as sent; 0 when !enhanced */
	const uint8_t *pdata;	/* consumer private data (after the words) */
	size_t pdata_len;
	size_t frame_len;	/* header + whole private data */
};

/* Results of iw_mpa_parse and error codes of the other functions. */
enum iw_mpa_status {
	IW_MPA_OK		= 0,
	IW_MPA_NEED_MORE	= 1,	/* partial frame; *need tells */
	IW_MPA_ERR_BAD_KEY	= -1,	/* neither Req nor Rep key */
	IW_MPA_ERR_WRONG_KEY	= -2,	/* a request where a reply was
					 * expected, or the reverse */
	IW_MPA_ERR_MARKERS	= -3,	/* M set: we do not do markers */
	IW_MPA_ERR_REVISION	= -4,	/* revision 0 or above 2 */
	IW_MPA_ERR_PD_LEN	= -5,	/* private data longer than 512 */
	IW_MPA_ERR_NO_WORDS	= -6,	/* enhanced, but no room for IRD/ORD */
	IW_MPA_ERR_RTR_MULTIPLE	= -7,	/* reply chose several RTR types */
	IW_MPA_ERR_RTR_NOT_OFFERED = -8, /* reply chose an RTR not offered */
	IW_MPA_ERR_NO_RTR	= -9,	/* no RTR type both sides support */
	IW_MPA_ERR_P2P_MISMATCH	= -10,	/* p2p request, non-p2p reply */
	IW_MPA_ERR_REV_MISMATCH	= -11,	/* reply revision above request's */
	IW_MPA_ERR_INSUFF_IRD	= -12,	/* responder ORD above our IRD */
	IW_MPA_ERR_INVAL	= -13,	/* bad arguments */
};

/* Which frame the caller waits for. */
enum iw_mpa_expect {
	IW_MPA_EXPECT_REQ,
	IW_MPA_EXPECT_REP,
	IW_MPA_EXPECT_ANY,
};

/* Bytes a frame built from p will take, or a negative errno as
 * iw_mpa_build would return. */
ssize_t iw_mpa_frame_size(int is_reply, const struct iw_mpa_params *p);

/* Write a request (is_reply == 0) or reply into buf.  Returns the number
 * of bytes written, -EINVAL (bad revision, IRD/ORD above 0x3FFF, RTR bits
 * that do not fit the frame: any in rev 1 or without p2p, none in a p2p
 * request, not exactly one in an accepting p2p reply; reject in a
 * request; pdata NULL with a length), -EMSGSIZE (private data too long)
 * or -ENOBUFS (buf shorter than the frame). */
ssize_t iw_mpa_build(void *buf, size_t size, int is_reply,
		     const struct iw_mpa_params *p);

/* Parse the bytes received so far.  Returns IW_MPA_OK and fills *f;
 * IW_MPA_NEED_MORE and sets *need (if need != NULL) to the number of
 * bytes still missing at least; or a negative enum iw_mpa_status.  Bytes
 * after frame_len (the first FPDUs) are not looked at.  Errors are
 * reported as early as the bytes allow (a bad first byte fails at once). */
int iw_mpa_parse(const void *buf, size_t len, enum iw_mpa_expect expect,
		 struct iw_mpa_frame *f, size_t *need);

/* Initiator: is this reply an acceptable answer to the request we sent?
 * A reject (R set) is well-formed and returns IW_MPA_OK: the caller looks
 * at rep->reject.  A revision-1 reply, or a revision-2 one without the
 * IRD/ORD words, is accepted with no RTR (the peer does not speak
 * RFC 6581).  Otherwise: a p2p request needs a p2p reply that chose
 * exactly one RTR type the request offered; a non-p2p request needs a
 * reply that chose no RTR (a bare p2p flag is tolerated, some responders
 * always set it); and the reply's ORD must not exceed our IRD. */
int iw_mpa_check_reply(const struct iw_mpa_params *req,
		       const struct iw_mpa_frame *rep);

/* The outcome of a negotiation, as one side sees it. */
struct iw_mpa_conn {
	int rev;
	int crc;		/* CRC used in both directions */
	int p2p;
	unsigned rtr;		/* the one RTR type, or 0: none */
	unsigned ird;		/* reads we serve at most */
	unsigned ord;		/* reads we issue at most */
};

/* Responder's side: what it can do. */
struct iw_mpa_local {
	int rev;		/* highest revision spoken: 1 or 2 */
	int crc;		/* want CRC */
	unsigned ird, ord;	/* resources, 0..0x3FFF */
	unsigned rtr_ok;	/* RTR types accepted as responder */
	unsigned rtr_pref;	/* preferred type (one bit) or 0 */
};

/* Responder: compute the reply to a parsed request.  Fills *rep (pdata
 * left NULL for the caller) and, if conn != NULL, the connection's
 * outcome.  Reply revision = min(request, local); a revision-2 request
 * without the IRD/ORD words gets a revision-1 reply.  CRC if either side
 * asks.  Reply ORD = min(local ORD, initiator IRD); reply IRD = local IRD.
 * Returns IW_MPA_OK, IW_MPA_ERR_NO_RTR (p2p requested and no common RTR
 * type: answer with a reject) or IW_MPA_ERR_INVAL. */
int iw_mpa_negotiate(const struct iw_mpa_local *local,
		     const struct iw_mpa_frame *req,
		     struct iw_mpa_params *rep, struct iw_mpa_conn *conn);

/* Initiator: the outcome after iw_mpa_check_reply accepted rep. */
void iw_mpa_initiator_conn(const struct iw_mpa_params *req,
			   const struct iw_mpa_frame *rep,
			   struct iw_mpa_conn *conn);

/* A one-line reason for a status code ("MPA markers are not supported"). */
const char *iw_mpa_strerror(int status);

/* The MPA (LLP layer) Terminate error code that reports a status:
 * IW_TERM_LLP_INSUFF_IRD, IW_TERM_LLP_NO_RTR or IW_TERM_LLP_BAD_RR. */
unsigned iw_mpa_term_ecode(int status);

/* The FPDU of a Terminate with layer LLP, type MPA and code ecode, no
 * header echoed (what an initiator sends when it cannot use a reply),
 * with the CRC if crc.  Bytes written, or -ENOBUFS. */
ssize_t iw_mpa_build_llp_terminate(void *buf, size_t size, int crc,
				   unsigned ecode);

#ifdef __cplusplus
}
#endif

#endif
