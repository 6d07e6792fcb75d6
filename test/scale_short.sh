#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# scale_short.sh [BUILDDIR]: many connections in make check, TAP --
# bench/iwscale with IW_SCALE_PSP (default 2000) connections over PSPs,
# IW_SCALE_SSP (500) over SSPs and 500 with small EP queues (4 DTOs each
# way): each run must set up every connection, use every one (RDMA
# Write, Read back, Sends, every byte checked), tear them all down and
# leave descriptors, threads and heap flat (doc/testing.md, "Connection
# scale").  No speed is asserted: the time bounds (IW_SCALE_TIMEOUT, 900
# s a run) only keep a hung run from hanging make check.  A run with one
# corrupted Write must fail.  Outputs in BUILDDIR/test/scale_short.d/.
# IW_SKIP_DEBIAN_TOOLS (set for the valgrind tree, whose twin ran this)
# or IW_SKIP_SCALE skip it.
here=$(cd "$(dirname "$0")" && pwd)
ia=iw-lo
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
tool_setup "$1" scale_short
echo "1..12"
if [ -n "$IW_SKIP_DEBIAN_TOOLS$IW_SKIP_SCALE" ]; then
	for k in 1 2 3 4 5 6 7 8 9 10 11 12; do
		echo "ok $k # SKIP IW_SKIP_SCALE or IW_SKIP_DEBIAN_TOOLS set"
	done
	exit 0
fi
iwscale=$builddir/bench/iwscale
[ -x "$iwscale" ] || { echo "Bail out! no $iwscale (make check builds it)"; exit 1; }
rm -f "$logdir"/*
limit=${IW_SCALE_TIMEOUT:-900}

# run TAG QUAL IWSCALE_ARGS...: one run, CSV in $out ($logdir/TAG.csv),
# stderr in $out.err; its exit status in $st.
run() {
	tag=$1 qual=$2
	shift 2
	out=$logdir/$tag.csv
	# Short busy measurements: only their validity is checked here.
	IWDAPL_CRC=0 timeout -k 5 "$limit" "$iwscale" -q "$qual" -i 2000 -t 0.2 --csv "$@" \
		>"$out" 2>"$out.err"
	st=$?
}

# rows_wrong CSV N: why the rows of a run of N connections are not what
# they must be (nothing when they are): every phase's rows present and
# valid, the use and the teardown of all N, no descriptor or thread left.
rows_wrong() {
	awk -F, -v n="$2" '
	NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	{
		k = $c["what"] "/" $c["side"]
		seen[k] = 1
		if ($c["valid"] != "OK") print "not valid: " k
		if ($c["what"] == "use" && $c["count"] != n) print "used " $c["count"] " of " n
		if ($c["what"] == "teardown" && $c["count"] != n) print "freed " $c["count"] " of " n
		if ($c["what"] ~ /^leak_/ && ($c["fds"] > 0 || $c["threads"] > 0))
			print k ": descriptors " $c["fds"] ", threads " $c["threads"]
	}
	END {
		m = split("tcp_setup/both setup/both use/both mem_connected/active mem_connected/passive " \
			  "mem_connected/kernel mem_idle/active mem_idle/passive poll_first/active " \
			  "pingpong_first/active write_first/active poll_lone/active " \
			  "pingpong_lone/active write_lone/active poll_busy/active pingpong_busy/active " \
			  "write_busy/active teardown/both leak_freed/active leak_freed/passive " \
			  "leak_closed/active leak_closed/passive", want, " ")
		for (i = 1; i <= m; i++)
			if (!(want[i] in seen)) print "no row " want[i]
	}' "$1"
}

# check NAME CONNS "IWSCALE ARGS" QUAL: a run of CONNS connections and
# its three test points.
check() {
	tag=$1 conns=$2
	# shellcheck disable=SC2086 # an option list
	run "$tag" "$4" -n "$conns" $3
	why=
	[ "$st" -eq 0 ] || why="iwscale exit status $st"
	tap_result "$tag: $conns connections set up, used and torn down (exit 0)" "$why" "$out.err"
	why=$(rows_wrong "$out" "$conns")
	tap_result "$tag: every row present and valid, every byte checked" "$why" "$out"
	why=$(awk -F, 'NR > 1 && $1 ~ /^leak_/ && $NF != "OK"' "$out")
	[ -s "$out" ] || why="no output"
	tap_result "$tag: descriptors, threads and heap flat after the teardown" "$why" "$out"
}

check psp "${IW_SCALE_PSP:-2000}" "" 64300
check ssp "${IW_SCALE_SSP:-500}" "--ssp" 64340
check depth4 500 "-d 4" 64380

# The checks can fail: one corrupted Write must fail the use, both sides'
# checks seeing it, and the run.
run corrupt 64420 -n 100 --corrupt
why=
[ "$st" -ne 0 ] || why="iwscale --corrupt exited 0"
grep -q '^use,.*,FAIL$' "$out" || why="${why:+$why; }no FAIL use row"
tap_result "a corrupted Write fails the use and the run" "$why" "$out" "$out.err"
why=
[ "$(grep -c 'connection 50: byte .* wrong' "$out.err")" -eq 2 ] ||
	why="the corrupted connection not reported by both sides"
tap_result "both sides report the corrupted connection's bytes" "$why" "$out.err"
why=
grep -q '^leak_freed,.*,OK$' "$out" || why="no valid leak rows after a failed use"
tap_result "a failed use still tears everything down" "$why" "$out"
[ $failed -eq 0 ]
