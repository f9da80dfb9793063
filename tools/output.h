/*
 * output.h - what every tool does at its exit: standard output checked.
 *
 * A tool that prints its answer and exits 0 must have written it: a full
 * disk or a closed pipe (gpuarena-config --keys > /dev/full) was a silent
 * success.  ga_tool_exit flushes standard output; when that or an earlier
 * write failed it says so and returns WRITE_STATUS, the tool's largest,
 * in place of RC.
 */
#ifndef GA_TOOL_OUTPUT_H
#define GA_TOOL_OUTPUT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

static inline int ga_tool_exit(const char *prog, int rc, int write_status)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return rc;
    fprintf(stderr, "%s: cannot write standard output%s%s\n", prog, errno ? ": " : "",
            errno ? strerror(errno) : "");
    return rc > write_status ? rc : write_status;
}

#endif /* GA_TOOL_OUTPUT_H */
