# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# netns_lib.sh: two network namespaces joined by a veth pair (MTU 1500),
# for the scripts that run the provider across a real link
# (udp_netns.sh, netns_tools.sh); cluster_lib.sh uses its skip and loss
# helpers for a bridge of many.  Sourced, not run.  The addresses live
# only on the veth pair inside the namespaces; both namespaces are
# removed when the sourcing script exits.

netns_skip() {	# REASON: the whole script is skipped (TAP)
	echo "1..0 # SKIP $1"
	exit 0
}

# netns_setup: sets NS_A, NS_B (namespace names), ADDR_A, ADDR_B (their
# addresses on the veth pair); skips the script when not root, when ip or
# nft is missing, or when the namespaces cannot be made.
netns_setup() {
	[ "$(id -u)" = 0 ] || netns_skip "needs root (network namespaces, nftables)"
	command -v ip >/dev/null 2>&1 || netns_skip "no ip (iproute2)"
	command -v nft >/dev/null 2>&1 || netns_skip "no nft (nftables)"
	NS_A=iwnsa$$ NS_B=iwnsb$$
	ADDR_A=169.254.77.1 ADDR_B=169.254.77.2
	va=iwva$$ vb=iwvb$$
	ip netns add "$NS_A" 2>/dev/null || netns_skip "cannot create network namespaces"
	trap netns_cleanup EXIT
	trap 'exit 1' INT TERM
	ip netns add "$NS_B" &&
		ip link add "$va" type veth peer name "$vb" &&
		ip link set "$va" netns "$NS_A" && ip link set "$vb" netns "$NS_B" &&
		ip -n "$NS_A" addr add "$ADDR_A/24" dev "$va" &&
		ip -n "$NS_B" addr add "$ADDR_B/24" dev "$vb" &&
		ip -n "$NS_A" link set "$va" mtu 1500 up &&
		ip -n "$NS_B" link set "$vb" mtu 1500 up &&
		ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up ||
		netns_skip "cannot set up the veth pair"
}

netns_cleanup() {
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
}

# netns_conf FILE LIB IA ADDR TRANSPORT [OPTIONS]: a dat.conf with one
# line, IA bound to ADDR over TRANSPORT (instance-data OPTIONS appended).
netns_conf() {
	echo "$3 u2.0 nonthreadsafe default $2 dapl.2.0 \"$4 $5${6:+ $6}\" \"\"" >"$1"
}

# netns_loss NS PCT [PROTO]: drop PCT % of the UDP (or PROTO: tcp)
# packets NS receives -- real loss: an input-hook drop leaves the sender's
# sendmsg successful (an output-hook drop would make it fail with EPERM).
# 0 removes the rule.
netns_loss() {
	ip netns exec "$1" nft delete table inet iwloss 2>/dev/null
	[ "$2" -eq 0 ] && return 0
	ip netns exec "$1" nft -f - <<NFT
table inet iwloss {
	chain input {
		type filter hook input priority 0; policy accept;
		meta l4proto ${3:-udp} numgen random mod 100 < $2 counter drop
	}
}
NFT
}

netns_loss_drops() {	# NS: the packets netns_loss's rule has dropped so far
	ip netns exec "$1" nft list table inet iwloss 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}

netns_frags() {	# NS: the IP fragments NS has created so far (by name:
	# the column's position differs between kernels)
	ip netns exec "$1" awk '/^Ip:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "FragCreates") c = i; h = 1; next }
		print $c; exit }' /proc/net/snmp
}
