/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uidrange: one uid and gid per NIC, from a range vnicd owns (issue 10).
 *
 * Like systemd's DynamicUser= and container runtimes' subordinate ids:
 * vnicd is given a block of ids that no passwd or group entry uses
 * (--uid-range FIRST-LAST or FIRST:COUNT, default UIDRANGE_DEFAULT), and
 * each NIC's worker runs as uid = gid = one id of it, so two workers can
 * never signal, trace or share a file with each other even if their
 * seccomp filter had a hole. An id is taken at AddNic, kept across the
 * NIC's restarts and returned when the NIC is gone (its worker reaped).
 * Ids are handed out round-robin, so a freed one is reused as late as
 * possible; a worker has RLIMIT_NPROC 0 and an empty read-only root, so
 * nothing of a previous owner survives its reaping.
 */
#ifndef VNIC_SUP_UIDRANGE_H
#define VNIC_SUP_UIDRANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 0x70000000-0x7000ffff: above what systemd gives system and regular
 * users, DynamicUser= and systemd-nspawn containers (UIDS-GIDS.md). */
#define UIDRANGE_DEFAULT_FIRST 1879048192u
#define UIDRANGE_DEFAULT_COUNT 65536u
#define UIDRANGE_DEFAULT "1879048192:65536"
#define UIDRANGE_MAX_COUNT (1u << 20)

struct uidrange {
	uint32_t first, count;
	uint32_t next;        /* round-robin cursor (offset) */
	uint32_t used;        /* ids taken */
	uint8_t *bits;        /* count bits */
};

/* uidrange_parse - "FIRST-LAST" or "FIRST:COUNT" into first and count;
 * 1 <= count <= UIDRANGE_MAX_COUNT, no uid 0, no wrap past 2^32 - 2
 * ((uid_t)-1 is "no id"). Returns: 0, or -EINVAL with err filled. */
int uidrange_parse(const char *s, uint32_t *first, uint32_t *count, char *err, size_t errlen);

/* uidrange_init - check that no passwd or group entry has an id in the
 * range (getpwent/getgrent, so NSS sources count) and allocate.
 * Returns: 0; -EEXIST with err naming the first entry found; -ENOMEM. */
int uidrange_init(struct uidrange *r, uint32_t first, uint32_t count, char *err, size_t errlen);

/* uidrange_alloc - a free id. Returns: 0 and *ret; -ENOSPC when all are taken. */
int uidrange_alloc(struct uidrange *r, uint32_t *ret);

/* uidrange_free - give @id back; ids outside the range (0) are ignored. */
void uidrange_free(struct uidrange *r, uint32_t id);

/* uidrange_take - mark @id taken (an upgrade in place takes over the ids
 * its NICs run as). Returns: 0; -EEXIST when it was taken already (the
 * pairs of one NIC share one); -ERANGE outside the range. */
int uidrange_take(struct uidrange *r, uint32_t id);

void uidrange_fini(struct uidrange *r);

#endif
