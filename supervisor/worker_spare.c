/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_spare: a vnicd-worker started before its NIC exists. See
 * worker_spare.h.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "supervisor.h"
#include "worker_spare.h"

void worker_spare_init(struct worker_spare *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->w.pidfd = sp->w.ctrl_fd = -1;
}

/* Close what the slot holds (the process is reaped or handed on). */
static void spare_clear(struct worker_spare *sp)
{
	if (sp->ev_exit)
		event_free(sp->ev_exit); /* event_del before close (habit 12) */
	if (sp->w.pidfd >= 0)
		close(sp->w.pidfd);
	if (sp->w.ctrl_fd >= 0)
		close(sp->w.ctrl_fd);
	worker_spare_init(sp);
}

static void spare_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_spare *sp = arg;
	struct worker_exit ex = { .desc = "" };

	(void)fd;
	(void)what;
	/* Readable pidfd: it has exited, so this does not block. */
	worker_reap(&sp->w, true, &ex);
	log_warn("nic %s: pre-started worker pid %d %s before its device started; the NIC "
		 "will start one then", sp->nic_id, (int)sp->w.pid, ex.desc);
	spare_clear(sp);
}

/* Spares are real processes: not under a simulated worker (the fuzz
 * targets), and not when a fault-injection run gives workers a --fault
 * spec on their command line (a spare could not carry it). */
static bool spare_allowed(const struct sup *s)
{
	if (s->wops)
		return false;
#ifdef VNIC_FAULT_INJECTION
	if (s->fault_worker[0])
		return false;
#endif
	return true;
}

void worker_spare_start(struct sup *s, struct worker_spare *sp, const char *nic_id)
{
	struct worker_opts o = { .user = s->worker_user, .sandbox_off = s->sandbox_off };
	char err[160];

	if (sp->w.pid > 0 || !spare_allowed(s))
		return;
	worker_spare_init(sp);
	snprintf(sp->nic_id, sizeof(sp->nic_id), "%s", nic_id);
	if (stat(s->worker_path, &sp->bin) < 0) {
		log_warn("nic %s: no pre-started worker: %s: %s", nic_id, s->worker_path,
			 strerror(errno));
		return;
	}
	if (worker_spawn(s->worker_path, nic_id, &o, &sp->w, err, sizeof(err)) < 0) {
		log_warn("nic %s: no pre-started worker: %s", nic_id, err);
		worker_spare_init(sp);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &sp->t_spawn);
	sp->ev_exit = event_new(s->base, sp->w.pidfd, EV_READ, spare_exit_cb, sp);
	if (!sp->ev_exit || event_add(sp->ev_exit, NULL) < 0) {
		worker_spare_discard(s, sp, "out of memory");
		return;
	}
	log_debug("nic %s: worker pid %d pre-started for the device's start", nic_id,
		  (int)sp->w.pid);
}

/* Is the binary at path still the one sp runs? */
static bool spare_current(const struct sup *s, const struct worker_spare *sp)
{
	struct stat st;

	return stat(s->worker_path, &st) == 0 && st.st_dev == sp->bin.st_dev &&
	       st.st_ino == sp->bin.st_ino && st.st_size == sp->bin.st_size &&
	       st.st_mtim.tv_sec == sp->bin.st_mtim.tv_sec &&
	       st.st_mtim.tv_nsec == sp->bin.st_mtim.tv_nsec;
}

bool worker_spare_take(struct sup *s, struct worker_spare *sp, struct worker_proc *out,
		       uint64_t *age_ms)
{
	struct pollfd p = { .fd = sp->w.pidfd, .events = POLLIN };
	struct timespec now;

	if (sp->w.pid <= 0)
		return false;
	switch (poll(&p, 1, 0)) {
	case 0:
		break;
	case 1: /* it died: reaped and logged as if the loop had seen it */
		spare_exit_cb(sp->w.pidfd, EV_READ, sp);
		return false;
	default:
		worker_spare_discard(s, sp, "cannot tell whether it lives");
		return false;
	}
	if (!spare_current(s, sp)) {
		worker_spare_discard(s, sp, "the worker binary changed since it started");
		return false;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	*age_ms = (uint64_t)((now.tv_sec - sp->t_spawn.tv_sec) * 1000 +
			     (now.tv_nsec - sp->t_spawn.tv_nsec) / 1000000);
	*out = sp->w;
	sp->w.pidfd = sp->w.ctrl_fd = -1; /* handed on, not closed */
	spare_clear(sp);
	return true;
}

void worker_spare_discard(struct sup *s, struct worker_spare *sp, const char *why)
{
	struct worker_exit ex;

	(void)s;
	if (sp->w.pid <= 0)
		return;
	if (sp->ev_exit) {
		event_free(sp->ev_exit);
		sp->ev_exit = NULL;
	}
	worker_kill(&sp->w);
	worker_reap(&sp->w, true, &ex);
	log_debug("nic %s: pre-started worker pid %d stopped: %s", sp->nic_id, (int)sp->w.pid,
		  why);
	spare_clear(sp);
}
