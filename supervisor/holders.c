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
#include <time.h>
#include <unistd.h>

#include "holders.h"
#include "log.h"
#include "workers/holder.h"

/* A holder among our children (its worker is gone) that we have not
 * reaped yet. Its pid cannot be another process's before we reap it. */
struct holder {
	pid_t pid;
	long long since_ms; /* when a sweep first saw it */
	bool killed;
	struct holder *next;
};

static struct event *ev_collect;   /* the deferred sweep, the lingers, the retries */
static struct holder *held;        /* lingering or dying */
static unsigned retry_ms;          /* the next reap retry's delay, while one is dying */
static bool sweep_due;             /* holders_collect armed the timer for a sweep */
static int life_rd = -1, life_wr = -1; /* the lifeline (holders.h) */

#define RETRY_FIRST_MS 1
#define RETRY_MAX_MS 100
#define HOLDERS_COLLECT_DELAY_US 2000 /* holders_collect */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

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

/* Take up one holder: reap it now if it has exited, else let it linger. */
static void holder_take(pid_t pid, long long now)
{
	struct holder *h;

	if (holder_try_reap(pid, false))
		return;
	h = calloc(1, sizeof(*h));
	if (!h)
		return; /* the next sweep takes it */
	h->pid = pid;
	h->since_ms = now;
	h->next = held;
	held = h;
}

/* Reap the holders that have exited, kill those that lingered long
 * enough. Returns the ms until there is more to do, or -1 for nothing. */
static long long tend_held(long long now)
{
	struct holder **pp = &held;
	long long next = -1;
	bool dying = false;

	while (*pp) {
		struct holder *h = *pp;
		long long left = h->since_ms + HOLDERS_LINGER_MS - now;

		if (holder_try_reap(h->pid, false)) {
			*pp = h->next;
			free(h);
			continue;
		}
		if (!h->killed && left <= 0) {
			/* Our unreaped child: the pid is still this holder. */
			kill(h->pid, SIGKILL);
			h->killed = true;
		}
		if (h->killed)
			dying = true;
		else if (next < 0 || left < next)
			next = left;
		pp = &h->next;
	}
	if (!dying) {
		retry_ms = RETRY_FIRST_MS;
		return next;
	}
	if (next < 0 || (long long)retry_ms < next)
		next = retry_ms;
	retry_ms = retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry_ms * 2;
	return next;
}

/* Our children, from every thread's list (an orphan goes to any thread). */
static void sweep(long long now)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

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
				holder_take(pid, now);
		fclose(fp);
	}
	closedir(d);
}

/* A timer for the next linger's end or reap retry (next ms; -1: none):
 * rather than a pidfd each, so vnicd holds no fd for them (a reply's
 * "every fd of the NIC closed" stays true). */
static void schedule(long long next)
{
	if (next >= 0) {
		struct timeval tv = { .tv_sec = (time_t)(next / 1000),
				      .tv_usec = (suseconds_t)(next % 1000) * 1000 };

		event_add(ev_collect, &tv);
	}
}

/* The sweep, then the timer. */
static void collect_cb(evutil_socket_t fd, short what, void *arg)
{
	long long now = now_ms();

	(void)fd;
	(void)what;
	(void)arg;
	sweep_due = false;
	sweep(now);
	schedule(tend_held(now));
}

int holders_init(struct event_base *base)
{
	int p[2];

	if (prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	retry_ms = RETRY_FIRST_MS;
	ev_collect = evtimer_new(base, collect_cb, NULL);
	if (!ev_collect) {
		close(p[0]);
		close(p[1]);
		return -ENOMEM;
	}
	life_rd = p[0];
	life_wr = p[1];
	/* Holders that lingered when an upgrade's exec brought us here. */
	event_active(ev_collect, EV_TIMEOUT, 0);
	return 0;
}

void holders_adopt(int rd, int wr)
{
	if (rd <= 0 || wr <= 0 || life_rd < 0)
		return;
	close(life_rd);
	close(life_wr);
	life_rd = rd;
	life_wr = wr;
	/* The exec needed them without FD_CLOEXEC; nothing else may. */
	fcntl(life_rd, F_SETFD, FD_CLOEXEC);
	fcntl(life_wr, F_SETFD, FD_CLOEXEC);
}

int holders_lifeline_rd(void)
{
	return life_rd;
}

int holders_lifeline_wr(void)
{
	return life_wr;
}

void holders_collect(void)
{
	/* A moment after the reap, not in the same turn of the loop: the
	 * answer a reap releases (GET_VRING_BASE at a migration's
	 * switch-over) goes out from a later callback of that turn, and the
	 * sweep (about 75 us of /proc reads here) would run before it. The
	 * holder lingers anyway. Without holders_init there is no lifeline
	 * and no holder. */
	if (ev_collect && !sweep_due) {
		struct timeval tv = { 0, HOLDERS_COLLECT_DELAY_US };

		/* Once: many reaps in a row (every NIC removed) must not keep
		 * pushing the sweep, and with it every linger's end, away. */
		sweep_due = true;
		event_add(ev_collect, &tv);
	}
}

void holders_expire(void)
{
	long long now;

	if (!ev_collect)
		return;
	now = now_ms();
	sweep_due = false;
	sweep(now); /* a worker reaped in this very callback */
	for (struct holder *h = held; h; h = h->next)
		h->since_ms = now - HOLDERS_LINGER_MS;
	schedule(tend_held(now));
}

void holders_shutdown(void)
{
	if (!ev_collect)
		return;
	sweep(now_ms());
	for (struct holder *h = held; h; h = h->next)
		if (!h->killed)
			kill(h->pid, SIGKILL);
	while (held) {
		struct holder *h = held;

		holder_try_reap(h->pid, true);
		held = h->next;
		free(h);
	}
	event_free(ev_collect);
	ev_collect = NULL;
	close(life_rd);
	close(life_wr);
	life_rd = life_wr = -1;
}
