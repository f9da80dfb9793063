/*
 * cupystream.h - CuPy's current stream, for the CuPy entry points
 * (cupystream.c).
 */
#ifndef GA_CUPYSTREAM_H
#define GA_CUPYSTREAM_H

#include <stdbool.h>

/* CuPy's current stream of the calling thread (its handle; NULL for the
 * legacy default stream) in *STREAM, when a Python interpreter runs this
 * process and has imported CuPy; else false, *STREAM unchanged. */
bool ga_cupy_current_stream(void **stream);

#endif /* GA_CUPYSTREAM_H */
