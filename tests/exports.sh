#!/bin/sh
# exports.sh - the shared library exports only gpuarena_* (and its version
# node), exports every function of the public header, and is not linked
# against libcuda (the driver is loaded at run time).  Skips (77) where no
# shared library was built (--disable-shared).
set -u
lib=../lib/.libs/libgpuarena.so
hdr=${srcdir:-.}/../include/gpuarena.h
if [ ! -e "$lib" ]; then
    echo "SKIP: $lib not built (--disable-shared?)"
    exit 77
fi
for tool in nm ldd; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
fail=0

# "T gpuarena_get" for "0000000000002240 T gpuarena_get@@GPUARENA_0".
syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $2, $3 }')
if [ -z "$syms" ]; then
    echo "FAIL: nm -D lists no defined symbol in $lib"
    exit 1
fi
bad=$(printf '%s\n' "$syms" | awk '
    $2 ~ /^gpuarena_[a-z0-9_]+$/ { next }
    $1 == "A" && $2 ~ /^GPUARENA_[0-9.]+$/ { next }
    { print }')
if [ -n "$bad" ]; then
    echo "FAIL: symbols outside the public API are exported:"
    printf '%s\n' "$bad" | sed 's/^/  /'
    fail=1
fi

# Every function declared in the header ("gpuarena_NAME(", types excluded).
for f in $(grep -oE '\bgpuarena_[a-z0-9_]+\(' "$hdr" | tr -d '(' | grep -v '_t$' | sort -u); do
    if ! printf '%s\n' "$syms" | grep -qE "^T $f\$"; then
        echo "FAIL: $f is declared in gpuarena.h but not exported"
        fail=1
    fi
done

# The Debian symbols file lists every exported function (a new one missing
# there fails the package build's lintian as a versioning error).
symfile=${srcdir:-.}/../debian/libgpuarena0.symbols
if [ -f "$symfile" ]; then
    for f in $(printf '%s\n' "$syms" | sed -n 's/^T //p'); do
        if ! grep -q "^ $f@GPUARENA_0 " "$symfile"; then
            echo "FAIL: $f is exported but not in debian/libgpuarena0.symbols"
            fail=1
        fi
    done
else
    echo "note: no $symfile (a tarball carries no debian/): symbols file not compared"
fi

if ldd "$lib" | grep -i 'libcuda' >/dev/null; then
    echo "FAIL: $lib is linked against the CUDA driver:"
    ldd "$lib" | grep -i libcuda
    fail=1
fi
if command -v readelf >/dev/null 2>&1 &&
   readelf -d "$lib" | grep NEEDED | grep -i 'libcuda' >/dev/null; then
    echo "FAIL: $lib has libcuda in DT_NEEDED"
    fail=1
fi

# Its thread-local storage is static (initial-exec, block/tcache.h), and
# glibc keeps some 1.5 KiB of static TLS in all for the libraries that a
# program loads with dlopen (Python for PyTorch and CuPy): the library's
# block stays small (696 bytes, 512 of them a message buffer, before
# errors.c made that buffer per thread on the heap).
tls=0
if command -v readelf >/dev/null 2>&1; then
    tls=$(readelf -lW "$lib" | awk '$1 == "TLS" { print $6 }')
    tls=$((${tls:-0}))
    if [ "$tls" -gt 256 ]; then
        echo "FAIL: $lib has $tls bytes of thread-local storage (at most 256)"
        fail=1
    fi
fi

[ "$fail" = 0 ] &&
    echo "PASS: $(printf '%s\n' "$syms" | wc -l) exported symbols, no libcuda, $tls bytes of TLS"
exit "$fail"
