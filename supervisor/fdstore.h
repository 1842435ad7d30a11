/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdstore: vnicd's state in systemd's fd store, so that vnicd's death
 * stops nothing (issue 16; doc/design.md "Surviving vnicd's death").
 *
 * With --fd-store under systemd (FileDescriptorStoreMax= in the unit),
 * systemd holds a copy of every fd the handover message names (the
 * listener, every control and vhost-user connection, guest memory,
 * eventfds, taps, stats pages with the inflight regions, dirty logs, each
 * worker's pidfd and channel), each named "fd-N" after its number here,
 * and the message itself (handover.proto), rewritten whenever it changes,
 * in a memfd named "state-a" or "state-b" (alternately: the newest
 * generation wins, so a death while one is written leaves the other).
 * When vnicd dies, nothing closes: no worker sees its channel end (they
 * run their rings on), no front end or VMM sees its connection end.
 * systemd restarts vnicd and passes the store back; the new process puts
 * every fd back at its number and takes over from the message exactly as
 * the new binary of an upgrade in place does (handover.h).
 *
 *   after each turn of the event loop (at most once per FDSTORE_SYNC_MS),
 *   fdstore_sync:
 *     fds closed or replaced since the last sync: FDSTOREREMOVE (always)
 *     busy (an operation the message cannot carry)? stop here
 *     new fds: FDSTORE=1 FDNAME=fd-N; the message changed? write it
 *     clear the journal
 *
 * The journal: a memfd (named in the message, so stored too) that lists
 * the connections and worker channels vnicd has read from, and the worker
 * channels it has sent to, since the stored state was written. Input read
 * and acted on is gone from the socket, and a request sent is in the
 * worker, but neither is in the state; so a restarted vnicd shuts those
 * connections down (the front end reconnects, the VMM sees its
 * connection end, the worker stops and is restarted exactly once) rather
 * than resume from a state that misses what was said.
 *
 * What one connection alone holds up (a VMM's unread replies, a front
 * end's half-read message) does not keep the state from being stored: the
 * state names that connection, and a restore shuts it down too.
 *
 * When the store holds something vnicd cannot take over (no state, a
 * state whose fds are not all there, a journal that overflowed,
 * --fd-store off), vnicd releases it all and starts afresh: then the
 * workers see their channels end and the front ends reconnect, as
 * without the store.
 */
#ifndef VNIC_SUP_FDSTORE_H
#define VNIC_SUP_FDSTORE_H

#include <stdbool.h>
#include <stdint.h>

struct sup;
struct handover;

/* Entries of the journal before it overflows (a restart then starts afresh). */
#define FDSTORE_JOURNAL_MAX 1000u

/*
 * fdstore_take - at start, before anything else opens an fd: the fds
 * systemd passed (LISTEN_FDS, LISTEN_FDNAMES) that are the store's.
 * @nlisten: in, every passed fd; out, the socket unit's alone, moved to 3...
 * @enabled: --fd-store; when false, whatever the store holds is released.
 * Returns: a handover to restore (every fd at its old number, every other
 * fd closed), or NULL (start afresh; the store released).
 */
struct handover *fdstore_take(int *nlisten, bool enabled);

/* fdstore_abandon - a stored state that could not be restored after all:
 * release everything it named and the state, so the next start is fresh. */
void fdstore_abandon(const struct handover *h);

/* fdstore_setup - with --fd-store, after the loop exists (and after a
 * restore or an upgrade, h: its journal and generation; else NULL): the
 * journal, and from h the fds already stored. Returns 0 or -1 (logged;
 * vnicd runs on without the store). */
int fdstore_setup(struct sup *s, const struct handover *h);

/* fdstore_adopted - after a restore from the store: shut down every
 * connection the journal names (see above). */
void fdstore_adopted(struct sup *s);

/* fdstore_sync - the store follows the state, now (before an upgrade's
 * exec). fdstore_turn - after each turn of the loop: a sync, at most one
 * per FDSTORE_SYNC_MS; a burst of turns within it is synced once, when it
 * has passed (a timer wakes the loop). What happens in between is what
 * the journal covers. */
#define FDSTORE_SYNC_MS 10
void fdstore_sync(struct sup *s);
void fdstore_turn(struct sup *s);

/* fdstore_note - vnicd is about to read from connection or channel fd, or
 * to send to a worker on its channel fd (sup_note_io). */
void fdstore_note(struct sup *s, int fd);

/* fdstore_release - at a clean exit: the store is emptied. */
void fdstore_release(struct sup *s);

/* For the handover message: the journal's fd (0: none), the generation,
 * the fds in the store (valid until the next sync). */
int fdstore_journal_fd(const struct sup *s);
uint64_t fdstore_generation(const struct sup *s);
int *fdstore_stored(const struct sup *s, size_t *n);

#endif
