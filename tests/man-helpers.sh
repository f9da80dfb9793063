# man-helpers.sh - shared by the man page consistency tests of `make check'.
# Sourced, not run.  Every path can be overridden from the environment, so
# that a test can be pointed at a copy with a key or a page missing:
#   GA_MANDIR        the man/ directory (default: $top_srcdir/man)
#   GA_CONFIG_TOOL   gpuarena-config (default: $top_builddir/tools/gpuarena-config)
#   GA_LIBSO         the shared library (default: $top_builddir/lib/.libs/libgpuarena.so)
#   GA_TOOLS_AM      tools/Makefile.am (default: $top_srcdir/tools/Makefile.am)
#   GA_MAN_AM        man/Makefile.am (default: $GA_MANDIR/Makefile.am)
# Exit statuses follow the Automake harness: 0 pass, 1 fail, 77 skip.

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${GA_MANDIR:=$top_srcdir/man}"
: "${GA_CONFIG_TOOL:=$top_builddir/tools/gpuarena-config}"
: "${GA_LIBSO:=$top_builddir/lib/.libs/libgpuarena.so}"
: "${GA_TOOLS_AM:=$top_srcdir/tools/Makefile.am}"
: "${GA_MAN_AM:=$GA_MANDIR/Makefile.am}"

ga_fail=0
fail() {
    echo "FAIL: $*" >&2
    ga_fail=1
}

# The keys documented in gpuarena.conf(5): under ".SH KEYS", each ".TP"
# followed by ".B key".
man_keys() {
    awk '
        /^\.SH / { in_keys = ($2 == "KEYS") ; next }
        in_keys && prev == ".TP" && $1 == ".B" { print $2 }
        { prev = $0 }
    ' "$1"
}

# The page a ".so" link page points to (relative to GA_MANDIR), or nothing.
so_target() {
    awk '/^\.so / { print $2; exit } /^\.\\"/ { next } NF { exit }' "$1"
}

# The page itself, or the page a ".so" page points to.
resolve_page() {
    t=$(so_target "$1")
    if [ -n "$t" ]; then echo "$GA_MANDIR/$t"; else echo "$1"; fi
}

# Programs of bin_PROGRAMS in a Makefile.am (with "+=" and continuations).
bin_programs() {
    awk '
        /^[ \t]*bin_PROGRAMS[ \t]*\+?=/ { on = 1; sub(/^[^=]*=/, "") }
        on { line = $0; cont = sub(/\\$/, "", line); printf "%s ", line; if (!cont) on = 0 }
    ' "$1" | tr -s ' \t' '\n' | sed '/^$/d'
}

# Pages listed in dist_manN_MANS of man/Makefile.am (paths relative to man/).
listed_pages() {
    awk '
        /^[ \t]*(dist_)?man[1-9]_MANS[ \t]*\+?=/ { on = 1; sub(/^[^=]*=/, "") }
        on { line = $0; cont = sub(/\\$/, "", line); printf "%s ", line; if (!cont) on = 0 }
    ' "$1" | tr -s ' \t' '\n' | sed '/^$/d'
}
