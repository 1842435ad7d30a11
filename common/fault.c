/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault: the table of injection points, the spec parser and the actions
 * (contract in fault.h). Compiled only with --enable-fault-injection.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"

#ifndef VNIC_FAULT_INJECTION
#error "fault.c is built only with --enable-fault-injection"
#endif

/* Every point, once. doc/fault-injection.md is this table in prose; the
 * lifecycle suite (tests/lifecycle.sh) drives them. syscall: the point
 * wraps a system call, so "fail" applies there. */
struct fault_point_def {
	const char *name;
	const char *where;
	const char *tests;
	int syscall;
};

static const struct fault_point_def fault_points[] = {
	{ "worker.ready.send", "worker main.c: sandbox entered, just before READY is sent",
	  "AddNic whose worker hangs/dies before READY: READY deadline, AddNic error, no leak",
	  1 },
	{ "worker.tx.after_pop", "worker net_tx.c: a TX chain was popped, nothing sent yet",
	  "unplug/crash with a chain in hand: stop finishes it; inflight returns it once", 0 },
	{ "worker.tx.send", "worker net_tx.c: the backend writev/sendmsg of one TX frame",
	  "L1 unplug while inside the backend write; fail: EIO drops the frame, the "
	  "descriptor still comes back, errors counted", 1 },
	{ "worker.flush.before_idx",
	  "worker net.c net_flush: used entries written, used->idx not yet published",
	  "L3 torn used entry: a crash here must not expose or lose the batch", 0 },
	{ "worker.inflight.popped",
	  "vring pop (inflight hook POP_AVAIL): the pop is recorded, no used write yet",
	  "L4: killed after the inflight record, before the used write", 0 },
	{ "worker.inflight.used_elem",
	  "vring push (inflight hook PUSH_ELEM): used element written, not published",
	  "L4: killed between the used entry and the used index", 0 },
	{ "worker.inflight.used_idx",
	  "vring flush (inflight hook FLUSH_IDX): used->idx published, inflight not cleared",
	  "L4: killed after publishing, before the inflight commit: no double completion", 0 },
	{ "worker.stop", "worker worker_event.c: Stop received, before the queues stop",
	  "RemoveNic deadline path (delay > deadline: SIGKILL via pidfd, reaped before the "
	  "reply); crash during Stop", 0 },
	{ "worker.exit", "worker main.c: Stopped sent and the loop left, before the teardown",
	  "a stopped worker that is slow to exit: its tap queue leaves the steering before "
	  "the reap (t_unsteer_at_stopped)", 0 },
	{ "sup.config.send", "vnicd nic.c: worker spawned, before Config is sent",
	  "a worker waiting for Config while the VMM goes away; fail: Config send fails", 1 },
	{ "sup.restart", "vnicd nic.c: a worker died, backoff over, before the replacement spawns",
	  "L6: buffers posted while no worker runs are served after the restart; vnicd "
	  "dying mid-restart leaves no worker", 0 },
	{ "sup.remove.reply", "vnicd nic.c: worker reaped, before the RemoveNic reply",
	  "the reply is late (race with disconnect); vnicd dying here leaves no worker", 0 },
	{ "sup.handover.restore",
	  "vnicd handover.c: the new binary of an upgrade, before it rebuilds its state",
	  "fail: the take-over fails after the check passed; the old binary must come back "
	  "with everything (not in the old binary itself, so the rollback runs clean)", 1 },
};

#define FAULT_NPOINTS (sizeof(fault_points) / sizeof(fault_points[0]))

struct fault_entry {
	unsigned point;            /* index in fault_points */
	enum fault_action action;
	unsigned arg;              /* delay ms, or errno for fail */
	unsigned nth, count;       /* fire at hits nth .. nth+count-1 (count 0: on) */
	unsigned hits, fired;
};

static struct fault_entry fault_armed[FAULT_MAX_ENTRIES];
static unsigned fault_narmed;
static unsigned fault_fired_by_point[FAULT_NPOINTS];
static fault_report_fn fault_report;
static fault_kill_fn fault_kill;

const char *fault_action_name(enum fault_action a)
{
	switch (a) {
	case FAULT_DELAY: return "delay";
	case FAULT_CRASH: return "crash";
	case FAULT_VIOLATE: return "violate";
	case FAULT_SIGKILL: return "sigkill";
	case FAULT_FAIL: return "fail";
	case FAULT_NONE: break;
	}
	return "none";
}

static int fault_index(const char *name, size_t len)
{
	for (unsigned i = 0; i < FAULT_NPOINTS; i++)
		if (strlen(fault_points[i].name) == len && !strncmp(fault_points[i].name, name, len))
			return (int)i;
	return -1;
}

int fault_point_known(const char *name)
{
	return fault_index(name, strlen(name)) >= 0;
}

unsigned fault_point_count(void)
{
	return FAULT_NPOINTS;
}

void fault_point_info(unsigned i, const char **ret_name, const char **ret_where,
		      const char **ret_tests, int *ret_syscall)
{
	if (i >= FAULT_NPOINTS)
		return;
	*ret_name = fault_points[i].name;
	*ret_where = fault_points[i].where;
	*ret_tests = fault_points[i].tests;
	*ret_syscall = fault_points[i].syscall;
}

void fault_set_hooks(fault_report_fn report, fault_kill_fn kill)
{
	fault_report = report;
	fault_kill = kill;
}

/* err = "<what> '<the text [a, a+alen)>'<rest>"; returns -EINVAL. */
static int fault_err(char *err, size_t errlen, const char *what, const char *a, size_t alen,
		     const char *rest)
{
	snprintf(err, errlen, "%s '%.*s'%s", what, (int)(alen < 100 ? alen : 100), a, rest);
	return -EINVAL;
}

/* A decimal in [lo, hi] spanning exactly [p, end). */
static int fault_num(const char *p, const char *end, unsigned lo, unsigned hi, unsigned *ret)
{
	unsigned long v = 0;

	if (p >= end || end - p > 9)
		return -EINVAL;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < lo || v > hi)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* Parse one entry [p, end) into e. */
static int fault_parse_entry(const char *p, const char *end, struct fault_entry *e, char *err,
			     size_t errlen)
{
	const char *eq = memchr(p, '=', (size_t)(end - p));
	const char *act, *aend, *colon, *at, *star;
	size_t alen;
	int idx;

	memset(e, 0, sizeof(*e));
	if (!eq)
		return fault_err(err, errlen, "fault entry", p,
				 (size_t)(end - p), ": expected POINT=ACTION");
	idx = fault_index(p, (size_t)(eq - p));
	if (idx < 0)
		return fault_err(err, errlen, "unknown fault point", p, (size_t)(eq - p), "");
	e->point = (unsigned)idx;
	act = eq + 1;
	at = memchr(act, '@', (size_t)(end - act));
	star = memchr(act, '*', (size_t)(end - act));
	aend = at ? at : star ? star : end;
	if (at && star && star < at)
		return fault_err(err, errlen, "fault entry", p,
				 (size_t)(end - p), ": @NTH comes before *COUNT");
	colon = memchr(act, ':', (size_t)(aend - act));
	alen = (size_t)((colon ? colon : aend) - act);
	if (alen == 5 && !strncmp(act, "delay", 5)) {
		e->action = FAULT_DELAY;
		if (!colon || fault_num(colon + 1, aend, 0, 600000, &e->arg) < 0)
			return fault_err(err, errlen, "fault entry", p,
					 (size_t)(end - p), ": delay:MS (0..600000)");
	} else if (alen == 5 && !strncmp(act, "crash", 5) && !colon) {
		e->action = FAULT_CRASH;
	} else if (alen == 7 && !strncmp(act, "violate", 7) && !colon) {
		e->action = FAULT_VIOLATE;
	} else if (alen == 7 && !strncmp(act, "sigkill", 7) && !colon) {
		e->action = FAULT_SIGKILL;
	} else if (alen == 4 && !strncmp(act, "fail", 4)) {
		e->action = FAULT_FAIL;
		e->arg = EIO;
		if (colon && fault_num(colon + 1, aend, 1, 4095, &e->arg) < 0)
			return fault_err(err, errlen, "fault entry", p,
					 (size_t)(end - p), ": fail[:ERRNO] (1..4095)");
		if (!fault_points[idx].syscall)
			return fault_err(err, errlen, "fault point", p, (size_t)(eq - p),
					 " wraps no system call: fail does not apply");
	} else {
		return fault_err(err, errlen, "fault entry", p, (size_t)(end - p),
				 ": action is delay:MS, crash, sigkill, violate or fail[:ERRNO]");
	}
	e->nth = 1;
	e->count = 1;
	if (at && fault_num(at + 1, star ? star : end, 1, 100000000, &e->nth) < 0)
		return fault_err(err, errlen, "fault entry", p,
				 (size_t)(end - p), ": @NTH (1..100000000)");
	if (star && fault_num(star + 1, end, 0, 100000000, &e->count) < 0)
		return fault_err(err, errlen, "fault entry", p,
				 (size_t)(end - p), ": *COUNT (0..100000000)");
	return 0;
}

/* Walk spec; for each entry call fn(entry, its text). */
static int fault_walk(const char *spec, char *err, size_t errlen,
		      int (*fn)(const struct fault_entry *e, const char *p, size_t len, void *arg),
		      void *arg)
{
	const char *p = spec ? spec : "";
	unsigned n = 0;

	if (strlen(p) > FAULT_SPEC_MAX) {
		snprintf(err, errlen, "fault spec longer than %d bytes", FAULT_SPEC_MAX);
		return -EINVAL;
	}
	while (*p) {
		const char *end = strchr(p, ',');
		struct fault_entry e;
		int r;

		if (!end)
			end = p + strlen(p);
		if (end == p || (*end == ',' && end[1] == '\0')) {
			snprintf(err, errlen, "fault spec: empty entry");
			return -EINVAL;
		}
		if (++n > FAULT_MAX_ENTRIES) {
			snprintf(err, errlen, "fault spec: more than %d entries", FAULT_MAX_ENTRIES);
			return -EINVAL;
		}
		r = fault_parse_entry(p, end, &e, err, errlen);
		if (r < 0)
			return r;
		r = fn(&e, p, (size_t)(end - p), arg);
		if (r < 0) {
			snprintf(err, errlen, "fault spec: no room");
			return r;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

struct fault_walk_ctx {
	const char *prefix;
	struct fault_entry *out;
	unsigned n;
	char *text;
	size_t textlen, used;
};

static int fault_match(const struct fault_entry *e, const char *prefix)
{
	return !prefix || !strncmp(fault_points[e->point].name, prefix, strlen(prefix));
}

static int fault_collect(const struct fault_entry *e, const char *p, size_t len, void *arg)
{
	struct fault_walk_ctx *c = arg;

	(void)p;
	(void)len;
	if (fault_match(e, c->prefix))
		c->out[c->n++] = *e;
	return 0;
}

int fault_arm(const char *spec, const char *prefix, char *err, size_t errlen)
{
	struct fault_entry tmp[FAULT_MAX_ENTRIES];
	struct fault_walk_ctx c = { .prefix = prefix, .out = tmp };
	int r = fault_walk(spec, err, errlen, fault_collect, &c);

	if (r < 0)
		return r;
	memcpy(fault_armed, tmp, sizeof(tmp[0]) * c.n);
	fault_narmed = c.n;
	memset(fault_fired_by_point, 0, sizeof(fault_fired_by_point));
	return 0;
}

static int fault_copy(const struct fault_entry *e, const char *p, size_t len, void *arg)
{
	struct fault_walk_ctx *c = arg;

	if (!fault_match(e, c->prefix))
		return 0;
	if (c->used + len + 2 > c->textlen)
		return -ENOSPC;
	if (c->used)
		c->text[c->used++] = ',';
	memcpy(c->text + c->used, p, len);
	c->used += len;
	c->text[c->used] = '\0';
	return 0;
}

int fault_filter(const char *spec, const char *prefix, char *out, size_t outlen, char *err,
		 size_t errlen)
{
	struct fault_walk_ctx c = { .prefix = prefix, .text = out, .textlen = outlen };

	if (outlen == 0)
		return -ENOSPC;
	out[0] = '\0';
	return fault_walk(spec, err, errlen, fault_copy, &c);
}

static void fault_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	/* EINTR: the rest of the time (bounded: each round sleeps less). */
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void fault_crash(void)
{
	/* A store to an address nothing maps (the first page is never
	 * mapped: vm.mmap_min_addr). Not NULL, which UBSan would report
	 * instead of letting the crash happen. */
	uintptr_t addr = 16;

	__asm__ volatile("" : "+r"(addr)); /* an address the compiler cannot see */
	*(volatile int *)addr = 0xdead;
	abort(); /* not reached */
}

int fault_hit(const char *name)
{
	int idx = fault_index(name, strlen(name));

	if (idx < 0)
		fault_crash(); /* a point missing from the table: fix the table */
	for (unsigned i = 0; i < fault_narmed; i++) {
		struct fault_entry *e = &fault_armed[i];

		if (e->point != (unsigned)idx)
			continue;
		e->hits++;
		if (e->hits < e->nth || (e->count && e->hits >= e->nth + e->count))
			continue;
		e->fired++;
		fault_fired_by_point[idx]++;
		if (fault_report)
			fault_report(name, e->action, e->arg);
		switch (e->action) {
		case FAULT_DELAY:
			fault_sleep_ms(e->arg);
			break;
		case FAULT_CRASH:
			fault_crash();
			break;
		case FAULT_SIGKILL:
			if (fault_kill)
				fault_kill(name);
			kill(getpid(), SIGKILL);
			fault_crash(); /* SIGKILL is not delivered late */
			break;
		case FAULT_FAIL:
			return (int)e->arg;
		case FAULT_VIOLATE:
			/* Under the sandbox this never returns (SIGSYS). */
			(void)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
			fault_crash(); /* not sandboxed: still end here */
			break;
		case FAULT_NONE:
			break;
		}
	}
	return 0;
}

unsigned fault_fired(const char *name)
{
	int idx = fault_index(name, strlen(name));

	return idx < 0 ? 0 : fault_fired_by_point[idx];
}
