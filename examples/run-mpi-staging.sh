#!/bin/sh
# run-mpi-staging.sh - run the MPI example on 2 ranks of this machine
# (`make check').  Exit 77 (SKIP) where there is no mpirun.
#   MPIRUN   the launcher (default: mpirun in PATH)
#   GA_MPI_NP  the number of ranks (default 2)
: "${srcdir:=$(dirname "$0")}"
: "${MPIRUN:=$(command -v mpirun)}"
np=${GA_MPI_NP:-2}
if [ -z "$MPIRUN" ] || ! command -v "$MPIRUN" > /dev/null 2>&1; then
    echo "SKIP: no mpirun"
    exit 77
fi
[ -x ./mpi_staging ] || { echo "FAIL: ./mpi_staging not built"; exit 1; }

flags=
if "$MPIRUN" --version 2>&1 | grep -q 'Open MPI'; then
    # More ranks than cores is fine here.  As root, Open MPI wants to be
    # told (its documented variables, which mpirun passes to the ranks).
    flags=--oversubscribe
    if [ "$(id -u)" = 0 ]; then
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
    fi
    # In containers the kernel often forbids the cross-memory attach of
    # the shared-memory transport; copy through the shared segment instead.
    : "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
    export OMPI_MCA_btl_vader_single_copy_mechanism
fi
# Under AddressSanitizer (the CI's sanitizer build), LeakSanitizer reports
# what Open MPI and hwloc keep until exit in plugins they have unloaded by
# then, which no suppression can name: check memory errors, not leaks, here
# (the unit tests check the library's leaks, under ASan and valgrind).
case "${ASAN_OPTIONS:-}" in
*detect_leaks=1*)
    ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0
    export ASAN_OPTIONS
    ;;
esac

out=$("$MPIRUN" $flags -np "$np" ./mpi_staging 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "FAIL: mpirun -np $np ./mpi_staging exited with $rc"; exit 1; }
n=$(echo "$out" | grep -c '^rank [0-9]*/'"$np"':.*: ok$')
[ "$n" = "$np" ] || { echo "FAIL: $n of $np ranks reported ok"; exit 1; }
echo "PASS: $np ranks exchanged staging buffers from gpuarena"
