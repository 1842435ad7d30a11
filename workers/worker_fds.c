/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_fds: the worker's I/O on fds that another process shares, and
 * its liveness heartbeat (issue 11 items 9 and 10).
 *
 * Rule: the worker never blocks on an fd another process can reconfigure.
 * The VMM holds the same open file description of every kick and call
 * eventfd (and of a tap_fd backend): it can clear O_NONBLOCK at any time,
 * so the flag the worker set proves nothing. Hence:
 *  - kick eventfd: read with preadv2(RWF_NOWAIT), a per-call flag nobody
 *    else can change; once per edge-triggered wake-up (worker_event.c adds
 *    kick events with EV_ET), so a semaphore-mode eventfd with a huge count
 *    yields one unit per VMM write, never a busy loop;
 *  - call eventfd: the kernel has no per-call non-blocking write for
 *    eventfds (pwritev2 RWF_NOWAIT is EOPNOTSUPP). poll(POLLOUT) first: not
 *    writable means the counter is saturated, i.e. an interrupt is already
 *    pending, so there is nothing to add. The write that follows can still
 *    block if the VMM saturates the counter and clears O_NONBLOCK in
 *    between: a one-shot ITIMER_REAL is pending whenever the worker
 *    writes (bound_ensure: at least 1 ms and at most WORKER_IO_BOUND_US
 *    left), and its SIGALRM handler is installed without SA_RESTART, so
 *    such a write returns EINTR; also counted as "already pending". The
 *    timer is re-armed only when less than 1 ms is left, not around every
 *    write (one setitimer per 9 ms of interrupts instead of two per
 *    interrupt); when it fires after a write that did not block, a
 *    blocking call of the loop (epoll_wait) returns EINTR once and is
 *    retried.
 *  - the heartbeat: a WORKER_BEAT_MS timer adds 1 to the stats page's
 *    heartbeat. A worker stuck anywhere (a blocked call, a loop) stops
 *    beating; the supervisor's watchdog sees that (nic_watchdog in nic.c).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "workers/worker.h"

static void worker_alarm(int sig)
{
	(void)sig; /* only to interrupt a blocked call (EINTR) */
}

int worker_fds_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = worker_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: the bounded call returns EINTR */
	return sigaction(SIGALRM, &sa, NULL) < 0 ? -errno : 0;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t); /* vDSO: no system call */
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Make sure SIGALRM is due within WORKER_IO_BOUND_US and not before 1 ms
 * from now: a call that blocks from here on is interrupted in time. */
static void bound_ensure(void)
{
	static uint64_t due_ns;
	uint64_t now = mono_ns();

	if (now + 1000000u < due_ns)
		return;
	{
		struct itimerval it = { { 0, 0 }, { 0, WORKER_IO_BOUND_US } };

		if (setitimer(ITIMER_REAL, &it, NULL) == 0)
			due_ns = now + (uint64_t)WORKER_IO_BOUND_US * 1000u;
	}
}

int worker_call_signal(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	uint64_t one = 1;
	ssize_t r;
	int e;

	if (poll(&p, 1, 0) == 0 || (p.revents & (POLLOUT | POLLERR)) == 0)
		return 1; /* saturated: an interrupt is pending already */
	bound_ensure();
	r = write(fd, &one, sizeof(one));
	e = errno;
	if (r == (ssize_t)sizeof(one))
		return 0;
	if (r < 0 && (e == EAGAIN || e == EINTR))
		return 1;
	return r < 0 ? -e : -EIO;
}

int worker_kick_read(int fd, uint64_t *ret_n)
{
	struct iovec iov = { .iov_base = ret_n, .iov_len = sizeof(*ret_n) };
	ssize_t r;

	r = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
	if (r < 0 && errno == EOPNOTSUPP) {
		/* A kernel without RWF_NOWAIT for eventfds: bounded instead. */
		bound_ensure();
		r = read(fd, ret_n, sizeof(*ret_n));
	}
	if (r == (ssize_t)sizeof(*ret_n))
		return 0;
	return r < 0 ? -errno : -EIO;
}

static void beat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	stats_beat(w->stats);
}

int worker_heartbeat_start(struct worker *w)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = WORKER_BEAT_MS * 1000 };

	w->beat_ev = event_new(w->base, -1, EV_PERSIST, beat_cb, w);
	if (!w->beat_ev || event_add(w->beat_ev, &tv) < 0)
		return -ENOMEM;
	stats_beat(w->stats);
	return 0;
}

void worker_heartbeat_stop(struct worker *w)
{
	if (w->beat_ev)
		event_free(w->beat_ev);
	w->beat_ev = NULL;
}
