#!/bin/sh
# run-fuzz.sh - build the config parser's libFuzzer target with clang
# (-fsanitize=fuzzer,address,undefined) and run it for a bounded time.
# Not part of `make check'; CI calls it.  Needs clang and libFuzzer
# (Debian: apt-get install clang libclang-rt-14-dev), libinih-dev, and a
# configured build tree for config.h.
#
# Usage: tests/fuzz/run-fuzz.sh [SECONDS] [BUILDDIR]
#   SECONDS   total fuzzing time (default 60)
#   BUILDDIR  a configured build tree, for config.h (default: the source tree)
# Extra libFuzzer flags may be passed in FUZZ_FLAGS.  Exits non-zero on a
# crash, a leak, a sanitizer report or a timeout of one input.
set -eu
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${2:-$top}" && pwd)
CC=${CC:-clang}
[ -r "$build/config.h" ] || { echo "run-fuzz.sh: no config.h in $build: run configure" >&2; exit 2; }
command -v "$CC" > /dev/null || { echo "run-fuzz.sh: $CC not found" >&2; exit 2; }
work=${FUZZ_WORKDIR:-$build/fuzz-out}
mkdir -p "$work/corpus"
src="$top/lib/config/config.c $top/lib/config/keys.c $top/lib/config/parse.c \
     $top/lib/config/suggest.c $top/lib/errors.c"
# shellcheck disable=SC2086
"$CC" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$build" -I"$top/include" -I"$top/lib" $(pkg-config --cflags inih) \
    -DGA_SYSCONFDIR='"/nonexistent"' \
    "$here/fuzz_config.c" $src $(pkg-config --libs inih) -lpthread -o "$work/fuzz_config"
# New inputs go to $work/corpus; the seeds in the tree are only read.
# shellcheck disable=SC2086
"$work/fuzz_config" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -artifact_prefix="$work/" -print_final_stats=1 ${FUZZ_FLAGS:-} \
    "$work/corpus" "$here/corpus_config"
