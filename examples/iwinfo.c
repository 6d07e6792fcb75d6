/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwinfo: open a DAT IA through the registry and print what dat_ia_query
 * reports, then the dat.conf entries that load iwdapl; or print the
 * counters of a running process.
 *   iwinfo [IA-NAME]          (default iw-lo; DAT_OVERRIDE selects the
 *                              dat.conf)
 *   iwinfo --conf             the dat.conf entries only
 *   iwinfo --stats [PID]      PID's counters, or the processes that
 *                              serve them */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/udat.h>
#include <dat2/dat_iw_extensions.h>

#include "iwinfo.h"

static const char *err_str(DAT_RETURN r)
{
	static char buf[160];
	const char *maj = "?", *min = "?";

	dat_strerror(r, &maj, &min);
	snprintf(buf, sizeof(buf), "0x%08x %s %s", (unsigned)r, maj, min);
	return buf;
}

static void print_address(const DAT_IA_ADDRESS_PTR addr)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
	char buf[INET_ADDRSTRLEN] = "?";

	if (sin && sin->sin_family == AF_INET)
		inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
	printf("  %-34s %s\n", "ia_address", buf);
}

static void print_ia(const DAT_IA_ATTR *a)
{
	printf("IA attributes\n");
	printf("  %-34s %s\n", "adapter_name", a->adapter_name);
	printf("  %-34s %s\n", "vendor_name", a->vendor_name);
	print_address(a->ia_address_ptr);
	printf("  %-34s %d\n", "max_eps", a->max_eps);
	printf("  %-34s %d\n", "max_dto_per_ep", a->max_dto_per_ep);
	printf("  %-34s %d / %d\n", "max_rdma_read_per_ep in/out",
	       a->max_rdma_read_per_ep_in, a->max_rdma_read_per_ep_out);
	printf("  %-34s %d\n", "max_evds", a->max_evds);
	printf("  %-34s %d\n", "max_evd_qlen", a->max_evd_qlen);
	printf("  %-34s %d\n", "max_iov_segments_per_dto",
	       a->max_iov_segments_per_dto);
	printf("  %-34s %d\n", "max_lmrs", a->max_lmrs);
	printf("  %-34s %llu\n", "max_lmr_block_size",
	       (unsigned long long)a->max_lmr_block_size);
	printf("  %-34s %d\n", "max_pzs", a->max_pzs);
	printf("  %-34s %llu\n", "max_message_size",
	       (unsigned long long)a->max_message_size);
	printf("  %-34s %llu\n", "max_rdma_size",
	       (unsigned long long)a->max_rdma_size);
	printf("  %-34s %d\n", "max_rmrs", a->max_rmrs);
	printf("  %-34s %d\n", "max_srqs", a->max_srqs);
	printf("  %-34s %s\n", "extension_supported",
	       a->extension_supported == DAT_EXTENSION_IW ? "DAT_EXTENSION_IW"
	       : a->extension_supported == DAT_EXTENSION_IB ? "DAT_EXTENSION_IB"
							    : "none");
	printf("  %-34s %d\n", "extension_version", a->extension_version);
}

static void print_provider(const DAT_PROVIDER_ATTR *p)
{
	printf("Provider attributes\n");
	printf("  %-34s %s\n", "provider_name", p->provider_name);
	printf("  %-34s %u.%u\n", "provider_version",
	       p->provider_version_major, p->provider_version_minor);
	printf("  %-34s %u.%u\n", "dapl_version", p->dapl_version_major,
	       p->dapl_version_minor);
	printf("  %-34s %s\n", "is_thread_safe",
	       p->is_thread_safe ? "TRUE" : "FALSE");
	printf("  %-34s %d\n", "max_private_data_size",
	       p->max_private_data_size);
	printf("  %-34s %s\n", "srq_supported",
	       p->srq_supported ? "TRUE" : "FALSE");
	for (int i = 0; i < p->num_provider_specific_attr; i++)
		printf("  %-34s %s\n", p->provider_specific_attr[i].name,
		       p->provider_specific_attr[i].value);
}

static int usage(FILE *f, int status)
{
	fprintf(f, "usage: iwinfo [IA-NAME]\n"
		   "       iwinfo --conf\n"
		   "       iwinfo --stats [PID]\n");
	return status;
}

static int query_ia(char *name)
{
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
	DAT_IA_ATTR ia_attr;
	DAT_PROVIDER_ATTR prov_attr;
	DAT_RETURN r;

	r = dat_ia_open(name, 8, &async_evd, &ia);
	if (r != DAT_SUCCESS) {
		fprintf(stderr, "dat_ia_open(%s): %s\n", name, err_str(r));
		return 1;
	}
	r = dat_ia_query(ia, &async_evd, DAT_IA_FIELD_ALL, &ia_attr,
			 DAT_PROVIDER_FIELD_ALL, &prov_attr);
	if (r != DAT_SUCCESS) {
		fprintf(stderr, "dat_ia_query: %s\n", err_str(r));
		dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
		return 1;
	}
	printf("Opened %s\n", name);
	print_ia(&ia_attr);
	print_provider(&prov_attr);
	r = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
	if (r != DAT_SUCCESS) {
		fprintf(stderr, "dat_ia_close: %s\n", err_str(r));
		return 1;
	}
	return 0;
}

static int stats(int argc, char **argv)
{
	char *end;
	long pid;

	if (argc < 3)
		return iwinfo_stats_list();
	pid = strtol(argv[2], &end, 10);
	if (argc > 3 || !*argv[2] || *end || pid <= 0)
		return usage(stderr, 2);
	return iwinfo_stats_pid(pid);
}

int main(int argc, char **argv)
{
	char *arg = argc > 1 ? argv[1] : (char *)"iw-lo";
	int r;

	if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
		return usage(stdout, 0);
	if (!strcmp(arg, "--stats"))
		return stats(argc, argv);
	if (!strcmp(arg, "--conf"))
		return iwinfo_conf() ? 1 : 0;
	if (arg[0] == '-' || argc > 2)
		return usage(stderr, 2);
	r = query_ia(arg);
	/* A dat.conf entry that does not resolve is reported, not fatal:
	 * the IA asked for opened. */
	(void)iwinfo_conf();
	return r;
}
