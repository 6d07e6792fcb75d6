/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Service Points and Connection Requests through Debian's libdat2: PSP and
 * RSP create/query/free with every bad input, qualifier collisions (also
 * across two IAs of the same address), dat_psp_create_any, the EP
 * reservation of an RSP, the CSP calls libdat2 does not export (reached
 * through the provider table), the CR calls with handles that are not CRs,
 * and an abrupt close that must release every qualifier. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcommon.h"
#include <dat2/dat_registry.h>	/* DAT_CSP_CREATE & co. */

/* The registry's map from the consumer's IA index to the provider's
 * handle: exported by libdat2, not declared by its headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);


#define QUAL 63100

struct env {
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE dto, conn, cr;
};

static DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	if (dat_evd_create(ia, 16, DAT_HANDLE_NULL, flags, &evd) != DAT_SUCCESS)
		BAIL("dat_evd_create(0x%x) failed", flags);
	return evd;
}

static void env_open(struct env *e)
{
	e->ia = test_open_ia(NULL);
	if (dat_pz_create(e->ia, &e->pz) != DAT_SUCCESS)
		BAIL("dat_pz_create failed");
	e->dto = make_evd(e->ia, DAT_EVD_DTO_FLAG);
	e->conn = make_evd(e->ia, DAT_EVD_CONNECTION_FLAG);
	e->cr = make_evd(e->ia, DAT_EVD_CR_FLAG);
}

static DAT_EP_HANDLE make_ep(const struct env *e, int configured)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_RETURN r;

	if (configured)
		r = dat_ep_create(e->ia, e->pz, e->dto, e->dto, e->conn, NULL, &ep);
	else
		r = dat_ep_create(e->ia, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				  DAT_HANDLE_NULL, DAT_HANDLE_NULL, NULL, &ep);
	if (r != DAT_SUCCESS)
		BAIL("dat_ep_create failed: 0x%x", r);
	return ep;
}

static DAT_EP_STATE ep_state(DAT_EP_HANDLE ep)
{
	DAT_EP_STATE s = (DAT_EP_STATE)-1;

	dat_ep_get_status(ep, &s, NULL, NULL);
	return s;
}

/* --------------------------------------------------------------- PSP */

static void test_psp(const struct env *e)
{
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL, other = DAT_HANDLE_NULL;
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = make_ep(e, 1);
	DAT_HANDLE_TYPE t;
	DAT_PSP_PARAM p;

	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->cr, DAT_PSP_CONSUMER_FLAG, &psp),
		   DAT_SUCCESS, "dat_psp_create");
	CHECK(dat_get_handle_type(psp, &t) == DAT_SUCCESS &&
	      t == DAT_HANDLE_TYPE_PSP, "get_handle_type(psp) == PSP");
	memset(&p, 0, sizeof(p));
	CHECK(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.ia_handle == e->ia && p.conn_qual == QUAL &&
	      p.evd_handle == e->cr && p.psp_flags == DAT_PSP_CONSUMER_FLAG,
	      "psp_query: consumer IA handle, qualifier, EVD, flags");
	CHECK_CODE(dat_psp_query(psp, 0x100, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "psp_query: unknown mask bit -> ARG2");
	CHECK_CODE(dat_psp_query(psp, DAT_PSP_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "psp_query: NULL param -> ARG3");
	CHECK_CODE(dat_psp_query(e->cr, DAT_PSP_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PSP,
		   "psp_query: an EVD handle -> INVALID_HANDLE_PSP");
	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->cr, DAT_PSP_PROVIDER_FLAG, &other),
		   DAT_CONN_QUAL_IN_USE, "psp_create: same qualifier -> CONN_QUAL_IN_USE");
	CHECK_CODE(dat_rsp_create(e->ia, QUAL, ep, e->cr, &rsp),
		   DAT_CONN_QUAL_IN_USE, "rsp_create: a PSP's qualifier -> CONN_QUAL_IN_USE");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONNECTED,
	      "... and the EP was not left reserved");
	CHECK_CODE(dat_evd_free(e->cr), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE,
		   "dat_evd_free of a PSP's EVD -> EVD_IN_USE");
	CHECK_CODE(dat_psp_free(psp), DAT_SUCCESS, "dat_psp_free");
	CHECK_CODE(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PSP,
		   "psp_query after free -> INVALID_HANDLE_PSP");
	CHECK_CODE(dat_psp_free(psp), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PSP,
		   "second dat_psp_free -> INVALID_HANDLE_PSP");
	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->cr, DAT_PSP_PROVIDER_FLAG, &psp),
		   DAT_SUCCESS, "the qualifier is free again after dat_psp_free");
	CHECK_CODE(dat_psp_free(psp), DAT_SUCCESS, "dat_psp_free");
	dat_ep_free(ep);
}

static void test_psp_bad(const struct env *e)
{
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;

	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->dto, DAT_PSP_CONSUMER_FLAG, &psp),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR,
		   "psp_create: EVD without CR flag -> INVALID_HANDLE_EVD_CR");
	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->pz, DAT_PSP_CONSUMER_FLAG, &psp),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR,
		   "psp_create: a PZ as EVD -> INVALID_HANDLE_EVD_CR");
	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->cr, 2, &psp),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "psp_create: unknown PSP flag -> ARG4");
	CHECK_CODE(dat_psp_create(e->ia, QUAL, e->cr, DAT_PSP_CONSUMER_FLAG, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "psp_create: NULL psp_handle -> ARG5");
	CHECK_CODE(dat_psp_create(e->ia, 0, e->cr, DAT_PSP_CONSUMER_FLAG, &psp),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "psp_create: qualifier 0 -> ARG2");
	/* Qualifiers above 65535 are valid: the engine maps them. */
	CHECK_CODE(dat_psp_create(e->ia, 65536, e->cr, DAT_PSP_CONSUMER_FLAG, &psp),
		   DAT_SUCCESS, "psp_create: qualifier beyond a port is valid");
	dat_psp_free(psp);
}

/* The registry is per process and address: a second IA on the same
 * address cannot take a qualifier the first one holds. */
static void test_two_ias(const struct env *e)
{
	DAT_IA_HANDLE ia2 = test_open_ia(NULL);
	DAT_EVD_HANDLE cr2 = make_evd(ia2, DAT_EVD_CR_FLAG);
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL, psp2 = DAT_HANDLE_NULL;

	dat_psp_create(e->ia, QUAL, e->cr, DAT_PSP_CONSUMER_FLAG, &psp);
	CHECK_CODE(dat_psp_create(ia2, QUAL, cr2, DAT_PSP_CONSUMER_FLAG, &psp2),
		   DAT_CONN_QUAL_IN_USE,
		   "second IA, same address and qualifier -> CONN_QUAL_IN_USE");
	/* A CR EVD only receives what the provider posts: one of another
	 * IA of the same provider will do (doc/semantics.md, t_share). */
	CHECK_CODE(dat_psp_create(e->ia, QUAL + 1, cr2, DAT_PSP_CONSUMER_FLAG, &psp2),
		   DAT_SUCCESS, "psp_create: CR EVD of another IA of the provider");
	dat_psp_free(psp2);
	dat_psp_free(psp);
	dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG);
}

static void test_psp_any(const struct env *e)
{
	DAT_PSP_HANDLE a = DAT_HANDLE_NULL, b = DAT_HANDLE_NULL;
	DAT_CONN_QUAL qa = 0, qb = 0;
	DAT_PSP_PARAM p;

	CHECK(dat_psp_create_any(e->ia, &qa, e->cr, DAT_PSP_CONSUMER_FLAG, &a) ==
		      DAT_SUCCESS &&
	      dat_psp_create_any(e->ia, &qb, e->cr, DAT_PSP_CONSUMER_FLAG, &b) ==
		      DAT_SUCCESS,
	      "dat_psp_create_any twice");
	/* The kernel picks ephemeral ports. */
	CHECK(qa != qb && qa >= 1024 && qa <= 65535 && qb >= 1024 && qb <= 65535,
	      "distinct unprivileged ports as qualifiers (%llu, %llu)",
	      (unsigned long long)qa, (unsigned long long)qb);
	CHECK(dat_psp_query(a, DAT_PSP_FIELD_CONN_QUAL, &p) == DAT_SUCCESS &&
	      p.conn_qual == qa, "psp_query reports the chosen qualifier");
	CHECK_CODE(dat_psp_create(e->ia, qa, e->cr, DAT_PSP_CONSUMER_FLAG, &b),
		   DAT_CONN_QUAL_IN_USE, "a chosen qualifier is in use");
	CHECK_CODE(dat_psp_create_any(e->ia, NULL, e->cr, DAT_PSP_CONSUMER_FLAG, &b),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "psp_create_any: NULL qualifier -> ARG2");
	dat_psp_free(a);
	dat_psp_free(b);
}

/* --------------------------------------------------------------- RSP */

static void test_rsp(const struct env *e)
{
	DAT_EP_HANDLE ep = make_ep(e, 1), unconf = make_ep(e, 0);
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL, rsp2 = DAT_HANDLE_NULL;
	DAT_RSP_PARAM p;
	DAT_EP_PARAM ep_param;
	DAT_HANDLE_TYPE t;

	CHECK_CODE(dat_rsp_create(e->ia, QUAL, ep, e->cr, &rsp), DAT_SUCCESS,
		   "dat_rsp_create");
	CHECK(dat_get_handle_type(rsp, &t) == DAT_SUCCESS &&
	      t == DAT_HANDLE_TYPE_RSP, "get_handle_type(rsp) == RSP");
	CHECK(ep_state(ep) == DAT_EP_STATE_RESERVED, "the EP is RESERVED");
	memset(&p, 0, sizeof(p));
	CHECK(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.ia_handle == e->ia && p.conn_qual == QUAL &&
	      p.evd_handle == e->cr && p.ep_handle == ep,
	      "rsp_query: consumer IA handle, qualifier, EVD, EP");
	CHECK_CODE(dat_rsp_query(rsp, 0x10, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "rsp_query: unknown mask bit -> ARG2");
	CHECK_CODE(dat_rsp_create(e->ia, QUAL + 1, ep, e->cr, &rsp2),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_RESERVED,
		   "rsp_create: EP already reserved -> INVALID_STATE_EP_RESERVED");
	CHECK_CODE(dat_rsp_create(e->ia, QUAL + 1, e->pz, e->cr, &rsp2),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "rsp_create: a PZ as EP -> INVALID_HANDLE_EP");
	CHECK_CODE(dat_rsp_create(e->ia, QUAL + 1, unconf, e->dto, &rsp2),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR,
		   "rsp_create: EVD without CR flag -> INVALID_HANDLE_EVD_CR");
	CHECK(ep_state(unconf) == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED,
	      "... and that EP was not left reserved");
	CHECK_CODE(dat_rsp_create(e->ia, QUAL + 1, unconf, e->cr, &rsp2),
		   DAT_SUCCESS, "rsp_create on an unconfigured EP");
	CHECK(ep_state(unconf) == DAT_EP_STATE_UNCONFIGURED_RESERVED,
	      "... which becomes UNCONFIGURED_RESERVED");
	memset(&ep_param, 0, sizeof(ep_param));
	ep_param.pz_handle = e->pz;
	ep_param.recv_evd_handle = e->dto;
	ep_param.request_evd_handle = e->dto;
	ep_param.connect_evd_handle = e->conn;
	CHECK(dat_ep_modify(unconf, DAT_EP_FIELD_PZ_HANDLE |
			    DAT_EP_FIELD_RECV_EVD_HANDLE |
			    DAT_EP_FIELD_REQUEST_EVD_HANDLE |
			    DAT_EP_FIELD_CONNECT_EVD_HANDLE, &ep_param) == DAT_SUCCESS &&
	      ep_state(unconf) == DAT_EP_STATE_RESERVED,
	      "dat_ep_modify configures it while reserved: RESERVED");
	CHECK_CODE(dat_rsp_free(rsp), DAT_SUCCESS, "dat_rsp_free");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONNECTED, "the EP is UNCONNECTED again");
	CHECK_CODE(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RSP,
		   "rsp_query after free -> INVALID_HANDLE_RSP");
	CHECK_CODE(dat_rsp_free(rsp2), DAT_SUCCESS, "dat_rsp_free (second RSP)");
	dat_ep_free(ep);
	dat_ep_free(unconf);
}

/* ------------------------------------------------------------ CSP, CR */

static void test_csp_cr(const struct env *e)
{
	DAT_IA_HANDLE prov_ia = DAT_HANDLE_NULL;
	DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
	DAT_CSP_PARAM cp;
	DAT_CR_PARAM crp;
	DAT_COMM comm = { 0, 0, 0 };

	if (dats_get_ia_handle(e->ia, &prov_ia) != DAT_SUCCESS)
		BAIL("dats_get_ia_handle failed");
	CHECK_CODE(DAT_CSP_CREATE(prov_ia, &comm, NULL, e->cr, &csp),
		   DAT_NOT_IMPLEMENTED,
		   "csp_create (not exported by libdat2) -> NOT_IMPLEMENTED");
	CHECK_CODE(DAT_CSP_CREATE(e->pz, &comm, NULL, e->cr, &csp),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA,
		   "csp_create on a PZ handle -> INVALID_HANDLE_IA");
	CHECK_CODE(DAT_CSP_QUERY(e->cr, DAT_CSP_FIELD_ALL, &cp),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP,
		   "csp_query of an EVD -> INVALID_HANDLE_CSP");
	CHECK_CODE(DAT_CSP_FREE(e->pz), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP,
		   "csp_free of a PZ -> INVALID_HANDLE_CSP");
	/* CRs come from the connection manager (next issue); the calls must
	 * already refuse what is not a CR. */
	CHECK_CODE(dat_cr_query(e->cr, DAT_CR_FIELD_ALL, &crp),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR,
		   "cr_query of an EVD -> INVALID_HANDLE_CR");
	CHECK_CODE(dat_cr_accept(e->pz, DAT_HANDLE_NULL, 0, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR,
		   "cr_accept of a PZ -> INVALID_HANDLE_CR");
	CHECK_CODE(dat_cr_reject(e->dto, 0, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR,
		   "cr_reject of an EVD -> INVALID_HANDLE_CR");
	CHECK_CODE(dat_cr_handoff(e->pz, QUAL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR,
		   "cr_handoff of a PZ -> INVALID_HANDLE_CR");
}

/* An abrupt close must give every qualifier back. */
static void test_close_releases(void)
{
	struct env e2;
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep;

	env_open(&e2);
	ep = make_ep(&e2, 1);
	CHECK(dat_psp_create(e2.ia, QUAL + 5, e2.cr, DAT_PSP_CONSUMER_FLAG, &psp) ==
		      DAT_SUCCESS &&
	      dat_rsp_create(e2.ia, QUAL + 6, ep, e2.cr, &rsp) == DAT_SUCCESS,
	      "a PSP and an RSP on a second IA");
	CHECK_CODE(dat_ia_close(e2.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		   "abrupt close with a live PSP, RSP and reserved EP");
	env_open(&e2);
	CHECK(dat_psp_create(e2.ia, QUAL + 5, e2.cr, DAT_PSP_CONSUMER_FLAG, &psp) ==
		      DAT_SUCCESS &&
	      dat_psp_create(e2.ia, QUAL + 6, e2.cr, DAT_PSP_CONSUMER_FLAG, &rsp) ==
		      DAT_SUCCESS,
	      "both qualifiers are free again");
	test_close_ia(e2.ia);
}

int main(void)
{
	struct env e;

	env_open(&e);
	test_psp(&e);
	test_psp_bad(&e);
	test_two_ias(&e);
	test_psp_any(&e);
	test_rsp(&e);
	test_csp_cr(&e);
	test_close_releases();
	test_close_ia(e.ia);
	return tap_done();
}
