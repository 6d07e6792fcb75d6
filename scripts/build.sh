#!/bin/sh
# build.sh DIR [configure options...]: configure and build out of tree in DIR.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1; shift
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null)
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" -q --enable-werror "$@"
make -j"$(nproc)" -s >/dev/null
make -j"$(nproc)" -s check TESTS= >/dev/null
