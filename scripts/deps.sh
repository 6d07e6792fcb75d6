#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Installs the Debian packages the build, the demo and the tests need,
# if any is missing.  Sourced by demo.sh and test.sh.
PKGS="build-essential g++ autoconf automake libtool pkg-config \
libdapl-dev libdapl2 dapl2-utils libibverbs-dev libnl-3-dev libnl-route-3-dev \
libisal-dev nftables \
valgrind iproute2 procps tshark libfabric-bin gnuplot-nox \
debhelper lintian"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "Installing missing Debian packages:$missing"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		{ echo "apt-get install failed" >&2; exit 1; }
	# CI machines can be short of disk: the downloaded archives are not
	# needed once installed (.ci/run asks; a user's cache is left alone).
	[ -z "${IW_APT_CLEAN:-}" ] || $SUDO apt-get clean
fi
