/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Size arguments of the test programs (iwdtest, iwa2a): a byte count with
 * an optional K or M suffix, 1 B..1 GiB, and comma-separated lists of
 * them ("8,1500,4K,1M"). */
#ifndef IWD_SIZE_ARG_H
#define IWD_SIZE_ARG_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static inline int size_arg_parse(const char *p, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(p, &end, 10);

	if (end == p)
		return -1;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end || v < 1 || v > (1ull << 30))
		return -1;
	*out = (size_t)v;
	return 0;
}

/* Parses list (cut up in place) into sizes[0..max-1]: their count, or -1
 * for a bad size, too many, or none. */
static inline int size_arg_list(char *list, size_t *sizes, int max)
{
	char *save = NULL, *tok;
	int n = 0;

	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max || size_arg_parse(tok, &sizes[n]))
			return -1;
		n++;
	}
	return n ? n : -1;
}

#endif
