/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * privdrop: close fds, resolve and become an unprivileged user.
 * Contracts in privdrop.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "privdrop.h"

static int lookup_name(const char *name, uid_t *ret_uid, gid_t *ret_gid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int rc;

	rc = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (rc)
		return -rc;
	if (!res)
		return -ENOENT;
	*ret_uid = pw.pw_uid;
	*ret_gid = pw.pw_gid;
	return 0;
}

int privdrop_resolve(const char *user, uid_t *ret_uid, gid_t *ret_gid)
{
	uid_t uid = 0;
	gid_t gid = 0;
	int rc;

	if (!ret_uid || !ret_gid)
		return -EINVAL;
	if (!user) {
		rc = lookup_name(PRIVDROP_DEFAULT_USER, &uid, &gid);
		if (rc == -ENOENT)
			rc = lookup_name(PRIVDROP_FALLBACK_USER, &uid, &gid);
	} else if (user[0] >= '0' && user[0] <= '9') {
		struct passwd pw, *res = NULL;
		char buf[4096], *end;
		unsigned long v, g;

		errno = 0;
		v = strtoul(user, &end, 10);
		if (errno || (*end && *end != ':') || v >= (uid_t)-1)
			return -EINVAL;
		uid = (uid_t)v;
		gid = (gid_t)v;
		if (*end == ':') {
			/* "UID:GID": both given, no NSS lookup (which would
			 * load NSS modules into the worker for nothing). */
			if (end[1] < '0' || end[1] > '9')
				return -EINVAL;
			g = strtoul(end + 1, &end, 10);
			if (errno || *end || g >= (gid_t)-1)
				return -EINVAL;
			gid = (gid_t)g;
		} else if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res) {
			gid = pw.pw_gid;
		}
		rc = 0;
	} else {
		rc = lookup_name(user, &uid, &gid);
	}
	if (rc < 0)
		return rc;
	if (uid == 0 || gid == 0)
		return -EPERM;
	*ret_uid = uid;
	*ret_gid = gid;
	return 0;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Close [lo, hi]; close_range, or a loop where the kernel lacks it. */
static int close_span(unsigned lo, unsigned hi)
{
	struct rlimit rl;

	if (lo > hi)
		return 0;
	if (syscall(SYS_close_range, lo, hi, 0) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur != RLIM_INFINITY && hi >= rl.rlim_cur)
		hi = rl.rlim_cur ? (unsigned)rl.rlim_cur - 1 : 0;
	for (unsigned fd = lo; fd <= hi && fd <= INT_MAX; fd++)
		(void)close((int)fd);
	return 0;
}

int privdrop_close_fds_except(const int *keep, unsigned n)
{
	int sorted[PRIVDROP_KEEP_MAX];
	unsigned next = 0;
	int rc;

	if (n > PRIVDROP_KEEP_MAX || (n && !keep))
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (keep[i] < 0)
			return -EINVAL;
		if (fcntl(keep[i], F_GETFD) < 0)
			return -EBADF;
		sorted[i] = keep[i];
	}
	qsort(sorted, n, sizeof(sorted[0]), int_cmp);
	for (unsigned i = 0; i < n; i++) {
		unsigned fd = (unsigned)sorted[i];

		if (fd > next) {
			rc = close_span(next, fd - 1);
			if (rc < 0)
				return rc;
		}
		if (fd + 1 > next)
			next = fd + 1;
	}
	return close_span(next, ~0u);
}

/* True when the process holds no capability in any set. */
static bool caps_empty(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0xff, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	for (unsigned i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return false;
	/* Ambient caps need permitted ones, but say so explicitly. */
	for (int cap = 0; cap <= 63; cap++) {
		int r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);

		if (r < 0 && errno == EINVAL)
			break; /* past the last capability the kernel knows */
		if (r != 0)
			return false;
	}
	return true;
}

int privdrop_to(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (uid == 0 || gid == 0)
		return -EPERM;
	/* Groups first: setgroups and setresgid need CAP_SETGID, which the
	 * uid change takes away. */
	if (setgroups(0, NULL) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0)
		return -errno;
	if (setresuid(uid, uid, uid) < 0)
		return -errno;
	/* Non-dumpable: no core, no ptrace by the same uid, /proc/<pid>
	 * owned by root. The uid change does this already when
	 * fs.suid_dumpable is 0; make it unconditional. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;

	/* Verify it stuck (as OpenSSH's permanently_set_uid does). */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return -errno;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return -EPERM;
	if (getgroups(0, NULL) != 0)
		return -EPERM;
	if (!caps_empty())
		return -EPERM;
	if (setgid(0) == 0 || setegid(0) == 0 || setuid(0) == 0 || seteuid(0) == 0)
		return -EPERM;
	return 0;
}
