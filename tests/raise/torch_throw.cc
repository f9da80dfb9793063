// torch_throw.cc - gpuarena_torch_alloc in a process where "libc10.so" is
// loaded (fake_c10.cc, linked in): a failed allocation must arrive here as
// the exception torchCheckFail throws, through the library's C frames,
// with gpuarena's reason in it, and leave nothing held (a second failure
// after it must throw too, not hang on a lock).  The free and
// record-stream hooks must not throw.
#include <gpuarena.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

static int failures;

static void expect_throw(ssize_t size, int device, const char *word)
{
    try {
        void *p = gpuarena_torch_alloc(size, device, nullptr);
        std::printf("FAIL: gpuarena_torch_alloc(%zd, %d) returned %p, no exception\n", size,
                    device, p);
        failures++;
    } catch (const std::runtime_error &e) {
        bool ok = std::strstr(e.what(), word) && std::strstr(e.what(), "gpuarena");
        std::printf("%s: gpuarena_torch_alloc(%zd, %d) threw: %s\n", ok ? "ok" : "FAIL", size,
                    device, e.what());
        failures += !ok;
    }
}

int main()
{
    expect_throw(-1, 0, "negative");
    expect_throw(4096, 99, "99");
    expect_throw(-5, 0, "negative"); // nothing was left held by the first ones
    int x = 0;
    gpuarena_torch_free(&x, 4, 0, nullptr); // not a block: no exception
    gpuarena_torch_record_stream(&x, nullptr);
    std::printf("%s: the free and record-stream hooks returned\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
