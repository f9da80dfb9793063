/*
 * nombind.h - make mbind(2) fail with EPERM in the calling process from
 * now on, as Docker's default seccomp profile does without CAP_SYS_NICE:
 * a seccomp filter, which stays for the life of the process (a test runs
 * it in a child).  False where no filter can be set (a kernel without
 * seccomp, a sandbox that forbids it).  Used by check_topo.c and
 * numa/numa_guest.c.
 */
#ifndef GA_TESTS_NOMBIND_H
#define GA_TESTS_NOMBIND_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline bool ga_refuse_mbind(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mbind, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

#endif /* GA_TESTS_NOMBIND_H */
