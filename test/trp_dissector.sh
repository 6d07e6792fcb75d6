#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# trp_dissector.sh [BUILDDIR]: the Wireshark dissector for TRP
# (tools/wireshark/trp.lua) on a real capture; TAP.
#
# An iwdtest run over the udp IA iw-lo-udp (Send, Write, Read and
# ping-pong, a few iterations of each size: a capture of a time-budgeted
# run at loopback speed, and its decode, took gigabytes of disk) is
# captured on loopback with tshark, on the run's UDP port,
# then decoded with the Lua dissector: every datagram must decode as TRP,
# the DDP/RDMAP segments must reach Wireshark's own iWARP dissector, no
# frame may be malformed, and every TRP header field must be shown.
# Capturing needs tshark/dumpcap and the right to capture (root, or the
# wireshark group): skipped otherwise.  Outputs stay in
# BUILDDIR/test/trp_dissector.d/.

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${1:-$(dirname "${DAT_OVERRIDE:-./dat.conf}")}
build=$(cd "$build" && pwd)
DAT_OVERRIDE=$build/dat.conf
export DAT_OVERRIDE
out=$build/test/trp_dissector.d
lua=$top/tools/wireshark/trp.lua
iwdtest=$build/test/dtest/iwdtest
mkdir -p "$out"

if ! command -v tshark >/dev/null 2>&1; then
	echo "1..0 # SKIP tshark not installed"
	exit 0
fi
if ! tshark -D 2>/dev/null | grep -q '\blo\b'; then
	echo "1..0 # SKIP no permission to capture on lo"
	exit 0
fi
if [ ! -x "$iwdtest" ] || ! grep -q '^iw-lo-udp ' "$DAT_OVERRIDE"; then
	echo "1..0 # SKIP no iwdtest or no iw-lo-udp in $DAT_OVERRIDE"
	exit 0
fi

n=0 failed=0
check() {	# check COND-STATUS TEXT
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}

port=$((40000 + $$ % 10000))
cap=$out/trp.pcapng
rm -f "$cap"
# The file size bound (KB) is a guard: the run below writes a few MB.
timeout 120 tshark -i lo -B 64 -f "udp port $port" -a filesize:65536 -w "$cap" \
	>"$out/capture.out" 2>&1 &
tpid=$!
tries=0
while ! grep -q 'Capturing on' "$out/capture.out" && [ $tries -lt 50 ]; do
	tries=$((tries + 1))
	sleep 0.2
done
# dumpcap says so a moment before its filter takes packets: on a busy
# machine (make distcheck) the client's first I packet, the MPA
# request, was once missed.
sleep 1
args="-P iw-lo-udp -q $port -S 64,4K,64K,300K -n 2"
# shellcheck disable=SC2086 # args is a word list
timeout 60 "$iwdtest" -s $args >"$out/server.out" 2>&1 &
spid=$!
tries=0
while [ $tries -lt 50 ] && ! ss -Hlun "( sport = :$port )" 2>/dev/null | grep -q .; do
	tries=$((tries + 1))
	sleep 0.1
done
# shellcheck disable=SC2086
timeout 60 "$iwdtest" -h 127.0.0.1 $args >"$out/client.out" 2>&1
cst=$?
wait "$spid"
sst=$?
sleep 0.5
kill "$tpid" 2>/dev/null
wait "$tpid" 2>/dev/null
check $((cst + sst)) "iwdtest over iw-lo-udp (client exit $cst, server exit $sst)"

# The dissector is a heuristic one (TRP has no port of its own): asked
# first, so that a port Wireshark gives another protocol (41170 is
# Manolito's, and the run's port is one of 40000-49999) does not take
# the capture.
decode() {
	tshark -r "$cap" -o udp.try_heuristic_first:TRUE -X lua_script:"$lua" "$@"
}
decode -V >"$out/decode.txt" 2>&1
all=$(tshark -r "$cap" 2>/dev/null | wc -l)
trp=$(decode -Y trp 2>/dev/null | wc -l)
ddp=$(decode -Y iwarp_ddp_rdmap 2>/dev/null | wc -l)
init=$(decode -Y 'trp.flags.init == 1' 2>/dev/null | wc -l)
acks=$(decode -Y 'trp.flags.ack == 1' 2>/dev/null | wc -l)
# A dissector on the run's port, as Wireshark registers its own.
echo "DissectorTable.get('udp.port'):add($port, Dissector.get('dns'))" >"$out/port.lua"
taken=$(decode -X lua_script:"$out/port.lua" -Y trp 2>/dev/null | wc -l)
[ "$all" -gt 0 ] && [ "$trp" -eq "$all" ]
check $? "every captured datagram decodes as TRP ($trp of $all)"
[ "$all" -gt 0 ] && [ "$taken" -eq "$all" ]
check $? "... also with the run's port given to another protocol ($taken of $all)"
[ "$ddp" -gt 0 ]
check $? "DDP/RDMAP segments handed to Wireshark's iwarp_ddp_rdmap ($ddp)"
grep -q 'MPA ID Req Frame' "$out/decode.txt" && grep -q 'MPA ID Rep Frame' "$out/decode.txt" && [ "$init" -ge 2 ]
check $? "the connection exchange: I packets with the MPA request and reply ($init)"
[ "$acks" -gt 0 ]
check $? "pure acknowledgements decoded ($acks)"
bad=$(grep -c -E 'Malformed|Expert Info \(Error' "$out/decode.txt")
check "$bad" "no malformed frame, no error expert info ($bad)"
missing=""
for f in 'PSN: ' 'Acknowledgement PSN: ' 'Init (I): ' 'Ack / selective ack (A): ' \
	 'Fin (F): ' 'Reserved (R): ' 'Credits: ' 'Peer may send up to PSN: ' \
	 'Packet kind: ' 'MPA key: ' 'MPA revision: ' 'Private data length: ' \
	 'Remote Direct Memory Access Protocol' 'Direct Data Placement'; do
	grep -q -F "$f" "$out/decode.txt" || missing="$missing [$f]"
done
[ -z "$missing" ]
check $? "every TRP field shown${missing:+; missing:$missing}"
echo "# decode: $out/decode.txt"
echo "1..$n"
[ "$failed" -eq 0 ]
