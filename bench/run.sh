#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/run.sh [--out DIR] [--quick] [--rounds N] [--only LIST] [BUILDDIR]
#
# The provider (iw-lo through libdat2, IWDAPL_CRC=0 and 1 on both sides)
# next to plain TCP and libfabric's TCP provider, on loopback, in one run:
#   - RDMA Write, RDMA Read and Send bandwidth and message rate over a size
#     sweep, with a window of outstanding operations (test/dtest/window.h),
#     blocking in dat_evd_wait;
#   - ping-pong latency, one way (half a round trip): mean, median, 99th
#     percentile and max over N iterations, blocking (dat_evd_wait),
#     blocking with every wait sleeping at once (IWDAPL_WAIT_SPIN_US=0:
#     a peer that answers after the spin), polling (spinning
#     dat_evd_dequeue) and, at the first latency size
#     and for BENCH_WAIT0_ITERS iterations, polling with dat_evd_wait and
#     timeout 0; and requests now and then: an 8 B and a 64 KiB blocking
#     ping-pong whose client pauses 2 ms after each round trip
#     (BENCH_GAP_ITERS round trips, CRC off), next to plain TCP's;
#   - plain TCP (bench/tcp_baseline: one send() per message, TCP_NODELAY,
#     the same window rule; ping-pong blocking and busy-polling);
#   - libfabric TCP: fi_pingpong -p tcp -e msg (its latency is a mean;
#     Debian's libfabric-bin ships no fi_msg_bw/fi_rma_bw: "n/a");
#   - connection setup rate over a PSP and over an SSP, next to plain
#     TCP's connect-accept-close, and the SSP upgrade time (bench/iwcm);
#   - memory per idle EP and per connected idle EP (bench/iwmem);
#   - the udp transport (TRP over UDP, CRC off as TRP has none) next to
#     the tcp one: RDMA Write bandwidth (BENCH_UDP_SIZES, default 64, 4K,
#     64K, 1M) and 8 B ping-pong (also one whose client pauses 2 ms
#     after each round trip, BENCH_GAP_ITERS round trips: an RPC now and
#     then, each a lone request; with the pure acks both sides sent per
#     round trip, IWDAPL_TRP_STATS), at the loopback MTU (iw-lo-udp) and at
#     a path MTU of 1500 (instance data mtu=1500), and both transports
#     at 1500 in a network namespace whose loopback MTU is 1500 (root
#     only; BENCH_NETNS=0: not).  Under loss between two namespaces:
#     bench/udp_loss.sh;
#   - RDMA Write bandwidth at 64 KiB and 1 MiB, iwdapl CRC off, plain
#     TCP and iwdapl CRC on back to back, BENCH_PAIR_REPS times a round
#     (3; --quick: 1): the bandwidth targets take the median of all these
#     paired ratios (BENCH_PAIR_SECONDS per point, default twice
#     --seconds);
#   - the machine's own stalls: a thread spinning on each CPU for 1 s
#     (bench/stall_probe), the time taken from a thread that never
#     sleeps -- the floor under any polling ping-pong's worst round trip;
#   - the consumer patterns (bench/patterns.sh): RDMA Write ping-pong
#     polling memory, Read and Write rendezvous ping-pongs, a stream of
#     Read rendezvous, bidirectional RDMA Write bandwidth, two ping-pong
#     pairs at once (and bench/wake_probe beside them: the same exchange
#     without the provider, by each way of waiting), Debian's dtest -W -a;
#     next to iwdapl's CQ-polling Send ping-pong and plain TCP over a
#     dense size sweep;
#   - once a run, what a message costs the machine (bench/cost.sh:
#     system calls, context switches and CPU time per round trip or
#     message, next to plain TCP; needs perf);
#   - only when asked (--only scale; minutes a round): connection scale
#     (bench/scale.sh): 10,000 connections between two processes over
#     PSPs (default and small EP queues) and SSPs -- setup rate against
#     plain TCP connect/accept, every connection used, memory per
#     connected EP, one busy connection among the idle ones, teardown,
#     leaks.
# Every figure is measured in each of N rounds (default 5); the table
# shows the median of the rounds and their spread [min-max].
#
# Writes into DIR (default bench/results-YYYYmmdd-HHMMSS/, never deleted):
#   results.csv  one row per measurement and round (columns: doc/testing.md)
#   summary.csv  per figure: median, min and max over the rounds
#   report.txt   the tables and the target lines printed here
#   bandwidth.png, msgrate.png, latency.png (when gnuplot is installed)
#   logs/        every tool's output
#
# Options: --quick (1 round, 3 sizes, short budgets: a smoke run of some
# 35 s that also validates every transfer), --rounds N, --sizes LIST,
# --lat-sizes LIST, --seconds S (budget per bandwidth point), --only LIST
# (sections: base -- all of the above but the patterns, the costs and the
# scale --, patterns, or parts of it: wpp, rdv, rdvstream, bibw, twopair,
# a2a, dtestwa, dtestws, busy; cost; scale; default base,patterns,cost), --pattern-sizes
# LIST, --rdv-sizes LIST
# (the patterns' sweeps; see bench/patterns.sh).
# Environment: BENCH_WINDOW (default 32), BENCH_LAT_ITERS (10000),
# BENCH_WAIT0_ITERS (1000; --quick: 200), BENCH_GAP_ITERS (300; --quick:
# 100), BENCH_PAIR_SECONDS (twice --seconds),
# BENCH_PAIR_REPS (paired trios a round, 3; --quick: 1),
# BENCH_CYCLES (connection cycles, 5000), BENCH_EPS (1000), BENCH_BW_POLL=1
# (also measure bandwidth while polling), BENCH_PAT_SECONDS,
# BENCH_TWOPAIR_SECONDS, BENCH_DTEST_WA_TIMEOUT (bench/patterns.sh),
# BENCH_SCALE_N, BENCH_SCALE_DEPTH, BENCH_SCALE_INFLIGHT,
# BENCH_SCALE_TIMEOUT, BENCH_SCALE_ARGS (bench/scale.sh),
# BENCH_STRICT=1 (exit 2 when a
# target is missed), BENCH_TIMEOUT (seconds per tool run, 120), and
# IWDTEST, TCP_BASELINE, IWCM, IWMEM, STALL_PROBE, FI_PINGPONG, IWSCALE
# (tool paths).
# Exit status: 0, 1 if a run failed or a transfer did not validate, 2 on
# a usage error or (BENCH_STRICT=1) a missed target.

usage() {
	sed -n '3,4p' "$0" | sed 's/^# //' >&2
	exit 2
}

out= quick=0 rounds= sizes= lat_sizes= secs= only=base,patterns,cost pat_sizes= rdv_sizes=
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--out=*) out=${1#--out=}; shift ;;
	--quick) quick=1; shift ;;
	--rounds) rounds=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--lat-sizes) lat_sizes=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--pattern-sizes) pat_sizes=$2; shift 2 ;;
	--rdv-sizes) rdv_sizes=$2; shift 2 ;;
	-h|--help) usage ;;
	-*) echo "run.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -le 1 ] || usage

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench_lib.sh
. "$here/bench_lib.sh"
bench_setup "$1"

window=${BENCH_WINDOW:-32}
if [ $quick -eq 1 ]; then
	: "${rounds:=1}" "${sizes:=64,65536,1048576}" "${lat_sizes:=8}" "${secs:=0.05}"
	lat_iters=${BENCH_LAT_ITERS:-1000} cycles=${BENCH_CYCLES:-100} eps=${BENCH_EPS:-100}
	verify=		# every transfer checked
else
	: "${rounds:=5}" "${sizes:=8,64,256,1K,4K,16K,64K,256K,1M,4M}"
	: "${lat_sizes:=8,64,512,4K,64K}" "${secs:=0.2}"
	lat_iters=${BENCH_LAT_ITERS:-10000} cycles=${BENCH_CYCLES:-5000} eps=${BENCH_EPS:-1000}
	verify=--no-verify	# the last transfer of each test checked
fi
# Both ends of every pair get it: tcp_baseline's server follows its
# client's request, iwdtest's server its own flag (a server left to check
# every transfer cost iwdapl's bulk rows about 30 %: 64 KiB
# Writes at 2300 MB/s instead of 3300 on 2 CPUs, next to a plain TCP
# that checked only the last).
case $rounds in '' | *[!0-9]* | 0) echo "run.sh: --rounds wants a positive number" >&2; exit 2 ;; esac
for s in $(echo "$only" | tr ',' ' '); do
	case $s in
	base | patterns | wpp | rdv | rdvstream | bibw | twopair | a2a | dtestwa | dtestws | busy | scale | cost) ;;
	*) echo "run.sh: --only: unknown section $s" >&2; exit 2 ;;
	esac
done
# want SECTION: --only selected it (a part of the patterns: or all of them).
want() {
	case ,$only, in
	*,"$1",*) return 0 ;;
	*,patterns,*) [ "$1" != base ] && [ "$1" != scale ] && [ "$1" != cost ] ;;
	*) return 1 ;;
	esac
}
# Sizes in bytes, for the report and the plots.
bytes() {
	echo "$1" | tr ',' '\n' | awk '/[kK]$/ { print $0 * 1024; next }
		/[mM]$/ { print $0 * 1048576; next } { print $0 + 0 }' | paste -s -d,
}
size_bytes=$(bytes "$sizes")
udp_sizes=${BENCH_UDP_SIZES:-64,4K,64K,1M}
lat_bytes=$(bytes "$lat_sizes")
# Polling with dat_evd_wait(timeout 0): the first latency size only, and
# fewer iterations, as a provider whose timeout-0 wait does not drive
# progress can take milliseconds per round trip there.
wait0_size=${lat_bytes%%,*}
wait0_iters=${BENCH_WAIT0_ITERS:-$((lat_iters < 1000 ? lat_iters / 5 : 1000))}
# The ping-pong 2 ms apart: 500 round trips a second.
gap_iters=${BENCH_GAP_ITERS:-$([ $quick -eq 1 ] && echo 100 || echo 300)}
gap_sizes=8,64K
# The bandwidth targets' sizes, measured paired (see paired()).
pair_secs=${BENCH_PAIR_SECONDS:-$(awk -v s="$secs" 'BEGIN { print 2 * s }')}
pair_reps=${BENCH_PAIR_REPS:-$([ $quick -eq 1 ] && echo 1 || echo 3)}
log_tag=
# The patterns' settings and steps (patterns_round).
# shellcheck source=bench/patterns.sh
. "$here/patterns.sh"
# shellcheck source=bench/scale.sh
. "$here/scale.sh"

out=${out:-$top/bench/results-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
raw=$out/results.csv
echo "round,transport,crc,mode,op,size,window,iterations,seconds,MBps,msgs_per_s,lat_mean_us,lat_median_us,lat_p99_us,lat_max_us,rss_per_ep,heap_per_ep,valid" >"$raw"
fipp=${FI_PINGPONG:-$(command -v fi_pingpong)}
status=0

# to_raw TRANSPORT CRC MODE < tool CSV (iwdtest's columns): raw rows.
# $op_renames ("FROM:TO ..."): ops that go into other rows than the
# tool's mode names (the same measurement in another section).
op_renames=
to_raw() {
	awk -F, -v r="$round" -v t="$1" -v c="$2" -v m="$3" -v ren="$op_renames" '
	BEGIN { n = split(ren, rr, " "); for (i = 1; i <= n; i++) { split(rr[i], ft, ":"); to[ft[1]] = ft[2] } }
	$1 == "mode" || NF < 12 { next }
	{ printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,,,%d\n",
		r, t, c, m, ($1 in to) ? to[$1] : $1, $2, $8, $3, $4, $5, $9, $6, $10, $11, $12,
		$7 == "OK" }' >>"$raw"
}

# failed WHAT LOG: report a failed tool run.
failed() {
	echo "run.sh: $1 failed (log: $2):" >&2
	tail -n 5 "$2" 2>/dev/null | sed 's/^/  /' >&2
	status=1
}

log() {	# log NAME: the log file of this round's NAME
	echo "$out/logs/r$round-$1"
}

# iw CRC MODE "IWDTEST ARGS": one iwdtest pair; rows tagged CRC, MODE.
iw() {
	spin=
	case $2 in
	poll) pf=-p ;;
	poll_wait0) pf=--poll-wait0 ;;
	# Blocking, every wait sleeping at once: what a consumer sees whose
	# peer answers after the wait's spin (one that computes between
	# messages), as a thread blocked in recv() does.
	block_sleep) pf= spin=IWDAPL_WAIT_SPIN_US=0 ;;
	*) pf= ;;
	esac
	l=$(log "iw-crc$1-$2-$(echo "$3" | awk '{ print $2 }')$log_tag")
	pair_env="IWDAPL_CRC=$1 $spin"
	iw_pair "$pf -w 20 $verify" "$pf -w 20 --csv $verify $3" "$l" || failed "iwdtest ($3, CRC $1, $2)" "$l.err"
	to_raw iwdapl "$1" "$2" <"$l"
}

# The udp transport (TRP over UDP) at the loopback MTU and at a path MTU
# of 1500, through a dat.conf of this run's own (iw-lo-udp1500); none
# when the build's dat.conf has no iw-lo-udp.
udp_conf=
if awk '$1 == "iw-lo-udp" { found = 1 } END { exit !found }' "$DAT_OVERRIDE"; then
	udp_conf=$work/dat.conf
	{
		cat "$DAT_OVERRIDE"
		awk '$1 == "iw-lo-udp" { $1 = "iw-lo-udp1500"
			sub(/ udp"/, " udp mtu=1500\""); print }' "$DAT_OVERRIDE"
	} >"$udp_conf"
	# The MTU 1500 rows must really run at 1500 (its instance data was
	# once left unchanged, and they measured the loopback MTU).
	if ! grep -q '^iw-lo-udp1500 .*udp mtu=1500"' "$udp_conf"; then
		echo "run.sh: could not derive iw-lo-udp1500 from $DAT_OVERRIDE" >&2
		exit 1
	fi
fi
# Both transports at a path MTU of 1500: in a network namespace of this
# run whose loopback's MTU is 1500 (root only).  On the host's loopback
# the tcp transport runs at 65536 and cannot be set to 1500; there the
# MTU 1500 rows compare udp at 1500 with tcp at 65536.
ns1500=
if [ -n "$udp_conf" ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1 &&
	[ "${BENCH_NETNS:-1}" = 1 ]; then
	ns1500=iwbench-$$
	if ip netns add "$ns1500" 2>/dev/null &&
		ip -n "$ns1500" link set lo mtu 1500 up 2>/dev/null; then
		at_exit='ip netns del "$ns1500" 2>/dev/null'
	else
		ip netns del "$ns1500" 2>/dev/null
		echo "run.sh: no network namespace with a loopback MTU of 1500: udp/tcp at 1500 rows n/a" >&2
		ns1500=
	fi
fi

# udp IA TRANSPORT MODE "IWDTEST ARGS" [NETNS]: one iwdtest pair over IA
# (a udp IA, or iw-lo in NETNS), CRC off; rows tagged TRANSPORT (udp,
# udp1500, and in the MTU 1500 namespace udp_ns1500, tcp_ns1500), MODE.
udp() {
	pf=
	[ "$3" = poll ] && pf=-p
	l=$(log "$2-$3-$(echo "$4" | awk '{ print $2 }')")
	pair_env="DAT_OVERRIDE=$udp_conf IWDAPL_CRC=0 IWDAPL_TRP_STATS=1"
	if [ -n "$5" ]; then
		srv_pre="ip netns exec $5" cli_pre="ip netns exec $5"
	fi
	iw_pair "$pf -P $1 -w 20 $verify" "$pf -P $1 -w 20 --csv $verify $4" "$l" ||
		failed "iwdtest over $2 ($4, $3)" "$l.err"
	pair_env= srv_pre= cli_pre=
	to_raw "$2" - "$3" <"$l"
	acks_raw "$2" "$3" "$l"
}

# acks_raw TRANSPORT MODE LOG: after a udp ping-pong, the pure acks both
# sides sent (their QPs' IWDAPL_TRP_STATS lines, in LOG.err) per round
# trip, as op acks (lat_mean_us the figure; none over tcp, which has no
# such lines): an answer that carries the ack of the message it answers
# makes none.
acks_raw() {
	awk -v r="$round" -v t="$1" -v m="$2" '
	FNR == NR { if ($1 == "pingpong" && $2 == 8) it = $3; next }
	/TRP qp [0-9]+: sent/ { n++; for (i = 1; i < NF; i++) if ($i == "acks") a += $(i + 1) }
	END { if (it > 0 && n) printf "%s,%s,-,%s,acks,8,1,%d,,,,%.3f,,,,,,1\n", r, t, m, it, a / it }
	' FS=, "$3" FS=' ' "$3.err" >>"$raw"
}

# dtest_run IA LOG LIMIT NETNS DTEST_ARGS...: Debian's dtest over IA,
# server and client with DTEST_ARGS (in NETNS, if not empty), each
# within LIMIT seconds; the client's output in LOG, the server's in
# LOG.server.  Sets dtest_ok (1: PASSED on both sides) and dtest_secs
# (the wall time of the last attempt, server start to both ended).  The
# CRC off unless dtest_crc says (1: on, the provider's default).
dtestw=${DTEST:-$(command -v dtest)}
# Line-buffered, so that a run cut short by the time limit keeps the
# lines of the sizes it finished.
linebuf=
command -v stdbuf >/dev/null 2>&1 && linebuf="stdbuf -oL"
dtest_run() {
	ia=$1 l=$2 dlimit=$3 pre=
	[ -n "$4" ] && pre="ip netns exec $4"
	shift 4
	try=0
	while :; do
		# The round's thousands of connections leave TIME_WAIT sockets
		# on ephemeral ports, and one on 45248 kept dtest's server from
		# its PSP (DAT_CONN_QUAL_IN_USE) in 4 of 5 rounds: gone, as
		# test/tool_lib.sh's wait_ports_free does (root).
		# shellcheck disable=SC2086
		$pre ss -K -tan state time-wait \
			'( sport = :45248 or sport = :15828 )' >/dev/null 2>&1
		t0=$(date +%s.%N)
		# shellcheck disable=SC2086
		DAT_OVERRIDE=${udp_conf:-$DAT_OVERRIDE} IWDAPL_CRC=${dtest_crc:-0} timeout -k 5 "$dlimit" $pre \
			$linebuf "$dtestw" -P "$ia" -s "$@" >"$l.server" 2>&1 &
		spid=$!
		# The client connects first to dtest's side channel (TCP
		# 15828), which tells it the server's address; the server
		# creates its PSP (qualifier 45248) only after that.
		# shellcheck disable=SC2086
		wait_listen 15828 $pre
		# shellcheck disable=SC2086
		DAT_OVERRIDE=${udp_conf:-$DAT_OVERRIDE} IWDAPL_CRC=${dtest_crc:-0} timeout -k 5 "$dlimit" $pre \
			$linebuf "$dtestw" -P "$ia" -h 127.0.0.1 "$@" >"$l" 2>&1 ||
			kill "$spid" 2>/dev/null
		# dtest's server writes its address on the side channel before
		# it creates its PSP, and a client whose IA opens fast (in a
		# namespace with only a loopback: under a millisecond) often
		# connects first: UNREACHABLE, and the server waits on.  That
		# race is dtest's (test/debian_tools.sh knows it too); up to 4
		# tries (2 of 3 failed in the namespace on 2 CPUs).
		early=0
		grep -q 'unexpected conn event.*UNREACHABLE' "$l" && early=1
		[ $early = 0 ] || kill "$spid" 2>/dev/null
		wait "$spid"
		dtest_secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
		try=$((try + 1))
		if [ $try -ge 4 ] || [ $early = 0 ]; then
			break
		fi
	done
	# dtest exits 0 when it fails: PASSED on both sides is the verdict.
	dtest_ok=0
	grep -q 'PASSED' "$l" && grep -q 'PASSED' "$l.server" && dtest_ok=1
}

# dtest_rows TRANSPORT CRC OP LOG: a row per "RDMA write PingPong: (N x
# SIZE) Total T us: latency L us" line of LOG (L: one way, the mean),
# valid = $dtest_ok.
dtest_rows() {
	awk -v r="$round" -v t="$1" -v c="$2" -v op="$3" -v ok="$dtest_ok" '
	/RDMA write PingPong:/ && / latency / {
		for (i = 1; i <= NF; i++) {
			if ($i == "Total") tot = $(i + 1) + 0
			if ($i == "latency") lat = $(i + 1) + 0
			if ($i ~ /^\(/) { n = substr($i, 2) + 0; sz = $(i + 2) + 0 }
		}
		if (tot > 0)
			printf "%s,%s,%s,poll,%s,%d,1,%d,%.6f,%.2f,%.0f,%s,,,,,,%d\n", r, t, c, op,
				sz, n, tot / 1e6, sz * n / tot, n / (tot / 1e6), lat, ok
	}' "$4" >>"$raw"
}

# dtest_w IA TRANSPORT CRC [NETNS]: Debian's dtest -W (an 8 B RDMA Write
# ping-pong; each side polls its Write's completion, then spins on the
# memory the peer writes) over IA; its "latency" is the one-way mean.
# A row tagged TRANSPORT, CRC, mode poll, op dtest_w; none without
# dtest (Debian dapl2-utils).
dtest_w() {
	[ -n "$dtestw" ] || return 0
	# Not in --quick: make check's smoke run would share dtest's fixed
	# qualifier with the Debian tool suites running beside it.
	[ $quick -eq 0 ] || [ "${BENCH_DTEST:-0}" = 1 ] || return 0
	l=$(log "dtest_w-$2")
	dtest_run "$1" "$l" "$limit" "$4" -W -b 8
	[ $dtest_ok = 1 ] || failed "dtest -W over $1" "$l"
	dtest_rows "$2" "$3" dtest_w "$l"
}

tcp() {	# tcp MODE "TCP_BASELINE ARGS"
	pf=
	[ "$1" = poll ] && pf=-p
	l=$(log "tcp-$1-$(echo "$2" | awk '{ print $2 }')$log_tag")
	# shellcheck disable=SC2086
	timeout -k 5 "$limit" "$tcpb" $pf --csv $verify $2 >"$l" 2>"$l.err" ||
		failed "tcp_baseline ($2, $1)" "$l.err"
	to_raw tcp - "$1" <"$l"
}

# fi_pingpong SIZE: libfabric's tcp provider (msg endpoints), which spins
# on its completion queue; "usec/xfer" is the mean one-way latency.
fi_pp() {
	[ -n "$fipp" ] || return 0
	next_qual
	l=$(log "fi_pingpong-$1")
	timeout -k 5 "$limit" "$fipp" -p tcp -e msg -I "$lat_iters" -S "$1" -B "$qual" \
		>"$l.server" 2>&1 &
	spid=$!
	wait_listen "$qual"
	timeout -k 5 "$limit" "$fipp" -p tcp -e msg -I "$lat_iters" -S "$1" -P "$qual" 127.0.0.1 \
		>"$l" 2>"$l.err"
	cst=$?
	[ $cst -eq 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" || cst=1
	if [ $cst -ne 0 ]; then	# a peer's failure is not ours: its figure is n/a
		echo "run.sh: fi_pingpong -S $1 failed (log: $l.err); libfabric TCP is n/a" >&2
		return
	fi
	# Its sizes read "8", "4k", "64k", "1m"; times "2.84s" or "842ms".
	awk -v r="$round" -v n="$lat_iters" '
	$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 {
		b = $1 + 0
		if ($1 ~ /k$/) b *= 1024; else if ($1 ~ /m$/) b *= 1048576; else if ($1 ~ /g$/) b *= 1073741824
		t = $5; s = t + 0
		if (t ~ /ms$/) s /= 1e3; else if (t ~ /us$/) s /= 1e6
		# MB/s one way, as the other ping-pongs count it (its own counts both)
		printf "%s,fi_tcp,-,poll,pingpong,%d,1,%s,%.6f,%.2f,%.0f,%s,,,,,,1\n", r, b, n, s,
			b * n / s / 1e6, n / s, $7
	}' "$l" >>"$raw"
}

# iwcm MODE [ROWMODE [CYCLES]]: connection cycles over a PSP or an SSP,
# or plain TCP's connect-accept-close (mode tcp, the yardstick); rows of
# mode ROWMODE (block).
cm() {
	next_qual
	l=$(log "iwcm-$1${2:+-$2}")
	IWDAPL_CRC=0 timeout -k 5 "$limit" "$iwcm" -m "$1" -n "${3:-$cycles}" -q "$qual" --csv \
		>"$l" 2>"$l.err" || failed "iwcm -m $1" "$l.err"
	if [ "$1" = tcp ]; then
		to_raw tcp - "${2:-block}" <"$l"
	else
		to_raw iwdapl 0 "${2:-block}" <"$l"
	fi
}

mem() {
	next_qual
	l=$(log iwmem)
	IWDAPL_CRC=0 timeout -k 5 "$limit" "$iwmem" -n "$eps" -q "$qual" --csv >"$l" 2>"$l.err" ||
		failed "iwmem" "$l.err"
	awk -F, -v r="$round" '$1 != "what" && NF >= 7 {
		printf "%s,iwdapl,0,block,mem_%s,0,,%s,,,,,,,,%s,%s,%d\n", r, $1, $2, $5, $6, $7 == "OK"
	}' "$l" >>"$raw"
}

# paired: RDMA Write bandwidth at the targets' sizes (64 KiB, 1 MiB),
# iwdapl CRC off, plain TCP, iwdapl CRC on, back to back in a few
# seconds, pair_reps times a round.  This machine has slow phases of
# several seconds in which everything -- plain TCP too -- takes 2-3
# times the CPU per byte; the sweeps, a minute apart, could land one
# column in such a phase and not the other (a round of 64 KiB Writes at
# 1300 MB/s beside TCP at 4100), and one trio of runs can still straddle
# a phase's edge (3 of 5 single trios did in one noisy run).  Each trio
# adds the ratio of each iwdapl run to the TCP run between them as a row
# of transport "ratio" (MBps = the ratio); the targets take the median
# of all these ratios.
paired() {
	steps="iw0 tcp iw1"
	# Neither CRC setting always goes first.
	[ $((round % 2)) -eq 0 ] && steps="iw1 tcp iw0"
	for rep in $(seq "$pair_reps"); do
		from=$(wc -l <"$raw")
		log_tag=-$rep
		for step in $steps; do
			case $step in
			tcp) tcp pair "-m stream -S 64K,1M -t $pair_secs --window $window" ;;
			*) iw "${step#iw}" pair "-m write -S 64K,1M -t $pair_secs --window $window" ;;
			esac
		done
		log_tag=
		steps=$(echo "$steps" | awk '{ print $3, $2, $1 }')
		awk -F, -v r="$round" -v from="$from" 'NR > from && $1 == r && $4 == "pair" && $11 > 0 {
			mb[$2 SUBSEP $3 SUBSEP $6] = $10
		}
		END {
			for (k in mb) {
				split(k, a, SUBSEP)
				t = mb["tcp", "-", a[3]]
				if (a[1] == "iwdapl" && t > 0)
					printf "%s,ratio,%s,pair,write,%s,,,,%.4f,,,,,,,,1\n", r, a[2], a[3], mb[k] / t
			}
		}' "$raw" >>"$raw"
	done
}

# The machine's own stalls of a spinning thread (bench/stall_probe, 1 s),
# as a row of its own: window = CPUs, iterations = seconds, MBps and
# msgs_per_s = stalls over 100 us and over 1 ms per second, lat_max_us =
# the longest.
stalls() {
	[ -x "$stallp" ] || return 0
	l=$(log stall_probe)
	timeout -k 5 "$limit" "$stallp" -t 1 --csv >"$l" 2>"$l.err" || {
		failed "stall_probe" "$l.err"
		return 0
	}
	awk -F, -v r="$round" '$1 == "stall" && NF >= 6 {
		printf "%s,machine,-,spin,stall,0,%s,%s,%s,%.2f,%.2f,,,,%s,,,1\n",
			r, $2, $3, $3, $4 / $3, $5 / $3, $6 }' "$l" >>"$raw"
}

echo "== iwdapl vs plain TCP vs libfabric TCP on loopback"
echo "   $rounds round(s); sizes $sizes, ${secs}s each, window $window; ping-pong $lat_iters iterations at $lat_sizes"
echo "   sections: $only${pat_parts:+; patterns at $pat_sizes (rendezvous $rdv_sizes), ${pat_secs}s each}"
want scale && echo "   scale: $scale_n connections, $scale_k connects in flight, small queues of $scale_depth; ${BENCH_SCALE_ARGS:+iwscale $BENCH_SCALE_ARGS; }a round takes minutes"
echo "   provider: $(awk '$1 == "iw-lo" { print $5; exit }' "$DAT_OVERRIDE"); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$fipp" ] || echo "   fi_pingpong not installed (Debian libfabric-bin): libfabric TCP is n/a"
echo "   results: $out"
bw_modes=block
[ "${BENCH_BW_POLL:-0}" = 1 ] && bw_modes="block poll"
# base_round: one round of everything but the patterns.
base_round() {
	for crc in 0 1; do
		for m in $bw_modes; do
			iw $crc "$m" "-m write,read,send -S $sizes -t $secs --window $window"
		done
		for m in block block_sleep poll; do
			iw $crc $m "-m pingpong -S $lat_sizes -n $lat_iters"
		done
		iw $crc poll_wait0 "-m pingpong -S $wait0_size -n $wait0_iters"
	done
	if [ -n "$udp_conf" ]; then
		# IA:TAG:NETNS
		runs="iw-lo-udp:udp: iw-lo-udp1500:udp1500:"
		[ -n "$ns1500" ] && runs="$runs iw-lo:tcp_ns1500:$ns1500 iw-lo-udp:udp_ns1500:$ns1500"
		for t in $runs; do
			ia=${t%%:*} tag=${t#*:} ns=${tag#*:} tag=${tag%%:*}
			udp "$ia" "$tag" block "-m write -S $udp_sizes -t $secs --window $window" "$ns"
			for m in block poll; do
				udp "$ia" "$tag" $m "-m pingpong -S 8 -n $lat_iters" "$ns"
			done
			udp "$ia" "$tag" block_gap "-m pingpong -S 8 -n $gap_iters --gap 2000" "$ns"
			dtest_w "$ia" "$tag" - "$ns"
		done
		dtest_w iw-lo iwdapl 0
	fi
	# Requests now and then: the client pauses 2 ms after each round trip.
	iw 0 block_gap "-m pingpong -S $gap_sizes -n $gap_iters --gap 2000"
	tcp block_gap "-m pingpong -S $gap_sizes -n $gap_iters --gap 2000"
	tcp block "-m stream -S $sizes -t $secs --window $window"
	[ "${BENCH_BW_POLL:-0}" = 1 ] && tcp poll "-m stream -S $sizes -t $secs --window $window"
	tcp block "-m pingpong -S $lat_sizes -n $lat_iters"
	tcp poll "-m pingpong -S $lat_sizes -n $lat_iters"
	for s in $(echo "$lat_bytes" | tr ',' ' '); do
		fi_pp "$s"
	done
	cm psp
	cm ssp
	cm tcp
	mem
	paired
	stalls
}

round=0
while [ $round -lt "$rounds" ]; do
	round=$((round + 1))
	if want base; then
		base_round
	fi
	patterns_round
	scale_round
	echo "   round $round of $rounds done"
done

if awk -F, 'NR > 1 && $NF != 1 { bad = 1 } END { exit !bad }' "$raw"; then
	echo "run.sh: some measurements did not validate (valid=0 in $raw)" >&2
	status=1
fi
awk -F, -f "$here/summarize.awk" "$raw" >"$out/summary.csv"
want base && base=1 || base=0
want scale && scale=$scale_n || scale=
awk -F, -v sizes="$size_bytes" -v lat_sizes="$lat_bytes" -v rounds="$rounds" \
	-v udp_sizes="$(bytes "$udp_sizes")" -v gap_sizes="$(bytes "$gap_sizes")" \
	-v base="$base" -v patterns="$pat_parts" \
	-v pat_sizes="$pat_bytes" -v rdv_sizes="$rdv_bytes" -v a2a_sizes="$(bytes "${BENCH_A2A_SIZES:-8,4K}")" \
	-v scale="$scale" -v scale_depth="$scale_depth" \
	-v strict="${BENCH_STRICT:-0}" -f "$here/report.awk" -f "$here/report_patterns.awk" \
	-f "$here/report_scale.awk" "$out/summary.csv" >"$out/report.txt"
rs=$?
# What a message costs the machine (bench/cost.sh): counts, once a run.
if want cost; then
	qf=
	[ $quick -eq 1 ] && qf=--quick
	sh "$here/cost.sh" $qf --out "$out/cost" "$build" >/dev/null ||
		failed "bench/cost.sh" "$out/cost/cost.txt"
	{ echo; cat "$out/cost/cost.txt" 2>/dev/null; } >>"$out/report.txt"
fi
cat "$out/report.txt"
if command -v gnuplot >/dev/null 2>&1; then
	sh "$here/plot.sh" "$out" || echo "run.sh: plotting failed" >&2
else
	echo "(gnuplot not installed: no plots)"
fi
[ $status -ne 0 ] || status=$rs
exit $status
