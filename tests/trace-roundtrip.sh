#!/bin/sh
# trace-roundtrip.sh - a trace recorded with GPUARENA_TRACE from a test
# program replays with gpuarena-replay to the same peak of requested bytes
# and the same number of allocations, arena by arena (issue 8).
replay=../tools/gpuarena-replay
trace=trace-roundtrip.$$.trace
GPUARENA_TRACE=trace-roundtrip.%p.trace timeout 300 ./trace_roundtrip > trace-roundtrip.want || {
    echo "FAIL: trace_roundtrip"; exit 1; }
set -- trace-roundtrip.*.trace
[ -f "$1" ] || { echo "FAIL: GPUARENA_TRACE wrote no file"; exit 1; }
mv "$1" $trace
head -1 $trace | grep -q '^# gpuarena-trace 3$' || { echo "FAIL: header"; exit 1; }
# The program made requests with no stream (GPUARENA_STREAM_HOST): they are
# written as "-", not as a stream number.
grep -q '^a [0-9]* [0-9]* -$' $trace && grep -q '^f [0-9]* -$' $trace || {
    echo "FAIL: no allocation or free with no stream ('-') in $trace"; rm -f $trace; exit 1; }
timeout 300 $replay --check --json --runs 1 $trace > trace-roundtrip.json || {
    echo "FAIL: gpuarena-replay --check $trace"; rm -f $trace; exit 1; }
status=0
while read -r kind peak allocs; do
    line=$(grep "\"arena\":{\"kind\":\"$kind\"" trace-roundtrip.json)
    echo "$line" | grep -q "\"peak_requested\":$peak," &&
        echo "$line" | grep -q "\"trace_peak_requested\":$peak," &&
        echo "$line" | grep -q "\"allocations\":$allocs," || {
        echo "FAIL: $kind arena: the program had a peak of $peak bytes and $allocs allocations"
        echo "$line"
        status=1
    }
done < trace-roundtrip.want
# A file that fills up (here a size limit, as a full disk) stops the
# recording, and what was recorded still replays: the file is cut back to
# its last whole line (a short write ended it inside one).
(
    trap '' XFSZ
    ulimit -f 40
    GPUARENA_TRACE=$trace timeout 300 ./trace_roundtrip > /dev/null
) || { echo "FAIL: trace_roundtrip with a file size limit"; status=1; }
size=$(wc -c < $trace)
[ "$size" -gt 0 ] && [ "$size" -le 40960 ] || { echo "FAIL: a limited trace of $size bytes"; status=1; }
[ "$(tail -c 1 $trace | od -An -c | tr -d ' ')" = '\n' ] || {
    echo "FAIL: the limited trace ends inside a line"; status=1; }
timeout 300 $replay --check --runs 1 $trace > /dev/null || {
    echo "FAIL: gpuarena-replay --check of the limited trace"; status=1; }
[ $status -eq 0 ] && echo "ok: $(cat trace-roundtrip.want | tr '\n' ' ')"
rm -f $trace trace-roundtrip.json trace-roundtrip.want
exit $status
