#!/bin/sh
# replay-known.sh - gpuarena-replay on a hand-written trace whose figures
# are known exactly, its JSON, --compare, --plot, and its exit codes.
srcdir=${srcdir:-.}
replay=../tools/gpuarena-replay
known=$srcdir/data/replay/known.trace
out=replay-known.out
err=replay-known.err
fail() {
    echo "FAIL: $*"
    echo "--- stdout"; cat $out 2>/dev/null
    echo "--- stderr"; cat $err 2>/dev/null
    rm -f $out $err replay-known.svg replay-known.trace
    exit 1
}
expect_rc() { # WANT COMMAND...
    want=$1; shift
    "$@" > $out 2> $err
    rc=$?
    [ $rc -eq "$want" ] || fail "exit $rc, not $want: $*"
}

expect_rc 0 "$replay" --check --json --runs 1 "$known"
for want in '"peak_requested":3500000' '"trace_peak_requested":3500000' \
            '"allocations":6' '"zero_size_allocations":1' '"events":12' '"ok":true'; do
    grep -q "$want" $out || fail "no $want in the JSON"
done

expect_rc 0 "$replay" --runs 3 "$known"
# Standard output that cannot be written: exit 5, said.
if [ -w /dev/full ]; then
    "$replay" --runs 1 "$known" > /dev/full 2> $err
    rc=$?
    [ $rc -eq 5 ] || fail "exit $rc, not 5, with standard output on /dev/full"
    grep -q "cannot write standard output" $err || fail "no message for the write error"
fi
# A closed pipe: exit 5 too (SIGPIPE killed it: 141).
rc=$( { { sleep 1; "$replay" --runs 1 "$known" 2> $err; echo $? >&3; } | true; } 3>&1)
[ "$rc" = 5 ] || fail "exit $rc, not 5, with standard output on a closed pipe"
grep -q 'peak requested *3.338 MiB' $out || fail "human table"

# Two setting groups side by side, and a plot of them.
expect_rc 0 "$replay" --runs 1 --compare 'first:;second:' --plot replay-known.svg "$known"
grep -q 'first *second' $out || fail "--compare columns"
grep -q '^<svg' replay-known.svg || fail "--plot wrote no SVG"
grep -q 'requested: peak 3.338 MiB at event 6' replay-known.svg || fail "no peak in the SVG"
grep -q 'reserved (second)' replay-known.svg || fail "no second group in the SVG"

# A first group that fails leaves the others' lines in the plot (all of
# them were left out, and the panel said "replay failed").
expect_rc 1 "$replay" --runs 1 --compare 'tiny:max_reserved=1M;all:' --plot replay-known.svg "$known"
grep -q 'reserved (all): peak 6.000 MiB' replay-known.svg || fail "no line of the group that replayed"
[ "$(grep -c '<polyline' replay-known.svg)" -ge 2 ] || fail "the plot drew no line"

# A trace's name is written as valid JSON and XML whatever its bytes: one
# that is not UTF-8 (Latin-1) and a control character.
name=$(printf 'replay-known-\377-\001.trace')
cp "$known" "$name"
"$replay" --json --runs 1 --plot replay-known.svg "$name" > $out 2> $err || fail "the odd name"
rm -f "$name"
LC_ALL=C grep -q "$(printf '\001')" $out replay-known.svg && fail "a control character written raw"
LC_ALL=C grep -q "$(printf '\377')" $out replay-known.svg && fail "a byte not UTF-8 written raw"
grep -q 'replay-known-\\ufffd-\\u0001.trace' $out || fail "the name not escaped in the JSON"
if command -v python3 > /dev/null 2>&1; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' $out || fail "the JSON does not parse"
    python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' replay-known.svg ||
        fail "the SVG does not parse"
fi

# Version 2: one table per arena.
expect_rc 0 "$replay" --check --runs 1 "$srcdir/data/replay/v2-arenas.trace"
grep -q 'v2-arenas.trace \[pinned 0\]' $out || fail "no pinned arena table"

# Version 3: requests with no stream ("-") are replayed with
# GPUARENA_STREAM_HOST.  A block freed with no stream is every stream's at
# once, so even with cross_stream=never the trace needs no more memory than
# its twin that makes every request on stream 0; replayed on some stream
# instead, each 64 MiB allocation on another stream would map its own.
nostream=$srcdir/data/replay/no-stream.trace
sed -E '/^[af] /s/ [-0-9]+$/ 0/' "$nostream" > replay-known.trace
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" $out; }
expect_rc 0 "$replay" --check --json --runs 1 -o cross_stream=never "$nostream"
for want in '"peak_requested":67108864' '"allocations":5' '"zero_size_allocations":1' \
            '"cross_stream_waits":0' '"ok":true'; do
    grep -q "$want" $out || fail "no $want in the JSON of $nostream"
done
got_reserved=$(field peak_reserved) got_maps=$(field provider_maps)
expect_rc 0 "$replay" --check --json --runs 1 -o cross_stream=never replay-known.trace
[ "$got_reserved" = "$(field peak_reserved)" ] && [ "$got_maps" = "$(field provider_maps)" ] ||
    fail "no stream: peak reserved $got_reserved in $got_maps maps; on one stream" \
        "$(field peak_reserved) in $(field provider_maps)"
printf '# gpuarena-trace 2\na 1 10 -\n' > replay-known.trace
expect_rc 3 "$replay" replay-known.trace
grep -q "replay-known.trace:2: STREAM '-' (no stream) needs '# gpuarena-trace 3'" $err ||
    fail "no error for '-' in a version 2 trace"

# A device beyond gpuarena's 64 (the format allows 1023): the sim and host
# arenas have no device and replay it; a GPU kind needs that GPU (4).
printf '# gpuarena-trace 2\nk device 1000\na 1 4096 0\nf 1 0\n' > replay-known.trace
expect_rc 0 "$replay" --check --runs 1 replay-known.trace
grep -q 'replay-known.trace \[device 1000\]' $out || fail "no table for device 1000"
expect_rc 0 "$replay" --check --runs 1 -a host replay-known.trace
expect_rc 4 "$replay" --runs 1 -a device replay-known.trace
grep -q 'cannot create a device arena on device 1000' $err ||
    fail "no error for device 1000 of a GPU kind"

# A trace with a header and nothing else replays as nothing and says so;
# a plot of nothing is refused (5), not skipped in silence.
printf '# gpuarena-trace 1\n' > replay-known.trace
expect_rc 0 "$replay" --runs 1 replay-known.trace
grep -q 'replay-known.trace  (no events: nothing to replay)' $out || fail "empty trace not said"
rm -f replay-known.svg
expect_rc 5 "$replay" --runs 1 --plot replay-known.svg replay-known.trace
grep -q 'nothing to plot' $err || fail "no message for a plot of nothing"
[ ! -e replay-known.svg ] || fail "a plot of nothing was written"

# Exit codes: 2 usage, 3 bad trace (with its line), 4 bad settings.
expect_rc 2 "$replay"
expect_rc 2 "$replay" --runs 0 "$known"
expect_rc 2 "$replay" -a nosuchkind "$known"
printf '# gpuarena-trace 1\na 1 10 0\nf 2 0\n' > replay-known.trace
expect_rc 3 "$replay" replay-known.trace
grep -q 'replay-known.trace:3: free of unknown id 2' $err || fail "no line in the trace error"
expect_rc 3 "$replay" /nonexistent.trace
expect_rc 4 "$replay" -o no_such_key=1 "$known"
rm -f $out $err replay-known.svg replay-known.trace
echo ok
