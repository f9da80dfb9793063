# libdir.sh - sourced by the script tests that load the shared library
# (raise-frameworks.sh, cupy-capture.sh): srcdir and top_builddir as the
# Automake harness sets them (or from the script's place), and libdir,
# the directory of the built libgpuarena.so.0; where there is none (a
# static-only build, such as CI's sanitizer builds) the test skips (77).
set -u
: "${srcdir:=$(dirname "$0")}"
: "${top_builddir:=..}"
libdir=$(cd "$top_builddir/lib/.libs" 2> /dev/null && pwd)
[ -n "$libdir" ] && [ -r "$libdir/libgpuarena.so.0" ] ||
    { echo "SKIP: libgpuarena.so.0 not built (static-only build?)"; exit 77; }
