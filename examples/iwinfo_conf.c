/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwinfo: the dat.conf entries that load iwdapl (libdaploiw), and whether
 * the netdev or IPv4 address of each entry's instance data exists on this
 * host.  The file is $DAT_OVERRIDE, else /etc/dat.conf, as for libdat2. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iwinfo.h"

#define LIB_NAME "libdaploiw"

struct conf_entry {
	char name[128], lib[512], where[128], transport[16];
};

/* The next field of a dat.conf line: a word, or a "quoted string". */
static char *next_field(char **s)
{
	char *p = *s, *start;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || *p == '\n')
		return NULL;
	if (*p == '"') {
		start = ++p;
		while (*p && *p != '"')
			p++;
	} else {
		start = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
	}
	if (*p)
		*p++ = '\0';
	*s = p;
	return start;
}

/* 1 when the line is an entry of ours, filled into *e. */
static int parse_line(char *line, struct conf_entry *e)
{
	char *f[8], *s = line;
	int n = 0;

	while (n < 8 && (f[n] = next_field(&s)))
		n++;
	if (n < 7 || f[0][0] == '#' || !strstr(f[4], LIB_NAME))
		return 0;
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", f[0]);
	snprintf(e->lib, sizeof(e->lib), "%s", f[4]);
	/* Instance data: "<netdev or IPv4 address> [tcp|udp] [options]". */
	if (sscanf(f[6], "%127s %15s", e->where, e->transport) < 2 ||
	    (strcmp(e->transport, "tcp") != 0 &&
	     strcmp(e->transport, "udp") != 0))
		snprintf(e->transport, sizeof(e->transport), "tcp");
	return 1;
}

/* The IPv4 address the entry's netdev or address names here, or why
 * there is none. */
static int resolve(const char *where, char *addr, size_t len,
		   const char **why)
{
	struct ifaddrs *ifs, *i;
	struct in_addr want;
	int by_addr = inet_pton(AF_INET, where, &want) == 1, found = 0;

	if (!by_addr && !if_nametoindex(where)) {
		*why = "no such netdev";
		return 0;
	}
	if (getifaddrs(&ifs) != 0) {
		*why = "getifaddrs failed";
		return 0;
	}
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *sin =
			(const struct sockaddr_in *)(void *)i->ifa_addr;

		if (!sin || sin->sin_family != AF_INET)
			continue;
		if (by_addr ? sin->sin_addr.s_addr == want.s_addr
			    : strcmp(i->ifa_name, where) == 0) {
			inet_ntop(AF_INET, &sin->sin_addr, addr,
				  (socklen_t)len);
			found = 1;
		}
	}
	freeifaddrs(ifs);
	if (!found)
		*why = by_addr ? "no local interface has this address"
			       : "the netdev has no IPv4 address";
	return found;
}

static int print_entry(const struct conf_entry *e)
{
	char addr[INET_ADDRSTRLEN] = "";
	const char *why = "";
	int ok = resolve(e->where, addr, sizeof(addr), &why);

	printf("  %-16s %-16s %-4s %s", e->name, e->where, e->transport,
	       ok ? "resolves to " : "does not resolve: ");
	printf("%s%s\n", ok ? addr : why,
	       access(e->lib, R_OK) == 0 ? "" : " (library not readable)");
	return ok ? 0 : 1;
}

int iwinfo_conf(void)
{
	const char *path = getenv("DAT_OVERRIDE");
	char line[2048];
	struct conf_entry e;
	int bad = 0, n = 0;
	FILE *f;

	if (!path || !*path)
		path = "/etc/dat.conf";
	printf("dat.conf entries for iwdapl (%s)\n", path);
	f = fopen(path, "r");
	if (!f) {
		printf("  (cannot read %s)\n", path);
		return 1;
	}
	while (fgets(line, sizeof(line), f))
		if (parse_line(line, &e)) {
			bad += print_entry(&e);
			n++;
		}
	fclose(f);
	if (!n)
		printf("  (none)\n");
	return bad;
}
