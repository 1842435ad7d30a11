/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inflight_file: a NIC's inflight region (shm/inflight.h) as a file in
 * vnicd's state directory on tmpfs, DIR/ID.pairK.inflight, instead of a
 * memfd, when there is no fd store (issue 16; doc/design.md "Inflight
 * tracking"). It outlives vnicd: when vnicd and its workers die together,
 * the NIC's first worker after the restart resumes on it and returns
 * every chain the dead one had popped exactly once, as after a worker
 * crash, if the VMM brings the NIC back on the same rings.
 *
 * Generations by name: at a cold start inflight_files_age() renames every
 * region the previous vnicd left to *.inflight.prev (and deletes the
 * older, unclaimed ones); the first NIC of that id and pair takes its
 * .prev back (inflight_file_open) and resumes on it only when it matches
 * (the rings it was written for, recorded in it, and the guest's used
 * index); every other start begins a fresh region. A NIC that ends
 * removes its file (inflight_file_unlink): only a NIC that vnicd never
 * saw end leaves one.
 */
#ifndef VNIC_INFLIGHT_FILE_H
#define VNIC_INFLIGHT_FILE_H

#include <stddef.h>

#include "supervisor.h"

/* inflight_files_age - at a cold start (not an upgrade or a restore from
 * the fd store, whose NICs still hold their files). */
void inflight_files_age(struct sup *s);

/*
 * inflight_file_open - the region file for the NIC spec describes (one
 * queue pair), made fresh or, for the first NIC of its id and pair after
 * a cold start, the previous vnicd's when it matches. *ret_fd (owned by
 * the caller) and *ret_len; *ret_fd -1 when no file is used (no state
 * directory, not tmpfs, the fd store, --inflight=off): a memfd then.
 * Returns 0, or a negative errno with err filled.
 */
int inflight_file_open(struct sup *s, const struct nic_spec *spec, int *ret_fd, size_t *ret_len,
		       char *err, size_t errlen);

/* inflight_file_unlink - remove the region file of NIC id, pair. */
void inflight_file_unlink(const struct sup *s, const char *id, unsigned pair);

#endif
