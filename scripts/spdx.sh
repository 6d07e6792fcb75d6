#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# spdx.sh [--check] [FILE...]: puts the project's SPDX license line (the
# expression "GPL-2.0-only OR BSD-2-Clause", see COPYING), in the comment
# form of each file's type, as its first line (second after a
# "#!" line) in every tracked file where a comment fits: C and C++ sources
# and headers, linker maps, shell and other "#!" scripts, Makefile.am,
# configure.ac, valgrind suppressions, Lua, Markdown and man pages.  Other
# files (data, dat.conf templates, Debian control files, COPYING itself)
# are covered by COPYING.  Running it twice changes nothing.
#
# --check changes nothing; it lists the files without the line and exits 1
# if there is any.  Without FILE arguments it takes every file git tracks
# (every file under the top directory when there is no git).
set -u

id='SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause'
top=$(cd "$(dirname "$0")/.." && pwd)
check=
case ${1:-} in
--check) check=1; shift ;;
-h | --help)
	sed -n '3,16s/^# \{0,1\}//p' "$0"
	exit 0 ;;
-*) echo "usage: $0 [--check] [FILE...]" >&2; exit 2 ;;
esac

# The line for FILE in its type's comment form; empty when none fits.
spdx_line() {
	case $1 in
	*.c | *.h | *.cc | *.map) printf '/* %s */\n' "$id" ;;
	*.sh | *.am | *.supp) printf '# %s\n' "$id" ;;
	*.ac) printf 'dnl %s\n' "$id" ;;
	*.lua) printf -- '-- %s\n' "$id" ;;
	*.md) printf '<!-- %s -->\n' "$id" ;;
	*.[1-8]) printf '.\\" %s\n' "$id" ;;
	*) [ "$(head -c 2 "$1")" != '#!' ] || printf '# %s\n' "$id" ;;
	esac
}

# The line number the SPDX line belongs on: after a "#!" line, else first.
spdx_pos() {
	if [ "$(head -c 2 "$1")" = '#!' ]; then echo 2; else echo 1; fi
}

list_files() {
	if [ $# -gt 0 ]; then
		printf '%s\n' "$@"
	elif git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git -C "$top" ls-files | sed "s|^|$top/|"
	else
		find "$top" -type f ! -path '*/.git/*' ! -path "$top/build*"
	fi
}

missing=0 bad=0 added=0
list_files "$@" | {
	while IFS= read -r f; do
		[ -f "$f" ] || continue
		case $f in
		*/corpus/* | */COPYING | */debian/copyright) continue ;;
		esac
		grep -Iq . "$f" 2>/dev/null || continue	# binary or empty
		want=$(spdx_line "$f")
		[ -n "$want" ] || continue
		pos=$(spdx_pos "$f")
		have=$(sed -n "${pos}p" "$f")
		[ "$have" != "$want" ] || continue
		if head -n 5 "$f" | grep -q '^[^[:alnum:]]*SPDX-License-Identifier:'; then
			echo "${f#"$top"/}: has another SPDX line; left as it is" >&2
			bad=$((bad + 1))
			continue
		fi
		if [ -n "$check" ]; then
			echo "${f#"$top"/}: no SPDX line"
			missing=$((missing + 1))
			continue
		fi
		tmp=$(mktemp) || exit 1
		# The line through the environment: awk -v would eat backslashes.
		SPDX_LINE=$want awk -v pos="$pos" '
			NR == pos { print ENVIRON["SPDX_LINE"] }
			{ print }
			END { if (NR < pos) print ENVIRON["SPDX_LINE"] }' \
			"$f" >"$tmp" && cat "$tmp" >"$f"
		rm -f "$tmp"
		added=$((added + 1))
	done
	if [ -n "$check" ]; then
		echo "spdx: $missing file(s) without the SPDX line, $bad with another"
	else
		echo "spdx: added the SPDX line to $added file(s); $bad with another left alone"
	fi
	[ "$missing" -eq 0 ] && [ "$bad" -eq 0 ]
}; exit	# on the same line: this file may have just been edited under the shell
