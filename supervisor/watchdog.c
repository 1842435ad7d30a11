/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog: worker liveness (issue 11 item 9).
 *
 * Every worker adds 1 to its stats page's heartbeat every WORKER_BEAT_MS
 * (workers/worker_fds.c), from its event loop. Every SUP_WATCHDOG_MS vnicd
 * compares each RUNNING worker's heartbeat with the last value it saw. A
 * worker whose heartbeat has not moved for SUP_STALL_MS while it has work
 * (a guest kick pending on one of its kick eventfds, or a control message
 * it has not read) is stuck: blocked in a call, looping, or stopped. It is
 * then STALLED: logged, reported to the VMM (NicStalled, NicStateChanged),
 * killed through its pidfd, and its reap restarts it under the usual
 * backoff and restart limit (nic.c). Reading the page takes no lock and
 * never waits for the worker; a worker that writes garbage there can only
 * get itself restarted.
 */
#include "config.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

#include "supervisor.h"
#include "workers/stats.h"

/* Work waits for the worker: a kick it has not read, or a message. */
static bool nic_has_work(const struct nic *n)
{
	struct pollfd p[NIC_NUM_QUEUES];
	int outq = 0;

	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		p[i] = (struct pollfd){ .fd = n->q[i].kick_fd, .events = POLLIN };
	if (poll(p, NIC_NUM_QUEUES, 0) > 0)
		for (int i = 0; i < NIC_NUM_QUEUES; i++)
			if (p[i].revents & POLLIN)
				return true;
	return n->w.ctrl_fd >= 0 && ioctl(n->w.ctrl_fd, SIOCOUTQ, &outq) == 0 && outq > 0;
}

static uint64_t ms_between(const struct timespec *a, const struct timespec *b)
{
	int64_t ms = (int64_t)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;

	return ms > 0 ? (uint64_t)ms : 0;
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	struct nic *n, *tmp;
	struct timespec now;

	(void)fd;
	(void)what;
	clock_gettime(CLOCK_MONOTONIC, &now);
	TAILQ_FOREACH_SAFE(n, &s->nics, link, tmp) {
		uint64_t hb, silent;

		if (n->state != NIC_RUNNING || !n->stats || n->w.pid == 0)
			continue;
		hb = stats_heartbeat(n->stats);
		if (n->hb_pid != n->w.pid || hb != n->hb_last) {
			n->hb_pid = n->w.pid;
			n->hb_last = hb;
			n->hb_t = now;
			continue;
		}
		silent = ms_between(&n->hb_t, &now);
		if (silent >= SUP_STALL_MS && nic_has_work(n))
			nic_stalled(n, silent);
	}
}

int sup_watchdog_start(struct sup *s)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = SUP_WATCHDOG_MS * 1000 };

	s->ev_watchdog = event_new(s->base, -1, EV_PERSIST, watchdog_cb, s);
	if (!s->ev_watchdog || event_add(s->ev_watchdog, &tv) < 0)
		return -1;
	return 0;
}

