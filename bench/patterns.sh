# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# patterns.sh: bench/run.sh's section of consumer patterns -- the
# exchanges RDMA consumers (MPI, storage protocols) build -- next to plain
# TCP doing the same.  Sourced by run.sh once its options are parsed; its
# steps use run.sh's helpers (want, bytes, iw, tcp, to_raw, log, failed,
# dtest_run, dtest_rows).  Every round runs, for each part --only selects
# (all by default), CRC off and on:
#   wpp        iwdtest -m wpp (RDMA Write ping-pong polling memory), its
#              signaled Writes reaped polling (-p, mode poll) and blocking
#              (mode block); in the polling run also iwdapl's CQ-polling
#              Send ping-pong, as rows of op pingpong_sweep;
#   rdv        iwdtest -m rdv,rdvw (Read and Write rendezvous ping-pongs),
#              blocking and polling;
#   rdvstream  iwdtest -m rdvstream (W Read rendezvous outstanding), and
#   bibw       iwdtest -m bibw (RDMA Writes both ways), blocking
#              (BENCH_BW_POLL=1: polling too), window BENCH_WINDOW;
#   plain TCP for these: tcp_baseline -m pingpong, blocking and -p, at the
#              sizes of wpp and rdv (op pingpong_sweep), -m handoff at
#              wpp's (op wpp_handoff: read by a helper thread while the
#              consumer spins on memory, wpp's arrangement), -m stream at
#              the rendezvous sizes (op stream_sweep), -m bidir,bidir1;
#   twopair    two iwdtest pairs at once (CRC off), then two tcp_baseline
#              pairs at once: 8 B ping-pong, blocking and polling; rows
#              twopair_a and twopair_b per pair and twopair, their mean;
#              then bench/wake_probe (op handoff: the same exchange with
#              no provider, by the way a waiter waits, one pair and two;
#              3 runs of 10,000 round trips, --quick 1 of 2,000);
#   a2a        bench/alltoall: 4 ranks on the 2 CPUs (an oversubscribed
#              job), each connected to the 3 others, iwdapl (CRC off, one
#              DTO EVD for all its connections) then plain TCP, blocking
#              and polling, at BENCH_A2A_SIZES (8,4K): an all-to-all
#              (op alltoall: a round's time) and a ping-pong of ranks 0
#              and 1 beside their idle connections to ranks 2 and 3 (op
#              pair4: one way), for BENCH_TWOPAIR_SECONDS each;
#   dtestwa    in the first round only: Debian's dtest -W -a (RDMA Write
#              ping-pong, 1 B to 4 MiB, 1000 round trips a size) over
#              iw-lo (tcp) and iw-lo-udp, each run within
#              BENCH_DTEST_WA_TIMEOUT seconds (300; then its rows say
#              valid=0): a row per size (op dtest_wa) and one for the run
#              (op dtest_wa_total, size 0: seconds = wall time, iterations
#              = sizes done).  Not in --quick (BENCH_DTEST=1: there too);
#              BENCH_DTEST_WA_MAX (bytes) passes dtest -b, the largest size.
#   dtestws    in the first round only: Debian's dtest -w (RDMA Writes
#              streaming both ways, 1000 of 4 MiB a side), waiting and
#              polling (-p), over iw-lo and iw-lo-udp, on the quiet
#              machine (mode block, poll) and beside a busy loop per CPU
#              at nice 19 (block_busy, poll_busy: a busy build machine),
#              with the provider's default CRC (on), as a user of dtest
#              runs it; op dtest_ws, size 4 MiB, MB/s of both ways as
#              dtest says, seconds = wall time.  Not in --quick.
#   busy       beside a busy loop per CPU at nice 0 (a build machine's
#              compilers): a blocking Send ping-pong, iwdtest -m pingpong
#              at 8 B and 64 KiB (CRC off), and plain TCP's blocking one,
#              for BENCH_BUSY_SECONDS (1); PSP connect-accept-disconnect cycles
#              (bench/iwcm, BENCH_BUSY_CYCLES, 300) and TCP's; rows of
#              mode block_busy; and wpp at 8 B and 64 KiB (mode
#              poll_busy) beside plain TCP's hand-off (tcp_baseline -m
#              handoff, block_busy).  Not in --quick (BENCH_BUSY=1:
#              there too).
# Sizes: --pattern-sizes (default a dense sweep 8 B..4 MiB; --quick 8,1M)
# for wpp and bibw, --rdv-sizes (default those of 4 KiB and up; --quick
# 4K,1M) for the rendezvous.  Every (mode, size) point runs for
# BENCH_PAT_SECONDS (0.1; --quick 0.05) after the tools' warm-up, so a
# slow size costs no more than a fast one; a pair of two at once for
# BENCH_TWOPAIR_SECONDS (1; --quick 0.2).

if [ $quick -eq 1 ]; then
	: "${pat_sizes:=8,1M}" "${rdv_sizes:=4K,1M}"
	pat_secs=${BENCH_PAT_SECONDS:-0.05} tp_secs=${BENCH_TWOPAIR_SECONDS:-0.2}
	wake_args="-n 2000 -r 1"
else
	: "${pat_sizes:=8,64,512,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M}"
	pat_secs=${BENCH_PAT_SECONDS:-0.1} tp_secs=${BENCH_TWOPAIR_SECONDS:-1}
	wake_args="-n 10000 -r 3"
fi
pat_bytes=$(bytes "$pat_sizes")
# Below 4 KiB consumers send eagerly: no rendezvous by default.
[ -n "$rdv_sizes" ] ||
	rdv_sizes=$(echo "$pat_bytes" | tr ',' '\n' | awk '$1 >= 4096' | paste -s -d,)
rdv_bytes=$(bytes "$rdv_sizes")
wa_limit=${BENCH_DTEST_WA_TIMEOUT:-300}
if want wpp && echo "$pat_bytes" | tr ',' '\n' | awk '$1 % 8 { bad = 1 } END { exit !bad }'; then
	echo "run.sh: --pattern-sizes: wpp needs multiples of 8" >&2
	exit 2
fi
pat_parts=
for p in wpp rdv rdvstream bibw twopair a2a dtestwa dtestws busy; do
	want $p && pat_parts=$pat_parts${pat_parts:+,}$p
done

# pair_rows TRANSPORT CRC MODE LOG: the rows of two ping-pong pairs run at
# once (LOG-a, LOG-b: the tools' CSV) as ops twopair_a and twopair_b, and
# their mean as op twopair (lat_mean_us the mean of the two means,
# lat_max_us the larger maximum, iterations and rates summed); that row
# only when both pairs gave theirs.
pair_rows() {
	op_renames=pingpong:twopair_a
	to_raw "$1" "$2" "$3" <"$4-a"
	op_renames=pingpong:twopair_b
	to_raw "$1" "$2" "$3" <"$4-b"
	op_renames=
	awk -F, -v r="$round" -v t="$1" -v c="$2" -v m="$3" '
	$1 == r && $2 == t && $3 == c && $4 == m && $5 ~ /^twopair_[ab]$/ {
		n++; it += $8; mb += $10; rate += $11; lat += $12; ok += $18
		if ($9 > s) s = $9
		if ($15 > mx) mx = $15
	}
	END {
		if (n == 2)
			printf "%s,%s,%s,%s,twopair,8,1,%d,%.6f,%.2f,%.0f,%.3f,,,%s,,,%d\n",
				r, t, c, m, it, s, mb, rate, lat / 2, mx, ok == 2
	}' "$raw" >>"$raw"
}

# The two kinds of pair of two_pairs, each writing its CSV into $1 (and
# errors into $1.err); $pf: the polling flag.
iw_pp8() {
	pair_env=IWDAPL_CRC=0
	iw_pair "$pf -w 20 $verify" "$pf -w 20 --csv $verify -m pingpong -S 8 -t $tp_secs" "$1"
}

tcp_pp8() {
	# shellcheck disable=SC2086
	timeout -k 5 "$limit" "$tcpb" $pf --csv $verify -m pingpong -S 8 -t "$tp_secs" \
		>"$1" 2>"$1.err"
}

# at_once TRANSPORT CRC MODE RUNNER: two pairs of RUNNER at once.
at_once() {
	l=$(log "twopair-$1-$3")
	"$4" "$l-a" &
	pa=$!
	# An iwdtest pair took the next qualifier in its subshell; the
	# second takes the one after, and so does the rest of the round.
	next_qual
	"$4" "$l-b" &
	pb=$!
	next_qual
	wait "$pa" || failed "$1: the first of two pairs at once ($3)" "$l-a.err"
	wait "$pb" || failed "$1: the second of two pairs at once ($3)" "$l-b.err"
	pair_env=
	pair_rows "$1" "$2" "$3" "$l"
}

# two_pairs MODE: more ping-pong threads than CPUs, blocking or polling.
two_pairs() {
	pf=
	[ "$1" = poll ] && pf=-p
	at_once iwdapl 0 "$1" iw_pp8
	at_once tcp - "$1" tcp_pp8
}

# handoff_floor: bench/wake_probe beside the two pairs -- the same
# exchange without the provider, by the way a waiter waits (a sleeping
# recv, an epoll_wait served first, the provider's sleep and its spin),
# one pair and two: rows of transport machine, op handoff, mode the way,
# size and window the pairs, iterations its runs, lat_mean_us the median
# of the runs' one-way means and lat_max_us the largest, msgs_per_s the
# parked watcher's wake-ups per message.
handoff_floor() {
	[ -x "$wakep" ] || return 0
	l=$(log wake_probe)
	# shellcheck disable=SC2086 # word list
	timeout -k 5 "$limit" "$wakep" --csv $wake_args >"$l" 2>"$l.err" || {
		failed "wake_probe" "$l.err"
		return 0
	}
	awk -F, -v r="$round" '$1 != "way" && NF >= 7 {
		printf "%s,machine,-,%s,handoff,%s,%s,%s,,,%s,%s,,,%s,,,1\n",
			r, $1, $2, $2, $3, $7, $4, $6 }' "$l" >>"$raw"
}

# a2a_run TRANSPORT MODE KIND: one bench/alltoall job of 4 ranks (qualifiers
# qual+1..qual+4), its CSV as rows of op KIND.
a2a_run() {
	af=
	[ "$1" = tcp ] && af=--tcp
	[ "$2" = poll ] && af="$af -p"
	[ "$3" = pair4 ] && af="$af --pair"
	next_qual
	l=$(log "a2a-$1-$2-$3")
	# shellcheck disable=SC2086 # word lists
	env IWDAPL_CRC=0 timeout -k 5 "$limit" "$a2a" $af -N 4 -q "$qual" -S "${BENCH_A2A_SIZES:-8,4K}" \
		-t "$tp_secs" --csv >"$l" 2>"$l.err" || failed "alltoall ($1, $2, $3)" "$l.err"
	next_qual; next_qual; next_qual
	awk -F, -v r="$round" -v t="$1" -v c="$([ "$1" = tcp ] && echo - || echo 0)" -v m="$2" -v o="$3" '
	$1 == "mode" || NF < 10 { next }
	{ printf "%s,%s,%s,%s,%s,%s,1,%s,%s,,,%s,%s,%s,%s,,,%d\n",
		r, t, c, m, o, $3, $4, $5, $6, $7, $8, $9, $10 == "OK" }' "$l" >>"$raw"
}

# a2a_part: the all-to-all and the pair beside idle connections.
a2a_part() {
	for m in block poll; do
		for t in iwdapl tcp; do
			a2a_run "$t" "$m" alltoall
			a2a_run "$t" "$m" pair4
		done
	done
}

# busy_loops on|off [NICE]: one busy loop per CPU at nice NICE (19), or
# none.
busy_pids=
busy_loops() {
	if [ "$1" = on ]; then
		case $at_exit in *busy_loops*) ;; *) at_exit="${at_exit:+$at_exit; }busy_loops off" ;; esac
		for _ in $(seq "$(nproc)"); do
			nice -n "${2:-19}" sh -c 'while :; do :; done' &
			busy_pids="$busy_pids $!"
		done
	else
		# shellcheck disable=SC2086 # a list of pids
		[ -z "$busy_pids" ] || kill $busy_pids 2>/dev/null
		# shellcheck disable=SC2086
		[ -z "$busy_pids" ] || wait $busy_pids 2>/dev/null
		busy_pids=
	fi
}

# dtest_ias CRC: the IAs dtest runs over, as IA:TRANSPORT:CRC (CRC the
# tcp row's; udp's is "-"), the udp IA only where the run has one;
# dtest_ia ONE sets ia, tag and c from one of them.
dtest_ias() {
	echo "iw-lo:iwdapl:$1"
	[ -z "$udp_conf" ] || echo "iw-lo-udp:udp:-"
}

dtest_ia() {
	ia=${1%%:*} tag=${1#*:} c=${1##*:}
	tag=${tag%%:*}
}

# dtest_ws: Debian's dtest -w over the tcp and the udp IA, quiet and busy.
dtest_ws() {
	[ -n "$dtestw" ] || return 0
	[ $quick -eq 0 ] || [ "${BENCH_DTEST:-0}" = 1 ] || return 0
	for t in $(dtest_ias 1); do
		dtest_ia "$t"
		for m in block poll block_busy poll_busy; do
			pf=
			case $m in poll*) pf=-p ;; esac
			l=$(log "dtest_ws-$tag-$m")
			case $m in *_busy) busy_loops on ;; esac
			dtest_crc=1
			# shellcheck disable=SC2086 # no flag, or -p
			dtest_run "$ia" "$l" "$limit" "" -w $pf
			dtest_crc=
			busy_loops off
			[ $dtest_ok = 1 ] || failed "dtest -w $pf over $ia ($m)" "$l"
			awk -v r="$round" -v t="$tag" -v c="$c" -v m="$m" -v s="$dtest_secs" -v ok="$dtest_ok" '
			/RDMA write \(bi-direction\)/ {
				for (i = 1; i <= NF; i++) {
					if ($i == "x") { n = $(i - 1) + 0; sz = $(i + 1) + 0 }
					if ($i ~ /^MB\/sec/) mb = $(i - 1) + 0
				}
				printf "%s,%s,%s,%s,dtest_ws,%d,1,%d,%s,%.2f,,,,,,,,%d\n",
					r, t, c, m, sz, n, s, mb, ok
			}' "$l" >>"$raw"
		done
	done
}

# dtest_wa: Debian's dtest -W -a over the tcp and the udp IA.
dtest_wa() {
	[ -n "$dtestw" ] || return 0
	# Not in --quick: as dtest_w.
	[ $quick -eq 0 ] || [ "${BENCH_DTEST:-0}" = 1 ] || return 0
	for t in $(dtest_ias 0); do
		dtest_ia "$t"
		l=$(log "dtest_wa-$tag")
		# shellcheck disable=SC2086 # no -b, or -b and its value
		dtest_run "$ia" "$l" "$wa_limit" "" -W -a ${BENCH_DTEST_WA_MAX:+-b $BENCH_DTEST_WA_MAX}
		[ $dtest_ok = 1 ] || failed "dtest -W -a over $ia (within ${wa_limit} s)" "$l"
		dtest_rows "$tag" "$c" dtest_wa "$l"
		echo "$round,$tag,$c,poll,dtest_wa_total,0,1,$(grep -c 'RDMA write PingPong:.* latency ' "$l"),$dtest_secs,,,,,,,,,$dtest_ok" >>"$raw"
	done
}

# busy_part: blocking exchanges, memory-polling ping-pong and connection
# setup beside a busy loop per CPU at nice 0, iwdapl and plain TCP.
busy_part() {
	# Not in --quick (the bench's smoke test runs beside other tests).
	[ $quick -eq 0 ] || [ "${BENCH_BUSY:-0}" = 1 ] || return 0
	busy_loops on 0
	iw 0 block_busy "-m pingpong -S 8,64K -t ${BENCH_BUSY_SECONDS:-1}"
	tcp block_busy "-m pingpong -S 8,64K -t ${BENCH_BUSY_SECONDS:-1}"
	# A consumer spinning on memory: the scheduler decides when it sees
	# its answer, for plain TCP's hand-off as for us.
	iw 0 poll_busy "-m wpp -p -S 8,64K -t ${BENCH_BUSY_SECONDS:-1}"
	tcp block_busy "-m handoff -S 8,64K -t ${BENCH_BUSY_SECONDS:-1}"
	cm psp block_busy "${BENCH_BUSY_CYCLES:-300}"
	cm tcp block_busy "${BENCH_BUSY_CYCLES:-300}"
	busy_loops off
}

# Plain TCP next to the patterns; rows of ops the base section has too
# get names of their own (pingpong_sweep, stream_sweep).
tcp_patterns() {
	pp=
	want wpp && pp=$pat_bytes
	want rdv && pp=$pp${pp:+,}$rdv_bytes
	pp=$(echo "$pp" | tr ',' '\n' | awk 'NF' | sort -n -u | paste -s -d,)
	op_renames="pingpong:pingpong_sweep stream:stream_sweep handoff:wpp_handoff"
	log_tag=-sweep
	if [ -n "$pp" ]; then
		tcp block "-m pingpong -S $pp -t $pat_secs"
		tcp poll "-m pingpong -S $pp -t $pat_secs"
	fi
	# wpp's floor: plain TCP read by a helper thread while the consumer
	# spins on memory (tcp_baseline's handoff mode).
	want wpp && tcp block "-m handoff -S $pat_bytes -t $pat_secs"
	if want rdvstream && [ -n "$rdv_bytes" ]; then
		tcp block "-m stream -S $rdv_sizes -t $pat_secs --window $window"
	fi
	want bibw && tcp block "-m bidir,bidir1 -S $pat_sizes -t $pat_secs --window $window"
	op_renames= log_tag=
}

# patterns_round: this round's patterns (those --only selected).
patterns_round() {
	[ -n "$pat_parts" ] || return 0
	for crc in 0 1; do
		if want wpp; then
			op_renames=pingpong:pingpong_sweep
			iw $crc poll "-m wpp,pingpong -S $pat_sizes -t $pat_secs"
			op_renames=
			iw $crc block "-m wpp -S $pat_sizes -t $pat_secs"
		fi
		if want rdv && [ -n "$rdv_bytes" ]; then
			for m in block poll; do
				iw $crc $m "-m rdv,rdvw -S $rdv_sizes -t $pat_secs"
			done
		fi
		for m in $bw_modes; do
			if want rdvstream && [ -n "$rdv_bytes" ]; then
				iw $crc "$m" "-m rdvstream -S $rdv_sizes -t $pat_secs --window $window"
			fi
			want bibw && iw $crc "$m" "-m bibw -S $pat_sizes -t $pat_secs --window $window"
		done
	done
	tcp_patterns
	if want twopair; then
		two_pairs block
		two_pairs poll
		handoff_floor
	fi
	want a2a && a2a_part
	if want dtestwa && [ "$round" = 1 ]; then
		dtest_wa
	fi
	if want dtestws && [ "$round" = 1 ]; then
		dtest_ws
	fi
	want busy && busy_part
}
