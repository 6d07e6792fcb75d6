#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/cost.sh [--quick] [--out DIR] [BUILDDIR]
#
# What a message costs the machine: the system calls, context switches
# and CPU time of both processes of an exchange, all their threads
# (perf stat, which the threads and a forked peer inherit), per round
# trip of a ping-pong, per message of a stream or per connection cycle;
# the provider (iw-lo, IWDAPL_CRC=0) next to plain TCP doing the same
# exchange (bench/tcp_baseline; bench/iwcm -m tcp for the cycles):
#   8 B ping-pong, blocking (dat_evd_wait; TCP blocks in recv);
#   8 B ping-pong whose waits all sleep (IWDAPL_WAIT_SPIN_US=0: a peer
#     that answers after the wait's spin; TCP: blocking again);
#   8 B ping-pong, polling (spinning dat_evd_dequeue; TCP: busy recv);
#   8 B RDMA Write ping-pong polling memory (wpp; its completions reaped
#     polling; TCP: blocking, what the wpp targets compare with);
#   64 KiB ping-pong, blocking;
#   64 B RDMA Writes, window 32 (TCP: send()s of 64 B);
#   a connect-accept-disconnect cycle over a PSP (TCP: connect, accept,
#     close), and the same over an SSP (a TCP connection upgraded:
#     dat_iw_ssp_create, dat_iw_socket_connect; TCP: the same cycle).
# Each exchange runs for a count and for twice that count; the figures
# are the differences between the two runs over the difference in
# iterations, so what a run pays once (starting, connecting, the
# warm-up's first touches) drops out.  Counts do not depend on the
# machine's speed as times do, but they move with timing where waiting
# is involved: a wait whose answer came during its spin makes no sleep.
# They show where a pattern's time goes on a machine whose system calls
# and wake-ups are dear (a virtual machine: doc/performance.md).
#
# Writes DIR/cost.txt (the table, also printed; default DIR: a fresh
# bench/cost-YYYYmmdd-HHMMSS/) and keeps the tools' output and perf's
# counts in DIR/logs.  Without perf (Debian's linux-perf) or the right to
# count system calls (kernel.perf_event_paranoid), says so and exits 0.
# --quick: a tenth of the counts.  Environment: BENCH_COST_N (ping-pong
# round trips, 20000; the 64 KiB ping-pong a quarter, the Writes ten
# times, the cycles a tenth), BENCH_TIMEOUT (seconds per tool run).
# Exit status: 0, 1 if a run failed, 2 on a usage error.
usage() {
	sed -n '3,3p' "$0" | sed 's/^# //' >&2
	exit 2
}

out= quick=0
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	-h|--help) usage ;;
	-*) echo "cost.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -le 1 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench_lib.sh
. "$here/bench_lib.sh"
bench_setup "$1"
out=${out:-$top/bench/cost-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
table=$out/cost.txt
n=${BENCH_COST_N:-20000}
[ $quick -eq 1 ] && n=$((n / 10))
[ "$n" -ge 40 ] || { echo "cost.sh: BENCH_COST_N too small" >&2; exit 2; }
events=raw_syscalls:sys_enter,context-switches,task-clock

if ! command -v perf >/dev/null 2>&1 ||
	! perf stat -x, -e "$events" -o "$work/probe" true >/dev/null 2>&1 ||
	! grep -q '^[0-9][0-9]*,,raw_syscalls:sys_enter' "$work/probe"; then
	echo "System cost per message: n/a (perf cannot count system calls here: install linux-perf, run as root)" |
		tee "$table"
	exit 0
fi

status=0
# Each exchange runs twice, COUNT and twice COUNT iterations, and the
# figures are the differences over the difference in iterations: what
# every run pays once (process and IA start, connection setup, thread
# creation, the warm-up's first touches) drops out.

# iterations CSV WARM_MAX: the count the tool ran, warm-up included.
iterations() {
	awk -F, -v w="$2" '$1 != "mode" && NF >= 12 { it = $3 }
		END { if (it > 0) { wu = int(it / 10); if (wu > w) wu = w; print it + wu } }' "$1"
}

# sums NAME: "syscalls ctxsw cpu_ms" summed over logs/NAME.*perf (a
# pair's two processes, or one tool's).
sums() {
	cat "$out/logs/$1".*perf 2>/dev/null | awk -F, '
		$3 == "raw_syscalls:sys_enter" { s += $1 }
		$3 == "context-switches" { c += $1 }
		$3 == "task-clock" { t += $1 }
		END { print s + 0, c + 0, t + 0 }'
}

# per_msg NAME WARM_MAX: "syscalls ctxsw cpu_us" per iteration from the
# runs NAME.1 and NAME.2, into logs/NAME.cost (nothing if one failed).
per_msg() {
	i1=$(iterations "$out/logs/$1.1.csv" "$2")
	i2=$(iterations "$out/logs/$1.2.csv" "$2")
	[ -n "$i1" ] && [ -n "$i2" ] && [ "$i2" -gt "$i1" ] || return 0
	echo "$(sums "$1.1") $(sums "$1.2")" | awk -v d=$((i2 - i1)) '{
		printf "%.1f %.2f %.1f\n", nn(($4 - $1) / d), nn(($5 - $2) / d), nn(($6 - $3) * 1000 / d) }
		function nn(v) { return v < 0 ? 0 : v }' \
		>"$out/logs/$1.cost"
}

# perf_pre FILE: the prefix that counts a command into FILE.
perf_pre() {
	echo "perf stat -x, -e $events -o $1 --"
}

# iw_cost NAME ENV "SERVER ARGS" "CLIENT ARGS" COUNT: an iwdtest pair.
iw_cost() {
	for k in 1 2; do
		srv_pre=$(perf_pre "$out/logs/$1.$k.server.perf")
		cli_pre=$(perf_pre "$out/logs/$1.$k.client.perf")
		pair_env="IWDAPL_CRC=0 $2"
		iw_pair "$3 -w 20" "$4 -w 20 --csv -n $(($5 * k))" "$out/logs/$1.$k.csv" ||
			{ echo "cost.sh: iwdtest ($4) failed (logs/$1.$k.csv.err)" >&2; status=1; }
	done
	srv_pre= cli_pre= pair_env=
	per_msg "$1" 1000
}

# tcp_cost NAME "TCP_BASELINE ARGS" COUNT: tcp_baseline (both sides).
tcp_cost() {
	for k in 1 2; do
		# shellcheck disable=SC2086
		$(perf_pre "$out/logs/$1.$k.perf") timeout -k 5 "$limit" "$tcpb" --csv $2 \
			-n $(($3 * k)) >"$out/logs/$1.$k.csv" 2>&1 ||
			{ echo "cost.sh: tcp_baseline ($2) failed (logs/$1.$k.csv)" >&2; status=1; }
	done
	per_msg "$1" 1000
}

# cm_cost NAME MODE COUNT: bench/iwcm's cycles (both sides).
cm_cost() {
	for k in 1 2; do
		next_qual
		$(perf_pre "$out/logs/$1.$k.perf") env IWDAPL_CRC=0 timeout -k 5 "$limit" \
			"$iwcm" -m "$2" -n $(($3 * k)) -q "$qual" --csv >"$out/logs/$1.$k.csv" 2>&1 ||
			{ echo "cost.sh: iwcm -m $2 failed (logs/$1.$k.csv)" >&2; status=1; }
	done
	per_msg "$1" 100
}

# row WHAT "IW FIGURES" "TCP FIGURES": a table line; CPU ratio iw/TCP.
row() {
	echo "$1|$2|$3" | awk -F'|' '{
		split($2, a, " "); split($3, b, " ")
		r = (b[3] > 0 && a[3] != "") ? sprintf("%.2f", a[3] / b[3]) : "-"
		printf "%-40s %9s %7s %8s   %9s %7s %8s   %6s\n", $1,
			a[1] == "" ? "-" : a[1], a[2] == "" ? "-" : a[2], a[3] == "" ? "-" : a[3],
			b[1] == "" ? "-" : b[1], b[2] == "" ? "-" : b[2], b[3] == "" ? "-" : b[3], r }'
}

tcp_cost tcp-pp8 "-m pingpong -S 8" "$n"
iw_cost pp8-block "" "" "-m pingpong -S 8" "$n"
iw_cost pp8-sleep IWDAPL_WAIT_SPIN_US=0 "" "-m pingpong -S 8" "$n"
iw_cost pp8-poll "" -p "-p -m pingpong -S 8" "$n"
tcp_cost tcp-pp8-poll "-p -m pingpong -S 8" "$n"
iw_cost wpp8 "" -p "-p -m wpp -S 8" "$n"
iw_cost pp64k "" "" "-m pingpong -S 64K" $((n / 4))
tcp_cost tcp-pp64k "-m pingpong -S 64K" $((n / 4))
iw_cost write64 "" --no-verify "-m write -S 64 --window 32 --no-verify" $((n * 10))
tcp_cost tcp-stream64 "-m stream -S 64 --window 32 --no-verify" $((n * 10))
cm_cost psp psp $((n / 10))
cm_cost ssp ssp $((n / 10))
cm_cost tcp-cycle tcp $((n / 10))

# fig NAME: its figures (empty when its run failed).
fig() {
	cat "$out/logs/$1.cost" 2>/dev/null
}

{
	echo "System cost per message (perf stat: both processes, all their threads; iwdapl CRC off)"
	printf "%-40s %9s %7s %8s   %9s %7s %8s   %6s\n" "per round trip / message / cycle" \
		"iw calls" "switch" "CPU us" "TCP calls" "switch" "CPU us" "CPU iw/TCP"
	row "8 B ping-pong, blocking" "$(fig pp8-block)" "$(fig tcp-pp8)"
	row "8 B ping-pong, every wait sleeps" "$(fig pp8-sleep)" "$(fig tcp-pp8)"
	row "8 B ping-pong, polling" "$(fig pp8-poll)" "$(fig tcp-pp8-poll)"
	row "8 B Write ping-pong polling memory" "$(fig wpp8)" "$(fig tcp-pp8)"
	row "64 KiB ping-pong, blocking" "$(fig pp64k)" "$(fig tcp-pp64k)"
	row "64 B RDMA Write, window 32" "$(fig write64)" "$(fig tcp-stream64)"
	row "connect-accept-disconnect (PSP)" "$(fig psp)" "$(fig tcp-cycle)"
	row "TCP connect, SSP upgrade, disconnect" "$(fig ssp)" "$(fig tcp-cycle)"
	echo "(calls: system calls; switch: context switches, voluntary and not; CPU: user + system time."
	echo " TCP: bench/tcp_baseline one send() per message, blocking in recv or busy-polling; bench/iwcm -m tcp."
	echo " Differences of runs of $n and $((2 * n)) round trips (8 B ping-pongs): what a run pays once drops out;"
	echo " on a busy machine the two runs differ in more than their count, and a difference below 0 shows as 0.)"
} | tee "$table"
exit $status
