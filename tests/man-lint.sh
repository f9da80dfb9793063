#!/bin/sh
# man-lint.sh - every manual page in man/ is clean under `mandoc -Tlint'
# (no message at any level) and `groff -ww -z -man'.  A link page, which
# holds one `.so manN/page.N' line, must name a page that exists; mandoc
# always calls .so fragile, so that one message is the only one allowed
# there.  Skips (77) where neither mandoc nor groff is installed.
set -u
man=$(cd "${srcdir:-.}/../man" && pwd) || exit 99
have_mandoc=no have_groff=no
command -v mandoc >/dev/null 2>&1 && have_mandoc=yes
command -v groff >/dev/null 2>&1 && have_groff=yes
if [ $have_mandoc = no ] && [ $have_groff = no ]; then
    echo "SKIP: neither mandoc nor groff is installed"
    exit 77
fi
fail=0 n=0
for page in "$man"/man[1-8]/*.[1-8]; do
    [ -e "$page" ] || continue
    n=$((n + 1))
    if head -n 1 "$page" | grep -q '^\.so '; then
        target=$(sed -n '1s/^\.so[[:space:]]*//p' "$page")
        if [ "$(wc -l < "$page")" -ne 1 ] || [ ! -f "$man/$target" ]; then
            echo "FAIL: $page: a link page must be one line naming an existing page"
            fail=1
        fi
        continue
    fi
    if [ $have_mandoc = yes ]; then
        out=$(mandoc -Tlint "$page" 2>&1)
        if [ -n "$out" ]; then
            printf '%s\n' "$out"
            fail=1
        fi
    fi
    if [ $have_groff = yes ]; then
        out=$(groff -ww -z -man "$page" 2>&1)
        if [ -n "$out" ]; then
            printf '%s: %s\n' "$page" "$out"
            fail=1
        fi
    fi
done
if [ "$n" = 0 ]; then
    echo "FAIL: no manual page found under $man"
    exit 1
fi
[ "$fail" = 0 ] && echo "PASS: $n pages clean (mandoc: $have_mandoc, groff: $have_groff)"
exit "$fail"
