#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# udp_netns.sh [BUILDDIR]: iWARP over TRP/UDP under real packet loss; TAP.
#
# Two network namespaces joined by a veth pair (MTU 1500), each with its
# own address and udp IA.  An nftables input-hook rule in both
# namespaces, `numgen random mod 100 < N drop`, drops N % of the UDP
# packets each side receives -- real loss: the sender's sendmsg succeeds
# and the datagram is gone (an output-hook drop would make sendmsg fail
# with EPERM instead).  For N = 0, 1 and 10 an iwdtest run (Write, Read,
# Send and ping-pong with every transfer's data checked) must pass, and
# the datagrams stay within the path MTU (no IP fragments).  IW_NETNS_LOSS
# overrides the list of percentages.
#
# Needs root (namespaces, nftables), ip and nft: skipped otherwise.  The
# addresses live only on the veth pair inside the namespaces this script
# makes and removes.  Outputs stay in BUILDDIR/test/udp_netns.d/.

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "${DAT_OVERRIDE:-./dat.conf}")}
build=$(cd "$build" && pwd)
out=$build/test/udp_netns.d
iwdtest=$build/test/dtest/iwdtest
lib=$build/.libs/libdaploiw.so.2
mkdir -p "$out"

skip() {
	echo "1..0 # SKIP $1"
	exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, nftables)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
command -v nft >/dev/null 2>&1 || skip "no nft (nftables)"
[ -x "$iwdtest" ] && [ -e "$lib" ] || skip "no iwdtest or provider in $build"
A=trpa$$ B=trpb$$ VA=vta$$ VB=vtb$$
AA=169.254.77.1 AB=169.254.77.2
ip netns add "$A" 2>/dev/null || skip "cannot create network namespaces"
cleanup() {
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
}
trap cleanup EXIT INT TERM
ip netns add "$B" &&
	ip link add "$VA" type veth peer name "$VB" &&
	ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" &&
	ip -n "$A" addr add "$AA/24" dev "$VA" &&
	ip -n "$B" addr add "$AB/24" dev "$VB" &&
	ip -n "$A" link set "$VA" mtu 1500 up && ip -n "$B" link set "$VB" mtu 1500 up &&
	ip -n "$A" link set lo up && ip -n "$B" link set lo up ||
	skip "cannot set up the veth pair"

conf=$out/dat.conf
{
	echo "trp-a u2.0 nonthreadsafe default $lib dapl.2.0 \"$AA udp\" \"\""
	echo "trp-b u2.0 nonthreadsafe default $lib dapl.2.0 \"$AB udp\" \"\""
} >"$conf"

loss() {	# loss NS PCT: drop PCT % of the UDP packets NS receives
	ip netns exec "$1" nft delete table inet trploss 2>/dev/null
	[ "$2" -eq 0 ] && return 0
	ip netns exec "$1" nft -f - <<NFT
table inet trploss {
	chain input {
		type filter hook input priority 0; policy accept;
		meta l4proto udp numgen random mod 100 < $2 drop
	}
}
NFT
}

frag_count() {	# IP fragments sent from namespace $1 so far
	ip netns exec "$1" awk '/^Ip:/ { if (h) { print $14; exit } h = 1 }' /proc/net/snmp
}

n=0 failed=0
for pct in ${IW_NETNS_LOSS:-0 1 10}; do
	n=$((n + 1))
	loss "$A" "$pct" && loss "$B" "$pct" || { echo "not ok $n - nft rule for $pct %"; failed=$((failed + 1)); continue; }
	fa=$(frag_count "$A")
	port=$((50000 + pct))
	args="-q $port -S 64,1500,64K,1M -t 0.3 -w 60"
	# shellcheck disable=SC2086 # args is a word list
	IWDAPL_TRP_STATS=1 timeout 300 ip netns exec "$B" env DAT_OVERRIDE="$conf" \
		"$iwdtest" -s -P trp-b $args >"$out/server.$pct.out" 2>&1 &
	spid=$!
	tries=0
	while [ $tries -lt 50 ] && ! ip netns exec "$B" ss -Hlun "( sport = :$port )" | grep -q .; do
		tries=$((tries + 1))
		sleep 0.1
	done
	# shellcheck disable=SC2086
	IWDAPL_TRP_STATS=1 timeout 300 ip netns exec "$A" env DAT_OVERRIDE="$conf" \
		"$iwdtest" -h "$AB" -P trp-a $args >"$out/client.$pct.out" 2>&1
	cst=$?
	wait "$spid"
	sst=$?
	fb=$(frag_count "$A")
	retx=$(grep -h 'TRP qp' "$out/client.$pct.out" "$out/server.$pct.out" |
		sed -n 's/.* retx \([0-9]*\) fast \([0-9]*\) rto \([0-9]*\).*/\1+\2/p' | paste -sd+ | bc 2>/dev/null)
	if [ "$cst" -eq 0 ] && [ "$sst" -eq 0 ] && ! grep -q FAIL "$out/client.$pct.out" &&
	   [ "$fa" = "$fb" ]; then
		echo "ok $n - $pct % loss: iwdtest passes, data checked (retransmissions: ${retx:-?})"
	else
		echo "not ok $n - $pct % loss: iwdtest (client $cst, server $sst, fragments $fa -> $fb)"
		tail -5 "$out/client.$pct.out" | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
done
echo "1..$n"
[ "$failed" -eq 0 ]
