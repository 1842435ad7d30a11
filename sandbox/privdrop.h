/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * privdrop: close what is not needed and become an unprivileged user.
 *
 * Order in the worker (see sandbox.h for the whole sequence):
 * privdrop_resolve() while /etc/passwd is still reachable,
 * sandbox_isolate() (still root), privdrop_close_fds_except(),
 * privdrop_to(), sandbox_rlimits(), sandbox_enter().
 *
 * Library code: never logs, returns 0 or a negative errno.
 */
#ifndef VNIC_PRIVDROP_H
#define VNIC_PRIVDROP_H

#include <sys/types.h>

/* Tried in this order when no user is given. */
#define PRIVDROP_DEFAULT_USER "vnicd"
#define PRIVDROP_FALLBACK_USER "nobody"

/* The most fds privdrop_close_fds_except() accepts to keep. */
#define PRIVDROP_KEEP_MAX 256

/*
 * privdrop_resolve - the uid and gid to drop to.
 * @user: a user name, a decimal uid (its passwd gid if it has an entry,
 *        else the same number as gid), "UID:GID" (both decimal, no
 *        lookup at all: vnicd's --uid-range), or NULL for PRIVDROP_DEFAULT_USER
 *        when it exists, else PRIVDROP_FALLBACK_USER.
 * May open files and sockets (NSS): call before sandbox_isolate() and
 * privdrop_close_fds_except().
 * Returns: 0 with *ret_uid and *ret_gid set; -ENOENT for an unknown user;
 * -EPERM when it resolves to uid 0 or gid 0 (that would drop nothing).
 */
int privdrop_resolve(const char *user, uid_t *ret_uid, gid_t *ret_gid);

/*
 * privdrop_close_fds_except - close every fd except the @n in @keep.
 * Each kept fd must be open (validates the fds a worker was given).
 * Returns: 0; -EINVAL for a negative fd or n > PRIVDROP_KEEP_MAX; -EBADF
 * if a kept fd is not open (nothing closed then).
 */
int privdrop_close_fds_except(const int *keep, unsigned n);

/*
 * privdrop_to - setgroups(0, NULL), setresgid(gid x3), setresuid(uid x3),
 * PR_SET_DUMPABLE 0, then verify: real/effective/saved ids are the new
 * ones, no supplementary groups, no capabilities left (permitted,
 * effective, inheritable, ambient), and setuid(0)/setgid(0) fail.
 * The kernel clears PR_SET_PDEATHSIG on this change: set it afterwards.
 * Returns: 0; -EPERM for uid 0 or gid 0, or when a check fails (the
 * caller must exit: the process is in an unknown state); other negative
 * errnos from the calls.
 */
int privdrop_to(uid_t uid, gid_t gid);

#endif
