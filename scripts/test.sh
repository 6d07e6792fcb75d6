#!/bin/sh
# Runs every test suite: the normal build, the AddressSanitizer +
# UndefinedBehaviorSanitizer build, valgrind over the DAT suite, and the
# threaded cases (dapltest's threaded mixes, t_mpi, t_ssp_stress) under
# ThreadSanitizer.
# Ends with the line "N passed, N failed".
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
-h | --help)
	echo "usage: scripts/test.sh"
	echo "Installs what is missing (scripts/deps.sh), builds build/, build-san/,"
	echo "build-tsan/ and build-vg/, runs the suites in each (doc/testing.md),"
	echo "the fuzz targets, then the Debian packaging test once (test/packaging.sh)."
	echo "Ends with the line \"N passed, N failed, N skipped\"."
	exit 0 ;;
esac
. "$top/scripts/deps.sh"
cd "$top" || exit 1
status=0

run_suite() {	# name dir wrapper tests configure-options...
	name=$1; dir=$2; wrapper=$3; tests=$4; shift 4
	echo "== $name"
	rm -f "$dir"/test/*.trs "$dir"/test/*/*.trs
	if ! "$top/scripts/build.sh" "$dir" "$@"; then
		echo "build failed: $name"
		echo ":test-result: ERROR build ($name)" > "$dir.build-failed.trs"
		status=1
		return
	fi
	rm -f "$dir.build-failed.trs"
	if [ -n "$tests" ]; then
		(cd "$dir" && make -s -k check TEST_WRAPPER="$wrapper" TESTS="$tests" >"$dir.check.out" 2>&1) || status=1
	else
		(cd "$dir" && make -s -k check TEST_WRAPPER="$wrapper" >"$dir.check.out" 2>&1) || status=1
	fi
	grep -E '^(# (TOTAL|PASS|FAIL|ERROR|SKIP)|(FAIL|ERROR):)' "$dir.check.out" || true
}

run_suite "unit and conformance tests" "$top/build" "" ""
# dapltest's large mixes run 10000 iterations in the plain build only.
IW_DAPLTEST_ITER=2000
export IW_DAPLTEST_ITER
run_suite "sanitizers (ASan + UBSan)" "$top/build-san" "" "" --enable-sanitizers
unset IW_DAPLTEST_ITER
# Races the tests provoke on purpose (t_crc_scribble) are not run here.
run_suite "ThreadSanitizer" "$top/build-tsan" "" \
	"test/dapltest/t_mpi test/dapltest/t_ssp_stress test/dapltest_suite.sh" \
	--enable-sanitizers=thread
IW_SKIP_DEBIAN_TOOLS=1
export IW_SKIP_DEBIAN_TOOLS
run_suite "valgrind" "$top/build-vg" "$top/test/valgrind.sh" ""
unset IW_SKIP_DEBIAN_TOOLS

# libFuzzer targets (clang; skipped with the reason when it is missing).
echo "== fuzzing (libFuzzer, ASan + UBSan)"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} FUZZ_TRS="$top/build-fuzz/test/fuzz/run.trs" \
	"$top/test/fuzz/run.sh" >"$top/build-fuzz.check.out" 2>&1 || status=1
grep -E '^(not ok|ok .*# SKIP)' "$top/build-fuzz.check.out" || true

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
