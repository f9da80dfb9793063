/*
 * fork.h - arenas across fork(2) (fork.c).
 */
#ifndef GA_FORK_H
#define GA_FORK_H

/* Install the fork handlers, once per process: when the library is
 * loaded (fork.c), and again, harmlessly, before the first arena is made,
 * so that no fork can find one half built. */
void ga_fork_init(void);

#endif /* GA_FORK_H */
