/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA Request / Reply frames: see iw_mpa.h for the contract and the
 * decisions.  Nothing here trusts a length it was not given: the header's
 * private-data length is checked against 512 before any private data is
 * waited for, and every read is bounded by the caller's len. */
#include "iw_mpa.h"

#include <errno.h>
#include <string.h>

#include "iw_crc32c.h"

static int one_bit(unsigned v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

/* ------------------------------------------------------------- build */

/* Which RTR bits fit which frame (see iw_mpa_build). */
static int check_rtr_params(int is_reply, const struct iw_mpa_params *p)
{
	if (p->rtr & ~IW_RTR_MASK)
		return -EINVAL;
	if (p->rev == IW_MPA_REV_BASIC)
		return (p->p2p || p->rtr) ? -EINVAL : 0;
	if (!p->p2p)
		return p->rtr ? -EINVAL : 0;
	if (!is_reply)
		return p->rtr ? 0 : -EINVAL;
	if (p->reject)
		return (p->rtr == 0 || one_bit(p->rtr)) ? 0 : -EINVAL;
	return one_bit(p->rtr) ? 0 : -EINVAL;
}

ssize_t iw_mpa_frame_size(int is_reply, const struct iw_mpa_params *p)
{
	size_t max_pdata = IW_MPA_MAX_PRIVATE_DATA;
	size_t words = 0;
	int rc;

	if (!p || (p->rev != IW_MPA_REV_BASIC && p->rev != IW_MPA_REV_ENHANCED))
		return -EINVAL;
	if (!is_reply && p->reject)
		return -EINVAL;
	if (p->pdata_len && !p->pdata)
		return -EINVAL;
	rc = check_rtr_params(is_reply, p);
	if (rc)
		return rc;
	if (p->rev == IW_MPA_REV_ENHANCED) {
		if (p->ird > IW_MPA_V2_IRD_ORD_MASK ||
		    p->ord > IW_MPA_V2_IRD_ORD_MASK)
			return -EINVAL;
		words = IW_MPA_V2_WORDS_LEN;
		max_pdata = IW_MPA_V2_MAX_PDATA;
	}
	if (p->pdata_len > max_pdata)
		return -EMSGSIZE;
	return (ssize_t)(IW_MPA_RR_HDR_LEN + words + p->pdata_len);
}

static struct iw_mpa_v2_words make_words(const struct iw_mpa_params *p)
{
	struct iw_mpa_v2_words w;
	uint16_t ird = (uint16_t)p->ird, ord = (uint16_t)p->ord;

	if (p->p2p)
		ird |= IW_MPA_V2_P2P;
	if (p->rtr & IW_RTR_SEND)
		ird |= IW_MPA_V2_SEND_RTR;
	if (p->rtr & IW_RTR_WRITE)
		ord |= IW_MPA_V2_WRITE_RTR;
	if (p->rtr & IW_RTR_READ)
		ord |= IW_MPA_V2_READ_RTR;
	w.ird_be = iw_be16(ird);
	w.ord_be = iw_be16(ord);
	return w;
}

ssize_t iw_mpa_build(void *buf, size_t size, int is_reply,
		     const struct iw_mpa_params *p)
{
	ssize_t total = iw_mpa_frame_size(is_reply, p);
	struct iw_mpa_rr hdr;
	uint8_t *out = buf;
	size_t off = IW_MPA_RR_HDR_LEN;

	if (total < 0)
		return total;
	if (!buf || size < (size_t)total)
		return -ENOBUFS;

	memcpy(hdr.key, is_reply ? IW_MPA_KEY_REP : IW_MPA_KEY_REQ,
	       IW_MPA_KEY_LEN);
	hdr.flags = (uint8_t)((p->crc ? IW_MPA_FLAG_CRC : 0) |
			      (p->reject ? IW_MPA_FLAG_REJECT : 0));
	hdr.rev = (uint8_t)p->rev;
	hdr.pd_len_be = iw_be16((uint16_t)(total - IW_MPA_RR_HDR_LEN));
	if (p->rev == IW_MPA_REV_ENHANCED) {
		struct iw_mpa_v2_words w = make_words(p);

		hdr.flags |= IW_MPA_FLAG_ENHANCED;
		memcpy(out + off, &w, sizeof(w));
		off += sizeof(w);
	}
	memcpy(out, &hdr, sizeof(hdr));
	if (p->pdata_len)
		memcpy(out + off, p->pdata, p->pdata_len);
	return total;
}

/* ------------------------------------------------------------- parse */

static int need_more(size_t *need, size_t n)
{
	if (need)
		*need = n;
	return IW_MPA_NEED_MORE;
}

/* Match the key on as many bytes as we have, so garbage fails at its
 * first byte.  The two keys differ only at byte 9 ('q' / 'p'); until then
 * *is_reply stays -1 (undecided). */
static int match_key(const uint8_t *b, size_t len, enum iw_mpa_expect expect,
		     int *is_reply)
{
	size_t n = len < IW_MPA_KEY_LEN ? len : IW_MPA_KEY_LEN;
	int req = memcmp(b, IW_MPA_KEY_REQ, n) == 0;
	int rep = memcmp(b, IW_MPA_KEY_REP, n) == 0;

	*is_reply = -1;
	if (!req && !rep)
		return IW_MPA_ERR_BAD_KEY;
	if (req && rep)
		return IW_MPA_OK;
	*is_reply = rep;
	if ((expect == IW_MPA_EXPECT_REQ && rep) ||
	    (expect == IW_MPA_EXPECT_REP && req))
		return IW_MPA_ERR_WRONG_KEY;
	return IW_MPA_OK;
}

/* Checks that need only the 20-byte header. */
static int parse_header(const uint8_t *b, int is_reply, struct iw_mpa_frame *f)
{
	struct iw_mpa_rr hdr;
	size_t pd_len;

	memcpy(&hdr, b, sizeof(hdr));
	pd_len = iw_be16(hdr.pd_len_be);
	if (hdr.rev < IW_MPA_REV_BASIC || hdr.rev > IW_MPA_REV_ENHANCED)
		return IW_MPA_ERR_REVISION;
	if (hdr.flags & IW_MPA_FLAG_MARKERS)
		return IW_MPA_ERR_MARKERS;
	if (pd_len > IW_MPA_MAX_PRIVATE_DATA)
		return IW_MPA_ERR_PD_LEN;

	memset(f, 0, sizeof(*f));
	f->is_reply = is_reply;
	f->flags = hdr.flags;
	f->rev = hdr.rev;
	f->crc = !!(hdr.flags & IW_MPA_FLAG_CRC);
	/* RFC 5044: R is not checked on reception of a request. */
	f->reject = is_reply && (hdr.flags & IW_MPA_FLAG_REJECT);
	/* 0x10 is reserved, hence ignored, in revision 1. */
	f->enhanced = hdr.rev == IW_MPA_REV_ENHANCED &&
		      (hdr.flags & IW_MPA_FLAG_ENHANCED);
	if (f->enhanced && pd_len < IW_MPA_V2_WORDS_LEN)
		return IW_MPA_ERR_NO_WORDS;
	f->pdata_len = pd_len;
	f->frame_len = IW_MPA_RR_HDR_LEN + pd_len;
	return IW_MPA_OK;
}

/* The private data is all there: split off the enhanced words. */
static void parse_pdata(const uint8_t *b, struct iw_mpa_frame *f)
{
	const uint8_t *pd = b + IW_MPA_RR_HDR_LEN;
	struct iw_mpa_v2_words w;
	uint16_t ird, ord;

	f->pdata = pd;
	if (!f->enhanced)
		return;
	memcpy(&w, pd, sizeof(w));
	ird = iw_be16(w.ird_be);
	ord = iw_be16(w.ord_be);
	f->p2p = !!(ird & IW_MPA_V2_P2P);
	f->rtr = (ird & IW_MPA_V2_SEND_RTR ? IW_RTR_SEND : 0) |
		 (ord & IW_MPA_V2_WRITE_RTR ? IW_RTR_WRITE : 0) |
		 (ord & IW_MPA_V2_READ_RTR ? IW_RTR_READ : 0);
	f->ird = ird & IW_MPA_V2_IRD_ORD_MASK;
	f->ord = ord & IW_MPA_V2_IRD_ORD_MASK;
	f->pdata = pd + IW_MPA_V2_WORDS_LEN;
	f->pdata_len -= IW_MPA_V2_WORDS_LEN;
}

int iw_mpa_parse(const void *buf, size_t len, enum iw_mpa_expect expect,
		 struct iw_mpa_frame *f, size_t *need)
{
	const uint8_t *b = buf;
	int is_reply, rc;

	if (!f || (!buf && len))
		return IW_MPA_ERR_INVAL;
	if (len == 0)
		return need_more(need, IW_MPA_RR_HDR_LEN);
	rc = match_key(b, len, expect, &is_reply);
	if (rc)
		return rc;
	if (len < IW_MPA_RR_HDR_LEN)
		return need_more(need, IW_MPA_RR_HDR_LEN - len);
	rc = parse_header(b, is_reply, f);
	if (rc)
		return rc;
	if (len < f->frame_len)
		return need_more(need, f->frame_len - len);
	parse_pdata(b, f);
	return IW_MPA_OK;
}

/* ------------------------------------------------- check / negotiate */

int iw_mpa_check_reply(const struct iw_mpa_params *req,
		       const struct iw_mpa_frame *rep)
{
	if (!req || !rep || !rep->is_reply)
		return IW_MPA_ERR_INVAL;
	if (rep->rev > req->rev)
		return IW_MPA_ERR_REV_MISMATCH;
	if (rep->markers || (rep->flags & IW_MPA_FLAG_MARKERS))
		return IW_MPA_ERR_MARKERS;
	if (rep->reject || !rep->enhanced)
		return IW_MPA_OK;
	if (req->p2p && !rep->p2p)
		return IW_MPA_ERR_P2P_MISMATCH;
	if (!req->p2p) {
		/* A p2p flag alone is tolerated (some responders always set
		 * it); choosing an RTR we did not ask for is not. */
		if (rep->rtr)
			return IW_MPA_ERR_RTR_NOT_OFFERED;
	} else if (rep->rtr == 0) {
		return IW_MPA_ERR_NO_RTR;
	} else if (!one_bit(rep->rtr)) {
		return IW_MPA_ERR_RTR_MULTIPLE;
	} else if (!(rep->rtr & req->rtr)) {
		return IW_MPA_ERR_RTR_NOT_OFFERED;
	}
	if (rep->ord > req->ird)
		return IW_MPA_ERR_INSUFF_IRD;
	return IW_MPA_OK;
}

/* The RTR type a responder picks among those offered (0: none common).
 * A Read RTR needs an IRD slot at the responder. */
static unsigned choose_rtr(const struct iw_mpa_local *local, unsigned offered)
{
	static const unsigned order[] = { IW_RTR_WRITE, IW_RTR_READ,
					  IW_RTR_SEND };
	unsigned common = offered & local->rtr_ok & IW_RTR_MASK;

	if (local->ird == 0)
		common &= ~(unsigned)IW_RTR_READ;
	if (local->rtr_pref & common)
		return local->rtr_pref;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (common & order[i])
			return order[i];
	return 0;
}

static int local_valid(const struct iw_mpa_local *l)
{
	return (l->rev == IW_MPA_REV_BASIC || l->rev == IW_MPA_REV_ENHANCED) &&
	       l->ird <= IW_MPA_V2_IRD_ORD_MASK &&
	       l->ord <= IW_MPA_V2_IRD_ORD_MASK &&
	       !(l->rtr_ok & ~IW_RTR_MASK) &&
	       (l->rtr_pref == 0 || one_bit(l->rtr_pref & IW_RTR_MASK)) &&
	       !(l->rtr_pref & ~IW_RTR_MASK);
}

int iw_mpa_negotiate(const struct iw_mpa_local *local,
		     const struct iw_mpa_frame *req,
		     struct iw_mpa_params *rep, struct iw_mpa_conn *conn)
{
	int rc = IW_MPA_OK;

	if (!local || !req || !rep || req->is_reply || !local_valid(local))
		return IW_MPA_ERR_INVAL;
	memset(rep, 0, sizeof(*rep));
	rep->rev = req->rev < local->rev ? req->rev : local->rev;
	/* Without the IRD/ORD words there is nothing to negotiate in
	 * revision 2: answer as revision 1. */
	if (rep->rev == IW_MPA_REV_ENHANCED && !req->enhanced)
		rep->rev = IW_MPA_REV_BASIC;
	rep->crc = local->crc || req->crc;
	if (rep->rev == IW_MPA_REV_ENHANCED) {
		rep->ird = local->ird;
		rep->ord = min_u(local->ord, req->ird);
		if (req->p2p) {
			rep->p2p = 1;
			rep->rtr = choose_rtr(local, req->rtr);
			if (!rep->rtr) {
				rep->reject = 1;
				rc = IW_MPA_ERR_NO_RTR;
			}
		}
	}
	if (conn) {
		conn->rev = rep->rev;
		conn->crc = rep->crc;
		conn->p2p = rep->p2p && !rep->reject;
		conn->rtr = rep->reject ? 0 : rep->rtr;
		conn->ird = local->ird;
		conn->ord = rep->rev == IW_MPA_REV_ENHANCED ? rep->ord
							    : local->ord;
	}
	return rc;
}

void iw_mpa_initiator_conn(const struct iw_mpa_params *req,
			   const struct iw_mpa_frame *rep,
			   struct iw_mpa_conn *conn)
{
	int negotiated = rep->enhanced && !rep->reject;

	conn->rev = rep->rev;
	conn->crc = req->crc || rep->crc;
	conn->p2p = negotiated && req->p2p;
	conn->rtr = conn->p2p ? rep->rtr : 0;
	conn->ird = req->ird;
	conn->ord = negotiated ? min_u(req->ord, rep->ird) : req->ord;
}

/* ----------------------------------------------------------- reasons */

const char *iw_mpa_strerror(int status)
{
	switch (status) {
	case IW_MPA_OK:
		return "success";
	case IW_MPA_NEED_MORE:
		return "MPA frame incomplete";
	case IW_MPA_ERR_BAD_KEY:
		return "not an MPA request or reply (bad key)";
	case IW_MPA_ERR_WRONG_KEY:
		return "MPA request where a reply was expected, or the reverse";
	case IW_MPA_ERR_MARKERS:
		return "MPA markers are not supported";
	case IW_MPA_ERR_REVISION:
		return "unsupported MPA revision (only 1 and 2 are)";
	case IW_MPA_ERR_PD_LEN:
		return "MPA private data longer than 512 bytes";
	case IW_MPA_ERR_NO_WORDS:
		return "MPA revision 2 frame too short for the IRD/ORD words";
	case IW_MPA_ERR_RTR_MULTIPLE:
		return "MPA reply chose more than one RTR type";
	case IW_MPA_ERR_RTR_NOT_OFFERED:
		return "MPA reply chose an RTR type that was not offered";
	case IW_MPA_ERR_NO_RTR:
		return "no RTR type supported by both sides";
	case IW_MPA_ERR_P2P_MISMATCH:
		return "peer-to-peer MPA request answered without peer-to-peer";
	case IW_MPA_ERR_REV_MISMATCH:
		return "MPA reply revision higher than the request's";
	case IW_MPA_ERR_INSUFF_IRD:
		return "responder's ORD exceeds our IRD (insufficient IRD)";
	case IW_MPA_ERR_INVAL:
		return "invalid argument";
	default:
		return "unknown MPA status";
	}
}

unsigned iw_mpa_term_ecode(int status)
{
	switch (status) {
	case IW_MPA_ERR_INSUFF_IRD:
		return IW_TERM_LLP_INSUFF_IRD;
	case IW_MPA_ERR_NO_RTR:
	case IW_MPA_ERR_RTR_MULTIPLE:
	case IW_MPA_ERR_RTR_NOT_OFFERED:
	case IW_MPA_ERR_P2P_MISMATCH:
		return IW_TERM_LLP_NO_RTR;
	default:
		return IW_TERM_LLP_BAD_RR;
	}
}

/* RFC 6581 section 7: an initiator that cannot use the reply it got
 * (not enough IRD, no RTR it can send) is already in FPDU mode and says
 * why with a Terminate of layer LLP before closing. */
ssize_t iw_mpa_build_llp_terminate(void *buf, size_t size, int crc,
				   unsigned ecode)
{
	struct iw_terminate_hdr t = {
		.hdr = {
			.ctrl_be = iw_be16(iw_ctrl_make(0, 1, IW_OP_TERMINATE)),
			.qn_be = iw_be32(IW_QN_TERMINATE),
			.msn_be = iw_be32(1),
		},
		.term_ctrl_be = iw_be32(iw_term_ctrl(IW_TERM_LAYER_LLP,
						     IW_TERM_LLP_ETYPE_MPA,
						     ecode, 0)),
	};
	unsigned ulpdu = sizeof(t), len = iw_fpdu_len(ulpdu);
	uint8_t *p = buf;
	uint16_t len_be = iw_be16((uint16_t)ulpdu);
	unsigned pad = iw_fpdu_pad(ulpdu);

	if (size < len)
		return -ENOBUFS;
	memcpy(p, &len_be, IW_FPDU_LEN_FIELD);
	memcpy(p + IW_FPDU_LEN_FIELD, &t, ulpdu);
	memset(p + IW_FPDU_LEN_FIELD + ulpdu, 0, pad);
	iw_fpdu_put_crc(p + len - IW_FPDU_CRC_LEN,
			crc ? iw_crc32c(0, p, len - IW_FPDU_CRC_LEN) : 0);
	return (ssize_t)len;
}
