#!/bin/sh
# run-fuzz-api.sh - build the public API's libFuzzer target (fuzz_api.c)
# with clang (-fsanitize=fuzzer,address,undefined) over the library's
# sources and run it for a bounded time from the seed corpus in
# corpus_api/.  Not part of `make check'; CI calls it.  Needs clang and
# libFuzzer (Debian: apt-get install clang libclang-rt-14-dev), the
# library's build dependencies (hwloc, inih, the CUDA headers), and a
# configured build tree for config.h.
#
# Usage: tests/fuzz/run-fuzz-api.sh [SECONDS] [BUILDDIR]
#   SECONDS   total fuzzing time (default 60)
#   BUILDDIR  a configured build tree, for config.h (default: the source tree)
# CUDA_HOME names the CUDA Toolkit (default /usr/local/cuda); extra
# libFuzzer flags go in FUZZ_FLAGS.  Exits non-zero on a crash, an abort
# of the target (a broken invariant or an undocumented status), a leak, a
# sanitizer report or a timeout of one input.
set -eu
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${2:-$top}" && pwd)
CC=${CC:-clang}
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -r "$build/config.h" ] || { echo "run-fuzz-api.sh: no config.h in $build: run configure" >&2; exit 2; }
command -v "$CC" > /dev/null || { echo "run-fuzz-api.sh: $CC not found" >&2; exit 2; }
work=${FUZZ_WORKDIR:-$build/fuzz-out}/api
mkdir -p "$work/corpus" "$work/obj"
# The library's sources (the fault-injection wrapper only where config.h
# asks for it), compiled for the fuzzer.
flags="-std=gnu11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
    -I$build -I$top/include -I$top/lib -I$cuda/include $(pkg-config --cflags hwloc inih) \
    -DGA_SYSCONFDIR=\"/nonexistent\" -pthread"
objs=
for src in $(cd "$top/lib" && find . -name '*.c' | sort); do
    case $src in
    ./providers/faulty.c) grep -q '^#define GA_FAULT_INJECTION' "$build/config.h" || continue ;;
    esac
    obj=$work/obj/$(echo "${src#./}" | tr / _ | sed 's/\.c$/.o/')
    # shellcheck disable=SC2086
    "$CC" $flags -c "$top/lib/$src" -o "$obj"
    objs="$objs $obj"
done
# shellcheck disable=SC2086
"$CC" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$top/include" "$here/fuzz_api.c" $objs $(pkg-config --libs hwloc inih) -pthread -ldl \
    -o "$work/fuzz_api"
# New inputs go to $work/corpus; the seeds in the tree are only read.
# HWLOC_COMPONENTS: hwloc's x86 backend is slow to start and adds nothing
# here (every host arena of an input loads no topology twice).
# shellcheck disable=SC2086
"$work/fuzz_api" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -max_len=2048 \
    -artifact_prefix="$work/" -print_final_stats=1 ${FUZZ_FLAGS:-} \
    "$work/corpus" "$here/corpus_api"
