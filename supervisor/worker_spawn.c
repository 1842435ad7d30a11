/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_spawn: fork+exec of vnicd-worker with its control socket at fd 3.
 * See worker_spawn.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "holders.h"
#include "worker_spawn.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_send_signal_(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_exec(const char *path, const char *nic_id, const struct worker_opts *o,
		       int ctrl, int lifeline)
{
	/* Writable copies: execve's prototype wants char *const[]. */
	char a0[] = "vnicd-worker", a1[] = "--nic", e0[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	char au[] = "--user", as[] = "--sandbox", off[] = "off", af[] = "--fault";
	char ai[] = "--ids", cfg[] = "config";
	char id[128], user[64], spec[WORKER_FAULT_SPEC_MAX + 1];
	char *argv[12] = { a0, a1, id, NULL };
	char *envp[] = { e0, NULL };
	size_t n = strnlen(nic_id, sizeof(id) - 1);
	int argc = 3, first;
	sigset_t none;

	memcpy(id, nic_id, n);
	id[n] = '\0';
	if (o && o->user) {
		n = strnlen(o->user, sizeof(user) - 1);
		memcpy(user, o->user, n);
		user[n] = '\0';
		argv[argc++] = au;
		argv[argc++] = user;
	}
	if (o && o->ids_from_config) {
		argv[argc++] = ai;
		argv[argc++] = cfg;
	}
	if (o && o->sandbox_off) {
		argv[argc++] = as;
		argv[argc++] = off;
	}
	if (o && o->fault && o->fault[0]) {
		/* Fault-injection builds of vnicd only (common/fault.h). */
		n = strnlen(o->fault, sizeof(spec) - 1);
		memcpy(spec, o->fault, n);
		spec[n] = '\0';
		argv[argc++] = af;
		argv[argc++] = spec;
	}
	argv[argc] = NULL;

	/* Signals: default dispositions and an empty mask, whatever the
	 * supervisor had (it ignores SIGPIPE; the worker decides its own). */
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* The lifeline out of the way of fd 3 first (holders.h). */
	if (lifeline >= 0 && (lifeline = fcntl(lifeline, F_DUPFD_CLOEXEC,
					       WORKER_LIFELINE_FD + 1)) < 0)
		_exit(126);
	/* The control socket at its fixed number, without CLOEXEC (dup2
	 * clears it; when it already is fd 3, clear it by hand). */
	if (ctrl == WORKER_CTRL_FD ? fcntl(ctrl, F_SETFD, 0) < 0 : dup2(ctrl, WORKER_CTRL_FD) < 0)
		_exit(126);
	/* The lifeline's read end for the worker's holder (none: no holder). */
	if (lifeline >= 0 && dup2(lifeline, WORKER_LIFELINE_FD) < 0)
		_exit(126);
	first = lifeline >= 0 ? WORKER_LIFELINE_FD + 1 : WORKER_CTRL_FD + 1;
	/* Blocking for the worker: it runs its own loop and sets what it wants. */
	fcntl(WORKER_CTRL_FD, F_SETFL, fcntl(WORKER_CTRL_FD, F_GETFL) & ~O_NONBLOCK);
	/* Every other NIC's fds, the listener, the VMM sockets: gone. */
	if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) < 0) {
		for (int fd = first; fd < 65536; fd++)
			close(fd);
	}
	execve(path, argv, envp);
	_exit(127);
}

int worker_spawn(const char *path, const char *nic_id, const struct worker_opts *opts,
		 struct worker_proc *ret, char *err, size_t errlen)
{
	int sv[2], pidfd, rc, lifeline = holders_lifeline_rd();
	pid_t pid;

	if (access(path, X_OK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "worker %s is not executable: %s", path, strerror(errno));
		return rc;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return rc;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto out_close_pair;
	}
	if (pid == 0) {
		close(sv[0]);
		child_exec(path, nic_id, opts, sv[1], lifeline);
	}
	close(sv[1]);
	pidfd = pidfd_open_(pid);
	if (pidfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "pidfd_open: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(sv[0]);
		return rc;
	}
	/* pidfd_open gives O_CLOEXEC already on Linux >= 5.3. */
	ret->pid = pid;
	ret->pidfd = pidfd;
	ret->ctrl_fd = sv[0];
	return 0;

out_close_pair:
	close(sv[0]);
	close(sv[1]);
	return rc;
}

int worker_kill(const struct worker_proc *w)
{
	if (pidfd_send_signal_(w->pidfd, SIGKILL) < 0 && errno != ESRCH)
		return -errno;
	return 0;
}

int worker_reap(const struct worker_proc *w, bool block, struct worker_exit *ret)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)w->pidfd, &si, WEXITED | (block ? 0 : WNOHANG)) < 0) {
		struct pollfd p = { .fd = w->pidfd, .events = POLLIN };

		if (errno != ECHILD)
			return -errno;
		/* A worker of an earlier vnicd, taken over from the fd store
		 * (fdstore.h): not our child, so its exit status went to
		 * whoever reaped it (systemd). The pidfd says it ended. */
		if (poll(&p, 1, block ? -1 : 0) <= 0)
			return 0;
		memset(ret, 0, sizeof(*ret));
		ret->failed = true;
		snprintf(ret->desc, sizeof(ret->desc),
			 "ended (a worker of the previous vnicd: its exit status went to its "
			 "new parent)");
		return 1;
	}
	if (si.si_pid == 0)
		return 0;
	/* Its holder is ours now (holders.h). */
	holders_collect();
	memset(ret, 0, sizeof(*ret));
	switch (si.si_code) {
	case CLD_EXITED:
		ret->status = si.si_status;
		ret->failed = si.si_status != 0;
		snprintf(ret->desc, sizeof(ret->desc), "exited with status %d", si.si_status);
		break;
	case CLD_KILLED:
	case CLD_DUMPED:
		ret->sig = si.si_status;
		ret->failed = true;
		snprintf(ret->desc, sizeof(ret->desc), "killed by signal %d (%s%s)", si.si_status,
			 strsignal(si.si_status),
			 si.si_status == SIGSYS ? ": seccomp violation" : "");
		break;
	default:
		ret->failed = true;
		snprintf(ret->desc, sizeof(ret->desc), "ended (code %d, status %d)", si.si_code,
			 si.si_status);
		break;
	}
	return 1;
}

const struct worker_ops worker_ops_process = {
	.spawn = worker_spawn,
	.kill = worker_kill,
	.reap = worker_reap,
};
