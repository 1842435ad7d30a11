/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_spare: a vnicd-worker started before its NIC exists.
 *
 * A worker's start (fork, exec, dynamic linking: 2-3 ms of CPU on a
 * paravirtualised host, 10-15 ms of wall time when the host is busy) is
 * on the guest's path whenever its device starts: at boot, and on a
 * live migration's destination, where the guest already runs when QEMU
 * starts the device. A vhost-user front end announces its device long
 * before it starts it (SET_OWNER at the front end's start; QEMU's
 * destination then waits for the migration), so vnicd starts the
 * endpoint's first worker process then. The spare waits for its Config
 * on its control socket (it has read nothing, mapped nothing, holds only
 * fd 3), and the device start sends it the Config a fresh worker would
 * get: from there on it is that NIC's worker, with the same sandbox,
 * uid and checks (doc/design.md, "Pre-started workers").
 *
 * One spare per front-end connection at most, for its first queue pair;
 * it goes with the connection. A spare that dies first is reaped and
 * logged, and the NIC then starts a worker as usual; so does one whose
 * binary was replaced since (its inode, size or mtime differ) or that
 * maps a file removed since (a library a package upgrade replaced).
 */
#ifndef VNIC_WORKER_SPARE_H
#define VNIC_WORKER_SPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "worker_spawn.h"

struct sup;
struct event;

struct worker_spare {
	struct worker_proc w;   /* w.pid 0: none */
	struct event *ev_exit;  /* its pidfd: it died before it was needed */
	struct timespec t_spawn;
	struct stat bin;        /* the worker binary it runs */
	char nic_id[64];        /* for the log */
};

/* worker_spare_init - an empty slot (no process). */
void worker_spare_init(struct worker_spare *sp);

/*
 * worker_spare_start - start a spare for NIC nic_id into the empty slot
 * sp, with the options a first launch of that NIC would have (but its
 * uid, which its Config carries). Nothing when sp is taken, or in a
 * fault-injection run that targets workers (their first launch gets the
 * fault spec on its command line). A failure is logged and leaves sp
 * empty: the NIC will spawn its worker itself.
 */
void worker_spare_start(struct sup *s, struct worker_spare *sp, const char *nic_id);

/*
 * worker_spare_take - hand sp's process to a NIC that launches now.
 * Returns: true with *out the process (sp empty, *age_ms how long it
 * waited), or false (sp empty too, a dead or outdated spare reaped and
 * logged): spawn as usual.
 */
bool worker_spare_take(struct sup *s, struct worker_spare *sp, struct worker_proc *out,
		       uint64_t *age_ms);

/* worker_spare_discard - kill sp's process, if any (sp empty); the loop
 * reaps it when its pidfd says it exited (worker_spare_reap_all: the
 * rest). */
void worker_spare_discard(struct sup *s, struct worker_spare *sp, const char *why);

/* worker_spare_reap_all - wait for every killed spare the loop has not
 * reaped yet: at exit, and before an upgrade's exec. */
void worker_spare_reap_all(struct sup *s);

#endif
