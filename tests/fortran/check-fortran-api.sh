#!/bin/sh
# The Fortran module lib/fortran/gpuarena.F90 follows include/gpuarena.h:
# the fields of gpuarena_stats_t and gpuarena_total_t are the same, in the
# same order, with the same array sizes, and every numeric constant of the header (status codes,
# kinds, GPUARENA_CPU, versions) has a parameter of the same value.  Runs
# without a Fortran compiler: what is added to the header fails here until
# the module has it.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
h=$top_srcdir/include/gpuarena.h
f=$top_srcdir/lib/fortran/gpuarena.F90
tmp=${TMPDIR:-/tmp}/check-stats-fields.$$
trap 'rm -f "$tmp".*' EXIT
# The fields of struct TAG (typedef NAME) in C and of type NAME in
# Fortran: "uint64_t a, b[2]; /* comment */" and "integer(c_int64_t) ::
# a, b(2)" lines, one field a line, compared.
same_fields() {
    tag=$1 name=$2
    sed -n "/^typedef struct $tag {/,/^} $name;/p" "$h" |
        sed -n 's/^ *uint64_t \([^;]*\);.*/\1/p' | tr ',' '\n' |
        sed 's/^ *//; s/ *$//; s/\[\([0-9]*\)\]$/(\1)/' > "$tmp.c"
    sed -n "/^ *type, bind(c), public :: $name\$/,/^ *end type $name/p" "$f" |
        sed -n 's/^ *integer(c_int64_t) *:: *\(.*\)$/\1/p' | sed 's/ *!.*//' | tr ',' '\n' |
        sed 's/^ *//; s/ *$//' > "$tmp.f"
    [ -s "$tmp.c" ] || { echo "FAIL: no field of $name found in $h"; exit 1; }
    [ -s "$tmp.f" ] || { echo "FAIL: no field of $name found in $f"; exit 1; }
    if ! diff -u "$tmp.c" "$tmp.f"; then
        echo "FAIL: $name differs between $h (-) and $f (+)"
        exit 1
    fi
    echo "$name: $(wc -l < "$tmp.c") fields, the same in C and Fortran"
}
same_fields gpuarena_stats_s gpuarena_stats_t
same_fields gpuarena_total gpuarena_total_t
# Constants: "NAME = 3," in enums, "#define NAME 3" or "#define NAME (-1)".
sed -n 's/^ *\(GPUARENA_[A-Z0-9_]*\) = \([0-9-]*\),\{0,1\} .*$/\1 \2/p
        s/^ *\(GPUARENA_[A-Z0-9_]*\) = \([0-9-]*\),\{0,1\}$/\1 \2/p
        s/^#define \(GPUARENA_[A-Z0-9_]*\) (\{0,1\}\(-\{0,1\}[0-9][0-9]*\))\{0,1\}$/\1 \2/p' "$h" |
    sort > "$tmp.cc"
sed -n 's/^ *integer(c_int), parameter, public :: \(GPUARENA_[A-Z0-9_]*\) = \(-\{0,1\}[0-9]*\)$/\1 \2/p' "$f" |
    sort > "$tmp.fc"
[ -s "$tmp.cc" ] || { echo "FAIL: no constant found in $h"; exit 1; }
missing=$(comm -23 "$tmp.cc" "$tmp.fc")
if [ -n "$missing" ]; then
    echo "FAIL: constants of $h missing from $f or of another value there:"
    echo "$missing"
    exit 1
fi
echo "$(wc -l < "$tmp.cc") constants of gpuarena.h, the same in the Fortran module"
