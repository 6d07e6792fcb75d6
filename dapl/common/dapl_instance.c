/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Provider instances: one per dat.conf line naming this library, with
 * its instance data, "<netdev or IPv4 address> <tcp|udp> [key=value ...]"
 * (the grammar and every key are in doc/instance-data.md).  The list of
 * instances lives as long as the library: stale handle slots may still
 * point at an instance's DAT_PROVIDER after the registry removed it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"

static struct dapl_lock providers_lock = DAPL_LOCK_INITIALIZER;
static struct dapl_provider *providers;

#define DEFAULT_MPA_TIMEOUT_MS 5000

static int parse_bool(const char *v, int *out)
{
	if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes"))
		*out = 1;
	else if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"))
		*out = 0;
	else
		return -1;
	return 0;
}

static int parse_int(const char *v, int lo, int hi, int *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < lo || n > hi)
		return -1;
	*out = (int)n;
	return 0;
}

static int parse_rtr(const char *v, int *out)
{
	static const char *const names[] = { "none", "write", "read", "send" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(v, names[i])) {
			*out = i;
			return 0;
		}
	return -1;
}

/* The TRP test aid's spec, checked by the engine (a NULL device). */
static int parse_trp_test(const char *v, char *out, size_t cap)
{
	if (strlen(v) >= cap || iwe_device_set_trp_test(NULL, v))
		return -1;
	strcpy(out, v);
	return 0;
}

static void parse_option(struct dapl_config *cfg, char *opt)
{
	char *eq = strchr(opt, '=');
	int bad;

	if (!eq) {
		snprintf(cfg->error, sizeof(cfg->error),
			 "option \"%s\" is not key=value", opt);
		return;
	}
	*eq = '\0';
	const char *v = eq + 1;
	if (!strcmp(opt, "mpa_rev"))
		bad = parse_int(v, 1, 2, &cfg->mpa_rev);
	else if (!strcmp(opt, "crc"))
		bad = parse_bool(v, &cfg->crc);
	else if (!strcmp(opt, "rtr"))
		bad = parse_rtr(v, &cfg->rtr);
	else if (!strcmp(opt, "mpa_timeout"))
		bad = parse_int(v, 1, 3600 * 1000, &cfg->mpa_timeout_ms);
	else if (!strcmp(opt, "mtu"))
		bad = parse_int(v, 576, 65535, &cfg->mtu);
	else if (!strcmp(opt, "trp_test"))
		bad = parse_trp_test(v, cfg->trp_test,
				     sizeof(cfg->trp_test));
	else {
		snprintf(cfg->error, sizeof(cfg->error), "unknown option \"%s\"",
			 opt);
		return;
	}
	if (bad)
		snprintf(cfg->error, sizeof(cfg->error),
			 "bad value \"%s\" for option %s", v, opt);
}

void dapl_config_parse(struct dapl_config *cfg, const char *instance_data)
{
	char buf[256], *save = NULL, *tok;
	int n = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->mpa_rev = 2;
	cfg->crc = 1;
	cfg->rtr = 1;	/* write */
	cfg->mpa_timeout_ms = DEFAULT_MPA_TIMEOUT_MS;
	if (!instance_data || strlen(instance_data) >= sizeof(buf)) {
		snprintf(cfg->error, sizeof(cfg->error),
			 "missing or too long (at most %zu bytes)",
			 sizeof(buf) - 1);
		return;
	}
	strcpy(buf, instance_data);
	for (tok = strtok_r(buf, " \t", &save); tok && !cfg->error[0];
	     tok = strtok_r(NULL, " \t", &save), n++) {
		if (n == 0) {
			if (strlen(tok) >= sizeof(cfg->where))
				snprintf(cfg->error, sizeof(cfg->error),
					 "device name too long");
			else
				strcpy(cfg->where, tok);
		} else if (n == 1) {
			if (!strcmp(tok, "tcp"))
				cfg->transport = IWE_TRANSPORT_TCP;
			else if (!strcmp(tok, "udp"))
				cfg->transport = IWE_TRANSPORT_UDP;
			else
				snprintf(cfg->error, sizeof(cfg->error),
					 "transport \"%s\" is neither tcp nor udp",
					 tok);
		} else {
			parse_option(cfg, tok);
		}
	}
	if (!cfg->error[0] && n < 2)
		snprintf(cfg->error, sizeof(cfg->error),
			 "expected \"<netdev or IPv4 address> <tcp|udp> [options]\"");
}

/* ------------------------------------------------------ the instances */

void dapl_provider_add(struct dapl_provider *p)
{
	dapl_lock(&providers_lock);
	p->next = providers;
	providers = p;
	dapl_unlock(&providers_lock);
}

struct dapl_provider *dapl_provider_find(const char *ia_name)
{
	struct dapl_provider *p;

	dapl_lock(&providers_lock);
	for (p = providers; p; p = p->next)
		if (strcmp(p->ia_name, ia_name) == 0)
			break;
	dapl_unlock(&providers_lock);
	return p;
}

/* At unload (the registry dlcloses us at exit) the entries can go. */
__attribute__((destructor)) static void providers_fini(void)
{
	while (providers) {
		struct dapl_provider *p = providers;

		providers = p->next;
		free(p);
	}
}
