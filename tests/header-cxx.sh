#!/bin/sh
# header-cxx.sh - gpuarena.h is usable from C++: its declarations have C
# linkage (extern "C") and it compiles cleanly as C++11 and C++17.
# Skips (77) where no C++ compiler is installed.
set -u
hdr_dir=${srcdir:-.}/../include
cxx=${CXX:-g++}
command -v "${cxx%% *}" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler '$cxx'"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.cc" <<'SRC'
#include <gpuarena.h>

#include <cstdio>

int main()
{
    gpuarena_t *a = nullptr;
    gpuarena_status_t r = gpuarena_get(GPUARENA_HOST, 0, &a);
    std::printf("%s %s\n", gpuarena_version(), gpuarena_strerror(r));
    return 0;
}
SRC
for std in c++11 c++17; do
    if ! $cxx -std=$std -pedantic -Wall -Wextra -Wshadow -Werror -I"$hdr_dir" -c "$tmp/t.cc" \
         -o "$tmp/t.o"; then
        echo "FAIL: gpuarena.h does not compile as $std"
        exit 1
    fi
done
# C linkage: the object refers to the plain C names, not mangled ones.
if command -v nm >/dev/null 2>&1; then
    if ! nm -u "$tmp/t.o" | grep -qE '[[:space:]]gpuarena_get$'; then
        echo "FAIL: gpuarena_get is not declared extern \"C\":"
        nm -u "$tmp/t.o"
        exit 1
    fi
fi
echo "PASS: gpuarena.h compiles as C++11 and C++17 with C linkage ($cxx)"
