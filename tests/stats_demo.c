/*
 * stats_demo.c - a program that uses a host arena and, with an argument
 * "signal", sends itself SIGUSR1 half-way; with "fork", makes a child
 * half-way that uses the arena, sends itself SIGUSR1 and exits through
 * exit(3); with "fork-first", makes such a child before its first
 * allocation, or with "fork-before" before its first call into gpuarena
 * (the child makes its own arena); with "chdir", moves to / after its
 * first arena; with "run", runs itself with "many"
 * (64 allocations of its own) after its allocations, as a program runs
 * another that inherits its environment; with "storm", has a thread send
 * it SIGUSR1 without pause while it exits: stats-report.sh runs it under
 * GPUARENA_STATS and GPUARENA_TRACE to see what a user sees.
 */
#include "gpuarena.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 0 when child PID exits with status 0, else 1. */
static int exited_well(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    return 0;
}

/* A child that uses A and exits through exit(3), waited for. */
static int child_uses(gpuarena_t *a)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        void *q;
        if (gpuarena_alloc(a, 1 << 20, NULL, &q) != GPUARENA_SUCCESS ||
            gpuarena_free(a, q, NULL) != GPUARENA_SUCCESS)
            exit(2);
        raise(SIGUSR1);
        struct timespec t = {0, 200 * 1000 * 1000}; /* time for a report thread */
        nanosleep(&t, NULL);
        exit(0); /* destructors run: the report at exit would */
    }
    return exited_well(pid);
}

/* A child made before the program's first call into gpuarena, which
 * uses an arena of its own; waited for. */
static int child_first(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        gpuarena_t *a;
        void *q;
        if (gpuarena_get(GPUARENA_HOST, 0, &a) != GPUARENA_SUCCESS ||
            gpuarena_alloc(a, 1 << 20, NULL, &q) != GPUARENA_SUCCESS ||
            gpuarena_free(a, q, NULL) != GPUARENA_SUCCESS)
            exit(2);
        exit(0); /* destructors run: the report at exit would */
    }
    return exited_well(pid);
}

/* This program again, as ARGV0 many, waited for. */
static int run_many(const char *argv0)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        execl(argv0, argv0, "many", (char *)NULL);
        _exit(127);
    }
    return exited_well(pid);
}

static void *storm(void *arg)
{
    (void)arg;
    for (;;) {
        kill(getpid(), SIGUSR1);
        struct timespec t = {0, 200 * 1000};
        nanosleep(&t, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    gpuarena_t *a;
    void *p[16];
    /* A shell or harness may have left SIGUSR1 ignored or blocked; this
     * program, like most, wants the default (gpuarena never replaces
     * another handler). */
    signal(SIGUSR1, SIG_DFL);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    if (argc > 1 && strcmp(argv[1], "fork-before") == 0 && child_first() != 0)
        return 1;
    if (gpuarena_get(GPUARENA_HOST, 0, &a) != GPUARENA_SUCCESS) {
        fprintf(stderr, "stats_demo: %s\n", gpuarena_last_error());
        return 1;
    }
    /* Before the first allocation, where the recorder has not yet read
     * GPUARENA_TRACE: the child must not read it either. */
    if (argc > 1 && strcmp(argv[1], "fork-first") == 0 && child_uses(a) != 0)
        return 1;
    /* A program that changes its directory once it runs: a relative
     * GPUARENA_STATS name stays where it started. */
    if (argc > 1 && strcmp(argv[1], "chdir") == 0 && chdir("/") != 0)
        return 1;
    if (argc > 1 && strcmp(argv[1], "many") == 0) {
        for (int i = 0; i < 64; i++) {
            void *q;
            if (gpuarena_alloc(a, 4096, NULL, &q) != GPUARENA_SUCCESS ||
                gpuarena_free(a, q, NULL) != GPUARENA_SUCCESS)
                return 1;
        }
        return 0;
    }
    for (int i = 0; i < 16; i++)
        if (gpuarena_alloc(a, (size_t)(i + 1) << 20, NULL, &p[i]) != GPUARENA_SUCCESS)
            return 1;
    if (argc > 1 && strcmp(argv[1], "signal") == 0) {
        /* The report thread prints to the file of GPUARENA_STATS: wait
         * (up to 10 s) until it has, so that the exit report comes after. */
        const char *file = getenv("GPUARENA_STATS");
        struct stat st0 = {0}, st1 = {0};
        if (file)
            stat(file, &st0);
        raise(SIGUSR1);
        for (int i = 0; i < 1000; i++) {
            struct timespec t = {0, 10 * 1000 * 1000};
            nanosleep(&t, NULL);
            if (!file || (stat(file, &st1) == 0 && st1.st_size > st0.st_size && i > 10))
                break;
        }
    }
    if (argc > 1 && strcmp(argv[1], "run") == 0 && run_many(argv[0]) != 0)
        return 1;
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        if (child_uses(a) != 0)
            return 1;
        struct timespec t = {0, 200 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    for (int i = 0; i < 8; i++)
        if (gpuarena_free(a, p[i], NULL) != GPUARENA_SUCCESS)
            return 1;
    if (argc > 1 && strcmp(argv[1], "raise") == 0) {
        /* 100,000 signals while the reports go to a pipe nobody reads:
         * "raised" on standard error once this thread is through them. */
        for (int i = 0; i < 100000; i++)
            raise(SIGUSR1);
        fputs("raised\n", stderr);
    }
    if (argc > 1 && strcmp(argv[1], "storm") == 0) {
        /* Reports on the signal while the report at exit is written. */
        pthread_t t;
        if (pthread_create(&t, NULL, storm, NULL) != 0)
            return 1;
        struct timespec w = {0, 20 * 1000 * 1000};
        nanosleep(&w, NULL);
    }
    return 0;
}
