/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holders: reap the workers' holders. See holders.h and workers/holder.h.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "holders.h"
#include "log.h"
#include "workers/holder.h"

/* A holder we saw among our children and have not reaped yet. It cannot
 * be reused as another process's pid before we reap it. */
struct holder {
	pid_t pid;
	struct holder *next;
};

static struct event *ev_collect;   /* the deferred sweep, and its retries */
static struct holder *held;        /* being waited for */
static unsigned retry_ms;          /* the next retry's delay, while any is held */

#define RETRY_FIRST_MS 1
#define RETRY_MAX_MS 100

/* Reap pid if it has exited; with block, wait for it. 1 reaped (or not
 * ours any more), 0 not yet. */
static int holder_try_reap(pid_t pid, bool block)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | (block ? 0 : WNOHANG)) < 0) {
		if (errno == EINTR)
			continue;
		return 1; /* ECHILD */
	}
	return si.si_pid != 0;
}

static bool is_holder(pid_t pid)
{
	char path[40], comm[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	if (n <= 0)
		return false;
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	return strcmp(comm, HOLDER_COMM) == 0;
}

static bool is_held(pid_t pid)
{
	for (struct holder *h = held; h; h = h->next)
		if (h->pid == pid)
			return true;
	return false;
}

/* Take up one holder: reap it now if it has exited, else remember it. */
static void holder_take(pid_t pid)
{
	struct holder *h;

	if (holder_try_reap(pid, false))
		return;
	h = calloc(1, sizeof(*h));
	if (!h)
		return; /* the next sweep takes it */
	h->pid = pid;
	h->next = held;
	held = h;
}

/* Reap the holders taken up that have exited since. */
static void reap_held(void)
{
	struct holder **pp = &held;

	while (*pp) {
		struct holder *h = *pp;

		if (holder_try_reap(h->pid, false)) {
			*pp = h->next;
			free(h);
		} else {
			pp = &h->next;
		}
	}
}

/* Our children, from every thread's list (an orphan goes to any thread). */
static void sweep(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	reap_held();
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[sizeof("/proc/self/task//children") + sizeof(e->d_name)];
		FILE *fp;
		int pid;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		fp = fopen(path, "re");
		if (!fp)
			continue;
		while (fscanf(fp, "%d", &pid) == 1)
			if (pid > 0 && !is_held(pid) && is_holder(pid))
				holder_take(pid);
		fclose(fp);
	}
	closedir(d);
}

/* The sweep, then a retry while a holder is still tearing down: a timer
 * rather than a pidfd each, so vnicd holds no fd for them (a reply's
 * "every fd of the NIC closed" stays true). */
static void collect_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sweep();
	if (!held) {
		retry_ms = RETRY_FIRST_MS;
		return;
	}
	{
		struct timeval tv = { .tv_sec = 0, .tv_usec = (suseconds_t)retry_ms * 1000 };

		event_add(ev_collect, &tv);
		retry_ms = retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry_ms * 2;
	}
}

int holders_init(struct event_base *base)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) < 0)
		return -errno;
	retry_ms = RETRY_FIRST_MS;
	ev_collect = evtimer_new(base, collect_cb, NULL);
	return ev_collect ? 0 : -ENOMEM;
}

void holders_collect(void)
{
	/* After the callback that reaped the worker (a device stop's answer
	 * is not held up by the sweep). Not a subreaper (no holders_init):
	 * the holders went to init, nothing to do. */
	if (ev_collect)
		event_active(ev_collect, EV_TIMEOUT, 0);
}

void holders_shutdown(void)
{
	if (!ev_collect)
		return;
	sweep();
	while (held) {
		struct holder *h = held;

		holder_try_reap(h->pid, true);
		held = h->next;
		free(h);
	}
	event_free(ev_collect);
	ev_collect = NULL;
}
