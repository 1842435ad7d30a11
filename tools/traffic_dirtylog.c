/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_dirtylog: vnic-bench traffic --dirty-log and --dirty-log-after,
 * the VMM side of live migration's dirty log (issue 14) and its check.
 *
 * Each NIC gets its own log: a sealed memfd of vnic_dirty_log_size(guest
 * memory's end) bytes, handed over with vnic_set_dirty_log, before the
 * frames flow (--dirty-log) or while they flow (--dirty-log-after S). Once
 * SetDirtyLog is answered every write of the worker is logged, so the
 * guest memory the worker writes is snapshot right then. After RemoveNic
 * (answered once the worker flushed its last bits and was reaped) every
 * page whose device-written bytes differ from the snapshot must have its
 * bit set. Only the bytes the device writes are compared, the used rings
 * and the receive buffers: the guest's own writes (avail rings share a
 * page with the used rings here) are the VMM's to track, not the log's.
 * A page written back with the same bytes is invisible to the diff: the
 * check finds missed pages, never proves a bit superfluous.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "sealed_memfd.h"
#include "traffic.h"

/* The snapshot: guest memory from its start to the end of the receive
 * buffers (the rings, then the buffers: guest.c's layout). */
static size_t tr_dl_span(const struct guest *g)
{
	return (size_t)(g->txslot_gpa - GUEST_GPA_BASE);
}

static int tr_dl_nic_on(struct tr_run *r, struct tr_nic *n)
{
	uint64_t size = vnic_dirty_log_size(GUEST_GPA_BASE + n->g->memsize);
	char err[200], name[32];
	void *p;
	int fd, rc;

	snprintf(name, sizeof(name), "vnic-bench-log%u", n->idx);
	fd = sealed_memfd_map(name, size, &p, "dirty log", err, sizeof(err));
	if (fd < 0) {
		tr_fail(r, "nic %u: %s", n->idx, err);
		return -EIO;
	}
	n->log_fd = fd;
	n->log = p;
	n->log_size = size;
	n->snap = malloc(tr_dl_span(n->g));
	if (!n->snap) {
		tr_fail(r, "nic %u: out of memory", n->idx);
		return -EIO;
	}
	rc = vnic_set_dirty_log(n->conn, n->id, fd, size, 0);
	if (rc != 0) {
		tr_fail(r, "nic %u: SetDirtyLog: %s", n->idx, vnic_last_error(n->conn));
		return -EIO;
	}
	/* From the answer on every write is logged: what differs from this
	 * at the end was written after it. */
	memcpy(n->snap, n->g->mem, tr_dl_span(n->g));
	n->h2g_at_log = n->f[FRAMES_H2G].recv;
	n->log_on = true;
	return 0;
}

int tr_dirty_log_on(struct tr_run *r)
{
	uint64_t t = bench_now_ns();

	r->dirty_log_done = true;
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		if (n->gone || n->failed || n->hostile)
			continue;
		if (tr_dl_nic_on(r, n) < 0)
			return -EIO;
	}
	printf("  dirty log on: %llu bytes per NIC, SetDirtyLog on %u NIC(s) in %.1f ms\n",
	       (unsigned long long)(r->nnics ? r->nics[0].log_size : 0), r->nnics,
	       (bench_now_ns() - t) / 1e6);
	return 0;
}

void tr_dirty_log_due(struct tr_run *r, uint64_t now)
{
	if (r->dirty_log_after < 0 || r->dirty_log_done ||
	    now < r->t0 + (uint64_t)(r->dirty_log_after * TR_NS))
		return;
	(void)tr_dirty_log_on(r);
}

static bool tr_dl_bit(const struct tr_nic *n, uint64_t gpa)
{
	uint64_t p = gpa / VNIC_DIRTY_LOG_PAGE;

	if (p / 8 >= n->log_size)
		return false;
	return __atomic_load_n(&n->log[p / 8], __ATOMIC_ACQUIRE) & (1u << (p % 8));
}

struct tr_dl_count {
	uint64_t changed, logged, missed;
	uint64_t first_missed; /* gpa of the first missed page */
};

/* The device-written bytes [gpa, gpa + len): per page, do they differ
 * from the snapshot? Then the page is logged or missed. (No two ranges
 * share a page: the rings are 16 KiB apart, the buffers page-aligned.) */
static void tr_dl_range(const struct tr_nic *n, uint64_t gpa, uint64_t len,
			struct tr_dl_count *c)
{
	uint64_t end = gpa + len;

	while (gpa < end) {
		uint64_t page_end = (gpa / VNIC_DIRTY_LOG_PAGE + 1) * VNIC_DIRTY_LOG_PAGE;
		uint64_t stop = page_end < end ? page_end : end;
		size_t off = (size_t)(gpa - GUEST_GPA_BASE);

		if (memcmp(n->g->mem + off, n->snap + off, (size_t)(stop - gpa))) {
			c->changed++;
			if (tr_dl_bit(n, gpa)) {
				c->logged++;
			} else {
				if (!c->missed)
					c->first_missed = gpa;
				c->missed++;
			}
		}
		gpa = stop;
	}
}

void tr_dirty_log_check(struct tr_run *r, struct tr_nic *n)
{
	struct tr_dl_count c = { 0 };
	uint64_t bits = 0;

	if (!n->log_on)
		return;
	for (unsigned q = 0; q < 2; q++)
		tr_dl_range(n, n->g->lay[q].used, vring_used_size(GUEST_QUEUE_SIZE), &c);
	tr_dl_range(n, n->g->rxbuf_gpa, (uint64_t)GUEST_QUEUE_SIZE * GUEST_RXBUF_SIZE, &c);
	for (uint64_t i = 0; i < n->log_size; i++)
		bits += (uint64_t)__builtin_popcount(n->log[i]);
	printf("  nic %s dirty log: %llu pages changed, %llu logged, %llu missed "
	       "(%llu bits set in all)\n", n->id, (unsigned long long)c.changed,
	       (unsigned long long)c.logged, (unsigned long long)c.missed,
	       (unsigned long long)bits);
	printf("RESULT dirtylog nic=%s changed=%llu logged=%llu missed=%llu bits=%llu\n", n->id,
	       (unsigned long long)c.changed, (unsigned long long)c.logged,
	       (unsigned long long)c.missed, (unsigned long long)bits);
	if (c.missed)
		tr_fail(r, "nic %s: %llu changed guest pages not in the dirty log (the first at "
			"0x%llx)", n->id, (unsigned long long)c.missed,
			(unsigned long long)c.first_missed);
	/* A run that moved frames into the guest and logged nothing checked
	 * nothing: the diff must have seen the receive buffers change. */
	if (n->f[FRAMES_H2G].recv > n->h2g_at_log && !c.changed)
		tr_fail(r, "nic %s: %llu frames received but no guest page changed after "
			"SetDirtyLog", n->id,
			(unsigned long long)(n->f[FRAMES_H2G].recv - n->h2g_at_log));
}

void tr_dirty_log_free(struct tr_nic *n)
{
	if (n->log)
		munmap(n->log, n->log_size);
	if (n->log_fd >= 0)
		close(n->log_fd);
	free(n->snap);
	n->log = NULL;
	n->snap = NULL;
	n->log_fd = -1;
}
