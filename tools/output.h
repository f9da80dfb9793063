/*
 * output.h - what every tool does at its exit: standard output checked.
 *
 * A tool that prints its answer and exits 0 must have written it: a full
 * disk or a closed pipe (gpuarena-config --keys > /dev/full) was a silent
 * success.  ga_tool_exit flushes standard output; when that or an earlier
 * write failed it says so and returns WRITE_STATUS, the tool's largest,
 * in place of RC.  ga_tool_main wraps a tool's main with it.
 */
#ifndef GA_TOOL_OUTPUT_H
#define GA_TOOL_OUTPUT_H

#include <errno.h>
#include <signal.h>
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

/* A tool's main: RUN(ARGC, ARGV) with SIGPIPE ignored, then ga_tool_exit.
 * A write to a closed pipe (`gpuarena-config --keys | head -1`) then
 * fails with EPIPE and the tool exits WRITE_STATUS, as its page says; the
 * signal killed it (141 in the shell), with no word. */
static inline int ga_tool_main(const char *prog, int (*run)(int, char **), int argc, char **argv,
                               int write_status)
{
    signal(SIGPIPE, SIG_IGN);
    return ga_tool_exit(prog, run(argc, argv), write_status);
}

#endif /* GA_TOOL_OUTPUT_H */
