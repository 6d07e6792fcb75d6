#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Runs every test suite: the normal build, the AddressSanitizer +
# UndefinedBehaviorSanitizer build, valgrind over the normal build's DAT
# and engine unit programs, the threaded cases (t_mpi, t_ssp_stress,
# t_prog_call, t_prog_watch, t_slab) under ThreadSanitizer, the fuzz
# targets, make distcheck and the Debian packages.
# Ends with the line "N passed, N failed".
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
-h | --help)
	echo "usage: scripts/test.sh"
	echo "Installs what is missing (scripts/deps.sh), builds build/, build-san/"
	echo "and build-tsan/, runs the suites in each and valgrind over build/'s"
	echo "programs (results in build-vg/, doc/testing.md),"
	echo "the fuzz targets, then the Debian packaging test once (test/packaging.sh)."
	echo "Ends with the line \"N passed, N failed, N skipped\"."
	exit 0 ;;
esac
. "$top/scripts/deps.sh"
cd "$top" || exit 1
status=0

# Tests that die on a signal on purpose leave no core files behind.
ulimit -c 0

free_mib() { df -Pm "$top" | awk 'NR == 2 { print $4 }'; }
# A full disk fails tests for a reason that is not theirs: say how much
# there is, and when it runs short, drop the object files of a tree whose
# suite is done (its logs and results stay; a rebuild remakes them).
LOW_DISK_MIB=${IW_LOW_DISK_MIB:-2048}
prune_if_short() {	# dir
	[ "$(free_mib)" -lt "$LOW_DISK_MIB" ] || return 0
	find "$1" -name '*.o' -type f -delete
	echo "   (disk short: removed $1's object files, $(free_mib) MiB free)"
}
echo "== disk: $(free_mib) MiB free in $top"

started=$(date +%s)
section_time() {	# the seconds the last section took, for the CI budget
	now=$(date +%s)
	echo "   ($((now - started)) s)"
	started=$now
}

suite_summary() {	# check.out: automake's counts and the failures
	grep -E '^(# (TOTAL|PASS|FAIL|ERROR|SKIP)|(FAIL|ERROR):)' "$1" || true
}

run_suite() {	# name dir wrapper tests configure-options...
	name=$1; dir=$2; wrapper=$3; tests=$4; shift 4
	echo "== $name"
	rm -f "$dir"/test/*.trs "$dir"/test/*/*.trs
	if ! "$top/scripts/build.sh" "$dir" "$@"; then
		echo "build failed: $name ($(free_mib) MiB free)"
		echo ":test-result: ERROR build ($name)" > "$dir.build-failed.trs"
		status=1
		return
	fi
	rm -f "$dir.build-failed.trs"
	if [ -n "$tests" ]; then
		(cd "$dir" && make -s -k check TEST_WRAPPER="$wrapper" TESTS="$tests" \
			${IW_CHECK_PROGRAMS:+check_PROGRAMS="$IW_CHECK_PROGRAMS"} >"$dir.check.out" 2>&1) || status=1
	else
		(cd "$dir" && make -s -k check TEST_WRAPPER="$wrapper" >"$dir.check.out" 2>&1) || status=1
	fi
	suite_summary "$dir.check.out"
	prune_if_short "$dir"
	section_time
}

# The TESTS list of a configured tree, one per line.
all_tests() {
	printf 'print-tests:\n\t@echo $(TESTS)\n' |
		make -s -C "$1" -f Makefile -f - print-tests | tr ' ' '\n' | grep .
}

run_suite "unit and conformance tests" "$top/build" "" ""
# The ThreadSanitizer tree builds only the programs it runs (the
# progress loop's hand-overs between threads among them).
TSAN_PROGRAMS="test/dapltest/t_mpi test/dapltest/t_ssp_stress test/engine/t_prog_call test/engine/t_prog_watch test/engine/t_slab test/engine/t_prog_cpu"
# While valgrind runs (one thread at a time, a CPU mostly free), the two
# sanitizer trees compile in the background at SCHED_IDLE, which takes
# no CPU time any test's thread wants; their stages below then find them
# built (a failed build fails there again and is reported).
(chrt -i 0 sh -c '
	"$1/scripts/build.sh" "$1/build-san" --enable-sanitizers &&
	IW_CHECK_PROGRAMS=$2 "$1/scripts/build.sh" "$1/build-tsan" --enable-sanitizers=thread' \
	sh "$top" "$TSAN_PROGRAMS") >"$top/build-prebuild.check.out" 2>&1 &
prebuild=$!
# valgrind runs the programs that own memory in every DAT and engine object
# once; the timing-driven ones (faults, limits, cycles, floods, the fast
# path ring, the UDP loss loop) run in the plain and ASan trees, and under
# valgrind's one-thread-at-a-time scheduler they would test the scheduler.
VG_TESTS="test/dapltest/t_ia test/dapltest/t_connect test/dapltest/t_ssp
test/dapltest/t_srq_conn test/dapltest/t_instance test/dapltest/t_handles
test/dapltest/t_calls test/dapltest/t_evd test/dapltest/t_cno
test/dapltest/t_mem test/dapltest/t_ep test/dapltest/t_share test/dapltest/t_sp
test/dapltest/t_srq test/dapltest/t_ext_dispatch test/engine/t_engine_local
test/engine/t_mpa_parse test/engine/t_qp_loop test/engine/t_qp_term
test/engine/t_cm test/engine/t_cm_ssp test/engine/t_srq test/engine/t_mw
test/engine/t_trp_wire test/engine/t_cm_trp test/engine/t_prog_quiet
test/engine/t_qp_hold"
# The plain tree's programs are the ones valgrind wants (same configure
# options): no tree of its own to build.  The plain results of these
# programs are set aside while valgrind runs them, its results then move
# to build-vg/ and the plain ones come back.
move_results() {	# from-dir to-dir tests...: their .log and .trs, and the suite log
	from=$1; to=$2; shift 2
	for t in "$@" test-suite; do
		for f in "$from/$t.log" "$from/$t.trs"; do
			[ -f "$f" ] || continue
			mkdir -p "$to/$(dirname "$t")"
			mv "$f" "$to/$(dirname "$t")/"
		done
	done
}
echo "== valgrind"
rm -rf "$top/build-vg" "$top/build-plain.aside"
if [ -f "$top/build.build-failed.trs" ]; then
	echo "   (not run: the plain tree did not build)"
else
	move_results "$top/build" "$top/build-plain.aside" $VG_TESTS
	(cd "$top/build" && make -s -k check TEST_WRAPPER="$top/test/valgrind.sh" \
		TESTS="$(echo $VG_TESTS)" >"$top/build-vg.check.out" 2>&1) || status=1
	move_results "$top/build" "$top/build-vg" $VG_TESTS
	move_results "$top/build-plain.aside" "$top/build" $VG_TESTS
	rm -rf "$top/build-plain.aside"
	suite_summary "$top/build-vg.check.out"
fi
section_time

wait "$prebuild"

# dapltest's large mixes: 1000 iterations here (over tcp and udp), 5000
# and 2000 in the plain tree; TRP across namespaces at 1 % loss and with
# reordering here, 0, 1 and 10 % there (t_trp_loop drops 10 % here too).
IW_DAPLTEST_ITER=1000
IW_NETNS_LOSS=1
export IW_DAPLTEST_ITER IW_NETNS_LOSS
# The soak judges resident sets and descriptors: the plain build's job (a
# sanitizer's quarantine and threads blur both).
IW_SKIP_SOAK=1
export IW_SKIP_SOAK
# Debian's dtest/dtestcm/dtestsrq (also across namespaces) and the bench
# smoke run in the plain tree, and so does layers.sh (it reads object
# files, it runs nothing); dapltest's suite (our provider under its
# threads) runs here too.
SAN_TESTS="$(echo $(all_tests "$top/build" | grep -v -e debian_tools -e bench_smoke -e netns_tools -e layers))"
run_suite "sanitizers (ASan + UBSan)" "$top/build-san" "" "$SAN_TESTS" --enable-sanitizers
unset IW_DAPLTEST_ITER IW_NETNS_LOSS IW_SKIP_SOAK
# Races the tests provoke on purpose (t_crc_scribble) are not run here.
IW_CHECK_PROGRAMS=$TSAN_PROGRAMS
export IW_CHECK_PROGRAMS
run_suite "ThreadSanitizer" "$top/build-tsan" "" "$IW_CHECK_PROGRAMS" \
	--enable-sanitizers=thread
unset IW_CHECK_PROGRAMS
# The tarball builds, every test passes in a tree built from it against a
# read-only source tree, and make distclean leaves no file behind: the
# full distcheck, as distributors run it (a subset of TESTS hid files that
# other tests left).  It skips Debian's tools, which ran in build/
# (distcheck-quick.stamp in Makefile.am).  It compiles on every CPU and
# runs the tests one at a time (Makefile.am).
echo "== make distcheck"
if (cd "$top/build" && make -s -j"$(nproc)" distcheck) \
	>"$top/build-distcheck.check.out" 2>&1; then
	echo ":test-result: PASS" >"$top/build-distcheck.trs"
	grep -E '^# TOTAL' "$top/build-distcheck.check.out" || true
else
	echo ":test-result: FAIL" >"$top/build-distcheck.trs"
	echo "FAIL: make distcheck (build-distcheck.check.out)"
	tail -20 "$top/build-distcheck.check.out"
	status=1
fi
section_time

# Every tracked source, script and document carries the license line.
echo "== SPDX lines"
if "$top/scripts/spdx.sh" --check >"$top/build-spdx.check.out" 2>&1; then
	echo ":test-result: PASS" >"$top/build-spdx.trs"
else
	echo ":test-result: FAIL" >"$top/build-spdx.trs"
	cat "$top/build-spdx.check.out"
	status=1
fi

# libFuzzer targets (clang; skipped with the reason when it is missing).
echo "== fuzzing (libFuzzer, ASan + UBSan)"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} FUZZ_TRS="$top/build-fuzz/test/fuzz/run.trs" \
	"$top/test/fuzz/run.sh" >"$top/build-fuzz.check.out" 2>&1 || status=1
grep -E '^(not ok|ok .*# SKIP)' "$top/build-fuzz.check.out" || true
section_time

# Once, not per tree: build the Debian packages from a copy of the tree,
# install, run dtest through /etc/dat.conf, purge (test/packaging.sh).
echo "== Debian packages"
"$top/test/packaging.sh" "$top/build-packaging" >"$top/build-packaging.check.out" 2>&1 || status=1
awk '/^ok .*# SKIP/ || /^1\.\.0 # SKIP/ { print ":test-result: SKIP"; next }
     /^ok / { print ":test-result: PASS" }
     /^not ok / { print ":test-result: FAIL" }
     /^Bail out!/ { print ":test-result: ERROR" }' \
	"$top/build-packaging.check.out" >"$top/build-packaging.trs"
grep -E '^(not ok|ok .*# SKIP|Bail out!|# lintian)' "$top/build-packaging.check.out" || true
section_time

results() {	# every .trs of the four trees, and the build failures
	cat "$top"/build*/test/*.trs "$top"/build*/test/*/*.trs \
		"$top"/build*.trs 2>/dev/null
}
pass=$(results | grep -c '^:test-result: PASS')
fail=$(results | grep -cE '^:test-result: (FAIL|ERROR|XPASS)')
skip=$(results | grep -c '^:test-result: SKIP')
[ "$fail" -eq 0 ] || status=1
echo "$pass passed, $fail failed, $skip skipped"
exit $status
