#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# test/fuzz/run.sh [target...]: build the libFuzzer targets (clang, ASan +
# UBSan, out of tree) if needed, replay the committed reproducers, then
# fuzz each target for a bounded time.  TAP on stdout, one line per
# reproducer and per target:
#   ok 3 - fuzz_rx: 123456 execs (2057/s), cov 789, no finding
# A finding fails its target and names the reproducer to run.
#
# Environment:
#   FUZZ_SECONDS  fuzzing time per target (default 60)
#   FUZZ_JOBS     targets fuzzed at once (default: the number of CPUs)
#   FUZZ_BUILD    build tree (default <top>/build-fuzz)
#   FUZZ_TRS      also write the results as an Automake .trs file there
#                 (scripts/test.sh counts it)
#   FUZZ_ALLOW    known findings to fuzz past (default: every id listed in
#                 test/fuzz/known, which are bugs already reported)
# Targets: the names of test/fuzz/fuzz_<name>.c that define
# LLVMFuzzerTestOneInput (default: all).  doc/testing.md has more.
top=$(cd "$(dirname "$0")/../.." && pwd)
src=$top/test/fuzz
build=${FUZZ_BUILD:-$top/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
out=$build/test/fuzz
known=$src/known
n=0
trs=""

tap() {	# result(PASS|FAIL|SKIP|XFAIL) line
	n=$((n + 1))
	case $1 in
	PASS) echo "ok $n - $2" ;;
	SKIP) echo "ok $n # SKIP $2" ;;
	XFAIL) echo "not ok $n - $2" ;;
	*) echo "not ok $n - $2" ;;
	esac
	trs="$trs:test-result: $1 $2
"
}

finish() {
	echo "1..$n"
	if [ -n "${FUZZ_TRS:-}" ]; then
		mkdir -p "$(dirname "$FUZZ_TRS")"
		global=PASS
		case $trs in *":test-result: FAIL"*) global=FAIL ;; esac
		printf ':global-test-result: %s\n:recheck: no\n:copy-in-global-log: no\n%s' \
			"$global" "$trs" >"$FUZZ_TRS"
	fi
	case $trs in *":test-result: FAIL"*) exit 1 ;; esac
	exit 0
}

# ------------------------------------------------------------ toolchain
[ -n "${FUZZ_TRS:-}" ] && rm -f "$FUZZ_TRS"
probe=$(mktemp -d) || exit 1
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
	>"$probe/p.c"
if ! command -v clang >/dev/null 2>&1; then
	reason="clang is not installed (Debian packages clang, libclang-rt-14-dev)"
elif ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
	reason="clang cannot link libFuzzer (Debian package libclang-rt-14-dev)"
else
	reason=""
fi
rm -rf "$probe"
if [ -n "$reason" ]; then
	tap SKIP "fuzzing: $reason"
	finish
fi

# ---------------------------------------------------------------- build
mkdir -p "$build" "$out"
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1)
if [ ! -f "$build/Makefile" ]; then
	(cd "$build" && "$top/configure" -q CC=clang --enable-werror --enable-fuzzing) \
		>"$out/build.log" 2>&1
fi
if ! (cd "$build" && make -j2 -s fuzz) >>"$out/build.log" 2>&1; then
	tap FAIL "build of the fuzz targets (see $out/build.log)"
	finish
fi

targets=$*
[ -n "$targets" ] ||
	targets=$(grep -l '^int LLVMFuzzerTestOneInput' "$src"/fuzz_*.c |
		sed 's|.*/fuzz_\(.*\)\.c$|\1|')
# Fresh seeds with this engine's STags next to the committed corpus.
rm -rf "$out/seeds"
"$out/fuzz_seeds" "$out/seeds" >"$out/seeds.log" 2>&1 ||
	tap FAIL "seed generator (see $out/seeds.log)"
allow=${FUZZ_ALLOW-$(sed -n 's/^\([a-z0-9-]*\)[[:space:]].*/\1/p' "$known" 2>/dev/null | paste -sd, -)}
UBSAN_OPTIONS=print_stacktrace=1
# Every hostile input earns a Terminate or refusal line in the provider's
# log: a write per iteration and a log of gigabytes.  The targets check
# the answers themselves.
IWDAPL_LOG=${IWDAPL_LOG:-none}
export UBSAN_OPTIONS IWDAPL_LOG
# libFuzzer drops crash-* files in the current directory when no prefix
# is given (replaying a reproducer): keep them in the build tree.
cd "$out" || exit 1

# ---------------------------------------------------------- reproducers
# test/fuzz/crashes/<target>/<id>: every finding ever made.  One that
# still fails is expected only while test/fuzz/known lists its id.
for t in $targets; do
	for f in "$src/crashes/fuzz_$t"/*; do
		[ -f "$f" ] || continue
		id=$(basename "$f")
		log=$out/repro-$t-$id.log
		if env -u FUZZ_ALLOW "$out/fuzz_$t" "$f" >"$log" 2>&1; then
			tap PASS "fuzz_$t: reproducer $id passes"
		elif grep -q "^$id[[:space:]]" "$known" 2>/dev/null; then
			tap XFAIL "fuzz_$t: reproducer $id still fails # TODO known finding: $(sed -n "s/^$id[[:space:]]*//p" "$known")"
		else
			tap FAIL "fuzz_$t: reproducer $id fails: $(grep -m1 -E 'FUZZ CHECK|SUMMARY' "$log") (log $log)"
		fi
	done
done

# ---------------------------------------------------------------- fuzz
# libFuzzer runs one thread per target: run as many targets at once as
# there are CPUs (the stage's time, not any target's, shrinks), then
# report each in order.
fuzz_one() {	# target: fuzz it, leave its exit status in fuzz_<t>.rc
	bin=$out/fuzz_$1
	# New inputs go to the first directory, kept between runs.
	corpora=$out/corpus/$1
	for d in "$out/seeds/fuzz_$1" "$src/corpus/fuzz_$1"; do
		[ -d "$d" ] && corpora="$corpora $d"
	done
	mkdir -p "$out/corpus/$1" "$out/findings"
	FUZZ_ALLOW=$allow "$bin" -max_total_time="$seconds" -timeout=20 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$out/findings/fuzz_$1-" $corpora >"$out/fuzz_$1.log" 2>&1
	echo $? >"$out/fuzz_$1.rc"
}
jobs_max=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
running=0
for t in $targets; do
	if [ "$running" -ge "$jobs_max" ]; then
		wait
		running=0
	fi
	rm -f "$out/fuzz_$t.rc"
	fuzz_one "$t" &
	running=$((running + 1))
done
wait
for t in $targets; do
	bin=$out/fuzz_$t
	log=$out/fuzz_$t.log
	rc=$(cat "$out/fuzz_$t.rc" 2>/dev/null || echo "none")
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
	what="fuzz_$t: ${execs:-0} execs (${rate:-0}/s), cov ${cov:-0}"
	if [ "$rc" = 0 ] && [ -z "$unit" ]; then
		tap PASS "$what, no finding"
	else
		why=$(grep -m1 -E 'FUZZ CHECK|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$log")
		tap FAIL "$what, FINDING: ${why:-exit $rc}; reproduce: $bin ${unit:-(none written, see $log)}"
	fi
done
finish
