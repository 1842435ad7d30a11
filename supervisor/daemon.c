/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * daemon: what vnicd checks and cleans before it serves (issue 10).
 * Contracts in daemon.h.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

int daemon_listen_fds(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	char *end;
	long p, n;

	if (!pid || !fds)
		return 0;
	errno = 0;
	p = strtol(pid, &end, 10);
	if (errno || *end || p != (long)getpid())
		return 0;
	n = strtol(fds, &end, 10);
	/* Many with the fd store (fdstore.h): every fd of every NIC. */
	if (errno || *end || n < 0 || n > 1 << 20)
		return 0;
	return (int)n;
}

int daemon_close_inherited(int keep_from, int keep_n)
{
	int hi_first = keep_from + keep_n;

	/* 0-2 stay (stdio, /dev/null once detached); [keep_from,
	 * keep_from + keep_n) are sockets systemd passed (LISTEN_FDS). */
	if (keep_n <= 0) {
		hi_first = 3;
	} else if (keep_from > 3) {
		if (syscall(SYS_close_range, 3u, (unsigned)keep_from - 1, 0u) < 0)
			return -errno;
	}
	if (syscall(SYS_close_range, (unsigned)hi_first, ~0u, 0u) < 0)
		return -errno;
	return 0;
}

static bool cap_has(const struct __user_cap_data_struct *d, int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

/* pid's parent, if its name (comm) is @comm and it is not a zombie; -1
 * otherwise or when gone. */
static long proc_ppid_if(long pid, const char *comm)
{
	char path[64], buf[512], *open_p, *close_p;
	FILE *f;
	long ppid = -1;
	char state = 0;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID ...": COMM may hold spaces and ')'. */
	open_p = strchr(buf, '(');
	close_p = strrchr(buf, ')');
	if (!open_p || !close_p || close_p < open_p)
		return -1;
	*close_p = '\0';
	if (strcmp(open_p + 1, comm) || sscanf(close_p + 2, "%c %ld", &state, &ppid) != 2)
		return -1;
	return state == 'Z' ? -1 : ppid; /* a zombie runs nothing any more */
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Wait until every pidfd of fds[0..n) is readable (the process ended),
 * at most until @deadline (CLOCK_MONOTONIC ms). Returns how many remain. */
static unsigned wait_pidfds(int *fds, unsigned n, uint64_t deadline)
{
	struct pollfd p[DAEMON_ORPHANS_MAX];
	unsigned left = n;

	while (left) {
		uint64_t now = now_ms();
		unsigned k = 0;

		if (now >= deadline)
			break;
		for (unsigned i = 0; i < n; i++)
			if (fds[i] >= 0)
				p[k++] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		if (poll(p, k, (int)(deadline - now)) <= 0)
			continue;
		for (unsigned j = 0; j < k; j++)
			for (unsigned i = 0; i < n; i++)
				if (fds[i] == p[j].fd && (p[j].revents & (POLLIN | POLLHUP | POLLERR))) {
					close(fds[i]);
					fds[i] = -1;
					left--;
				}
	}
	return left;
}

static bool pid_kept(long pid, const pid_t *keep, size_t nkeep)
{
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] == pid)
			return true;
	return false;
}

int daemon_wait_orphans(unsigned wait_ms, const pid_t *keep, size_t nkeep, unsigned *ret_found,
			unsigned *ret_killed)
{
	int fds[DAEMON_ORPHANS_MAX];
	unsigned n = 0, left;
	long first = 0;
	struct dirent *e;
	uint64_t t0 = now_ms();
	DIR *d = opendir("/proc");

	*ret_found = *ret_killed = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < DAEMON_ORPHANS_MAX) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		int fd;

		if (*end || pid <= 1 || pid_kept(pid, keep, nkeep) ||
		    proc_ppid_if(pid, "vnicd-worker") != 1)
			continue;
		fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (fd < 0)
			continue; /* gone meanwhile */
		if (!first)
			first = pid;
		fds[n++] = fd;
	}
	closedir(d);
	*ret_found = n;
	if (n == 0)
		return 0;
	log_warn("%u worker(s) of an earlier vnicd still running (pid %ld%s): waiting up to %u ms "
		 "for them to stop their queues before serving anything", n, first,
		 n > 1 ? " and more" : "", wait_ms);
	left = wait_pidfds(fds, n, t0 + wait_ms);
	for (unsigned i = 0; left && i < n; i++)
		if (fds[i] >= 0 && syscall(SYS_pidfd_send_signal, fds[i], SIGKILL, NULL, 0) == 0)
			(*ret_killed)++;
	if (left) {
		log_warn("%u earlier worker(s) still running after %u ms: SIGKILL", left, wait_ms);
		left = wait_pidfds(fds, n, now_ms() + 1000);
	}
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	log_info("the earlier vnicd's workers are gone after %llu ms (%u killed%s)",
		 (unsigned long long)(now_ms() - t0), *ret_killed, left ? ", some still there" : "");
	return 0;
}

int daemon_check_worker(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		snprintf(err, errlen, "worker binary %s: %s (give --worker PATH or $VNICD_WORKER)",
			 path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0) {
		snprintf(err, errlen, "worker binary %s is not an executable file", path);
		return -EACCES;
	}
	return 0;
}

int daemon_check_privileges(bool sandbox_off, char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	static const struct {
		int cap;
		const char *name, *why;
	} need[] = {
		{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "the workers' namespaces and empty root" },
		{ CAP_SETUID, "CAP_SETUID", "the workers' uid drop" },
		{ CAP_SETGID, "CAP_SETGID", "the workers' gid drop" },
	};
	char missing[160] = "";
	size_t used = 0;

	if (sandbox_off)
		return 0;
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &hdr, d) < 0) {
		snprintf(err, errlen, "capget: %s", strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!cap_has(d, need[i].cap))
			used += (size_t)snprintf(missing + used, sizeof(missing) - used, "%s%s (%s)",
						 used ? ", " : "", need[i].name, need[i].why);
	if (used) {
		snprintf(err, errlen,
			 "workers cannot be sandboxed: missing %s; run vnicd as root (or with "
			 "these capabilities), or --sandbox=off for debugging",
			 missing);
		return -EPERM;
	}
	return 0;
}

bool daemon_has_net_admin(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));
	return syscall(SYS_capget, &hdr, d) == 0 && cap_has(d, CAP_NET_ADMIN);
}

/* One "key = value" line; false for a comment or a blank line. */
static bool conf_split(char *line, char **key, char **val)
{
	char *p = line, *eq, *e;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '#' || *p == '\0' || *p == '\n')
		return false;
	e = p + strlen(p);
	while (e > p && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	eq = strchr(p, '=');
	*key = p;
	*val = NULL;
	if (!eq)
		return true;
	*val = eq + 1;
	for (e = eq; e > p && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	*e = '\0';
	while (**val == ' ' || **val == '\t')
		(*val)++;
	return true;
}

int daemon_conf_parse(const char *path, const struct daemon_conf_key *keys, size_t nkeys,
		      void *ctx, char *err, size_t errlen)
{
	char line[512], sub[192];
	unsigned lineno = 0;
	FILE *f;
	int rc = 0;

	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		const struct daemon_conf_key *k = NULL;
		char *key, *val;

		lineno++;
		if (!conf_split(line, &key, &val))
			continue;
		if (!val) {
			snprintf(err, errlen, "%s:%u: \"%.64s\": want KEY = VALUE", path, lineno, key);
			rc = -EINVAL;
			break;
		}
		for (size_t i = 0; i < nkeys && !k; i++)
			if (!strcmp(key, keys[i].name))
				k = &keys[i];
		if (!k) {
			size_t used = 0;

			sub[0] = '\0';
			for (size_t i = 0; i < nkeys && used < sizeof(sub); i++)
				used += (size_t)snprintf(sub + used, sizeof(sub) - used, "%s%s",
							 i ? ", " : "", keys[i].name);
			snprintf(err, errlen, "%s:%u: unknown key \"%.64s\" (known: %s)", path, lineno,
				 key, sub);
			rc = -EINVAL;
			break;
		}
		rc = k->set(ctx, k, val, sub, sizeof(sub));
		if (rc)
			snprintf(err, errlen, "%s:%u: %s", path, lineno, sub);
	}
	fclose(f);
	return rc;
}

static int conf_log_level(void *ctx, const struct daemon_conf_key *k, const char *val, char *err,
			  size_t errlen)
{
	struct daemon_conf *c = ctx;

	(void)k;
	if (log_level_parse(val, &c->log_level) < 0) {
		snprintf(err, errlen, "log-level %.32s: use error, warn, info or debug", val);
		return -EINVAL;
	}
	c->have_log_level = true;
	return 0;
}

int daemon_conf_read(const char *path, struct daemon_conf *ret, char *err, size_t errlen)
{
	static const struct daemon_conf_key keys[] = { { "log-level", conf_log_level, 0, 0 } };

	memset(ret, 0, sizeof(*ret));
	return daemon_conf_parse(path, keys, sizeof(keys) / sizeof(keys[0]), ret, err, errlen);
}
