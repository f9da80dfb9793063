#!/bin/sh
# localize.sh ARCHIVE PATTERN - leave PATTERN's symbols the only global
# ones of the static library ARCHIVE, as the version script does for the
# shared one.
#
# Why: the objects of libgpuarena.a call each other through some 360
# internal ga_* functions and variables, which a static link otherwise
# sees as global: a program or another static library defining one of
# those names (Global Arrays' Fortran API is ga_*) failed to link with
# "multiple definition", or, worse, took the other's definition.  The
# archive's objects are linked into one relocatable object (ld -r),
# whose internal references are then resolved, and objcopy makes every
# symbol not matching PATTERN local.  A static link then pulls the whole
# library in at once, as the shared library is loaded whole.
#
# Objects compiled for link-time optimisation carry their compiler's
# intermediate code besides the machine code (GCC's -ffat-lto-objects):
# that code is dropped, since it still names the symbols as global and
# a program linked with -flto would read it instead.  Where the link,
# the copy or the check fails (objects of intermediate code only, or no
# GNU binutils), the archive is left as built, with a warning: it works
# as before.  Standard output: "localized", or "kept: " and why.
#
# Environment: LD, OBJCOPY, NM, AR, RANLIB (the Makefile passes configure's).
set -u
archive=$1
pattern=$2
: "${LD:=ld}" "${OBJCOPY:=objcopy}" "${NM:=nm}" "${AR:=ar}" "${RANLIB:=ranlib}"

tmp=$archive.localize
rm -rf "$tmp" && mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
obj=$tmp/libgpuarena.o

# Says why on standard error, and on standard output for the stamp file
# that tests/static-link.sh reads.
give_up() {
    echo "localize.sh: warning: $1: $archive keeps its internal symbols global" >&2
    echo "kept: $1"
    exit 0
}

# Global symbols defined in an archive or object: "T name" lines.
defined() {
    $NM -g --defined-only "$1" 2>/dev/null | awk 'NF >= 3 { print $(NF - 1), $NF }' | sort -u
}

if ! $LD -r -o "$obj" --whole-archive "$archive"; then
    # clang's -flto objects are LLVM bitcode ("BC" 0xC0DE), which the
    # linker reads only through its plug-in, and ld -r not at all.
    magic=$($AR p "$archive" 2> /dev/null | head -c 4 | od -An -tx1 | tr -d ' \n')
    [ "$magic" != 4243c0de ] ||
        give_up "the objects hold no machine code (LLVM bitcode: link-time optimisation)"
    give_up "$LD -r failed"
fi
[ "$OBJCOPY" != : ] || give_up "no objcopy"
$OBJCOPY --wildcard --keep-global-symbol="$pattern" \
    --remove-section='.gnu.lto_*' --remove-section='.gnu.debuglto_*' "$obj" ||
    give_up "$OBJCOPY failed"

# The public symbols are all there, and nothing else is global.
prefix=${pattern%\*}
public() { defined "$1" | awk -v p="$prefix" 'index($2, p) == 1' | sort -u; }
[ -n "$(public "$obj")" ] ||
    give_up "the objects hold no machine code (link-time optimisation without -ffat-lto-objects?)"
[ "$(public "$archive")" = "$(public "$obj")" ] ||
    give_up "the relocatable object does not define the archive's public symbols"
[ "$(defined "$obj")" = "$(public "$obj")" ] ||
    give_up "objcopy left symbols outside $pattern global"

rm -f "$tmp/new.a"
$AR cr "$tmp/new.a" "$obj" && $RANLIB "$tmp/new.a" && mv -f "$tmp/new.a" "$archive" ||
    give_up "$AR failed"
echo "localized"
exit 0
