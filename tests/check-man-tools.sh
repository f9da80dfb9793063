#!/bin/sh
# Every program of bin_PROGRAMS in tools/Makefile.am has a man1 page of its
# name whose NAME section names it.
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
progs=$(bin_programs "$GA_TOOLS_AM")
if [ -z "$progs" ]; then
    echo "SKIP: no bin_PROGRAMS in $GA_TOOLS_AM"
    exit 77
fi
for p in $progs; do
    page=$GA_MANDIR/man1/$p.1
    if [ ! -r "$page" ]; then
        fail "tool $p has no man page ($page)"
    elif ! awk '/^\.SH/ { on = ($2 == "NAME"); next } on' "$page" | grep -qw -- "$p"; then
        fail "$page does not name $p in its NAME section"
    fi
done
[ $ga_fail = 0 ] && echo "tools with man1 pages: $(echo $progs)"
exit $ga_fail
