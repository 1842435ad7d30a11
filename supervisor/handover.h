/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handover: upgrade in place (issue 16; doc/design.md "Upgrade in place").
 *
 * vnicd re-executes the vnicd binary installed at the path it was started
 * from, in its own process: the pid stays (every worker stays its child,
 * systemd's MainPID stays), every fd stays (no front end, VMM or worker
 * sees a close). What the fds mean travels in one protobuf message
 * (proto/handover.proto) in a sealed memfd.
 *
 *   old process                            new process (same pid)
 *   handover_upgrade:
 *     busy? -> refuse, nothing changed
 *     pack the Handover into a memfd
 *     child: NEW --handover-check  ------>  decode, check every fd, exit 0
 *     exit != 0 -> refuse, keep serving
 *     clear FD_CLOEXEC on the named fds
 *     execv(NEW ... --handover-fd N) ---->  handover_load: decode, check,
 *     (fails -> restore, keep serving)        close every fd not named
 *                                            usual setup, no bind, no fork
 *                                            handover_restore: rebuild the
 *                                              connections, NICs, endpoints
 *                                              (fails -> exec the old binary
 *                                              again with the same message)
 *                                            answer the Upgrade, loop
 *
 * While it happens the workers run their rings: the data path never goes
 * through vnicd. Their messages, a front end's and a VMM's wait in the
 * sockets.
 */
#ifndef VNIC_SUP_HANDOVER_H
#define VNIC_SUP_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sup;
struct vmm_conn;
struct handover;

/* HANDOVER_FORMAT: what this binary writes; it reads 1 .. this. */
#define HANDOVER_FORMAT 1u
/* The largest message a reader takes. */
#define HANDOVER_MAX_BYTES (256u << 20)
/* The check child must have finished within this. */
#define HANDOVER_CHECK_MS 10000

/* handover_set_exec - where to find the binary (the path vnicd was started
 * from, resolved now) and the command line to give it again. */
void handover_set_exec(struct sup *s, int argc, char **argv);

/*
 * handover_upgrade - the Upgrade request of connection c (NULL: none asked
 * through the control socket). On success it does not return: the new
 * binary runs in this process and answers c.
 * Returns: -EBUSY (busy: why in err; ask again), -ENOEXEC (the new
 * binary's check failed), or another negative errno (err filled); in
 * every case nothing changed and this process keeps serving.
 */
int handover_upgrade(struct sup *s, struct vmm_conn *c, uint64_t request_id, char *err,
		     size_t errlen);

/* handover_arg_fd - the N of --handover-fd N / --handover-fd=N in argv,
 * -1 when absent, -2 when malformed. */
int handover_arg_fd(int argc, char **argv);

/*
 * handover_load - read and check the message in memfd fd: format, every
 * field in range, every fd it names open, >= 3 and named once, every
 * reference resolvable. With @close_others, then close every fd >= 3 it
 * does not name (and not fd itself, kept for a rollback).
 * Returns: the decoded handover, or NULL with err filled.
 */
struct handover *handover_load(int fd, bool close_others, char *err, size_t errlen);

/*
 * handover_restore - rebuild s from h (after s->base exists): the listener
 * fd is set before, by handover_listen_fd. On failure it exec's the old
 * binary with the same message (it does not return) unless that fails
 * too; then it returns a negative errno with err filled.
 */
int handover_listen_fd(const struct handover *h, bool *socket_activated);
int handover_restore(struct sup *s, struct handover *h, char *err, size_t errlen);

/* handover_finish - after the event loop is ready: set FD_CLOEXEC on every
 * adopted fd, close the message, answer the Upgrade; frees h. */
void handover_finish(struct sup *s, struct handover *h);

/* handover_rollback - exec the old binary with the same handover (after
 * a failure that took nothing over); returns only when that fails. */
void handover_rollback(const struct handover *h, const char *why);

/* handover_from_store - h is a restart's, from the fd store (fdstore.h). */
bool handover_from_store(const struct handover *h);
/* handover_worker_pids - the workers h names, up to max. Returns: how many. */
size_t handover_worker_pids(const struct handover *h, pid_t *pids, size_t max);

/* handover_close_others - close every fd >= 3 that h does not name (but
 * its own memfd). */
void handover_close_others(const struct handover *h);

/*
 * The fd store's state (fdstore.h): the message as an upgrade would build
 * it, without the heartbeats. handover_snap_new returns NULL while vnicd
 * is busy (why in err) or out of memory; handover_snap_fds: every fd it
 * names, sorted; handover_snap_pack: packed with this generation (malloc,
 * NULL on out of memory).
 */
struct handover_snap;
struct handover_snap *handover_snap_new(struct sup *s, char *err, size_t errlen);
const int *handover_snap_fds(const struct handover_snap *hs, size_t *n);
uint8_t *handover_snap_pack(struct handover_snap *hs, uint64_t generation, size_t *len);
/* handover_snap_aliases - the fds the store has under another's name:
 * pairs of {fd, the stored fd it shares its open file with}. */
int handover_snap_aliases(struct handover_snap *hs, const int (*pairs)[2], size_t n);
void handover_snap_free(struct handover_snap *hs);

/* handover_free - a handover not restored (the check). */
void handover_free(struct handover *h);

#endif
