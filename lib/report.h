/*
 * report.h - GPUARENA_STATS and GPUARENA_STATS_SIGNAL (report.c).
 */
#ifndef GA_REPORT_H
#define GA_REPORT_H

/* Read the variables once and arrange the report (called when an arena
 * is made). */
void ga_report_init(void);

/* In a child made by fork(2) (fork.c): no report at exit or on SIGUSR1. */
void ga_report_fork_child(void);

#endif /* GA_REPORT_H */
