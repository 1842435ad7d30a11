/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder: keeps the worker's exit off a device stop's path.
 *
 * The kernel makes an exiting process reapable only once the last user of
 * its address space has torn it down: for a worker that touched a few
 * thousand guest pages that is 2-6 ms on a host like ours, and a device
 * stop (GET_VRING_BASE, a migration's downtime) is answered only after the
 * worker is reaped. A holder is a child process made with clone(CLONE_VM)
 * in the worker's step 6, after the uid drop and before the rlimits and the
 * filter (main.c): it shares the worker's memory, holds no fd but a
 * pipe of its own, enters strict seccomp (read, write, exit) and blocks in
 * read forever. PR_SET_PDEATHSIG kills it when the worker dies, and it
 * pays the teardown then, after the worker is reaped. vnicd is a child
 * subreaper and reaps holders (supervisor/holders.c); elsewhere init does.
 *
 * The worker starts reading guest data only after the holder is seen
 * asleep in strict mode (/proc/<pid>/status), that is in that read, from
 * which it never returns
 * to code of its own: after the worker is reaped no process of vnicd runs
 * an instruction that could write the guest's memory, only the kernel
 * unmaps it.
 */
#ifndef VNICD_WORKERS_HOLDER_H
#define VNICD_WORKERS_HOLDER_H

#include <stddef.h>
#include <sys/types.h>

/* Its name (comm), which is how vnicd tells a holder from a worker. */
#define HOLDER_COMM "vnicd-holder"

/* Start the holder and wait until it is blocked. proc_dir: an open /proc.
 * Returns its pid, or a negative errno with err set (no holder is left). */
pid_t holder_start(int proc_dir, char *err, size_t errlen);

#endif
