#!/bin/sh
# Every symbol exported by libgpuarena.so has a man3 page of its name that
# mentions it (directly or through a .so link page).
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
if [ ! -r "$GA_LIBSO" ]; then
    echo "SKIP: $GA_LIBSO not built (static-only build?)"
    exit 77
fi
command -v nm > /dev/null || { echo "SKIP: no nm"; exit 77; }
syms=$(nm -D --defined-only "$GA_LIBSO" | awk 'NF == 3 && $2 ~ /^[TDBRVWiu]$/ { print $3 }' |
       sed 's/@.*//' | sort -u)
[ -n "$syms" ] || fail "no exported symbol found in $GA_LIBSO"
n=0
for s in $syms; do
    n=$((n + 1))
    page=$GA_MANDIR/man3/$s.3
    if [ ! -r "$page" ]; then
        fail "exported symbol $s has no man page ($page)"
        continue
    fi
    target=$(resolve_page "$page")
    if [ ! -r "$target" ]; then
        fail "$page links to $target, which does not exist"
    elif ! grep -qw -- "$s" "$target"; then
        fail "$target (the page of $s) does not mention $s"
    fi
done
[ $ga_fail = 0 ] && echo "$n exported symbols, each with its man3 page"
exit $ga_fail
