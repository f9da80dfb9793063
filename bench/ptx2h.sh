#!/bin/sh
# ptx2h.sh PTX SOURCE - write PTX (nvcc -ptx output) to stdout as a C
# header holding one string, ga_bench_kernels_ptx, for cuModuleLoadData.
# SOURCE is the .cu file it came from (named in the header's comment).
# Used by `make -C bench regen-kernels'; the header is checked in, since
# the GPU machines may have no nvcc.
set -eu
ptx=$1
src=$2
grep -q '^\.version ' "$ptx" || { echo "ptx2h.sh: $ptx has no .version line" >&2; exit 1; }
cat <<HEAD
/*
 * bench_kernels_ptx.h - GENERATED from $src by \`make -C bench
 * regen-kernels' (nvcc -ptx -arch=compute_75, then ptx2h.sh); do not edit.
 * $(grep '^\.version ' "$ptx" | tr -d '\r') / $(grep '^\.target ' "$ptx" | tr -d '\r'): the driver
 * compiles it for the GPU at hand (see $src).
 */
#ifndef GA_BENCH_KERNELS_PTX_H
#define GA_BENCH_KERNELS_PTX_H

/* clang-format off */
static const char ga_bench_kernels_ptx[] =
HEAD
# Escape backslashes and quotes, tabs as \t; one string piece per line.
sed -e 's/\r$//' -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' \
    -e 's/^/    "/' -e 's/$/\\n"/' "$ptx"
cat <<TAIL
    ;
/* clang-format on */

#endif /* GA_BENCH_KERNELS_PTX_H */
TAIL
