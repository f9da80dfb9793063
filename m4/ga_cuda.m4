# GA_CHECK_CUDA: find the CUDA Toolkit's driver API headers: cuda.h, and
# cudaTypedefs.h for the types of the entry points that cuGetProcAddress
# returns (lib/cuda/cuda.c).  gpuarena needs only the headers at build
# time; libcuda.so.1 is opened at run time, so the library works (host
# and sim arenas) without a driver.
AC_DEFUN([GA_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR],
      [CUDA Toolkit directory holding include/cuda.h (default: /usr/local/cuda)])],
    [], [with_cuda=/usr/local/cuda])
  AS_IF([test "x$with_cuda" = xno],
    [AC_MSG_ERROR([gpuarena needs the CUDA driver API header cuda.h; --without-cuda is not supported])])
  dnl --with-cuda with no directory: the default one.
  AS_IF([test "x$with_cuda" = xyes], [with_cuda=/usr/local/cuda])
  dnl Absolute: the flags are used from lib/ and tests/, not from where
  dnl configure ran (a relative DIR passed the check here and failed there).
  AS_CASE([$with_cuda], [/*], [],
    [ga_cuda_abs=`cd "$with_cuda" 2>/dev/null && pwd` ||
       AC_MSG_ERROR([--with-cuda=$with_cuda: no such directory])
     with_cuda=$ga_cuda_abs])
  CUDA_CPPFLAGS="-I$with_cuda/include"
  save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  AC_CHECK_HEADER([cuda.h], [],
    [AC_MSG_ERROR([cuda.h not found in $with_cuda/include: install the CUDA Toolkit headers or pass --with-cuda=DIR])])
  dnl Shipped beside cuda.h by the toolkit, but by another of NVIDIA's
  dnl packages than the driver's header: a packager who installed only
  dnl that one passed configure and failed in the middle of the build.
  AC_CHECK_HEADER([cudaTypedefs.h], [],
    [AC_MSG_ERROR([cudaTypedefs.h not found in $with_cuda/include (cuda.h was): it comes with the CUDA Toolkit's runtime headers; install them too or pass --with-cuda=DIR])],
    [[#include <cuda.h>]])
  AC_MSG_CHECKING([for CUDA driver API version >= 12020])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cuda.h>]],
    [[#if CUDA_VERSION < 12020
      #error too old
      #endif]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_ERROR([cuda.h in $with_cuda/include is older than CUDA 12.2])])
  CPPFLAGS=$save_CPPFLAGS
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_DIR], [$with_cuda])
  AC_DEFINE_UNQUOTED([GA_CUDA_DIR], ["$with_cuda"], [CUDA Toolkit directory])
])
