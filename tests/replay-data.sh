#!/bin/sh
# replay-data.sh - every trace in tests/data replays through the sim arena
# with --check: the block manager's invariants hold after every event, the
# arena's peak of requested bytes and its count of allocations equal the
# trace's, and everything is freed at the end.
srcdir=${srcdir:-.}
replay=../tools/gpuarena-replay
status=0
for t in "$srcdir"/data/*.trace "$srcdir"/data/replay/*.trace; do
    if ! timeout 300 "$replay" --check --runs 1 "$t" > replay-data.out 2>&1; then
        echo "FAIL: gpuarena-replay --check $t"
        cat replay-data.out
        status=1
    else
        echo "ok: $t"
    fi
done
rm -f replay-data.out
exit $status
