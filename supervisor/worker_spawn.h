/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_spawn: start one vnicd-worker process and watch it by pidfd.
 *
 * fork+exec (STYLE habit 11): besides stdio the child inherits exactly one
 * fd, its end of a SOCK_SEQPACKET socketpair at WORKER_CTRL_FD; everything
 * else is closed with close_range before execve; argv and environment are
 * explicit. The NIC's fds (memory, eventfds, backend, stats page) travel
 * afterwards in the Config message over that socket. A sandbox violation's
 * record comes back in the stats page (sandbox.h).
 */
#ifndef VNIC_WORKER_SPAWN_H
#define VNIC_WORKER_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "worker_abi.h"

struct worker_proc {
	pid_t pid;
	int pidfd;     /* readable when the process has exited */
	int ctrl_fd;   /* our end of the control socketpair, non-blocking */
};

/* Longest --fault spec passed on (FAULT_SPEC_MAX of common/fault.h). */
#define WORKER_FAULT_SPEC_MAX 1024

/* What the worker is told on its command line (issue 4). */
struct worker_opts {
	const char *user; /* --user USER; NULL: the worker's default
			     ("vnicd" when that user exists, else "nobody") */
	bool sandbox_off; /* --sandbox off: debugging only */
	bool ids_from_config; /* --ids config: the uid and gid come in the Config
				 (a pre-started worker, worker_spare.h); a worker
				 too old to know it exits at once */
	const char *fault; /* --fault SPEC (common/fault.h); NULL or "": none.
			      Set only by a fault-injection build of vnicd */
};

/*
 * worker_spawn - fork and exec @path as
 * `vnicd-worker --nic ID [--user USER] [--ids config] [--sandbox off] [--fault SPEC]` (@opts may be
 * NULL: neither option; the defaults, sandbox on, need no argument).
 * Returns: 0 with *ret filled, or a negative errno with err filled and
 * nothing left (no child, no fd).
 */
int worker_spawn(const char *path, const char *nic_id, const struct worker_opts *opts,
		 struct worker_proc *ret, char *err, size_t errlen);

/* worker_kill - SIGKILL through the pidfd (no pid reuse race). */
int worker_kill(const struct worker_proc *w);

/* How a worker ended. */
struct worker_exit {
	bool failed;     /* anything but exit status 0 */
	int sig;         /* terminating signal, 0 when it exited */
	int status;      /* exit status when it exited */
	char desc[96];   /* "exited with status 0", "killed by signal 31 (...)" */
};

/*
 * worker_reap - collect the exit status once the pidfd is readable
 * (waitid(P_PIDFD)); with @block, wait for it.
 * Returns: 1 and *ret filled; 0 when not exited yet (non-blocking);
 * negative errno on error.
 */
int worker_reap(const struct worker_proc *w, bool block, struct worker_exit *ret);

/*
 * How the supervisor starts, kills and reaps workers: struct sup's wops,
 * NULL for worker_ops_process (the three functions above, real
 * processes). The fuzz targets put a simulated worker there
 * (fuzz/sim_worker.c): an in-process peer on the same control socket, an
 * eventfd for the pidfd, so a NIC's whole life runs without fork.
 */
struct worker_ops {
	int (*spawn)(const char *path, const char *nic_id, const struct worker_opts *opts,
		     struct worker_proc *ret, char *err, size_t errlen);
	int (*kill)(const struct worker_proc *w);
	int (*reap)(const struct worker_proc *w, bool block, struct worker_exit *ret);
};
extern const struct worker_ops worker_ops_process;

#endif
