#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# udp_netns.sh [BUILDDIR]: iWARP over TRP/UDP across a real link, under
# real packet loss, reordering and duplication; TAP.
#
# Two network namespaces joined by a veth pair (MTU 1500, netns_lib.sh),
# each with its own address and udp IA; iwdtest's server in B, its
# client in A.  An nftables input-hook rule in both namespaces,
# `numgen random mod 100 < N drop`, drops N % of the UDP packets each
# side receives (real loss: the sender's sendmsg succeeded).
#   - Loss matrix: for N = 0, 1, 10, Send, RDMA Write and RDMA Read at
#     1 B, 1500 B (two datagrams), 64 KiB, 1 MiB and 16 MiB, every
#     transfer's data checked: one test point per loss, operation and
#     size; no IP fragment sent (datagrams within the path MTU).
#   - Reordering and duplication: the engine's test aid (instance data
#     trp_test=reorder:10,dup:10), with 1 % loss on top.
#   - 100 connections at once: dapltest, 4 threads x 25 EPs, data
#     validated, at 1 % loss.
#   - iwdtest --ssp across the link over tcp and udp; over udp once more
#     with the first datagram of each of the four negotiation steps
#     (hello, welcome, READY, the SSP's offer) dropped by nftables: the
#     negotiation repeats what was lost, the server's SSP meets the
#     repeated READY where the TRP request belongs (NON_PEER_REJECTED,
#     the datagram left to the application) and upgrades again.
#   - A peer killed mid-transfer, over udp and tcp: the survivor's EP
#     must end (BROKEN or DISCONNECTED) within a bound: 2 s when the
#     peer's kernel answers (ICMP port unreachable, TCP reset); 20 s
#     when the peer's host is gone too, either side killed, over udp (no
#     answer: the retransmission limit, about 8.5 s, or the peer
#     timeout, 10 s, doc/trp.md) and over tcp (the peer timeout: TCP
#     keepalive and user timeout).  The runs whose survivors wait out
#     the silence go two at a time: both servers vanish together over
#     udp and tcp, then both clients.
# IW_NETNS_LONG=1 runs the long variant: more sizes, 3 s per operation
# and size instead of 0.3 s.  IW_NETNS_LOSS overrides the list of loss
# percentages.  Needs root (namespaces, nftables), ip and nft: skipped
# otherwise.  Outputs stay in BUILDDIR/test/udp_netns.d/.

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "${DAT_OVERRIDE:-./dat.conf}")}
build=$(cd "$build" && pwd) || exit 99
out=$build/test/udp_netns.d
iwdtest=$build/test/dtest/iwdtest
lib=$build/.libs/libdaploiw.so.2
# shellcheck source=test/netns_lib.sh
. "$here/netns_lib.sh"
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"

if [ -n "$IW_SKIP_DEBIAN_TOOLS" ]; then
	netns_skip "run with Debian's tools, against this build's twin"
fi
[ -x "$iwdtest" ] && [ -e "$lib" ] || netns_skip "no iwdtest or provider in $build"
mkdir -p "$out" || exit 99
netns_setup
limit=300 n=0 failed=0 port=50000
if [ -n "$IW_NETNS_LONG" ]; then
	sizes=1,2,1500,4K,64K,256K,1M,4M,16M budget=3
else
	sizes=1,1500,64K,1M,16M budget=0.3
fi

conf_pair() {	# NAME TRANSPORT [OPTIONS]: NAME.a.conf and NAME.b.conf, IA iw-ns
	netns_conf "$out/$1.a.conf" "$lib" iw-ns "$ADDR_A" "$2" "$3"
	netns_conf "$out/$1.b.conf" "$lib" iw-ns "$ADDR_B" "$2" "$3"
}
in_a() {	# NAME CMD...: CMD in namespace A with NAME's dat.conf
	c=$1
	shift
	ip netns exec "$NS_A" env DAT_OVERRIDE="$out/$c.a.conf" IWDAPL_TRP_STATS=1 "$@"
}
in_b() {
	c=$1
	shift
	ip netns exec "$NS_B" env DAT_OVERRIDE="$out/$c.b.conf" IWDAPL_TRP_STATS=1 "$@"
}
await_port() {	# PORT: waits (up to 5 s) until B listens on it (TCP or UDP)
	tries=0
	while [ $tries -lt 50 ] && ! ip netns exec "$NS_B" ss -Hltun "( sport = :$1 )" | grep -q .; do
		tries=$((tries + 1))
		sleep 0.1
	done
}
# iwd_server NAME: an iwdtest server in B on a fresh qualifier ($port),
# its pid in $spid once it listens.
iwd_server() {
	port=$((port + 1))
	in_b "$1" timeout "$limit" "$iwdtest" -s -P iw-ns -q "$port" -w 60 \
		>"$out/$1.server.out" 2>&1 &
	spid=$!
	await_port "$port"
}
set_loss() {	# PCT on both sides
	netns_loss "$NS_A" "$1" && netns_loss "$NS_B" "$1"
}
retx() {	# NAME: retransmissions of every QP of the run (IWDAPL_TRP_STATS)
	cat "$out/$1".*.out | sed -n 's/.* retx \([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}

# matrix NAME PCT OPTIONS: one iwdtest run over udp at PCT % loss; a test
# point per operation and size, from its CSV rows.
matrix() {
	run=$1 pct=$2
	conf_pair "$run" udp "$3"
	set_loss "$pct" || { tap_result "$run: nft rule for $pct %" "nft failed"; return; }
	fa=$(netns_frags "$NS_A") fb=$(netns_frags "$NS_B")
	iwd_server "$run"
	start=$(date +%s)
	in_a "$run" timeout "$limit" "$iwdtest" -h "$ADDR_B" -P iw-ns -q "$port" -w 60 --csv \
		-m write,read,send -S "$sizes" -t "$budget" >"$out/$run.client.out" 2>&1
	cst=$?
	reap "$spid" 15 "$out/$run.server.out"
	secs=$(($(date +%s) - start))
	set_loss 0
	for mode in write read send; do
		for size in $(echo "$sizes" | tr , ' '); do
			bytes=$(echo "$size" | sed 's/K$/*1024/; s/M$/*1048576/' | bc)
			row=$(grep "^$mode,$bytes," "$out/$run.client.out")
			verdict=
			if [ -z "$row" ]; then
				verdict="no result row (client status $cst, server $waited)"
			elif [ "$(echo "$row" | cut -d, -f7)" != OK ]; then
				verdict="data validation failed: $row"
			fi
			tap_result "$run: $mode $size, data checked ($(echo "$row" | cut -d, -f3) transfers, $(echo "$row" | cut -d, -f5) MB/s)" \
				"$verdict" "$out/$run.client.out" "$out/$run.server.out"
		done
	done
	verdict=
	[ "$cst" -eq 0 ] && [ "$waited" -eq 0 ] || verdict="client status $cst, server status $waited"
	[ "$fa" = "$(netns_frags "$NS_A")" ] && [ "$fb" = "$(netns_frags "$NS_B")" ] ||
		verdict="${verdict:+$verdict; }IP fragments sent"
	tap_result "$run: both sides end cleanly, no IP fragment ($(retx "$run") retransmissions, $secs s)" \
		"$verdict" "$out/$run.client.out" "$out/$run.server.out"
}

# 100 connections at once: dapltest, 4 threads x 25 EPs, data validated.
many_connections() {
	run=conn100
	if ldd "$lib" 2>/dev/null | grep -q -E 'lib(asan|ubsan|tsan)\.so'; then
		# Debian's dapltest cannot load a sanitizer build of the
		# provider without a preload; the plain tree runs this case.
		n=$((n + 1))
		echo "ok $n # SKIP 100 connections: dapltest with a sanitizer build of the provider"
		return
	fi
	conf_pair $run udp
	set_loss 1
	srv_pre="in_b $run"
	cli_pre="in_a $run"
	dport=62100
	in_b $run timeout "$limit" dapltest -T S -D iw-ns -n $dport >"$out/$run.server.out" 2>&1 &
	spid=$!
	wait_listening dapltest "$spid" $dport
	in_a $run timeout "$limit" dapltest -T T -s "$ADDR_B" -D iw-ns -n $dport -V -i 200 -t 4 -w 25 \
		client SR 1024 server SR 1024 client RW 4096 client RR 4096 >"$out/$run.client.out" 2>&1
	cst=$?
	in_a $run timeout 60 dapltest -T Q -s "$ADDR_B" -D iw-ns -n $dport >"$out/$run.quit.out" 2>&1
	reap "$spid" 15 "$out/$run.server.out"
	set_loss 0
	bad='[Ee]rror|[Ff]ail|FAIL|[Ww]arning|[Mm]ismatch|bad (dis)?connect|[Ss]egmentation|[Aa]bort'
	verdict=$(judge "$out/$run.client.out" "$cst" 'Test completed successfully|Stats ----' "$bad")
	sverdict=$(judge "$out/$run.server.out" "$waited" 'Exiting' "$bad")
	[ -z "$sverdict" ] || verdict="${verdict:+$verdict; }server: $sverdict"
	# Every QP prints its TRP counters when destroyed: 100 data EPs.
	qps=$(grep -c 'TRP qp' "$out/$run.client.out")
	[ "$qps" -ge 100 ] || verdict="${verdict:+$verdict; }only $qps TRP connections"
	tap_result "100 connections at once over udp at 1 % loss (dapltest -t 4 -w 25, data validated)" \
		"$verdict" "$out/$run.client.out" "$out/$run.server.out"
}

ms_since() {	# NANOSECONDS-TIMESTAMP: milliseconds since then
	echo $((($(date +%s%N) - $1) / 1000000))
}

# kill_peers [vanish] TRANSPORT:VICTIM:BOUND-MS...: for each run, a client
# in A writes 16 MiB messages to a server in B; once every client is
# connected and a second later, every VICTIM (server or client) is
# SIGKILLed at once -- with "vanish", after the
# victims' namespace drops everything it receives and sends, so nothing
# answers (no ICMP) and the dying process's TCP FIN or reset never leaves
# (so with "vanish" the victims of one call share a namespace).  Each
# survivor must print its EP's end event and exit within its BOUND-MS.
# The runs of one call wait out their bounds together.
kill_peers() {
	vanish=
	[ "$1" = vanish ] && vanish=1 && shift
	k=0 vns=$NS_A longest=0
	for spec in "$@"; do
		k=$((k + 1))
		tr=${spec%%:*} victim=${spec#*:}
		bound=${victim#*:} victim=${victim%%:*}
		run=kill-$tr-$victim${vanish:+-vanish}
		[ "$victim" = server ] && vns=$NS_B
		[ "$bound" -le "$longest" ] || longest=$bound
		wait_s=$((bound / 1000 + 5))
		[ "$wait_s" -ge 10 ] || wait_s=10
		conf_pair "$run" "$tr"
		port=$((port + 1))
		# Neither a shell function nor timeout(1) around either side:
		# $! must be iwdtest itself (ip and env exec it); the poll
		# below bounds them.
		ip netns exec "$NS_B" env DAT_OVERRIDE="$out/$run.b.conf" \
			"$iwdtest" -s -P iw-ns -q "$port" -w "$wait_s" >"$out/$run.server.out" 2>&1 &
		spid=$!
		await_port "$port"
		ip netns exec "$NS_A" env DAT_OVERRIDE="$out/$run.a.conf" \
			"$iwdtest" -h "$ADDR_B" -P iw-ns -q "$port" -w "$wait_s" \
			-m write -S 16M -t 60 >"$out/$run.client.out" 2>&1 &
		cpid=$!
		# Mid-transfer: the client's header (printed once connected)
		# and a second of writes; a setup slowed by the runs already
		# streaming (both sides touch some 80 MiB of buffers first:
		# seconds on a busy VM, doc/performance.md) is waited for, up
		# to 20 s.
		tries=0
		while [ $tries -lt 200 ] && ! grep -q '^mode' "$out/$run.client.out"; do
			tries=$((tries + 1))
			sleep 0.1
		done
		if [ "$victim" = server ]; then
			eval "vpid_$k=$spid survivor_$k=$cpid slog_$k=\"\$out/\$run.client.out\""
		else
			eval "vpid_$k=$cpid survivor_$k=$spid slog_$k=\"\$out/\$run.server.out\""
		fi
		eval "desc_$k=\"\$tr: \$victim killed mid-transfer\" bound_$k=$bound ms_$k="
	done
	sleep 1
	[ -z "$vanish" ] || ip netns exec "$vns" nft -f - <<NFT
table inet iwvanish {
	chain input { type filter hook input priority 0; policy drop; }
	chain output { type filter hook output priority 0; policy drop; }
}
NFT
	t0=$(date +%s%N)
	i=0
	while [ $i -lt $k ]; do
		i=$((i + 1))
		eval "vpid=\$vpid_$i"
		kill -9 "$vpid" 2>/dev/null	# "vanish": a victim may be gone (its sends failed, EPERM)
	done
	i=0
	while [ $i -lt $k ]; do
		i=$((i + 1))
		eval "vpid=\$vpid_$i"
		wait "$vpid" 2>/dev/null	# now: no "Killed" notice from the shell later
	done
	# Each survivor's end, to 0.1 s, until the longest bound and 15 s more.
	left=$k
	while [ $left -gt 0 ] && [ "$(ms_since "$t0")" -lt $((longest + 15000)) ]; do
		i=0 left=0
		while [ $i -lt $k ]; do
			i=$((i + 1))
			eval "pid=\$survivor_$i ms=\$ms_$i"
			[ -z "$ms" ] || continue
			if kill -0 "$pid" 2>/dev/null; then
				left=$((left + 1))
			else
				eval "ms_$i=$(ms_since "$t0")"
			fi
		done
		[ $left -eq 0 ] || sleep 0.1
	done
	i=0
	while [ $i -lt $k ]; do
		i=$((i + 1))
		eval "pid=\$survivor_$i ms=\$ms_$i slog=\$slog_$i bound=\$bound_$i desc=\$desc_$i"
		if [ -z "$ms" ]; then
			echo "iw-test: still running $(((longest + 15000) / 1000)) s after the kill; killed" >>"$slog"
			kill "$pid" 2>/dev/null
			ms=$(ms_since "$t0")
		fi
		wait "$pid" 2>/dev/null
		ev=$(sed -n 's/^iwdtest: connection event: //p' "$slog")
		verdict=
		case $ev in
		BROKEN|DISCONNECTED) [ "$ms" -le "$bound" ] || verdict="ended after $ms ms" ;;
		*) verdict="no BROKEN/DISCONNECTED reported (${ev:-none}) in $ms ms" ;;
		esac
		tap_result "$desc${vanish:+, its host gone (no ICMP)}: the other EP ends (${ev:-no event}) within $bound ms ($ms ms)" \
			"$verdict" "$slog"
	done
	ip netns exec "$vns" nft delete table inet iwvanish 2>/dev/null
}

# ssp TRANSPORT: iwdtest --ssp across the link: a socket of TRANSPORT
# (TCP, or a connected UDP socket) negotiated in streaming mode, then
# upgraded by a Socket Service Point; every transfer's data checked.
ssp() {	# TRANSPORT [WHAT]: WHAT tells a run under loss apart
	run=ssp-$1${2:+-lossy}
	conf_pair "$run" "$1"
	port=$((port + 1))
	in_b "$run" timeout "$limit" "$iwdtest" -s --ssp -P iw-ns -q "$port" -w 30 \
		>"$out/$run.server.out" 2>&1 &
	spid=$!
	await_port "$port"
	in_a "$run" timeout "$limit" "$iwdtest" -h "$ADDR_B" --ssp -P iw-ns -q "$port" -w 30 \
		--csv -m write,read,send -S 1,64K -t 0.2 >"$out/$run.client.out" 2>&1
	cst=$?
	reap "$spid" 15 "$out/$run.server.out"
	oks=$(grep -c ',OK,' "$out/$run.client.out")
	verdict=
	[ "$cst" -eq 0 ] && [ "$waited" -eq 0 ] || verdict="client status $cst, server status $waited"
	[ "$oks" -eq 6 ] || verdict="${verdict:+$verdict; }$oks of 6 transfers validated"
	tap_result "$1: iwdtest --ssp upgrades a $(echo "$1" | tr a-z A-Z) socket across the link${2:+ $2} ($oks of 6 transfers validated)" \
		"$verdict" "$out/$run.client.out" "$out/$run.server.out"
}

# ssp_lossy: ssp udp with the first datagram of each negotiation step
# dropped on arrival (an nftables rule per step, matching the word after
# "IWDTEST " in the UDP payload, with a quota of one datagram); each rule
# must have dropped one.
ssp_lossy() {
	next=$((port + 1))	# the qualifier ssp takes
	for ns in "$NS_A" "$NS_B"; do
		ip netns exec "$ns" nft -f - <<NFT || { tap_result "ssp udp under loss: nft rules" "nft failed"; return; }
table inet iwssploss {
	chain input {
		type filter hook input priority 0; policy accept;
		udp dport $next @th,128,32 0x53535020 quota until 60 bytes counter drop comment "hello"
		udp sport $next @th,128,32 0x57454c43 quota until 60 bytes counter drop comment "welcome"
		udp dport $next @th,128,32 0x52454144 quota until 60 bytes counter drop comment "READY"
		udp sport $next @th,128,32 0x55504752 quota until 60 bytes counter drop comment "offer"
	}
}
NFT
	done
	ssp udp "under the loss of each negotiation step's first datagram"
	drops=$(for ns in "$NS_A" "$NS_B"; do
		ip netns exec "$ns" nft list table inet iwssploss
		ip netns exec "$ns" nft delete table inet iwssploss
	done | sed -n 's/.*counter packets \([0-9]*\) .*comment "\([a-zA-Z]*\)".*/\2=\1/p' |
		grep -v '=0$' | sort | tr '\n' ' ' | sed 's/ $//')
	verdict=
	[ "$drops" = "READY=1 hello=1 offer=1 welcome=1" ] || verdict="dropped: ${drops:-nothing}"
	tap_result "udp: each negotiation step lost its first datagram ($drops)" "$verdict" \
		"$out/ssp-udp-lossy.client.out" "$out/ssp-udp-lossy.server.out"
}

ssp tcp
ssp udp
ssp_lossy
for pct in ${IW_NETNS_LOSS:-0 1 10}; do
	matrix "loss$pct" "$pct"
done
matrix reorder-dup 1 "trp_test=reorder:10,dup:10,seed:7"
many_connections
kill_peers udp:server:2000
# The server survives waiting to receive: its idle probe (TRP_IDLE_PROBE_MS,
# 1 s) meets the ICMP port unreachable of the dead client's kernel.
kill_peers udp:client:3000
kill_peers tcp:server:2000
kill_peers tcp:client:2000
# With the victim's host gone, the survivor learns it from silence.  Over
# udp: its retransmissions unanswered (TRP_MAX_RETX) or, with nothing of
# its own unacknowledged (the server reading, the client awaiting the
# server's acknowledgement), its peer's idle probes missing for 10 s.
# Over tcp: the kernel's keepalive (every 2 s while idle) and user timeout
# (data unacknowledged) end it after IWDAPL_PEER_TIMEOUT_MS, 10 s.
kill_peers vanish udp:server:20000 tcp:server:20000
kill_peers vanish udp:client:20000 tcp:client:20000
echo "1..$n"
[ "$failed" -eq 0 ]
