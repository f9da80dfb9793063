/*
 * cupystream.c - CuPy's current stream, asked of the running Python
 * interpreter, for gpuarena_cupy_malloc.
 *
 * CuPy's allocator hook names no stream, so the CuPy entry points
 * allocate on the legacy stream, which cannot be captured into a CUDA
 * graph.  But CuPy captures on its current stream
 * (cupy.cuda.Stream.begin_capture), and an array made during the capture
 * belongs to the graph for as long as the graph may be launched: once
 * CuPy frees it, a later allocation would get the block and every launch
 * would write over it (seen on an H100 with CuPy 14).  Knowing CuPy's
 * current stream, gpuarena_cupy_malloc asks the driver whether it is
 * being captured, and then serves the allocation from the capture's own
 * pool (graphpool.c), or refuses it as gpuarena_alloc does on a
 * capturing stream.
 *
 * The interpreter is reached through its C API found with dlsym (CuPy
 * runs in a Python process, whose executable exports it; libgpuarena
 * links no libpython), and CuPy through sys.modules: a module that is not
 * imported is not imported here.  The function and the API are looked up
 * once.  A call then costs CuPy's C function get_current_stream_ptr,
 * called through the pointer that cupy.cuda.stream exports to other
 * Cython modules, and for a stream other than the legacy one a capture
 * check.  CuPy's function is quick (about 0.2 us with ctypes' call
 * around it, H200 host) inside `with stream:`, and takes 2-5 us where no
 * stream was made current in the thread: CuPy 14 then looks for the
 * thread's state anew each time (cupy.empty and its release, H200 host:
 * 5.2-5.4 us against 3.2-3.5 without the check).  cupy_capture_check
 * (gpuarena.conf(5)) turns the question off.
 */
#include "cupystream.h"

#include "raise.h" /* ga_sym */

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef void py_object_t; /* PyObject, opaque here */

static struct {
    int (*is_initialized)(void);
    int (*gil_ensure)(void); /* PyGILState_STATE is an enum */
    void (*gil_release)(int);
    py_object_t *(*sys_get_object)(const char *);                      /* borrowed */
    py_object_t *(*dict_get_item_string)(py_object_t *, const char *); /* borrowed */
    py_object_t *(*get_attr_string)(py_object_t *, const char *);
    const char *(*capsule_get_name)(py_object_t *);
    void *(*capsule_get_pointer)(py_object_t *, const char *);
    void (*dec_ref)(py_object_t *);
    py_object_t *(*err_occurred)(void);
    void (*err_clear)(void);
    bool api; /* every function above was found */
    /* CuPy's own C function, from cupy.cuda.stream's table of the
     * functions it exports to other Cython modules (__pyx_capi__); NULL
     * until CuPy is found, or for good when it has no such function
     * there (searched once: a failed attribute lookup makes an exception,
     * dearer than the whole check). */
    intptr_t (*current_ptr)(void);
    bool searched;
} py;

static pthread_once_t api_once = PTHREAD_ONCE_INIT;

#define FIND(field, symbol) ga_sym(RTLD_DEFAULT, symbol, &py.field, sizeof py.field)

static void find_api(void)
{
    py.api = FIND(is_initialized, "Py_IsInitialized") && FIND(gil_ensure, "PyGILState_Ensure") &&
             FIND(gil_release, "PyGILState_Release") && FIND(sys_get_object, "PySys_GetObject") &&
             FIND(dict_get_item_string, "PyDict_GetItemString") &&
             FIND(get_attr_string, "PyObject_GetAttrString") &&
             FIND(capsule_get_name, "PyCapsule_GetName") &&
             FIND(capsule_get_pointer, "PyCapsule_GetPointer") && FIND(dec_ref, "Py_DecRef") &&
             FIND(err_occurred, "PyErr_Occurred") && FIND(err_clear, "PyErr_Clear");
}

/* The signature CuPy 14 gives the function in its table; another one
 * is not called. */
#define CURRENT_PTR_SIGNATURE "intptr_t (void)"

/* Look for CuPy's function (GIL held): once CuPy is imported, and once
 * only then. */
static void search_cupy(void)
{
    py_object_t *modules = py.sys_get_object("modules");
    py_object_t *m = modules ? py.dict_get_item_string(modules, "cupy.cuda.stream") : NULL;
    if (!m)
        return; /* not imported (yet): asked again next time */
    py.searched = true;
    py_object_t *capi = py.get_attr_string(m, "__pyx_capi__");
    py_object_t *cap = capi ? py.dict_get_item_string(capi, "get_current_stream_ptr") : NULL;
    const char *name = cap ? py.capsule_get_name(cap) : NULL;
    void *f =
        name && !strcmp(name, CURRENT_PTR_SIGNATURE) ? py.capsule_get_pointer(cap, name) : NULL;
    if (f)
        memcpy(&py.current_ptr, &f, sizeof f);
    if (capi)
        py.dec_ref(capi);
    if (py.err_occurred())
        py.err_clear();
}

bool ga_cupy_current_stream(void **stream)
{
    pthread_once(&api_once, find_api);
    if (!py.api || !py.is_initialized())
        return false;
    bool found = false;
    int gil = py.gil_ensure();
    if (py.err_occurred()) {
        /* An exception is pending in this thread: leave it alone. */
        py.gil_release(gil);
        return false;
    }
    if (!py.searched)
        search_cupy();
    if (py.current_ptr) {
        *stream = (void *)py.current_ptr();
        found = !py.err_occurred();
    }
    if (py.err_occurred())
        py.err_clear(); /* ours: none was pending before */
    py.gil_release(gil);
    return found;
}
