#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# dapltest_suite.sh [BUILDDIR]: Debian's dapltest (dapl2-utils), the DAT
# conformance tool, against the build tree's provider over loopback; TAP.
#
# One dapltest server (-T S) serves every transaction and performance
# client; the limit and FFT tests run on their own; the quit test ends the
# server, which must then exit cleanly, and its whole log must be free of
# errors (the server validates data too).
#
# dapltest exits 0 whatever happened and its FFT cases print "Result: PASS"
# even after a failed call, so each run is judged by its output: exit
# status, no error line, and the line that only a completed run prints.
# Outputs are kept in BUILDDIR/test/dapltest_suite.d/.
#
# A ThreadSanitizer build of the provider (configure
# --enable-sanitizers=thread) runs the threaded transaction mixes only,
# with the TSan runtime preloaded into dapltest; a race report with a
# frame in libdaploiw fails the case (races wholly inside dapltest are
# its own).  IW_DAPLTEST_ITER overrides the iteration count of the large
# mixes (default 5000: at 10000 the three took 165 s of a CI run on a
# slow day; IW_DAPLTEST_ITER=10000 for a longer run).  IW_TOOL_IA names
# the IA (default iw-lo; iw-lo-udp runs over TRP/UDP).  The server and
# the clients may run in two network namespaces (tool_lib.sh,
# test/netns_tools.sh).

here=$(cd "$(dirname "$0")" && pwd)
ia=${IW_TOOL_IA:-iw-lo}
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
tool_setup "$1" dapltest_suite

# dapltest's default port, 42768, lies in Linux's ephemeral range; the
# server's control port and the FFT tests' qualifier are set outside it.
PORT=62000
FFT_PORT=62500
BIG=${IW_DAPLTEST_ITER:-5000}
# Every line dapltest prints when something went wrong contains one of
# these (its FFT "failed in file" lines, "Test Error", "Validation Error",
# "bad disconnect event", "Warning: ..._wait", "dat_..._create failed").
CRASH='[Ss]egmentation|[Aa]bort|AddressSanitizer|UndefinedBehavior|runtime error'
BAD="[Ee]rror|[Ff]ail|FAIL|[Ww]arning|[Mm]ismatch|bad (dis)?connect|unimplemented|[Cc]annot|Could not|$CRASH"
# The limit tests stop at the first failing call by design, and FFT
# descriptions say "fails": those runs are judged by narrower patterns.
BAD_LIMIT="with errors|error occurs|Cannot find|$CRASH"
BAD_FFT="failed in file|Error =|Result: [^P]|$CRASH"
out_ok_T='Stats ----|Test completed successfully'
srv_pid=

run_dapltest() {	# LOG ARGS...: one dapltest client run, status in $st
	log=$1
	shift
	# shellcheck disable=SC2086 # cli_pre and tool_env are word lists
	timeout -k 5 "$limit" $cli_pre env $tool_env dapltest "$@" >"$log" 2>&1
	st=$?
}

# client NAME DONE-REGEX BAD-REGEX ARGS...: one dapltest run, one point.
client() {
	name=$1 done=$2 bad=$3
	shift 3
	log=$logdir/$name.out
	run_dapltest "$log" "$@"
	tap_result "$name" "$(judge "$log" "$st" "$done" "$bad")" "$log"
}

trans() {	# NAME ARGS...: transaction test, data validated by both sides
	name=$1
	shift
	client "$name" "$out_ok_T" "$BAD" -T T -s $host -D $ia -n $PORT -V "$@"
}

perf() {	# NAME ARGS...: performance test; its result line starts "raw:"
	name=$1
	shift
	client "$name" '^raw: R[RW], ' "$BAD" -T P -s $host -D $ia -n $PORT "$@"
}

server_start() {
	wait_ports_free $PORT
	slog=$logdir/server.out
	# shellcheck disable=SC2086
	timeout -k 5 1500 $srv_pre env $tool_env dapltest -T S -D $ia -n $PORT >"$slog" 2>&1 &
	srv_pid=$!
	wait_listening dapltest "$srv_pid" $PORT
}

# The quit test, then the server must exit by itself, and its log (all of
# the run: it validates the data it receives) must show no error.
quit_and_check_server() {
	client quit 'End of Work' "$BAD" -T Q -s $host -D $ia -n $PORT
	reap "$srv_pid" 15 "$slog"
	why=$(judge "$slog" "$waited" 'DT_cs_Server .*Exiting' "$BAD")
	tap_result "server exits cleanly after the quit test, no error in its log" \
		"$why" "$slog"
}

transaction_cases() {
	# Mixed operations, several segments each (segment sizes are
	# multiples of the 64-byte optimal_buffer_alignment: dapltest's RDMA
	# validation assumes its aligned segments abut).
	mix="client SR 1024 2 server SR 1024 2 client RW 4096 3 server RW 2048 2 client RR 4096 2 server RR 8192"
	# shellcheck disable=SC2086 # $mix is a word list
	{
	trans T-sr-wait-1x1 -i 2000 -t 1 -w 1 client SR 4096 server SR 4096
	trans T-sr-poll-1x1 -i 2000 -t 1 -w 1 -P client SR 4096 server SR 4096
	trans T-mix-wait-1x1 -i 2000 -t 1 -w 1 $mix
	trans T-mix-poll-1x8 -i 2000 -t 1 -w 8 -P $mix
	trans T-mix-wait-4x1-rsp -i 2000 -t 4 -w 1 -r $mix
	trans T-reap-sends -i 2000 client SR 1024 -f server SR 1024 -f client RW 8192 server RR 8192
	trans T-big-wait-4x8 -i "$BIG" -t 4 -w 8 client SR 256 server SR 256 client RW 4096 server RR 4096
	trans T-big-poll-4x8 -i "$BIG" -t 4 -w 8 -P client SR 256 server SR 256 client RW 4096 server RR 4096
	trans T-big-wait-1x8-rsp -i "$BIG" -t 1 -w 8 -r client SR 1024 server SR 1024 client RW 8192 2 client RR 8192 2
	trans T-big-poll-4x1-rsp -i "$BIG" -t 4 -w 1 -r -P client SR 1024 server SR 1024 server RW 65536 server RR 65536
	}
}

perf_cases() {
	perf P-rw-bandwidth-poll -i 2000 -p 16 -m p RW 65536 1
	perf P-rw-bandwidth-block -i 2000 -p 16 -m b RW 65536 4
	perf P-rw-latency-poll -i 5000 -p 1 -m p RW 8 1
	perf P-rr-bandwidth-poll -i 2000 -p 16 -m p RR 65536 1
	perf P-rr-bandwidth-block -i 2000 -p 16 -m b RR 16384 2
	perf P-rr-latency-poll -i 5000 -p 1 -m p RR 8 1
}

# Every limit test on its own; -d makes dapltest print its verdict.
limit_cases() {
	for t in limit_ia limit_pz limit_cno limit_evd limit_rsp limit_psp \
		 limit_ep limit_lmr limit_rpost limit_size_lmr; do
		client "L-$t" 'Limit Testing Completed - Successfully' "$BAD_LIMIT" \
			-T L -D $ia -n $FFT_PORT -d $t
	done
}

# fft NAME FEATURE [CASES...]: every case must print "Result: PASS".
fft() {
	name=$1 feature=$2
	shift 2
	log=$logdir/$name.out
	run_dapltest "$log" -T F -D $ia -n $FFT_PORT -s $host -f "$feature" "$@"
	why=$(judge "$log" "$st" 'Result: PASS' "$BAD_FFT")
	results=$(grep -c 'Result:' "$log")
	if [ -z "$why" ] && [ "$#" -gt 0 ] && [ "$results" -ne "$#" ]; then
		why="$results results for $# cases"
	fi
	tap_result "$name" "$why" "$log"
}

fft_cases() {
	fft F-hwconn hwconn
	fft F-endpoint endpoint
	fft F-pz pz
	fft F-mem mem
	fft F-connmgt connmgt
	# Cases 13 and 15 pass the IA handle (the registry's small integer
	# index) as a CNO and an EVD handle; libdat2's dat_cno_query and
	# dat_evd_query dereference any handle they get, so dapltest dies in
	# the registry before our provider is called.  Case 5 (dat_cr_query)
	# is hard-coded "UNSUPP" in dapltest: it never creates a CR there
	# (dat_cr_query is covered by test/dapltest/t_connect).
	fft F-queryinfo queryinfo case0 case1 case2 case3 case4 case6 case7 \
		case8 case9 case10 case11 case12 case14 case16 case17
	for c in 5 13 15; do
		n=$((n + 1))
		echo "ok $n - F-queryinfo case$c # SKIP dapltest cannot run it (see the comment in $0)"
	done
}

if [ -n "$IW_SKIP_DEBIAN_TOOLS" ]; then
	echo "1..0 # SKIP Debian tools already run against this build's twin"
	exit 0
fi
if ! command -v dapltest >/dev/null 2>&1; then
	echo "1..1"
	echo "not ok 1 - dapltest not installed (Debian dapl2-utils)"
	exit 1
fi
echo "# provider: $(head -n1 "$DAT_OVERRIDE")"
echo "# outputs: $logdir"
setup_sanitizers
server_start
if [ "$san_kind" = tsan ]; then
	# The threaded mixes, fewer iterations: TSan slows them tenfold.
	mix="client SR 256 server SR 256 client RW 4096 server RR 4096 2"
	# shellcheck disable=SC2086
	{
	trans T-tsan-wait-4x8 -i 300 -t 4 -w 8 $mix
	trans T-tsan-poll-4x2 -i 300 -t 4 -w 2 -P $mix
	trans T-tsan-rsp-2x4 -i 300 -t 2 -w 4 -r $mix
	}
else
	transaction_cases
	perf_cases
fi
quit_and_check_server
if [ "$san_kind" != tsan ]; then
	limit_cases
	fft_cases
fi
echo "1..$n"
[ "$failed" -eq 0 ]
