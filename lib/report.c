/*
 * report.c - GPUARENA_STATS: print every arena's statistics when the
 * program exits, and on SIGUSR1 when GPUARENA_STATS_SIGNAL=1, so that an
 * unmodified program (an MPI job, a Python script) can be inspected.
 *
 *   GPUARENA_STATS=stderr | stdout | FILE    (%p: pid, %r: MPI rank)
 *
 * A FILE ending in ".json" gets JSON, anything else the table.  The
 * variables are read when the first arena is made; a bad value is
 * ignored (the library never prints on its own account), and
 * gpuarena-config(1) says so.
 *
 * A signal handler may not take locks or call stdio, so SIGUSR1 only
 * writes a byte to a pipe; a thread started for this reads it and prints.
 * The handler is installed only where SIGUSR1 still has its default
 * disposition: a program's own handler is never replaced.
 */
#include "config.h"

#include "report.h"

#include "arena.h"
#include "env.h"
#include "errors.h"
#include "outpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char target[PATH_MAX];
static bool json, enabled;
static int pipe_fds[2] = {-1, -1};
static pthread_t reporter; /* the signal thread, while started */
static bool reporter_started;
/* One report at a time: the signal thread's and the exit's, each with a
 * stream of its own on the same file, would mix their lines. */
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void print_now(void)
{
    pthread_mutex_lock(&print_lock);
    FILE *out;
    bool close_it = false;
    if (strcmp(target, "stderr") == 0) {
        out = stderr;
    } else if (strcmp(target, "stdout") == 0) {
        out = stdout;
    } else {
        out = fopen(target, "a");
        close_it = true;
    }
    if (out) {
        (void)gpuarena_stats_print(out, json ? "j" : "");
        if (close_it)
            fclose(out);
    }
    pthread_mutex_unlock(&print_lock);
}

static void on_signal(int sig);

/* The signal handler and the thread are this library's code: when it is
 * unloaded (dlclose) a later SIGUSR1 or the thread's wake-up would run
 * code no longer mapped.  SIGUSR1 is then ignored (its default would
 * kill a program that is exiting, or that was told SIGUSR1 asks for a
 * report), and the thread, at the end of its pipe, returns before the
 * library goes; a report it is printing is finished first. */
static void stop_signal(void)
{
    if (!reporter_started)
        return;
    struct sigaction cur;
    if (sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == on_signal) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        sigaction(SIGUSR1, &ign, NULL);
    }
    int w = pipe_fds[1];
    pipe_fds[1] = -1;
    close(w); /* the thread reads the end of the pipe */
    pthread_join(reporter, NULL);
    close(pipe_fds[0]);
    pipe_fds[0] = -1;
    reporter_started = false;
}

/* A destructor rather than atexit(): it also runs, while the code is
 * still mapped, when the library is unloaded before exit (dlclose). */
__attribute__((destructor)) static void at_exit(void)
{
    stop_signal();
    if (enabled)
        print_now();
}

static void on_signal(int sig)
{
    (void)sig;
    int e = errno;
    char c = 1;
    ssize_t n = write(pipe_fds[1], &c, 1); /* -1 in a forked child: EBADF */
    (void)n;
    errno = e;
}

/* One report for every wake-up, however many signals came meanwhile
 * (their bytes read at once): a report per byte fell behind a storm of
 * signals, and the pipe filled. */
static void *signal_thread(void *arg)
{
    (void)arg;
    for (;;) {
        char c[256];
        ssize_t n = read(pipe_fds[0], c, sizeof c);
        if (n > 0)
            print_now();
        else if (n == 0 || errno != EINTR)
            return NULL; /* the write end closed (stop_signal), or broken */
    }
}

static void start_signal(void)
{
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
        return;
    if (pipe(pipe_fds) != 0)
        return;
    fcntl(pipe_fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(pipe_fds[1], F_SETFD, FD_CLOEXEC);
    /* The handler never blocks: with the pipe full (a report stalled on
     * a pipe nobody reads), a report is coming anyway, and the thread the
     * signal interrupted went on waiting inside the handler. */
    fcntl(pipe_fds[1], F_SETFL, fcntl(pipe_fds[1], F_GETFL) | O_NONBLOCK);
    /* The thread must not take the program's signals.  Joinable: the
     * library waits for it to end when it is unloaded (stop_signal). */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    int rc = pthread_create(&reporter, NULL, signal_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc != 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        pipe_fds[0] = pipe_fds[1] = -1;
        return;
    }
    reporter_started = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

static bool in_fork_child; /* ga_report_fork_child */

/* PATH made absolute, where it fits: the report is written at exit or on
 * a signal, after the program may have changed its directory. */
static void absolute(char *path, size_t size)
{
    char cwd[4096], buf[4096];
    if (path[0] == '/' || strcmp(path, "stderr") == 0 || strcmp(path, "stdout") == 0 ||
        !getcwd(cwd, sizeof cwd))
        return;
    if ((size_t)snprintf(buf, sizeof buf, "%s/%s", cwd, path) < size)
        memcpy(path, buf, strlen(buf) + 1);
}

static void init(void)
{
    /* A child forked before the parent read the variable prints a report
     * of its own only to a file of its own (%p), not to its parent's. */
    const char *v = ga_env("GPUARENA_STATS");
    if (in_fork_child && v && !ga_output_per_process(v))
        v = NULL;
    if (!v)
        return;
    /* An invalid name is ignored (gpuarena(7)): the call that read it
     * did not fail, and its message is not the thread's. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    gpuarena_status_t st = ga_output_path("stats file", v, target, sizeof target);
    ga_error_restore(&saved);
    if (st != GPUARENA_SUCCESS)
        return;
    absolute(target, sizeof target);
    size_t n = strlen(target);
    json = n > 5 && strcmp(target + n - 5, ".json") == 0;
    enabled = true;
    const char *sig = ga_env("GPUARENA_STATS_SIGNAL");
    if (sig && strcmp(sig, "1") == 0)
        start_signal();
}

/* A child made by fork(2) prints nothing, as it records no trace
 * (trace/recorder.c): its report would repeat the parent's figures, to
 * the file named for the parent.  Its SIGUSR1 must not wake the parent's
 * report thread through the pipe they share either. */
void ga_report_fork_child(void)
{
    in_fork_child = true;
    enabled = false;
    reporter_started = false; /* the thread did not come along */
    int w = pipe_fds[1], r = pipe_fds[0];
    pipe_fds[1] = pipe_fds[0] = -1;
    if (w >= 0)
        close(w);
    if (r >= 0)
        close(r);
}

void ga_report_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init);
}
