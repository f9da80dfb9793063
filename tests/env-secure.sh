#!/bin/sh
# env-secure.sh - in a set-user-ID program gpuarena ignores GPUARENA_TRACE,
# GPUARENA_STATS, GPUARENA_OPTIONS, GPUARENA_CONF and GPUARENA_TOPOLOGY
# (gpuarena(7), ENVIRONMENT): otherwise any user could have such a program
# write a trace over a file only its owner may write.  Each variable is
# first shown to take effect in a plain run of env_secure, then a copy of
# it owned by another user with the set-user-ID bit is run with them all.
# Needs root (to give the copy away); skips (77) without it, or where the
# set-user-ID bit does not take (a nosuid file system).
set -u
prog=./env_secure
[ -x "$prog" ] || { echo "no $prog"; exit 99; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a set-user-ID copy"; exit 77; }
owner=65534 # nobody
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
chmod 1777 "$tmp" # the copy, running as $owner, could write here if it listened
fail() { echo "FAIL: $*"; exit 1; }
printf '[host]\nno_such_key = 1\n' > "$tmp/bad.conf"

# 1. Each variable acts in a plain run.
GPUARENA_TRACE="$tmp/plain.trace" GPUARENA_STATS="$tmp/plain.stats" $prog > /dev/null ||
    fail "the plain run failed"
[ -s "$tmp/plain.trace" ] || fail "GPUARENA_TRACE wrote nothing in the plain run"
[ -s "$tmp/plain.stats" ] || fail "GPUARENA_STATS wrote nothing in the plain run"
for v in "GPUARENA_OPTIONS=host.no_such_key=1" "GPUARENA_CONF=$tmp/bad.conf" \
    "GPUARENA_TOPOLOGY=$tmp/missing.xml"; do
    env "$v" $prog > /dev/null 2>&1
    rc=$?
    [ $rc = 3 ] || fail "$v: the plain run exited $rc, not 3 (refused)"
done

# 2. A set-user-ID copy ignores them all.
cp "$prog" "$tmp/suid" && chown "$owner" "$tmp/suid" && chmod 4755 "$tmp/suid" || exit 99
# LeakSanitizer cannot trace a set-user-ID process (it fails the exit even
# with detect_leaks=0 in some builds), so the copy's own "arena ok" is
# what counts, not its exit status; the dynamic loader ignores
# LD_LIBRARY_PATH there, so a library found only through it (a test
# machine's unpacked packages) stops the copy: exit 127, a skip.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
    GPUARENA_TRACE="$tmp/suid.trace" GPUARENA_STATS="$tmp/suid.stats" \
    GPUARENA_OPTIONS=host.no_such_key=1 GPUARENA_CONF="$tmp/bad.conf" \
    GPUARENA_TOPOLOGY="$tmp/missing.xml" "$tmp/suid" > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/out" "$tmp/err"
[ $rc = 127 ] && { echo "SKIP: the set-user-ID copy could not be loaded"; exit 77; }
grep -q "^uid=0 euid=$owner\$" "$tmp/out" ||
    { echo "SKIP: the set-user-ID bit did not take here (nosuid?)"; exit 77; }
grep -qx "arena ok" "$tmp/out" ||
    fail "the set-user-ID run exited $rc without its arena: it read a variable it should ignore"
[ ! -e "$tmp/suid.trace" ] || fail "the set-user-ID run wrote GPUARENA_TRACE's file"
[ ! -e "$tmp/suid.stats" ] || fail "the set-user-ID run wrote GPUARENA_STATS's file"

# 3. gpuarena-config, set-user-ID, shows what the library reads: no
# GPUARENA_OPTIONS line (it echoed the variable that it then ignored).
tool=${top_builddir:-..}/tools/gpuarena-config
if [ -x "$tool" ] && ! grep -q 'libtool' "$tool" 2>/dev/null; then
    cp "$tool" "$tmp/config-suid" && chown "$owner" "$tmp/config-suid" &&
        chmod 4755 "$tmp/config-suid" || exit 99
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
        GPUARENA_OPTIONS=device.zero=true "$tmp/config-suid" > "$tmp/out" 2> "$tmp/err"
    grep -q '^# gpuarena ' "$tmp/out" || fail "the set-user-ID gpuarena-config printed no report"
    if grep -q '^# GPUARENA_OPTIONS' "$tmp/out"; then
        fail "the set-user-ID gpuarena-config showed GPUARENA_OPTIONS, which it ignores"
    fi
fi
echo "ok: the set-user-ID copy ignored every GPUARENA_ variable"
