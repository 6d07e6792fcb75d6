/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: instance-data parsing (dapl_config_parse, the
 * dat.conf string "<netdev or IPv4> <tcp|udp> [key=value ...]").
 *
 * The input, NUL-terminated, is the instance data.  Invariants: both
 * strings of the result are NUL-terminated inside their arrays; an
 * accepted string yields fields within their documented ranges
 * (doc/instance-data.md) and has at least its two positional words; a
 * string of 256 bytes or more is refused; parsing is a pure function of
 * the string (a second parse gives the same bytes). */
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "fuzz_check.h"

static void check_config(const struct dapl_config *cfg, const char *s)
{
	FUZZ_CHECK(memchr(cfg->error, 0, sizeof(cfg->error)) != NULL,
		   "error[] not NUL-terminated");
	FUZZ_CHECK(memchr(cfg->where, 0, sizeof(cfg->where)) != NULL,
		   "where[] not NUL-terminated");
	if (strlen(s) >= 256)
		FUZZ_CHECK(cfg->error[0], "a %zu-byte string accepted",
			   strlen(s));
	if (cfg->error[0])
		return;
	FUZZ_CHECK(cfg->where[0] && !strpbrk(cfg->where, " \t"),
		   "device \"%s\"", cfg->where);
	FUZZ_CHECK(strstr(s, cfg->where) != NULL,
		   "device \"%s\" not from the string", cfg->where);
	FUZZ_CHECK(cfg->transport == IWE_TRANSPORT_TCP ||
		   cfg->transport == IWE_TRANSPORT_UDP,
		   "transport %d", (int)cfg->transport);
	FUZZ_CHECK(cfg->mpa_rev == 1 || cfg->mpa_rev == 2, "mpa_rev %d",
		   cfg->mpa_rev);
	FUZZ_CHECK(cfg->crc == 0 || cfg->crc == 1, "crc %d", cfg->crc);
	FUZZ_CHECK(cfg->rtr >= 0 && cfg->rtr <= 3, "rtr %d", cfg->rtr);
	FUZZ_CHECK(cfg->mpa_timeout_ms >= 1 && cfg->mpa_timeout_ms <= 3600000,
		   "mpa_timeout_ms %d", cfg->mpa_timeout_ms);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct dapl_config cfg;

	(void)argc;
	(void)argv;
	dapl_config_parse(&cfg, NULL);
	FUZZ_CHECK(cfg.error[0], "NULL instance data accepted");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dapl_config a, b;
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* Garbage in the result must come from the parser, not from us. */
	memset(&a, 0xA5, sizeof(a));
	memset(&b, 0x5A, sizeof(b));
	dapl_config_parse(&a, s);
	check_config(&a, s);
	dapl_config_parse(&b, s);
	FUZZ_CHECK(!memcmp(&a, &b, sizeof(a)), "two parses differ");
	free(s);
	return 0;
}
