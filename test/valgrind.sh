#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Runs one test program under valgrind: any memory error or leak that the
# program itself owns fails the test (exit 99 is Automake's "hard error").
exec valgrind --quiet --trace-children=yes --error-exitcode=99 --leak-check=full \
	--errors-for-leak-kinds=definite,indirect \
	--suppressions="$(dirname "$0")/valgrind.supp" "$@"
