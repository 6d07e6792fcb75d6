#!/bin/sh
# The main job on the loopback IA: installs what is missing, builds, and
# shows the provider working through Debian's DAT registry: the IA's
# attributes, an RDMA transfer with data validation, and a TCP socket
# upgraded to RDMA with a Socket Service Point.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
b="$top/build"
export DAT_OVERRIDE="$b/dat.conf"
echo "== dat.conf: $DAT_OVERRIDE"
head -1 "$DAT_OVERRIDE"
echo
echo "== iwinfo: open iw-lo through libdat2 and print dat_ia_query"
"$b/examples/iwinfo" iw-lo
echo
echo "== iwdtest: RDMA write, read, send and ping-pong over iw-lo, data validated"
q=$((50000 + $$ % 10000))
"$b/test/dtest/iwdtest" -s -q "$q" >"$b/demo-server.log" 2>&1 &
srv=$!
"$b/test/dtest/iwdtest" -h 127.0.0.1 -q "$q" -S 64,4K,64K,1M -t 0.5
wait "$srv"
echo
echo "== iwdtest --ssp: the same transfers over a TCP socket upgraded to RDMA"
q=$((q + 1))
"$b/test/dtest/iwdtest" -s --ssp -q "$q" >"$b/demo-server-ssp.log" 2>&1 &
srv=$!
"$b/test/dtest/iwdtest" -h 127.0.0.1 --ssp -q "$q" -S 64,64K -t 0.5
wait "$srv"
if [ -x "$b/examples/ssp_upgrade" ]; then
	echo
	echo "== ssp_upgrade: a TCP socket negotiates, then becomes an RDMA connection"
	"$b/examples/ssp_upgrade" --self-test
fi
if [ -x "$b/examples/ssp_handoff" ]; then
	echo
	echo "== ssp_handoff: a child process upgrades the socket it inherited"
	"$b/examples/ssp_handoff" --self-test
fi
