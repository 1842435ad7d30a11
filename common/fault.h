/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault: named fault injection points for the lifecycle suite (issue 5,
 * TESTPLAN L1-L11, "Fault-injection practice").
 *
 * Built only with ./configure --enable-fault-injection (VNIC_FAULT_INJECTION
 * in config.h). Without it FAULT_POINT() and FAULT_ERRNO() are no-ops and this module
 * is not compiled at all: a production vnicd or vnicd-worker contains no
 * fault symbol and no spec parser (tests/fault_absent.sh checks with nm).
 *
 * Arming: vnicd reads VNIC_FAULT, a comma-separated list of
 *     POINT=ACTION[:ARG][@NTH][*COUNT]
 *   POINT   a name from the table in fault.c (doc/fault-injection.md);
 *           "sup.*" points are vnicd's own, "worker.*" points are passed
 *           to workers as `--fault SPEC` (only the worker entries, and
 *           only on the worker's first launch, so a restarted worker runs
 *           clean). With VNIC_FAULT_NIC=ID both fire for NIC ID only.
 *   ACTION  delay:MS   sleep MS milliseconds there (holds a race window open)
 *           crash      a real crash: store to an unmapped address (SIGSEGV;
 *                      under ASan its SEGV report, then death)
 *           sigkill    the process dies by SIGKILL at that point (vnicd:
 *                      kill(2) on itself; the sandboxed worker cannot, so
 *                      it asks vnicd, which kills it through its pidfd)
 *           fail[:ERRNO]  the system call at that point fails with ERRNO
 *                      (default EIO) without being made; only points that
 *                      wrap a system call accept it
 *           violate    a call the worker's sandbox forbids (socket(2)),
 *                      as code a guest had taken over would make: the
 *                      sandbox must kill the worker and vnicd report the
 *                      syscall (issue 4). Unsandboxed it crashes instead.
 *   @NTH    fire from the NTH hit on (default 1)
 *   *COUNT  fire COUNT times (default 1; 0 = every hit from NTH on)
 * Unknown points, actions the point does not support and malformed entries
 * are errors (a typo must not arm nothing silently).
 *
 * Library code: no logging. The process installs a report hook (called
 * before each action, e.g. to log "fault X fired") and, for sigkill in a
 * process that cannot kill itself, a kill hook.
 * Single-threaded use (vnicd and the worker are one thread each).
 */
#ifndef VNIC_FAULT_H
#define VNIC_FAULT_H

#include <stddef.h>

#ifdef VNIC_FAULT_INJECTION

enum fault_action {
	FAULT_NONE = 0,
	FAULT_DELAY,
	FAULT_CRASH,
	FAULT_SIGKILL,
	FAULT_FAIL,
	FAULT_VIOLATE,
};

/* Most entries one spec may hold. */
#define FAULT_MAX_ENTRIES 16
/* Longest spec accepted (environment or argv). */
#define FAULT_SPEC_MAX 1024

/* fault_action_name - "delay", "crash", ... */
const char *fault_action_name(enum fault_action a);

/*
 * fault_arm - parse spec and arm the entries whose point starts with
 * prefix ("" or NULL: all). Every entry is validated, armed or not.
 * Replaces what was armed before.
 * Returns: 0 or -EINVAL with err filled.
 */
int fault_arm(const char *spec, const char *prefix, char *err, size_t errlen);

/*
 * fault_filter - copy into out the entries of spec whose point starts with
 * prefix, in spec syntax ("" when none). The spec must be valid.
 * Returns: 0, -EINVAL (bad spec, err filled) or -ENOSPC.
 */
int fault_filter(const char *spec, const char *prefix, char *out, size_t outlen, char *err,
		 size_t errlen);

/* fault_point_known - is name in the table of points? */
int fault_point_known(const char *name);

/* fault_point_count - points in the table; fault_point_info - the i-th
 * point's name, process and description (for docs and --list). */
unsigned fault_point_count(void);
void fault_point_info(unsigned i, const char **ret_name, const char **ret_where,
		      const char **ret_tests, int *ret_syscall);

/* Hooks. report(point, action, arg) runs before the action is taken;
 * kill() must not return (default: kill(getpid(), SIGKILL)). */
typedef void (*fault_report_fn)(const char *point, enum fault_action a, unsigned arg);
typedef void (*fault_kill_fn)(const char *point);
void fault_set_hooks(fault_report_fn report, fault_kill_fn kill);

/*
 * fault_hit - count one pass at point name and take the armed action.
 * Returns: 0, or for a firing "fail" entry the positive errno the caller
 * makes its system call fail with. An unregistered name is a programming
 * error in a test build: it crashes at once.
 */
int fault_hit(const char *name);

/* fault_fired - how many times entries at name fired in this process. */
unsigned fault_fired(const char *name);

/* FAULT_POINT(name): a statement, for points that wrap no system call.
 * FAULT_ERRNO(name): an expression, 0 or the errno a "fail" entry asks
 * for, at points that wrap one (the call site skips the call then). */
#define FAULT_POINT(name) ((void)fault_hit(name))
#define FAULT_ERRNO(name) fault_hit(name)

#else /* !VNIC_FAULT_INJECTION */

/* Production: every point compiles to nothing (no name, no call). */
#define FAULT_POINT(name) ((void)0)
#define FAULT_ERRNO(name) 0

#endif
#endif
