#!/bin/sh
# The main job on the loopback IA: installs what is missing, builds, and
# shows the provider working through Debian's DAT registry.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
export DAT_OVERRIDE="$top/build/dat.conf"
echo "== dat.conf: $DAT_OVERRIDE"
head -1 "$DAT_OVERRIDE"
echo "== iwinfo: open iw-lo through libdat2 and print dat_ia_query"
"$top/build/examples/iwinfo" iw-lo
