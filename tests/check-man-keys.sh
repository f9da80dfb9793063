#!/bin/sh
# Every key of the code's table (gpuarena-config --keys) is documented in
# gpuarena.conf(5), and every key the page documents is in the table.
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
page=$GA_MANDIR/man5/gpuarena.conf.5
[ -x "$GA_CONFIG_TOOL" ] || { echo "FAIL: $GA_CONFIG_TOOL not built" >&2; exit 1; }
[ -r "$page" ] || { echo "FAIL: $page missing" >&2; exit 1; }
tmp=${TMPDIR:-/tmp}/check-man-keys.$$
trap 'rm -f "$tmp".*' EXIT
"$GA_CONFIG_TOOL" --keys | sort > "$tmp.code" || fail "gpuarena-config --keys failed"
man_keys "$page" | sort > "$tmp.man"
[ -s "$tmp.code" ] || fail "the key table is empty"
[ -s "$tmp.man" ] || fail "no key found under KEYS in $page"
for k in $(comm -23 "$tmp.code" "$tmp.man"); do
    fail "key '$k' is in the code's table but not documented in $page"
done
for k in $(comm -13 "$tmp.code" "$tmp.man"); do
    fail "key '$k' is documented in $page but not in the code's table"
done
dups=$(uniq -d "$tmp.man")
[ -z "$dups" ] || fail "keys documented twice in $page: $dups"
[ $ga_fail = 0 ] && echo "$(wc -l < "$tmp.code") keys: table and gpuarena.conf(5) agree"
exit $ga_fail
