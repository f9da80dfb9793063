#!/bin/sh
# Every man page is clean under `mandoc -Tlint' (all messages, style
# included) and `groff -ww -z -man', where they are installed; a ".so"
# link page must point to an existing page.  Every page is listed in
# man/Makefile.am (so that `make install' installs it) and every listed
# page exists.
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
: "${MANDOC:=$(command -v mandoc)}"
: "${GROFF:=$(command -v groff)}"
if [ -z "$MANDOC" ] && [ -z "$GROFF" ]; then
    echo "SKIP: neither mandoc nor groff is installed"
    exit 77
fi
pages=$(cd "$GA_MANDIR" && ls man[1-9]/*.[1-9] 2> /dev/null)
[ -n "$pages" ] || fail "no man page under $GA_MANDIR"
for p in $pages; do
    t=$(so_target "$GA_MANDIR/$p")
    if [ -n "$t" ]; then
        [ -r "$GA_MANDIR/$t" ] || fail "$p: .so target $t does not exist"
        continue
    fi
    if [ -n "$MANDOC" ]; then
        out=$("$MANDOC" -Tlint "$GA_MANDIR/$p" 2>&1)
        [ -z "$out" ] || fail "mandoc -Tlint $p:
$out"
    fi
    if [ -n "$GROFF" ]; then
        out=$(cd "$GA_MANDIR" && "$GROFF" -ww -z -man "$p" 2>&1)
        [ -z "$out" ] || fail "groff -ww -z -man $p:
$out"
    fi
done
listed=$(listed_pages "$GA_MAN_AM")
for p in $pages; do
    echo "$listed" | grep -qx -- "$p" || fail "$p is not listed in $GA_MAN_AM (not installed)"
done
for p in $listed; do
    [ -r "$GA_MANDIR/$p" ] || fail "$GA_MAN_AM lists $p, which does not exist"
done
[ $ga_fail = 0 ] && echo "$(echo $pages | wc -w) pages clean under ${MANDOC:+mandoc }${GROFF:+groff}"
exit $ga_fail
