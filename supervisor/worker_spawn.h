/*
 * worker_spawn: start one vnicd-worker process and watch it by pidfd.
 *
 * fork+exec (STYLE habit 11): the child gets exactly one inherited fd, its
 * end of a SOCK_SEQPACKET socketpair, at WORKER_CTRL_FD; everything else is
 * closed with close_range before execv; argv and environment are explicit.
 * The NIC's fds (memory, eventfds, backend, stats page) travel afterwards
 * in the Config message over that socket.
 */
#ifndef VNIC_WORKER_SPAWN_H
#define VNIC_WORKER_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The fd number the worker finds its control socket at. */
#define WORKER_CTRL_FD 3

struct worker_proc {
	pid_t pid;
	int pidfd;     /* readable when the process has exited */
	int ctrl_fd;   /* our end of the control socketpair, non-blocking */
};

/*
 * worker_spawn - fork and exec @path as `vnicd-worker --nic ID`.
 * Returns: 0 with *ret filled, or a negative errno with err filled and
 * nothing left (no child, no fd).
 */
int worker_spawn(const char *path, const char *nic_id, struct worker_proc *ret,
		 char *err, size_t errlen);

/* worker_kill - SIGKILL through the pidfd (no pid reuse race). */
int worker_kill(const struct worker_proc *w);

/*
 * worker_reap - collect the exit status once the pidfd is readable
 * (waitid(P_PIDFD)); with @block, wait for it.
 * Returns: 1 and a description in desc ("exited with status 0", "killed
 * by signal 31 (SIGSYS: seccomp violation)"), *ret_failed true when the
 * exit was not a clean status 0; 0 when not exited yet (non-blocking);
 * negative errno on error.
 */
int worker_reap(const struct worker_proc *w, bool block, bool *ret_failed,
		char *desc, size_t desclen);

#endif
