/*
 * raise.h - a failed allocation of a framework entry point reported to the
 * framework as an exception (raise.c).
 */
#ifndef GA_RAISE_H
#define GA_RAISE_H

#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h> /* ssize_t */

/* Throw ST (the reason in gpuarena_last_error()) as PyTorch's c10::Error,
 * when PyTorch is loaded in this process: it does not return then.  Else
 * return, and the caller returns NULL. */
void ga_raise_torch(gpuarena_status_t st, ssize_t size);

/* Throw gpuarena_last_error() as PyTorch's c10::Error, named FUNC, when
 * PyTorch is loaded; else return.  For hooks other than allocation. */
void ga_raise_torch_error(const char *func);

/* Set ST as a Python exception (MemoryError when out of memory, else
 * RuntimeError) when a Python interpreter runs this process, and answer
 * what gpuarena_cupy_malloc returns then; else answer NULL. */
void *ga_raise_cupy(gpuarena_status_t st, size_t size);

/* The function at SYMBOL of HANDLE (RTLD_DEFAULT: the whole process) in
 * *FN, a pointer to function of FN_SIZE bytes (ISO C has no conversion
 * from void *); false, *FN zeroed, when it is not there.  For the
 * frameworks' functions, found at run time (raise.c, cupystream.c). */
bool ga_sym(void *handle, const char *symbol, void *fn, size_t fn_size);

#endif /* GA_RAISE_H */
