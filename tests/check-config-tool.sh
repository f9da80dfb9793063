#!/bin/sh
# gpuarena-config as a user meets it: --check names the file, the line and
# the closest key and exits 1; the settings it prints show a file's and
# GPUARENA_OPTIONS's effect, and are themselves a valid config file.
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
T=$GA_CONFIG_TOOL
tmp=${TMPDIR:-/tmp}/check-config-tool.$$
trap 'rm -rf "$tmp".*' EXIT
unset GPUARENA_CONF GPUARENA_OPTIONS XDG_CONFIG_HOME
export HOME=/nonexistent-home
printf '[device]\nexpandable = true\nmax_cahced = 20G\n' > "$tmp.bad"
"$T" --check "$tmp.bad" > /dev/null 2> "$tmp.err"
[ $? = 1 ] || fail "--check of a bad file did not exit 1"
grep -qxF "$tmp.bad:3: key 'device.max_cahced': unknown key (did you mean 'max_cached'?)" \
    "$tmp.err" || fail "--check message: $(cat "$tmp.err")"
printf '[device]\nexpandable = false\n[device.1]\nmax_cached = 1G\n' > "$tmp.good"
"$T" --check "$tmp.good" | grep -qxF "$tmp.good: ok" || fail "--check of a good file"
GPUARENA_CONF=$tmp.good GPUARENA_OPTIONS=pinned.numa=0,1 "$T" > "$tmp.out" || fail "show"
grep -qE "^expandable += false +# $tmp.good:2$" "$tmp.out" || fail "file origin not shown"
grep -qE "^max_cached += 1G +# $tmp.good:4$" "$tmp.out" || fail "device section not shown"
grep -qE "^numa += 0,1 +# GPUARENA_OPTIONS$" "$tmp.out" || fail "GPUARENA_OPTIONS not shown"
"$T" --check "$tmp.out" > /dev/null || fail "the printed settings do not check"
# Node lists of any length come back whole, as ranges (they were cut at
# 159 characters, into a narrower list or one that did not parse).
GPUARENA_OPTIONS='pinned.numa=interleave:0-63,host.numa=63,0-61' "$T" > "$tmp.out" ||
    fail "show with long node lists"
grep -qE "^numa += interleave:0-63 +# GPUARENA_OPTIONS$" "$tmp.out" || fail "pinned node list"
grep -qE "^numa += 0-61,63 +# GPUARENA_OPTIONS$" "$tmp.out" || fail "host node list"
"$T" --check "$tmp.out" > /dev/null || fail "the printed node lists do not check"
# The origins are comments, so a long file name does not make a line of
# the output too long to read back.
long=$tmp.d/$(printf '%0150d' 0)
mkdir -p "$long" && cp "$tmp.good" "$long/g.conf" || fail "cannot make $long"
GPUARENA_CONF=$long/g.conf "$T" > "$tmp.out" || fail "show with a long file name"
grep -qF "# $long/g.conf:2" "$tmp.out" || fail "long origin not shown"
"$T" --check "$tmp.out" > /dev/null || fail "the settings printed with a long file name do not check"
rm -rf "$tmp.d"
# A newline in GPUARENA_OPTIONS (which the library takes as a space) or
# in a file's name stays inside its comment.
nl='
'
GPUARENA_OPTIONS="device.zero=true,${nl}device.round=4K" "$T" > "$tmp.out" ||
    fail "show with a newline in GPUARENA_OPTIONS"
grep -qF '# GPUARENA_OPTIONS: device.zero=true,\012device.round=4K' "$tmp.out" ||
    fail "the newline of GPUARENA_OPTIONS not escaped"
"$T" --check "$tmp.out" > /dev/null || fail "the settings printed with a newline do not check"
cp "$tmp.good" "$tmp.n${nl}l" || fail "cannot make a file name with a newline"
GPUARENA_CONF="$tmp.n${nl}l" "$T" > "$tmp.out" || fail "show with a newline in the file name"
"$T" --check "$tmp.out" > /dev/null ||
    fail "the settings printed from a file name with a newline do not check"
GPUARENA_OPTIONS=device.max_cahced=1G "$T" > /dev/null 2> "$tmp.err"
[ $? = 1 ] || fail "a bad GPUARENA_OPTIONS did not exit 1"
# GPUARENA_STATS and GPUARENA_TRACE: shown; a value the library would
# ignore in silence is said, and exits 1 (it was not even shown).
GPUARENA_STATS='s.%r.json' GPUARENA_TRACE=stderr "$T" > "$tmp.out" 2> "$tmp.err" ||
    fail "good GPUARENA_STATS: exit $?"
grep -qxF '# GPUARENA_STATS: s.%r.json' "$tmp.out" || fail "GPUARENA_STATS not shown"
grep -qxF '# GPUARENA_TRACE: stderr' "$tmp.out" || fail "GPUARENA_TRACE not shown"
GPUARENA_STATS='bad%x.json' "$T" > "$tmp.out" 2> "$tmp.err"
[ $? = 1 ] || fail "a bad GPUARENA_STATS did not exit 1"
grep -qF "GPUARENA_STATS: statistics file 'bad%x.json'" "$tmp.err" ||
    fail "bad GPUARENA_STATS not said: $(cat "$tmp.err")"
"$T" --bogus > /dev/null 2> "$tmp.err"
[ $? = 2 ] || fail "a bad option did not exit 2"
grep -qF "unrecognized option '--bogus'" "$tmp.err" || fail "bad option not named: $(cat "$tmp.err")"
"$T" --keys extra > /dev/null 2> "$tmp.err"
[ $? = 2 ] || fail "--keys with an operand did not exit 2"
grep -qF "'--keys' does not take 1 argument" "$tmp.err" || fail "operand not named: $(cat "$tmp.err")"
# Standard output that cannot be written is an error, not a silent success.
if [ -w /dev/full ]; then
    "$T" --keys > /dev/full 2> "$tmp.err"
    [ $? = 3 ] || fail "--keys > /dev/full did not exit 3"
    grep -qF "cannot write standard output" "$tmp.err" || fail "write error: $(cat "$tmp.err")"
fi
# A closed pipe (its reader gone before the first write): exit 3, said;
# SIGPIPE killed the tool (141).
rc=$( { { sleep 1; "$T" --keys 2> "$tmp.err"; echo $? >&3; } | true; } 3>&1)
[ "$rc" = 3 ] || fail "--keys into a closed pipe: exit $rc, not 3"
grep -qF "cannot write standard output" "$tmp.err" || fail "closed pipe: $(cat "$tmp.err")"
"$T" --help | grep -q -- --check || fail "--help"
"$T" --help extra > /dev/null 2>&1
[ $? = 2 ] || fail "--help with an operand did not exit 2"
"$T" --version | grep -q "gpuarena" || fail "--version"
[ $ga_fail = 0 ] && echo "gpuarena-config behaves"
exit $ga_fail
