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
 * filter (main.c): it shares the worker's memory, holds no fd but the read
 * end of vnicd's lifeline pipe (WORKER_LIFELINE_FD, which the worker closes
 * once the holder has it), enters strict seccomp (read, write, exit) and
 * blocks reading the lifeline, which vnicd never writes to.
 *
 * When the worker dies the holder goes to vnicd, a child subreaper, and
 * stays there, asleep, for a second (supervisor/holders.h): the teardown
 * of the worker's memory waits until vnicd kills it, after the stop's
 * answer and after the rest of a migration's downtime too. If vnicd is
 * gone, the lifeline's last write end is closed and every holder reads
 * EOF and exits.
 *
 * The worker starts reading guest data only after the holder is seen
 * asleep in strict mode (/proc/<pid>/status), that is in that read, from
 * which it returns to code of its own only at vnicd's end: after the
 * worker is reaped no process of vnicd runs an instruction that could
 * write the guest's memory, only the kernel unmaps it.
 */
#ifndef VNICD_WORKERS_HOLDER_H
#define VNICD_WORKERS_HOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Its name (comm), which is how vnicd tells a holder from a worker. */
#define HOLDER_COMM "vnicd-holder"

/* Is fd the lifeline's read end (a FIFO open read-only)? */
bool holder_lifeline_ok(int fd);

/* Start the holder on WORKER_LIFELINE_FD and wait until it is blocked.
 * proc_dir: an open /proc. Returns its pid, or a negative errno with err
 * set (no holder is left; without a lifeline none is started). */
pid_t holder_start(int proc_dir, char *err, size_t errlen);

#endif
