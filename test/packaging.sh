#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# packaging.sh [WORKDIR]: tests iwdapl-register on scratch files, then the
# Debian packages end to end, and prints TAP.
#
# Scratch files (any user): adding twice is adding once, removing leaves
# every other line byte for byte, a missing final newline is added without
# touching the last entry and taken away again on removal.
#
# Packages (root with dpkg-buildpackage only; skipped otherwise, or when
# iwdapl's packages are installed already, which it does not touch -- but
# it purges what a run of its own, killed before its purge, left): builds
# them from a copy of the source tree in WORKDIR (the tree itself stays
# clean), checks them with lintian (no error tag), installs them, runs
# Debian's dtest against the installed provider through /etc/dat.conf (no
# DAT_OVERRIDE), purges them and checks that /etc/dat.conf is byte for byte
# what it was; then once more with the other final-newline state of the
# file.  /etc/dat.conf is restored whatever happens.
#
# WORKDIR defaults to a temporary directory, removed at the end; a given
# one is kept with the build log, lintian's output and the dtest outputs.
# IW_TOOL_TIMEOUT (seconds, default 120) bounds each dtest run.

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
ia=iw-lo
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
limit=${IW_TOOL_TIMEOUT:-120}
n=0 failed=0 san_kind=
unset DAT_OVERRIDE

if [ -n "${1:-}" ]; then
	work=$1
	rm -rf "$work"
	keep_work=1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/iwdapl-packaging.XXXXXX") || exit 99
	keep_work=
fi
mkdir -p "$work/scratch" || exit 99
logdir=$work

pkgs="libdaploiw2 libdaploiw-dev iwdapl-utils"
conf=/etc/dat.conf
installed_by_us=
conf_saved=
# A copy of $conf as it was, from before our install until our purge and
# restore: a run killed in between (SIGKILL, a machine stopped: no EXIT
# trap) left its packages installed, and later runs skipped them as a
# user's own.  Its presence tells them apart.
marker=${IW_PKG_MARKER:-/var/tmp/iwdapl-packaging.conf}

skip() {	# COUNT REASON: COUNT test points skipped
	i=0
	while [ "$i" -lt "$1" ]; do
		n=$((n + 1))
		echo "ok $n # SKIP $2"
		i=$((i + 1))
	done
}

installed() {	# PACKAGE: dpkg has it installed
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# The copy of $conf goes once none of our packages is left (a purge that
# failed leaves it for the next run to retry).
drop_marker() {
	for p in $pkgs; do
		! installed "$p" || return 0
	done
	rm -f "$marker"
}

cleanup() {
	if [ -n "$installed_by_us" ]; then
		# shellcheck disable=SC2086 # package list
		dpkg --purge $pkgs >>"$work/cleanup.log" 2>&1
	fi
	if [ -n "$conf_saved" ] && ! cmp -s "$work/dat.conf.orig" "$conf"; then
		cp -p "$work/dat.conf.orig" "$conf"
		echo "# restored $conf from $work/dat.conf.orig"
	fi
	[ -z "$conf_saved" ] || drop_marker
	[ -n "$keep_work" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# ------------------------------------------------ iwdapl-register, scratch
reg=$work/iwdapl-register
sed -e 's|@libdir[@]|/usr/lib/test|g' -e 's|@VERSION[@]|test|g' \
	"$top/tools/iwdapl-register.in" >"$reg" && chmod +x "$reg" || exit 99
s=$work/scratch

# Two provider lines, the second without a final newline, as Debian ships.
entry() { printf '%s u2.0 nonthreadsafe default lib%s.so.2 dapl.2.0 "%s 1" ""' "$1" "$1" "$1"; }
{ echo "# a comment"; entry ofa-a; echo; entry ofa-b; } >"$s/nonl"
{ cat "$s/nonl"; echo; } >"$s/nl"

why=
cp "$s/nonl" "$s/t"
"$reg" -q --add --conf "$s/t" && cp "$s/t" "$s/once" &&
	"$reg" -q --add --conf "$s/t" || why="--add failed"
[ -n "$why" ] || cmp -s "$s/t" "$s/once" || why="the second --add changed the file"
[ -n "$why" ] || [ "$("$reg" --list --conf "$s/t" | grep -c '^iw-lo ')" -eq 1 ] ||
	why="--list does not show iw-lo once"
tap_result "iwdapl-register: adding twice is adding once" "$why" "$s/t"

# The original bytes, one newline, then exactly our two lines.
why=
size=$(wc -c <"$s/nonl")
head -c "$size" "$s/once" | cmp -s - "$s/nonl" || why="the original bytes changed"
[ -n "$why" ] || [ "$(tail -c +$((size + 1)) "$s/once" | head -c 1 | od -An -c | tr -d ' ')" = '\n' ] ||
	why="no newline after the original last line"
[ -n "$why" ] || [ "$(sed -n 3p "$s/once")" = "$(entry ofa-b)" ] ||
	why="the last original entry is not intact on its own line"
[ -n "$why" ] || [ "$(wc -l <"$s/once")" -eq 5 ] || why="not 5 lines: $(wc -l <"$s/once")"
tap_result "iwdapl-register: a missing final newline is added, the last entry intact" \
	"$why" "$s/once"

why=
for f in nonl nl; do
	cp "$s/$f" "$s/t"
	"$reg" -q --add --conf "$s/t" && "$reg" -q --remove --conf "$s/t" ||
		why="$why $f: add/remove failed;"
	cmp -s "$s/t" "$s/$f" || why="$why $f: not byte-identical after add+remove;"
done
tap_result "iwdapl-register: add then remove restores the file (with and without final newline)" "$why"

# Others' lines around ours: one appended after ours, another IA of ours.
why=
cp "$s/nonl" "$s/t"
"$reg" -q --add --conf "$s/t" &&
	entry admin-added >>"$s/t" && echo >>"$s/t" &&
	"$reg" -q --add --name iw-eth9 --where eth9 --options 'mpa_rev=1' --conf "$s/t" &&
	"$reg" -q --remove iw-lo --conf "$s/t" || why="add/remove failed"
{ cat "$s/nonl"; echo; entry admin-added; echo; } >"$s/want"
[ -n "$why" ] || [ "$("$reg" --list --conf "$s/t")" = \
	'iw-eth9 u2.0 nonthreadsafe default /usr/lib/test/libdaploiw.so.2 dapl.2.0 "eth9 tcp mpa_rev=1" ""' ] ||
	why="--list after removing iw-lo: $("$reg" --list --conf "$s/t")"
[ -n "$why" ] || { "$reg" -q --remove --conf "$s/t" && cmp -s "$s/t" "$s/want"; } ||
	why="others' lines are not byte-identical after --remove"
tap_result "iwdapl-register: --remove leaves others' lines byte-identical" "$why" "$s/t"

why=
cp "$s/nonl" "$s/t"
"$reg" -q --add --name iw-a --conf "$s/t" && "$reg" -q --add --name iw-b --conf "$s/t" &&
	"$reg" -q --remove iw-a --conf "$s/t" && "$reg" -q --remove iw-b --conf "$s/t" ||
	why="add/remove failed"
[ -n "$why" ] || cmp -s "$s/t" "$s/nonl" || why="not byte-identical after removing both, one by one"
tap_result "iwdapl-register: two IAs removed one by one restore the file" "$why" "$s/t"

why=
{ cat "$s/nl"; echo 'iw-lo u2.0 nonthreadsafe default /x.so dapl.2.0 "lo tcp" ""'; } >"$s/t"
cp "$s/t" "$s/foreign"
chmod 640 "$s/t"
"$reg" -q --add --conf "$s/t" 2>"$s/err"
st=$?
[ "$st" -eq 3 ] || why="exit status $st, not 3, for a name taken by another line"
cmp -s "$s/t" "$s/foreign" || why="$why; the file changed"
"$reg" -q --add --name iw-other --conf "$s/t" || why="$why; --add iw-other failed"
[ "$(stat -c %a "$s/t")" = 640 ] || why="$why; mode $(stat -c %a "$s/t"), not 640"
tap_result "iwdapl-register: a name it did not write is left alone; mode kept" "$why" "$s/err"

# ------------------------------------------------------- Debian packages
PKG_POINTS=7
if [ "$(id -u)" -ne 0 ]; then
	skip $PKG_POINTS "not root (dpkg -i)"
	echo "1..$n"
	exit 0
fi
if ! command -v dpkg-buildpackage >/dev/null 2>&1 || ! command -v dh >/dev/null 2>&1; then
	skip $PKG_POINTS "dpkg-buildpackage or debhelper missing (Debian dpkg-dev, debhelper)"
	echo "1..$n"
	exit 0
fi
if [ -f "$marker" ]; then
	# shellcheck disable=SC2086 # list of packages
	dpkg --purge $pkgs >"$work/leftover.log" 2>&1
	cp -p "$marker" "$conf" && drop_marker
	echo "# purged $pkgs, left installed by an interrupted run ($marker), and restored $conf"
fi
for p in $pkgs; do
	if installed "$p"; then
		skip $PKG_POINTS "$p is installed already; not touching it"
		echo "1..$n"
		exit 0
	fi
done

# A copy of the sources: the files git knows (tracked or new), or the
# whole directory of a tarball; dpkg-buildpackage builds in place.
version=$(cd "$top" && dpkg-parsechangelog -S Version)
src=$work/src/iwdapl-$version
mkdir -p "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		tar --null --ignore-failed-read -T - -cf -) 2>/dev/null | tar -xf - -C "$src"
else
	(cd "$top" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$src"
fi
echo "# building $version in $src"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
	timeout 1800 dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1
st=$?
debs=
for p in $pkgs; do
	debs="$debs $work/src/${p}_${version}_$(dpkg --print-architecture).deb"
done
why=
[ "$st" -eq 0 ] || why="dpkg-buildpackage exit status $st"
for d in $debs; do
	[ -f "$d" ] || why="${why:+$why; }no $d"
done
if ! tap_result "dpkg-buildpackage -us -uc -b builds $pkgs" "$why" "$work/build.log"; then
	skip $((PKG_POINTS - 1)) "the packages did not build"
	echo "1..$n"
	exit 1
fi

if command -v lintian >/dev/null 2>&1; then
	lintian --pedantic "$work/src/iwdapl_${version}_"*.changes >"$work/lintian.out" 2>&1
	errors=$(grep -c '^E: ' "$work/lintian.out")
	echo "# lintian: $errors errors, $(grep -c '^W: ' "$work/lintian.out") warnings," \
		"$(grep -c '^[IP]: ' "$work/lintian.out") info/pedantic ($work/lintian.out)"
	why=
	[ "$errors" -eq 0 ] || why="$(grep '^E: ' "$work/lintian.out" | head -n 5)"
	tap_result "lintian reports no error" "$why"
else
	skip 1 "lintian not installed"
fi

why=
lib=$work/src/libdaploiw2_${version}_$(dpkg --print-architecture).deb
# grep reads all of dpkg-deb's output (-q would break its pipe).
dpkg-deb -c "$lib" | grep 'libdaploiw\.so\.2 ' >/dev/null || why="no libdaploiw.so.2 in libdaploiw2"
! dpkg-deb -c "$lib" | grep '\.la$' >/dev/null || why="${why:+$why; }a .la file in libdaploiw2"
syms=$(dpkg-deb -I "$lib" symbols | grep -c '@')
[ "$syms" -eq 2 ] || why="${why:+$why; }the symbols file lists $syms symbols, not 2"
# shellcheck disable=SC2086 # list of packages
for want in usr/include/dat2/dat_iw_extensions.h 'libdaploiw\.so ' man3/dat_iw_ssp_create.3 \
	usr/bin/iwinfo usr/bin/iwdtest usr/bin/iwdapl-register man1/iwdapl-register.1 man7/iwdapl.7; do
	for d in $debs; do dpkg-deb -c "$d"; done | grep "$want" >/dev/null || why="${why:+$why; }no $want"
done
tap_result "package contents (library and symbols, header, tools, man pages)" "$why"

cp -p "$conf" "$work/dat.conf.orig" 2>/dev/null || : >"$work/dat.conf.orig"
cp -p "$work/dat.conf.orig" "$marker"
conf_saved=1
installed_by_us=1
# shellcheck disable=SC2086 # list of packages
dpkg -i $debs >"$work/install.log" 2>&1
st=$?
why=
[ "$st" -eq 0 ] || why="dpkg -i exit status $st"
listed=$(iwdapl-register --list iw-lo 2>&1)
case $listed in
"iw-lo u2.0 nonthreadsafe default /usr/lib/"*"/libdaploiw.so.2 dapl.2.0 \"127.0.0.1 tcp\" \"\"") ;;
*) why="${why:+$why; }iwdapl-register --list shows '$listed'" ;;
esac
size=$(wc -c <"$work/dat.conf.orig")
head -c "$size" "$conf" | cmp -s - "$work/dat.conf.orig" ||
	why="${why:+$why; }the lines before ours changed"
[ -n "$why" ] || iwinfo iw-lo >"$work/iwinfo.out" 2>&1 || why="iwinfo iw-lo failed"
tap_result "dpkg -i registers iw-lo in $conf (iwdapl-register --list, iwinfo)" "$why" \
	"$work/install.log" "$work/iwinfo.out"

if command -v dtest >/dev/null 2>&1; then
	wait_ports_free 45248 15828
	timeout -k 5 "$limit" dtest -P "$ia" -s >"$work/dtest.server.out" 2>&1 &
	spid=$!
	wait_listening dtest "$spid"
	timeout -k 5 "$limit" dtest -P "$ia" -h 127.0.0.1 >"$work/dtest.client.out" 2>&1
	cst=$?
	reap "$spid" 15 "$work/dtest.server.out"
	done_re='DAPL Test Complete\. PASSED'
	bad='FAILED|[Ee]rror|ERR|[Ss]egmentation|[Aa]bort'
	why=$(judge "$work/dtest.client.out" "$cst" "$done_re" "$bad")
	[ -z "$why" ] || why="client: $why"
	swhy=$(judge "$work/dtest.server.out" "$waited" "$done_re" "$bad")
	[ -z "$swhy" ] || why="${why:+$why; }server: $swhy"
	tap_result "Debian's dtest against the installed provider, no DAT_OVERRIDE" "$why" \
		"$work/dtest.server.out" "$work/dtest.client.out"
else
	skip 1 "dtest not installed (Debian dapl2-utils)"
fi

# purge_cycle NAME [WHY]: purge; the file must then be what it was before.
purge_cycle() {
	# shellcheck disable=SC2086 # list of packages
	dpkg --purge $pkgs >"$work/purge.log" 2>&1
	st=$?
	installed_by_us=
	why=${2:-}
	[ "$st" -eq 0 ] || why="${why:+$why; }dpkg --purge exit status $st"
	cmp -s "$conf" "$work/dat.conf.before" ||
		why="${why:+$why; }$conf differs from before the installation"
	! ls /usr/lib/*/libdaploiw.so.2 >/dev/null 2>&1 ||
		why="${why:+$why; }the library is still there"
	tap_result "$1" "$why" "$work/purge.log"
}

final_newline_state() {
	if [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; then
		echo "no final newline"
	else
		echo "a final newline"
	fi
}

cp -p "$work/dat.conf.orig" "$work/dat.conf.before"
purge_cycle "dpkg --purge leaves $conf byte-identical ($(final_newline_state "$work/dat.conf.orig"))"

# Once more with the other final-newline state of the same file.
if [ "$(final_newline_state "$work/dat.conf.orig")" = "a final newline" ]; then
	head -c -1 "$work/dat.conf.orig" >"$work/dat.conf.before"
else
	{ cat "$work/dat.conf.orig"; echo; } >"$work/dat.conf.before"
fi
cat "$work/dat.conf.before" >"$conf"
installed_by_us=1
why=
dpkg -i "$lib" >"$work/install2.log" 2>&1 || why="dpkg -i libdaploiw2 failed"
/usr/share/libdaploiw2/iwdapl-register --list iw-lo 2>/dev/null | grep -q '^iw-lo ' ||
	why="${why:+$why; }iw-lo not registered"
purge_cycle "install + purge with $(final_newline_state "$work/dat.conf.before"): byte-identical" "$why"
cp -p "$work/dat.conf.orig" "$conf"

echo "1..$n"
[ "$failed" -eq 0 ]
