/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The EP state machine (DAT 2.0, dat_ep_* and the EP state diagram).
 *
 * ep->state always holds the exact DAT state, UNCONFIGURED_* variants
 * included, and changes only here: dapl_ep_transition_locked checks every
 * change against the table below (and asserts it), then stores the
 * configured or unconfigured form of the new state as the EP's PZ and
 * EVDs dictate.  The table is written over the configured ("base") forms;
 * a state may always be entered again (dat_ep_modify re-deriving the
 * unconfigured form, a second end of a connection).
 *
 * Besides DAT's own arrows, the table holds the returns of calls that
 * failed after the state had moved (the DAT rule "a failed call changes
 * nothing"): a connect the engine refused (ACTIVE -> UNCONNECTED), an
 * accept it refused (COMPLETION_PENDING -> PASSIVE or UNCONNECTED), and a
 * request the provider could not deliver as a CR (PASSIVE -> RESERVED or
 * UNCONNECTED).
 *
 * Also here: what an EP's state implies (configured, connected, may
 * connect), its reservation by an RSP or SSP, and the reset of its
 * connection bookkeeping.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "iw_log.h"

#define BIT(s) (1u << (s))
#define S(name) DAT_EP_STATE_##name

/* Legal next base states of each base state. */
static const unsigned int legal_next[] = {
	[S(UNCONNECTED)] = BIT(S(RESERVED)) |
		BIT(S(PASSIVE_CONNECTION_PENDING)) |	/* provider-created EP */
		BIT(S(ACTIVE_CONNECTION_PENDING)) |
		BIT(S(COMPLETION_PENDING)),		/* accepts another's CR */
	[S(RESERVED)] = BIT(S(UNCONNECTED)) |
		BIT(S(PASSIVE_CONNECTION_PENDING)),
	[S(PASSIVE_CONNECTION_PENDING)] = BIT(S(COMPLETION_PENDING)) |
		BIT(S(UNCONNECTED)) |		/* rejected */
		BIT(S(RESERVED)),		/* request not delivered */
	[S(TENTATIVE_CONNECTION_PENDING)] = BIT(S(COMPLETION_PENDING)) |
		BIT(S(UNCONNECTED)),
	[S(ACTIVE_CONNECTION_PENDING)] = BIT(S(CONNECTED)) |
		BIT(S(DISCONNECTED)) |
		BIT(S(UNCONNECTED)),		/* the engine refused */
	[S(COMPLETION_PENDING)] = BIT(S(CONNECTED)) |
		BIT(S(DISCONNECT_PENDING)) | BIT(S(DISCONNECTED)) |
		BIT(S(PASSIVE_CONNECTION_PENDING)) |	/* accept refused */
		BIT(S(UNCONNECTED)),
	[S(CONNECTED)] = BIT(S(DISCONNECT_PENDING)) | BIT(S(DISCONNECTED)),
	[S(DISCONNECT_PENDING)] = BIT(S(DISCONNECTED)),
	[S(DISCONNECTED)] = BIT(S(UNCONNECTED)),	/* dat_ep_reset */
};

#define NSTATES (sizeof(legal_next) / sizeof(legal_next[0]))

/* What the consumer may do in a base state: free the EP (not while an RSP
 * or a pending CR owns it) and modify it (only before a connection
 * exists, which is what the unconfigured states are for). */
enum { FREEABLE = 1, MODIFIABLE = 2 };
static const unsigned char may[] = {
	[S(UNCONNECTED)] = FREEABLE | MODIFIABLE,
	[S(RESERVED)] = MODIFIABLE,
	[S(PASSIVE_CONNECTION_PENDING)] = MODIFIABLE,
	[S(TENTATIVE_CONNECTION_PENDING)] = MODIFIABLE,
	[S(ACTIVE_CONNECTION_PENDING)] = FREEABLE,
	[S(CONNECTED)] = FREEABLE,
	[S(DISCONNECT_PENDING)] = FREEABLE,
	[S(DISCONNECTED)] = FREEABLE,
	[S(COMPLETION_PENDING)] = FREEABLE,
	[S(CONNECTED_SINGLE_PATH)] = FREEABLE,
	[S(CONNECTED_MULTI_PATH)] = FREEABLE,
};

static int state_may(DAT_EP_STATE state, unsigned char what)
{
	size_t s = dapl_ep_base_state(state);

	return s < sizeof(may) && (may[s] & what);
}

/* ------------------------------------------------------------ debug */

void dapl_ep_debug(const struct dapl_ep *ep, int always, const char *fmt, ...)
{
	enum iw_log_level level = always ? IW_LOG_ERROR : IW_LOG_DEBUG;
	char obj[32];
	va_list ap;

	if (!iw_log_on(level))
		return;
	snprintf(obj, sizeof(obj), "ep %p", (void *)ep->obj.handle);
	va_start(ap, fmt);
	iw_logv(level, obj, fmt, ap);
	va_end(ap);
}

/* ----------------------------------------------------------- states */

DAT_RETURN dapl_ep_state_subtype(DAT_EP_STATE state)
{
	switch (state) {
	case DAT_EP_STATE_UNCONNECTED:
		return DAT_INVALID_STATE_EP_UNCONNECTED;
	case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED:
		return DAT_INVALID_STATE_EP_UNCONFIGURED;
	case DAT_EP_STATE_RESERVED:
		return DAT_INVALID_STATE_EP_RESERVED;
	case DAT_EP_STATE_UNCONFIGURED_RESERVED:
		return DAT_INVALID_STATE_EP_UNCONFRESERVED;
	case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
		return DAT_INVALID_STATE_EP_PASSCONNPENDING;
	case DAT_EP_STATE_UNCONFIGURED_PASSIVE:
		return DAT_INVALID_STATE_EP_UNCONFPASSIVE;
	case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
		return DAT_INVALID_STATE_EP_ACTCONNPENDING;
	case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
		return DAT_INVALID_STATE_EP_TENTCONNPENDING;
	case DAT_EP_STATE_UNCONFIGURED_TENTATIVE:
		return DAT_INVALID_STATE_EP_UNCONFTENTATIVE;
	case DAT_EP_STATE_CONNECTED:
	case DAT_EP_STATE_CONNECTED_SINGLE_PATH:
	case DAT_EP_STATE_CONNECTED_MULTI_PATH:
		return DAT_INVALID_STATE_EP_CONNECTED;
	case DAT_EP_STATE_DISCONNECT_PENDING:
		return DAT_INVALID_STATE_EP_DISCPENDING;
	case DAT_EP_STATE_DISCONNECTED:
		return DAT_INVALID_STATE_EP_DISCONNECTED;
	case DAT_EP_STATE_COMPLETION_PENDING:
		return DAT_INVALID_STATE_EP_COMPLPENDING;
	}
	return DAT_INVALID_STATE_EP_NOTREADY;
}

DAT_RETURN dapl_ep_state_error(const struct dapl_ep *ep)
{
	return DAT_INVALID_STATE | dapl_ep_state_subtype(ep->state);
}

int dapl_ep_is_configured(const struct dapl_ep *ep)
{
	return ep->pz && ep->recv_evd && ep->request_evd && ep->connect_evd;
}

DAT_EP_STATE dapl_ep_base_state(DAT_EP_STATE state)
{
	switch (state) {
	case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED:
		return DAT_EP_STATE_UNCONNECTED;
	case DAT_EP_STATE_UNCONFIGURED_RESERVED:
		return DAT_EP_STATE_RESERVED;
	case DAT_EP_STATE_UNCONFIGURED_PASSIVE:
		return DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
	case DAT_EP_STATE_UNCONFIGURED_TENTATIVE:
		return DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
	default:
		return state;
	}
}

static DAT_EP_STATE unconfigured_form(DAT_EP_STATE state)
{
	switch (state) {
	case DAT_EP_STATE_UNCONNECTED:
		return DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
	case DAT_EP_STATE_RESERVED:
		return DAT_EP_STATE_UNCONFIGURED_RESERVED;
	case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
		return DAT_EP_STATE_UNCONFIGURED_PASSIVE;
	case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
		return DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
	default:
		/* Connected and later states have no unconfigured form: an EP
		 * gets there only once configured, and cannot be changed. */
		return state;
	}
}

/* The form of base state 'to' that matches the EP's configuration. */
static DAT_EP_STATE state_form(const struct dapl_ep *ep, DAT_EP_STATE to)
{
	return dapl_ep_is_configured(ep) ? to : unconfigured_form(to);
}

int dapl_ep_transition_legal(DAT_EP_STATE from, DAT_EP_STATE to)
{
	from = dapl_ep_base_state(from);
	to = dapl_ep_base_state(to);
	if (from == to)
		return 1;
	return (size_t)from < NSTATES && (size_t)to < 32 &&
	       (legal_next[from] & BIT(to)) != 0;
}

int dapl_ep_transition_locked(struct dapl_ep *ep, DAT_EP_STATE to)
{
	DAT_EP_STATE next = state_form(ep, dapl_ep_base_state(to));

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (!dapl_ep_transition_legal(ep->state, to)) {
		dapl_ep_debug(ep, 1, "illegal state change %d -> %d",
			      (int)ep->state, (int)next);
		assert(!"illegal EP state change");
		return 0;
	}
	if (next != ep->state)
		dapl_ep_debug(ep, 0, "state %d -> %d", (int)ep->state,
			      (int)next);
	ep->state = next;
	return 1;
}

int dapl_ep_owned(const struct dapl_ep *ep)
{
	return !state_may(ep->state, FREEABLE);
}

int dapl_ep_modifiable(const struct dapl_ep *ep)
{
	return state_may(ep->state, MODIFIABLE);
}

void dapl_ep_state_init(struct dapl_ep *ep)
{
	ep->state = state_form(ep, DAT_EP_STATE_UNCONNECTED);
}

int dapl_ep_connected(const struct dapl_ep *ep)
{
	return ep->state == DAT_EP_STATE_CONNECTED ||
	       ep->state == DAT_EP_STATE_CONNECTED_SINGLE_PATH ||
	       ep->state == DAT_EP_STATE_CONNECTED_MULTI_PATH;
}

DAT_RETURN dapl_ep_config_error(const struct dapl_ep *ep)
{
	/* The most specific subtype DAT has for each missing piece. */
	if (!ep->pz)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_PZ;
	if (!ep->recv_evd)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_EVD_RECV;
	if (!ep->request_evd)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_EVD_REQUEST;
	if (!ep->connect_evd)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_EVD_CONNECT;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ep_check_connectable(const struct dapl_ep *ep)
{
	if (dapl_ep_base_state(ep->state) != DAT_EP_STATE_UNCONNECTED)
		return dapl_ep_state_error(ep);
	return dapl_ep_config_error(ep);
}

/* ------------------------------------------------------ reservation */

DAT_RETURN dapl_ep_reserve_locked(struct dapl_ep *ep, const void *owner,
				  struct dapl_ep **ref)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (dapl_ep_base_state(ep->state) != DAT_EP_STATE_UNCONNECTED ||
	    ep->reserved_by)
		return dapl_ep_state_error(ep);
	ep->reserved_by = owner;
	ep->reserver_ref = ref;
	if (ref)
		*ref = ep;
	dapl_ep_transition_locked(ep, DAT_EP_STATE_RESERVED);
	return DAT_SUCCESS;
}

void dapl_ep_forget_reserver_locked(struct dapl_ep *ep)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (ep->reserver_ref && *ep->reserver_ref == ep)
		*ep->reserver_ref = NULL;
	ep->reserver_ref = NULL;
	ep->reserved_by = NULL;
}

void dapl_ep_unreserve_locked(struct dapl_ep *ep, const void *owner)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (ep->reserved_by != owner)
		return;
	dapl_ep_forget_reserver_locked(ep);
	if (dapl_ep_base_state(ep->state) == DAT_EP_STATE_RESERVED)
		dapl_ep_transition_locked(ep, DAT_EP_STATE_UNCONNECTED);
}

/* ------------------------------------------------------- connection */

struct iwe_conn *dapl_ep_take_conn_locked(struct dapl_ep *ep)
{
	struct iwe_conn *c = ep->conn;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	ep->conn = NULL;
	ep->cm_final = 0;
	ep->cm_adopt = 0;
	ep->disc_posted = 0;
	return c;
}
