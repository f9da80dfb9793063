/*
 * raise.c - a failed allocation reported to PyTorch or CuPy as an
 * exception, not as a NULL pointer.
 *
 * Neither framework checks the pointer its allocator hook returns
 * (measured with PyTorch 2.11 and CuPy 14 on an H100): a NULL becomes a
 * tensor or array without memory, the first kernel that writes it faults
 * on an illegal address, and the CUDA context is lost for the rest of the
 * process.  An out-of-memory error that a training loop could have caught
 * becomes the end of the program.  So the entry points raise instead, in
 * the way each framework understands:
 *
 * - PyTorch: its own error function, c10::detail::torchCheckFail, found
 *   in the libc10.so that PyTorch has loaded, throws a c10::Error, which
 *   PyTorch turns into a Python RuntimeError.  The C++ exception unwinds
 *   through gpuarena_torch_alloc and this file, which are built with
 *   -fexceptions for it (lib/Makefile.am) and hold no lock by then.
 * - CuPy: a Python exception set with the interpreter's C API, and
 *   (void *)-1 returned: CuPy's Cython wrapper of the hook propagates an
 *   exception that is set when the hook returns -1.
 *
 * Where the framework is not loaded (a C program, the tests), nothing is
 * found and the entry points return NULL as documented.  Everything is
 * looked up at the time of the failure: failures are rare, and the
 * framework may have been loaded after libgpuarena.
 */
#include "raise.h"

#include "errors.h" /* GA_ERROR_MAX */

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool ga_sym(void *handle, const char *symbol, void *fn, size_t fn_size)
{
    void *p = dlsym(handle, symbol);
    memset(fn, 0, fn_size);
    if (p)
        memcpy(fn, &p, fn_size < sizeof p ? fn_size : sizeof p);
    return p != NULL;
}

/* void c10::detail::torchCheckFail(const char *func, const char *file,
 *                                  uint32_t line, const char *msg) */
typedef void (*torch_fail_t)(const char *, const char *, uint32_t, const char *);
#define TORCH_FAIL_SYMBOL "_ZN3c106detail14torchCheckFailEPKcS2_jS2_"

/* PyTorch's error function, when PyTorch is loaded; else NULL. */
static torch_fail_t torch_fail(void)
{
    /* RTLD_NOLOAD: only a libc10 that PyTorch has loaded already. */
    void *h = dlopen("libc10.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return NULL;
    torch_fail_t fail;
    ga_sym(h, TORCH_FAIL_SYMBOL, &fail, sizeof fail);
    /* PyTorch keeps its own reference: FAIL stays valid. */
    dlclose(h);
    return fail;
}

void ga_raise_torch_error(const char *func)
{
    torch_fail_t fail = torch_fail();
    if (fail)
        fail(func, __FILE__, __LINE__, gpuarena_last_error());
}

void ga_raise_torch(gpuarena_status_t st, ssize_t size)
{
    torch_fail_t fail = torch_fail();
    if (!fail)
        return;
    char msg[GA_ERROR_MAX + 128];
    /* "CUDA out of memory." as PyTorch's own allocator says it, so that
     * programs that look for it in the message (to retry with a smaller
     * batch) recognise this one too. */
    if (st == GPUARENA_ERR_OUT_OF_MEMORY)
        snprintf(msg, sizeof msg, "CUDA out of memory. gpuarena could not allocate %zd bytes: %s",
                 size, gpuarena_last_error());
    else
        snprintf(msg, sizeof msg, "gpuarena could not allocate %zd bytes: %s", size,
                 gpuarena_last_error());
    /* Copied into the exception before it unwinds this frame. */
    fail("gpuarena_torch_alloc", __FILE__, __LINE__, msg);
}

typedef int (*py_is_initialized_t)(void);
typedef int (*py_gil_ensure_t)(void); /* PyGILState_STATE is an enum */
typedef void (*py_gil_release_t)(int);
typedef void (*py_err_set_string_t)(void *, const char *);

void *ga_raise_cupy(gpuarena_status_t st, size_t size)
{
    py_is_initialized_t initialized;
    py_gil_ensure_t ensure;
    py_gil_release_t release;
    py_err_set_string_t set_string;
    ga_sym(RTLD_DEFAULT, "Py_IsInitialized", &initialized, sizeof initialized);
    ga_sym(RTLD_DEFAULT, "PyGILState_Ensure", &ensure, sizeof ensure);
    ga_sym(RTLD_DEFAULT, "PyGILState_Release", &release, sizeof release);
    ga_sym(RTLD_DEFAULT, "PyErr_SetString", &set_string, sizeof set_string);
    /* The exception types are variables of type PyObject *. */
    void **type = dlsym(RTLD_DEFAULT, st == GPUARENA_ERR_OUT_OF_MEMORY ? "PyExc_MemoryError"
                                                                       : "PyExc_RuntimeError");
    if (!initialized || !ensure || !release || !set_string || !type || !*type || !initialized())
        return NULL;
    char msg[GA_ERROR_MAX + 128];
    snprintf(msg, sizeof msg, "gpuarena could not allocate %zu bytes: %s", size,
             gpuarena_last_error());
    int gil = ensure();
    set_string(*type, msg);
    release(gil);
    return (void *)(intptr_t)-1;
}
