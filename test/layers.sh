#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# layers.sh [BUILDDIR]: the files of dapl/common and dapl/ssp form
# layers, and so do the files of the engine (dapl/openib_iw): no file
# calls into a file that calls back into it, directly or around a longer
# cycle.  Read from the object files: each file's
# undefined symbols against the global symbols the others define (nm), so
# it sees calls and data, not function pointers (the provider table, the
# engine's handlers), which is what a lower file may hand upwards.  Prints
# the files bottom first.  TAP.
#
# A pair of files that are one concept may call each other: name it in
# ALLOWED as "a b" (file names without .c).  There is none in dapl/common
# and dapl/ssp; in the engine, the two halves of TRP (its acknowledgements
# are read by the receive half and act on the transmit half's ring, whose
# packets carry the receive half's selective acks) are one protocol.
ALLOWED=""
ALLOWED_ENGINE="iw_trp_tx iw_trp_rx"

b=${1:-.}
n=0
failed=0
ok() {	# RESULT DESCRIPTION [DIAGNOSTIC...]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
	shift 2
	for l in "$@"; do
		[ -n "$l" ] && printf '%s\n' "$l" | sed 's/^/# /'
	done
}

if ! command -v nm >/dev/null 2>&1; then
	echo "1..0 # SKIP nm (binutils) is not installed"
	exit 0
fi
# check_set TITLE ALLOWED DIR...: the floors of the files of dapl/DIR...
check_set() {
	title=$1; allowed=$2; shift 2; dirs=$*
	objs=$(for d in $dirs; do ls "$b"/dapl/$d/.libs/libdaploiw_la-*.o; done 2>/dev/null)
	count=$(printf '%s\n' "$objs" | grep -c '\.o$')
	[ "$count" -ge 20 ]
	ok $? "object files of $title found in $b ($count)"
	[ "$count" -ge 20 ] || return 1

	# One line per symbol: "D file sym" (defined here), "U file sym" (used).
	syms=$(for o in $objs; do
		f=$(basename "$o" .o)
		f=${f#libdaploiw_la-}
		case $o in */dapl/ssp/*) f=ssp/$f ;; esac
		nm -g --defined-only "$o" | awk -v f="$f" 'NF >= 3 { print "D", f, $NF }'
		nm -u "$o" | awk -v f="$f" '{ print "U", f, $NF }'
	done)

	# Edges "a b": file a uses a symbol that file b defines.
	edges=$(printf '%s\n' "$syms" | awk '
		$1 == "D" { def[$3] = $2; files[$2] = 1; next }
		{ use[NR] = $2 " " $3 }
		END {
			for (i in use) {
				split(use[i], u, " ")
				if ((u[2] in def) && def[u[2]] != u[1])
					e[u[1] " " def[u[2]]] = 1
			}
			for (k in e) print k
			for (f in files) print f, f
		}' | sort -u)

	# Kahn, bottom up: a file is placed once everything it uses is placed.
	# Self-edges only declare the file; ALLOWED pairs are folded into one.
	order=$(printf '%s\n' "$edges" | awk -v allowed="$allowed" '
		BEGIN {
			na = split(allowed, al, " ")
			for (i = 1; i + 1 <= na; i += 2) {
				same[al[i] " " al[i + 1]] = 1
				same[al[i + 1] " " al[i]] = 1
			}
		}
		{
			node[$1] = 1; node[$2] = 1
			if ($1 != $2 && !(($1 " " $2) in same)) {
				out[$1] = out[$1] " " $2
			}
		}
		END {
			left = 0
			for (f in node) left++
			while (left > 0) {
				placed_now = ""
				for (f in node) {
					if (f in done) continue
					k = split(out[f], o, " ")
					ready = 1
					for (j = 1; j <= k; j++)
						if (!(o[j] in done)) ready = 0
					if (ready) placed_now = placed_now " " f
				}
				if (placed_now == "") break
				k = split(placed_now, p, " ")
				# Deterministic output: sort this floor by name.
				for (i = 1; i <= k; i++)
					for (j = i + 1; j <= k; j++)
						if (p[j] < p[i]) { t = p[i]; p[i] = p[j]; p[j] = t }
				line = ""
				for (i = 1; i <= k; i++) {
					done[p[i]] = 1; left--
					line = line (i > 1 ? " " : "") p[i]
				}
				print "floor: " line
			}
			# What is left is on a cycle or above one.
			for (f in node)
				if (!(f in done)) print "cycle: " f " uses" out[f]
		}')

	cycles=$(printf '%s\n' "$order" | grep '^cycle: ')
	[ -z "$cycles" ]
	ok $? "no file of $title calls into a file that calls back into it" \
		"$(printf '%s\n' "$order" | sed 's/^floor: /bottom up: /;
			s/^cycle: /on or above a cycle: /')"
}

check_set "dapl/common and dapl/ssp" "$ALLOWED" common ssp || { echo "1..$n"; exit 1; }

# dapl/common uses dapl/ssp only from its top, the provider table.
up=$(printf '%s\n' "$edges" | awk '$1 !~ /^ssp\// && $1 != "provider" && $2 ~ /^ssp\//')
[ -z "$up" ]
ok $? "only provider.c of dapl/common calls into dapl/ssp" "$up"

check_set "the engine (dapl/openib_iw)" "$ALLOWED_ENGINE" openib_iw

echo "1..$n"
[ "$failed" -eq 0 ]
