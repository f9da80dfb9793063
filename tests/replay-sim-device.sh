#!/bin/sh
# replay-sim-device.sh - the shipped traces replayed through the real
# device arena of GPU 0 give the same peak reserved bytes and provider
# maps as through the sim arena (bench/replay-device.sh, which says why the
# sim replay simulates events that complete at once).  Exits 77 without a
# GPU, or where GPU 0 has too little free memory for the largest trace
# (gpt2_train.trace reserves about 17 GiB).
: "${srcdir:=$(dirname "$0")}"
: "${top_builddir:=..}"
replay=$top_builddir/tools/gpuarena-replay
[ -x "$replay" ] || { echo "SKIP: $replay not built"; exit 77; }
# One GPU test at a time (gpulock.h): hold gpu-tests.lock from here on.
if command -v flock > /dev/null; then
    exec 9> gpu-tests.lock && flock 9
fi
out=${TMPDIR:-/tmp}/replay-sim-device.$$
trap 'rm -f "$out"' EXIT
GA_REPLAY_RUNS=1 sh "$srcdir/../bench/replay-device.sh" "$replay" "$srcdir"/data/*.trace > "$out" 2>&1
rc=$?
cat "$out"
if grep -q "skipped: no GPU" "$out"; then
    exit 77
fi
if [ $rc -eq 1 ] && grep -qi "out of memory" "$out"; then
    echo "SKIP: GPU 0 has too little free memory for the traces"
    exit 77
fi
exit $rc
