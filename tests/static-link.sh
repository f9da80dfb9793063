#!/bin/sh
# static-link.sh - the static library, like the shared one, defines no
# global symbol but gpuarena_*: a program with functions and variables of
# the library's internal names (ga_*, which Global Arrays' Fortran API
# also uses) links against libgpuarena.a, keeps its own definitions, and
# uses a host arena; gpuarena.pc's --static flags name what the archive
# needs.  Before lib/localize.sh the link failed with "multiple
# definition of `ga_error'".  Skips (77) where no static library was
# built (--disable-static), no compiler or pkg-config is found, or the
# objects were compiled to intermediate code only (link-time optimisation).
set -u
lib=${top_builddir:-..}/lib/.libs/libgpuarena.a
hdr_dir=${srcdir:-.}/../include
cc=${CC:-cc}
pkgconf=${PKG_CONFIG:-pkg-config}
if [ ! -e "$lib" ]; then
    echo "SKIP: $lib not built (--disable-static?)"
    exit 77
fi
for tool in nm "${cc%% *}" "$pkgconf"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
# lib/localize.sh could not make the symbols local where the objects hold
# only a compiler's intermediate code (-flto without -ffat-lto-objects).
stamp=${top_builddir:-..}/lib/libgpuarena-localized.stamp
if [ -f "$stamp" ] && grep -q '^kept: the objects hold no machine code' "$stamp"; then
    echo "SKIP: $(cat "$stamp")"
    exit 77
fi
fail=0

bad=$(nm -g --defined-only "$lib" | awk 'NF >= 3 && $NF !~ /^gpuarena_[a-z0-9_]+$/ { print $NF }')
if [ -n "$bad" ]; then
    echo "FAIL: $lib defines $(printf '%s\n' "$bad" | wc -l) global symbols outside gpuarena_*, e.g.:"
    printf '%s\n' "$bad" | head -5 | sed 's/^/  /'
    fail=1
fi

# What a static link needs besides the archive: gpuarena.pc's --static
# flags name the libraries the archive calls (hwloc, inih, threads).  The
# program is linked with configure's flags for them, hwloc and inih as
# shared libraries: pkg-config's also name hwloc's own static needs
# (-ludev on Debian), which a build machine need not have.
if pcflags=$(PKG_CONFIG_PATH=${top_builddir:-..}/lib${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
    "$pkgconf" --static --libs gpuarena 2> /dev/null); then
    for want in -lgpuarena -lhwloc -linih -pthread; do
        case " $pcflags " in
        *" $want "*) ;;
        *)
            echo "FAIL: pkg-config --static --libs gpuarena lacks $want: $pcflags"
            fail=1
            ;;
        esac
    done
else
    echo "note: pkg-config could not resolve gpuarena.pc's dependencies here (hwloc's or inih's .pc)"
    pcflags=
fi
private=${GA_STATIC_LIBS:-}
if [ -z "$private" ] && [ -n "$pcflags" ]; then
    private=$(printf '%s\n' "$pcflags" | tr ' ' '\n' | grep -v -e '^-L' -e '^-lgpuarena$' | tr '\n' ' ')
fi
[ -n "$private" ] || { echo "SKIP: no flags to link hwloc and inih with"; exit 77; }

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'SRC'
#include <gpuarena.h>
#include <stdio.h>

/* Names that the library uses inside (ga_error is its error setter,
 * ga_bm_alloc_on its allocation): the program's own, with other types. */
int ga_error(int x);
int ga_error(int x) { return x + 40; }
long ga_bm_alloc_on = 2;

int main(void)
{
    gpuarena_t *a = NULL;
    void *p = NULL;
    if (gpuarena_create(GPUARENA_HOST, 0, NULL, &a) != GPUARENA_SUCCESS)
        return 3;
    if (gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p) != GPUARENA_SUCCESS || !p)
        return 4;
    ((volatile char *)p)[4095] = 1;
    if (gpuarena_free(a, p, GPUARENA_STREAM_HOST) != GPUARENA_SUCCESS)
        return 5;
    /* A bad call still reports through the library's own ga_error. */
    if (gpuarena_free(a, (char *)p + 1, GPUARENA_STREAM_HOST) == GPUARENA_SUCCESS ||
        !*gpuarena_last_error())
        return 6;
    if (gpuarena_destroy(a) != GPUARENA_SUCCESS)
        return 7;
    printf("%d\n", ga_error(0) + (int)ga_bm_alloc_on);
    return 0;
}
SRC
# shellcheck disable=SC2086 # the flags are words
# GA_LINK_FLAGS: the build's CFLAGS and LDFLAGS (a sanitizer's runtime).
if ! $cc ${GA_LINK_FLAGS:-} -I"$hdr_dir" "$tmp/t.c" "$lib" $private -o "$tmp/t" > "$tmp/link.log" 2>&1; then
    echo "FAIL: a program with ga_* names of its own does not link against $lib:"
    sed 's/^/  /' "$tmp/link.log" | head -8
    exit 1
fi
out=$("$tmp/t")
rc=$?
if [ $rc -ne 0 ] || [ "$out" != 42 ]; then
    echo "FAIL: the statically linked program exited $rc printing '$out' (want 0, '42')"
    fail=1
fi
exit $fail
