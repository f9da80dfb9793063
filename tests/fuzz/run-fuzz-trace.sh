#!/bin/sh
# run-fuzz-trace.sh [SECONDS] - build the trace reader with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer and fuzz it (default 60 s)
# from the seed corpus in corpus_trace/.  Needs clang and libFuzzer
# (Debian: apt-get install clang libclang-rt-14-dev).  Not part of make check.
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${1:-60}
work=${FUZZ_WORK:-$(mktemp -d)}
mkdir -p "$work"
CC=${CC_FUZZ:-clang}
# config.h of the build tree, if any, else a minimal one.
if [ -f "$top/config.h" ]; then inc=$top; else
    printf '#define PACKAGE_VERSION "fuzz"\n' > "$work/config.h"; inc=$work; fi
$CC -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined \
    -I"$top/include" -I"$top/lib" -I"$inc" \
    "$here/fuzz_trace.c" "$top/lib/trace/reader.c" "$top/lib/trace/map.c" \
    "$top/lib/errors.c" -o "$work/fuzz_trace"
mkdir -p "$work/corpus"
cp "$here"/corpus_trace/* "$work/corpus/"
echo "fuzzing the trace reader for $secs s in $work"
"$work/fuzz_trace" -max_total_time="$secs" -max_len=4096 \
    -dict="$here/trace.dict" "$work/corpus" "$here/corpus_trace"
