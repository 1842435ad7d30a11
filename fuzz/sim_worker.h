/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sim_worker: a simulated vnicd-worker for the supervisor-side fuzz
 * targets (issue 18), plugged in through struct worker_ops
 * (supervisor/worker_spawn.h).
 *
 * A spawn makes what the real one makes, minus the process: a
 * SOCK_SEQPACKET socketpair (the supervisor's end non-blocking, as
 * worker_spawn gives it) and an eventfd in place of the pidfd, made readable when the simulated worker "exits".
 * The peer end is served in this process by sim_worker_settle(), which
 * alternates s->base (EVLOOP_NONBLOCK) with one step of every simulated
 * worker; nothing blocks or sleeps. It speaks proto/worker.proto as
 * workers/main.c and workers/worker_event.c do: Config (and RegionFds) ->
 * Ready; Start; Stop -> Stopped with the ring indexes it was given, then
 * exit 0; SetPolicy -> PolicySet; SetDirtyLog -> DirtyLogSet; SetCallFd ->
 * CallFdSet; a message it cannot take -> Error, then exit 1; the
 * supervisor closing the channel -> exit 0. Every fd the supervisor sends
 * is closed as soon as the message is read.
 *
 * SIM_FUZZED workers read "datagram records" (fuzz/DGRAM format: u8 nfds,
 * u8 fdkind, u16 le len, len bytes) from the shared input at the points
 * where the real worker sends (see sim_worker.c, "Fuzzed points"). On the
 * worker channel no message carries fds, so fdkind is free for two more
 * things, both 0 in a recorded real session:
 *   bits 0-3  the kind of the nfds fds sent (mod 6): 0 eventfd, 1 pipe end,
 *             2 /dev/null, 3 unsealed memfd, 4 empty memfd, 5 socket
 *   bits 4-6  what the worker does after this record: 0 nothing,
 *             1 exit 0, 2 exit 1, 3 SIGSEGV, 4 SIGSYS, 5 SIGKILL,
 *             6 close its control socket and go silent (stays alive),
 *             7 go silent (hangs: reads nothing, sends nothing)
 *   bit 7     the bytes go to the stats page's sandbox violation record
 *             (their first 24), not the socket
 * Once the input is used up a fuzzed worker answers as an obedient one.
 */
#ifndef VNIC_FUZZ_SIM_WORKER_H
#define VNIC_FUZZ_SIM_WORKER_H

#include <stdbool.h>

#include "fuzz.h"

struct sup;

/* s->wops = the simulated ops. */
void sim_worker_use(struct sup *s);

enum sim_behaviour { SIM_OBEDIENT, SIM_FUZZED };
/* Workers spawned from now on behave so; @in (SIM_FUZZED only) is read,
 * not copied: it must outlive them (sim_worker_reset forgets it). */
void sim_worker_behave(enum sim_behaviour b, struct fuzz_in *in);

/*
 * sim_worker_settle - run s->base (EVLOOP_NONBLOCK) and the simulated
 * peers until neither has anything left to do (two quiet rounds in a
 * row), at most max_rounds rounds. Timers of the supervisor are not
 * fired: see sim_worker_expire_timers. Never blocks or sleeps.
 * Returns: the rounds used.
 */
unsigned sim_worker_settle(struct sup *s, unsigned max_rounds);

/*
 * sim_worker_expire_timers - make every pending timer event of s->base
 * (no fd: the READY and stop deadlines, the restart backoff, the
 * control-channel grace) fire now, as if its time had come: time passes
 * only when the target says so. Settle afterwards to run them.
 * Returns: how many were fired.
 */
unsigned sim_worker_expire_timers(struct sup *s);

/*
 * sim_worker_settle_all - settle; then, while timers are armed, fire them
 * and settle again; max_rounds rounds in all (each firing counts as one).
 * Returns: the rounds used. A target that wants the end of a NIC's story
 * (every deadline met or missed) calls this.
 */
unsigned sim_worker_settle_all(struct sup *s, unsigned max_rounds);

/* Every live simulated worker dies by @sig now (its supervisor sees the
 * eventfd readable and reaps it). */
void sim_worker_crash_all(int sig);

/* Free every simulated worker, close its fds, forget the input; the next
 * spawned worker gets pid numbers from the start again. */
void sim_worker_reset(void);

/* Live simulated workers (spawned, not yet exited). */
unsigned sim_worker_count(void);

/*
 * sim_worker_peek - the message type (Vnic__Worker__WorkerMessage__MsgCase,
 * > 0) of the next record in @in, without consuming it; 0 when the next
 * record is no well-formed frame or goes to the violation record; -1 when the
 * input is used up. Lets a target choose the supervisor action that the
 * next record would answer (a recorded session then replays in order).
 */
int sim_worker_peek(const struct fuzz_in *in);

#endif
