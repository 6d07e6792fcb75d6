#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/plot.sh DIR: draws DIR/summary.csv (from bench/run.sh) with gnuplot
#   DIR/bandwidth.png  MB/s against message size
#   DIR/msgrate.png    messages/s against message size
#   DIR/latency.png    one-way ping-pong latency (median) against size
#   DIR/patterns.png   the consumer patterns' one-way latency (median)
#                      against size: wpp, rdv, rdvw, iwdapl's Send
#                      ping-pong and plain TCP over the same sweep
# one curve per transport, operation, CRC setting and mode, each point the
# median of the rounds with an error bar from their min to their max.  The
# curves' data stay in DIR/plotdata/ (size median min max).
dir=${1:?usage: plot.sh DIR}
sum=$dir/summary.csv
[ -r "$sum" ] || { echo "plot.sh: no $sum" >&2; exit 1; }
data=$dir/plotdata
mkdir -p "$data" || exit 1

# curve FILE TRANSPORT CRC MODE OP METRIC: that curve's points, by size.
curve() {
	awk -F, -v t="$2" -v c="$3" -v m="$4" -v o="$5" -v metric="$6" '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	$1 == t && $2 == c && $3 == m && $4 == o && $(col[metric "_med"]) != "" {
		print $5, $(col[metric "_med"]), $(col[metric "_min"]), $(col[metric "_max"])
	}' "$sum" | sort -n >"$data/$1.dat"
	[ -s "$data/$1.dat" ]
}

# plot_cmd: the "plot" arguments for the curves listed in $curves, as
# lines "FILE|TITLE|STYLE"; only curves with data.
plot_cmd() {
	echo "$curves" | awk -F'|' -v d="$data" 'NF == 3 {
		printf "%s'\''%s/%s.dat'\'' using 1:2:3:4 with yerrorlines %s title '\''%s'\''",
			n++ ? ", " : "", d, $1, $3, $2
	}'
}

add() {	# add FILE TITLE STYLE TRANSPORT CRC MODE OP METRIC
	if curve "$1" "$4" "$5" "$6" "$7" "$8"; then
		curves="$curves
$1|$2|$3"
	fi
}

# style COLOUR CRC: a colour per operation or mode, CRC on dashed.
style() {
	echo "lc rgb '$1' lw 1.5 dt $([ "$2" = 1 ] && echo 2 || echo 1)"
}

onoff() { [ "$1" = 1 ] && echo on || echo off; }

xfer_curves() {	# xfer_curves METRIC
	curves=
	for op in write read send; do
		case $op in write) c='#1f77b4' ;; read) c='#2ca02c' ;; *) c='#ff7f0e' ;; esac
		for crc in 0 1; do
			add "iw-$op-crc$crc-$1" "iwdapl $op, CRC $(onoff $crc)" "$(style "$c" $crc)" \
				iwdapl $crc block $op "$1"
		done
	done
	add "tcp-stream-$1" "plain TCP, one send() per message" "lc rgb 'black' lw 2" \
		tcp - block stream "$1"
}

lat_curves() {
	curves=
	for mode in block block_sleep poll poll_wait0; do
		case $mode in block) c='#1f77b4' ;; block_sleep) c='#2ca02c' ;;
		poll) c='#d62728' ;; *) c='#9467bd' ;; esac
		for crc in 0 1; do
			add "iw-pp-$mode-crc$crc" "iwdapl $mode, CRC $(onoff $crc)" "$(style "$c" $crc)" \
				iwdapl $crc $mode pingpong lat_median_us
		done
	done
	add tcp-pp-block "plain TCP blocking" "lc rgb 'black' lw 2" tcp - block pingpong lat_median_us
	add tcp-pp-poll "plain TCP busy-polling" "lc rgb 'black' lw 2 dt 3" \
		tcp - poll pingpong lat_median_us
	add fi-pp "libfabric TCP (fi_pingpong -p tcp; its mean)" "lc rgb 'gray40' lw 2 dt 4" \
		fi_tcp - poll pingpong lat_mean_us
}

pattern_curves() {
	curves=
	for crc in 0 1; do
		add "wpp-poll-crc$crc" "wpp (RDMA Write, memory polling), CRC $(onoff $crc)" \
			"$(style '#d62728' $crc)" iwdapl $crc poll wpp lat_median_us
		add "rdv-block-crc$crc" "rdv (Read rendezvous) blocking, CRC $(onoff $crc)" \
			"$(style '#2ca02c' $crc)" iwdapl $crc block rdv lat_median_us
	done
	add rdvw-block-crc0 "rdvw (Write rendezvous) blocking, CRC off" "$(style '#ff7f0e' 0)" \
		iwdapl 0 block rdvw lat_median_us
	add sendpp-poll-crc0 "iwdapl Send ping-pong, polling, CRC off" "$(style '#1f77b4' 0)" \
		iwdapl 0 poll pingpong_sweep lat_median_us
	add tcp-sweep-block "plain TCP blocking" "lc rgb 'black' lw 2" tcp - block pingpong_sweep \
		lat_median_us
	add tcp-sweep-poll "plain TCP busy-polling" "lc rgb 'black' lw 2 dt 3" \
		tcp - poll pingpong_sweep lat_median_us
}

# draw PNG TITLE YLABEL: one chart of $curves (log-log).
draw() {
	cmd=$(plot_cmd)
	[ -n "$cmd" ] || return 0
	gnuplot 2>"$data/$1.log" <<EOF || { cat "$data/$1.log" >&2; return 1; }
set terminal $term noenhanced size 1100,760
set output '$dir/$1'
set title '$2'
set xlabel 'message size (bytes)'
set ylabel '$3'
set logscale xy
set format x '%.0s%cB'
set grid
set key below maxrows 4
set offsets graph 0.02, graph 0.02, 0, 0
plot $cmd
EOF
}

term=png
gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
xfer_curves MBps
draw bandwidth.png "Bandwidth on loopback (blocking; median of rounds, bars: min-max)" "MB/s" || exit 1
xfer_curves msgs_per_s
draw msgrate.png "Message rate on loopback (blocking; median of rounds, bars: min-max)" "messages per second" || exit 1
lat_curves
draw latency.png "Ping-pong latency, one way: median (median of rounds, bars: min-max)" "microseconds" || exit 1
pattern_curves
draw patterns.png "Consumer patterns, one way: median (median of rounds, bars: min-max)" "microseconds" || exit 1
ls "$dir"/*.png 2>/dev/null | sed 's/^/plot: /'
