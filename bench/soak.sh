#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/soak.sh [--cycles N] [--minutes M] [--interval S] [--out DIR] [BUILDDIR]
#
# A soak of the provider (iw-lo through libdat2, DAT_OVERRIDE=BUILDDIR/
# dat.conf) in two phases, printing TAP:
#   1. N connect / transfer / disconnect cycles (default 10000) between a
#      t_cycles server and client (test/dapltest/t_cycles.c: Send echo,
#      RDMA Write, RDMA Read back, every byte checked, graceful close);
#   2. M minutes (default 60, decimals allowed) of mixed dapltest traffic
#      against one dapltest server: transaction mixes (send/receive, RDMA
#      Write and Read, several segments, data validated by both sides,
#      waiting and polling, 1 to 4 threads, 1 to 8 EPs, PSP and RSP) and
#      performance runs in rotation, each judged by its output as
#      test/dapltest_suite.sh does; then the quit test, after which the
#      server must exit cleanly.
# Every S seconds (default 5) it samples the resident set (VmRSS), open
# descriptors and threads of the long-lived provider processes (the
# cycles server and client, the dapltest server, the latter also after
# each client run, when it is idle) into DIR/samples.csv:
#   time_s,phase,process,pid,state,rss_kib,fds,threads
# At the end it prints, per process, the first sample after a warm-up
# (the first tenth of the samples; for the dapltest server at least four
# rotations of the client kinds), the last and the maximum of each
# figure, and fails when the last exceeds the first by more than
# SOAK_RSS_TOL_KIB (default 2048) of resident set, SOAK_FD_TOL (0)
# descriptors (SOAK_FD_TOL_BUSY, 2, for the cycles processes, sampled
# inside or between connections; the client checks its own descriptors
# between cycles exactly) or SOAK_THREAD_TOL (0) threads.  The dapltest server is
# judged on its idle samples only (a client's threads come and go), after
# four rotations of the client kinds.  So that the resident set follows
# what is allocated rather than glibc's high-water marks, the processes
# run with SOAK_MALLOC_TUNABLES (GLIBC_TUNABLES: one arena, fixed mmap
# and trim thresholds of 64 KiB; empty: glibc's defaults).  With a
# sanitizer build the resident set is shown, not judged.
#
# DIR defaults to bench/soak-YYYYmmdd-HHMMSS/ (logs of every run too).
# Environment: SOAK_QUAL (t_cycles' qualifier, 61900), SOAK_DT_PORT
# (dapltest's, 62050), SOAK_DT_ITER (iterations per dapltest run, 2000),
# IW_TOOL_TIMEOUT (seconds per dapltest client run, 120).
# Exit status: 0 when every run was clean and nothing grew, 1 otherwise,
# 2 on a usage error.  test/soak_short.sh runs a short one in make check.
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
ia=iw-lo
host=127.0.0.1

usage() {
	echo "usage: bench/soak.sh [--cycles N] [--minutes M] [--interval S] [--out DIR] [BUILDDIR]"
}

cycles=10000 minutes=60 interval=5 out=
while [ $# -gt 0 ]; do
	case $1 in
	--cycles) cycles=$2; shift 2 ;;
	--minutes) minutes=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
done
case $cycles$interval in *[!0-9]*) usage >&2; exit 2 ;; esac
case $minutes in '' | *[!0-9.]*) usage >&2; exit 2 ;; esac
[ "$interval" -ge 1 ] || { usage >&2; exit 2; }

# shellcheck source=test/tool_lib.sh
. "$top/test/tool_lib.sh"
builddir=$(cd "${1:-$top/build}" && pwd) || exit 2
DAT_OVERRIDE=$builddir/dat.conf
export DAT_OVERRIDE
[ -r "$DAT_OVERRIDE" ] || { echo "Bail out! no $DAT_OVERRIDE (build first)"; exit 1; }
cyc=$builddir/test/dapltest/t_cycles
if [ ! -x "$cyc" ]; then
	make -C "$builddir" -s test/dapltest/t_cycles >/dev/null 2>&1 ||
		{ echo "Bail out! cannot build $cyc"; exit 1; }
fi
out=${out:-$here/soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
logdir=$out
csv=$out/samples.csv
echo "time_s,phase,process,pid,state,rss_kib,fds,threads" >"$csv"
limit=${IW_TOOL_TIMEOUT:-120}
n=0
failed=0
QUAL=${SOAK_QUAL:-61900}
PORT=${SOAK_DT_PORT:-62050}
ITER=${SOAK_DT_ITER:-2000}
BAD_CRASH='[Ss]egmentation|[Aa]bort|AddressSanitizer|UndefinedBehavior|runtime error'
BAD="[Ee]rror|[Ff]ail|FAIL|[Ww]arning|[Mm]ismatch|bad (dis)?connect|[Cc]annot|Could not|$BAD_CRASH"
GLIBC_TUNABLES=${SOAK_MALLOC_TUNABLES-glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=65536}
export GLIBC_TUNABLES
t_start=$(date +%s.%N)
last_sample=0
live_pids=

# Whatever happens, no process of ours outlives the script.
cleanup() {
	for p in $live_pids; do
		kill -9 "$p" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

now_s() {	# seconds since the start, to the millisecond
	awk -v s="$t_start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.3f", n - s }'
}

# sample PHASE NAME PID STATE: one CSV row, if the process is alive and
# not already exiting (its descriptors gone).
sample() {
	status=/proc/$3/status
	[ -r "$status" ] || return 0
	rss=$(awk '/^VmRSS:/ { print $2 }' "$status")
	thr=$(awk '/^Threads:/ { print $2 }' "$status")
	fds=$(ls "/proc/$3/fd" 2>/dev/null | wc -l)
	[ -n "$rss" ] && [ "$fds" -gt 0 ] &&
		echo "$(now_s),$1,$2,$3,$4,$rss,$fds,$thr" >>"$csv"
}

# idle_sample PID: an idle sample of the dapltest server.  dapltest's
# own per-client threads end a moment after their client: wait (up to
# 3 s) for the thread count to come back to the first idle sample's, so
# a late exit is not taken for a leaked thread while one that never
# ends still shows.
idle_sample() {
	if [ -n "$idle_threads" ]; then
		tries=30
		while [ "$tries" -gt 0 ] &&
		    [ "$(awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0)" -gt "$idle_threads" ]; do
			sleep 0.1
			tries=$((tries - 1))
		done
	fi
	sample dapltest server "$1" idle
	[ -n "$idle_threads" ] ||
		idle_threads=$(awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
}

# due: whether INTERVAL seconds have passed since the last periodic sample.
due() {
	t=$(date +%s)
	[ $((t - last_sample)) -ge "$interval" ] || return 1
	last_sample=$t
}

# ----------------------------------------------------------- phase 1
cycles_phase() {
	echo "# phase 1: $cycles connect/transfer/disconnect cycles (t_cycles)"
	wait_ports_free "$QUAL"
	"$cyc" --server "$QUAL" >"$out/cycles-server.log" 2>&1 &
	spid=$!
	live_pids="$live_pids $spid"
	wait_listening t_cycles "$spid"
	"$cyc" --client "$QUAL" "$cycles" --quit >"$out/cycles-client.log" 2>&1 &
	cpid=$!
	live_pids="$live_pids $cpid"
	sample cycles server "$spid" busy
	sample cycles client "$cpid" busy
	while kill -0 "$cpid" 2>/dev/null; do
		if due; then
			sample cycles server "$spid" busy
			sample cycles client "$cpid" busy
		fi
		sleep 0.2
	done
	wait "$cpid"
	cst=$?
	why=$(judge "$out/cycles-client.log" "$cst" "^$cycles cycles ok, 0 failed" "$BAD_CRASH")
	tap_result "$cycles cycles, every one connected, validated and closed" "$why" "$out/cycles-client.log"
	grep -h 'cycles ok' "$out/cycles-client.log" | diag
	reap "$spid" 15 "$out/cycles-server.log"
	why=$(judge "$out/cycles-server.log" "$waited" "^served $((cycles + 1)) cycles, 0 failed" "$BAD_CRASH")
	tap_result "the cycles server served them all and exits after the quit cycle" "$why" "$out/cycles-server.log"
}

# ----------------------------------------------------------- phase 2
# The rotation of dapltest clients: transaction mixes, data validated
# (-V), and performance runs (segment sizes are multiples of 64: see
# test/dapltest_suite.sh).
DT_KINDS=6
dt_case() {	# INDEX: sets args and done for one client run
	mix="client SR 1024 2 server SR 1024 client RW 4096 2 server RW 2048 client RR 4096 server RR 8192"
	done_T='Stats ----|Test completed successfully'
	case $(($1 % DT_KINDS)) in
	0) done=$done_T; args="-T T -s $host -D $ia -n $PORT -V -i $ITER -t 1 -w 1 $mix" ;;
	1) done=$done_T; args="-T T -s $host -D $ia -n $PORT -V -i $ITER -t 2 -w 8 -P $mix" ;;
	2) done=$done_T; args="-T T -s $host -D $ia -n $PORT -V -i $ITER -t 4 -w 2 -r $mix" ;;
	3) done='^raw: R[RW], '; args="-T P -s $host -D $ia -n $PORT -i $ITER -p 16 -m b RW 65536 2" ;;
	4) done=$done_T; args="-T T -s $host -D $ia -n $PORT -V -i $ITER -t 4 -w 4 client SR 256 server SR 256 client RW 4096 server RR 4096" ;;
	*) done='^raw: R[RW], '; args="-T P -s $host -D $ia -n $PORT -i $ITER -p 8 -m p RR 16384 1" ;;
	esac
}

dapltest_phase() {
	echo "# phase 2: $minutes minutes of dapltest traffic"
	wait_ports_free "$PORT"
	# shellcheck disable=SC2086 # tool_env is a word list
	env $tool_env dapltest -T S -D $ia -n $PORT >"$out/dapltest-server.log" 2>&1 &
	dpid=$!
	live_pids="$live_pids $dpid"
	wait_listening dapltest "$dpid"
	end=$(awk -v m="$minutes" -v t="$(date +%s)" 'BEGIN { printf "%d", t + m * 60 }')
	runs=0 bad_runs=0 idle_threads=
	idle_sample "$dpid"
	while [ "$(date +%s)" -lt "$end" ] && kill -0 "$dpid" 2>/dev/null; do
		dt_case "$runs"
		log=$out/dapltest-run$runs.out
		# shellcheck disable=SC2086
		timeout -k 5 "$limit" env $tool_env dapltest $args >"$log" 2>&1 &
		bg=$!
		while kill -0 "$bg" 2>/dev/null; do
			due && sample dapltest server "$dpid" busy
			sleep 0.2
		done
		wait "$bg"
		rst=$?
		why=$(judge "$log" "$rst" "$done" "$BAD")
		if [ -n "$why" ]; then
			bad_runs=$((bad_runs + 1))
			echo "# dapltest run $runs ($args): $why"
		else
			rm -f "$log"	# clean runs leave nothing behind
		fi
		runs=$((runs + 1))
		idle_sample "$dpid"
	done
	tap_result "$runs dapltest runs over $minutes minutes, every one clean" \
		"$([ "$bad_runs" -eq 0 ] || echo "$bad_runs failed (logs in $out)")"
	run_dapltest_quit
}

run_dapltest_quit() {
	log=$out/dapltest-quit.out
	# shellcheck disable=SC2086
	timeout -k 5 "$limit" env $tool_env dapltest -T Q -s $host -D $ia -n $PORT >"$log" 2>&1
	rst=$?
	why=$(judge "$log" "$rst" 'End of Work' "$BAD")
	tap_result "the quit test" "$why" "$log"
	reap "$dpid" 15 "$out/dapltest-server.log"
	why=$(judge "$out/dapltest-server.log" "$waited" 'DT_cs_Server .*Exiting' "$BAD")
	tap_result "the dapltest server exits cleanly, no error in its log" \
		"$why" "$out/dapltest-server.log"
}

# ----------------------------------------------------------- verdict
# One line per process: first (after the warm-up) / last / max of each
# figure; "grew" when a last exceeds its first beyond the tolerance.
growth() {
	# A sanitizer's quarantine makes the resident set grow: not judged.
	rtol=${SOAK_RSS_TOL_KIB:-2048}
	[ -n "$san_kind" ] && rtol=999999999
	awk -F, -v rtol="$rtol" -v ftol="${SOAK_FD_TOL:-0}" \
	    -v ftol_busy="${SOAK_FD_TOL_BUSY:-2}" \
	    -v ttol="${SOAK_THREAD_TOL:-0}" -v warm_dt="$((4 * DT_KINDS))" '
	NR == 1 { next }
	$2 == "dapltest" && $5 != "idle" { next }
	{ k = $2 " " $3; if (!(k in cnt)) order[++nk] = k
	  i = ++cnt[k]; rss[k, i] = $6; fd[k, i] = $7; th[k, i] = $8
	  busy[k] = $5 == "busy" }
	function judge(k, name, v, tol, skip,   n, f, l, m, i) {
		n = cnt[k]; f = v[k, skip + 1]; l = v[k, n]; m = f
		for (i = skip + 1; i <= n; i++) if (v[k, i] + 0 > m + 0) m = v[k, i]
		printf " %s %d/%d/%d", name, f, l, m
		return l - f > tol
	}
	END {
		for (j = 1; j <= nk; j++) {
			k = order[j]
			# Warm-up: a tenth of the samples; for the dapltest
			# server also four rotations of the client kinds.
			skip = int(cnt[k] / 10)
			if (k ~ /^dapltest/ && skip < warm_dt) skip = warm_dt
			printf "%s samples %d, warm-up %d:", k, cnt[k], skip
			if (cnt[k] < skip + 2) { print " too few samples"; continue }
			bad = judge(k, "rss_kib", rss, rtol, skip)
			# A busy process may be sampled inside a connection.
			bad += judge(k, "fds", fd, busy[k] ? ftol_busy : ftol, skip)
			bad += judge(k, "threads", th, ttol, skip)
			printf " %s\n", bad ? "GREW" : "flat"
		}
	}' "$csv"
}

verdict() {
	echo "# samples: $csv"
	[ -n "$san_kind" ] && echo "# $san_kind build: the resident set is shown, not judged"
	echo "# first (after warm-up)/last/max per process:"
	growth >"$out/growth.txt"
	diag <"$out/growth.txt"
	while read -r phase proc rest; do
		what="$phase $proc: resident set, descriptors and threads flat"
		case $rest in
		*"too few samples")
			n=$((n + 1))
			echo "ok $n - $what # SKIP too few samples after the warm-up"
			continue ;;
		*GREW) why="grew beyond the tolerance: $rest" ;;
		*) why= ;;
		esac
		tap_result "$what" "$why"
	done <"$out/growth.txt"
}

echo "# provider: $(head -n1 "$DAT_OVERRIDE")"
echo "# output: $out"
setup_sanitizers
[ "$cycles" -gt 0 ] && cycles_phase
if [ "$minutes" != 0 ] && [ -n "$minutes" ]; then
	if command -v dapltest >/dev/null 2>&1; then
		dapltest_phase
	else
		n=$((n + 1))
		echo "ok $n - dapltest phase # SKIP dapltest not installed (Debian dapl2-utils)"
	fi
fi
verdict
echo "1..$n"
[ "$failed" -eq 0 ]
