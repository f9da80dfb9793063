#!/bin/sh
# header-c.sh - gpuarena.h is self-contained and clean as strict C11:
# a file that includes only it compiles with -std=c11 -pedantic and every
# warning as an error, and the header may be included twice.
set -u
hdr_dir=${srcdir:-.}/../include
cc=${CC:-cc}
command -v "${cc%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler '$cc'"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'SRC'
#include <gpuarena.h>
#include <gpuarena.h>

static gpuarena_status_t use(gpuarena_t *a, gpuarena_stream_t s)
{
    void *p = NULL;
    gpuarena_stats_t st;
    gpuarena_status_t r = gpuarena_alloc(a, 64, s, &p);
    if (r != GPUARENA_SUCCESS)
        return r;
    r = gpuarena_stats(a, &st);
    (void)gpuarena_free(a, p, s);
    return r;
}

int main(void)
{
    gpuarena_t *a = NULL;
    gpuarena_status_t r = gpuarena_get(GPUARENA_HOST, 0, &a);
    return r == GPUARENA_SUCCESS ? (int)use(a, NULL) : (int)r;
}
SRC
for std in c11 c17; do
    if ! $cc -std=$std -pedantic -Wall -Wextra -Werror -Wstrict-prototypes \
         -Wmissing-prototypes -I"$hdr_dir" -c "$tmp/t.c" -o "$tmp/t.o"; then
        echo "FAIL: gpuarena.h does not compile as -std=$std -pedantic -Werror"
        exit 1
    fi
done
echo "PASS: gpuarena.h compiles alone as strict C11 and C17 with $cc"
