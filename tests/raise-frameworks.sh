#!/bin/sh
# raise-frameworks.sh - a failed allocation of the PyTorch and CuPy entry
# points is raised in the framework (lib/raise.c): as the C++ exception
# of PyTorch's error function, through the library's C frames, shown with
# a stand-in libc10.so (raise/fake_c10.cc) and a C++ program; as a Python
# exception, shown with python3 and ctypes (python/raise_cupy.py).  Needs
# no GPU.  Each half skips without its compiler or interpreter, the whole
# (77) where neither runs or the shared library is not built.
. "${srcdir:-$(dirname "$0")}/libdir.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
ran=0 failed=0

cxx=${CXX:-g++}
if command -v "${cxx%% *}" > /dev/null 2>&1; then
    ran=$((ran + 1))
    if $cxx -std=c++11 -shared -fPIC -Wl,-soname,libc10.so -o "$tmp/libc10.so" \
            "$srcdir/raise/fake_c10.cc" &&
       $cxx -std=c++11 -I"$srcdir/../include" -o "$tmp/torch_throw" "$srcdir/raise/torch_throw.cc" \
            -L"$tmp" -Wl,--no-as-needed -lc10 -Wl,--as-needed -L"$libdir" -lgpuarena -Wl,-rpath,"$tmp" -Wl,-rpath,"$libdir"; then
        "$tmp/torch_throw" || failed=$((failed + 1))
    else
        echo "FAIL: cannot build the PyTorch half"
        failed=$((failed + 1))
    fi
else
    echo "SKIP: PyTorch half: no C++ compiler '$cxx'"
fi

if command -v python3 > /dev/null 2>&1; then
    ran=$((ran + 1))
    python3 "$srcdir/python/raise_cupy.py" "$libdir/libgpuarena.so.0" || failed=$((failed + 1))
else
    echo "SKIP: CuPy half: no python3"
fi

[ $ran = 0 ] && exit 77
[ $failed = 0 ]
