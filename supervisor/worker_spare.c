/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_spare: a vnicd-worker started before its NIC exists. See
 * worker_spare.h.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
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
	/* With a uid per NIC the uid comes in the Config: "--ids config"
	 * makes the worker insist on it (and one too old to know the option
	 * exits at once, so the start spawns as before). */
	struct worker_opts o = { .user = s->worker_user, .sandbox_off = s->sandbox_off,
				 .ids_from_config = s->uid_per_nic };
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

/* Does sp's process map a file that was replaced or removed since it
 * started ("(deleted)" in /proc/PID/maps: a library or the binary that a
 * package upgrade installed anew)? Unreadable counts as yes. */
static bool spare_maps_stale(const struct worker_spare *sp)
{
	char path[48], line[512];
	bool stale = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)sp->w.pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	while (!stale && fgets(line, sizeof(line), f))
		stale = strstr(line, " (deleted)\n") != NULL;
	fclose(f);
	return stale;
}

/* Is the binary at --worker, and every file sp maps, still what sp runs? */
static bool spare_current(const struct sup *s, const struct worker_spare *sp)
{
	struct stat st;

	return stat(s->worker_path, &st) == 0 && st.st_dev == sp->bin.st_dev &&
	       st.st_ino == sp->bin.st_ino && st.st_size == sp->bin.st_size &&
	       st.st_mtim.tv_sec == sp->bin.st_mtim.tv_sec &&
	       st.st_mtim.tv_nsec == sp->bin.st_mtim.tv_nsec && !spare_maps_stale(sp);
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
		worker_spare_discard(s, sp, "the worker binary or a library changed since it started");
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

/* A killed spare whose exit the loop has yet to see. */
struct worker_spare_dying {
	struct worker_spare_dying *next;
	struct sup *s;
	struct worker_proc w;   /* pidfd only: its control socket is closed */
	struct event *ev;
};

static void dying_free(struct worker_spare_dying *d, bool block)
{
	struct worker_spare_dying **pp = &d->s->spares_dying;
	struct worker_exit ex;

	while (*pp != d)
		pp = &(*pp)->next;
	*pp = d->next;
	event_free(d->ev);
	worker_reap(&d->w, block, &ex);
	close(d->w.pidfd);
	free(d);
}

static void dying_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dying_free(arg, true); /* readable: it has exited, no wait */
}

void worker_spare_discard(struct sup *s, struct worker_spare *sp, const char *why)
{
	struct worker_spare_dying *d;
	struct worker_exit ex;

	if (sp->w.pid <= 0)
		return;
	if (sp->ev_exit) {
		event_free(sp->ev_exit);
		sp->ev_exit = NULL;
	}
	worker_kill(&sp->w);
	log_debug("nic %s: pre-started worker pid %d stopped: %s", sp->nic_id, (int)sp->w.pid,
		  why);
	if (worker_reap(&sp->w, false, &ex) != 0) { /* reaped already, or not ours to wait for */
		spare_clear(sp);
		return;
	}
	/* Its exit is reaped from the loop, which never waits for a process
	 * (one still in exec may take a while to die). */
	d = calloc(1, sizeof(*d));
	if (d) {
		d->s = s;
		d->w = sp->w;
		d->ev = event_new(s->base, d->w.pidfd, EV_READ, dying_cb, d);
	}
	if (!d || !d->ev || event_add(d->ev, NULL) < 0) {
		if (d && d->ev)
			event_free(d->ev);
		free(d);
		worker_reap(&sp->w, true, &ex); /* out of memory: wait for it here */
		spare_clear(sp);
		return;
	}
	d->next = s->spares_dying;
	s->spares_dying = d;
	sp->w.pidfd = -1; /* the list's now */
	spare_clear(sp);
}

void worker_spare_reap_all(struct sup *s)
{
	while (s->spares_dying)
		dying_free(s->spares_dying, true);
}
