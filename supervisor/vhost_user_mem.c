/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_mem: the front end's memory table: each region checked alone
 * and the whole table by memtable.h's rules before anything changes;
 * SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG; front-end addresses to guest
 * physical ones; the dirty log of live migration (SET_LOG_BASE).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "vhost_user_priv.h"

/* Translate a front-end virtual address range to guest physical: wholly
 * inside one region (a ring that straddles two is refused). */
static int vu_uva_to_gpa(const struct vu_conn *c, uint64_t uva, uint64_t len, uint64_t *gpa)
{
	for (unsigned i = 0; i < c->nreg; i++) {
		const struct vu_region *r = &c->reg[i];

		if (uva >= r->uva && uva - r->uva < r->d.size && len <= r->d.size - (uva - r->uva)) {
			*gpa = r->d.gpa + (uva - r->uva);
			return 0;
		}
	}
	return -EFAULT;
}

int vu_ring_gpas(const struct vu_conn *c, const struct vu_ring *r, uint64_t g[3],
			char *err, size_t errlen)
{
	if (vu_uva_to_gpa(c, r->desc, vring_desc_size(r->num), &g[0]) ||
	    vu_uva_to_gpa(c, r->avail, vring_avail_size(r->num) + 2, &g[1]) ||
	    vu_uva_to_gpa(c, r->used, vring_used_size(r->num) + 2, &g[2])) {
		snprintf(err, errlen, "ring addresses (desc 0x%llx avail 0x%llx used 0x%llx, "
			 "%u entries) are not each inside one memory region",
			 (unsigned long long)r->desc, (unsigned long long)r->avail,
			 (unsigned long long)r->used, r->num);
		return -EFAULT;
	}
	return 0;
}

/* One region from the front end, checked alone. */
static int check_region(const struct vu_mem_region *r, int fd, unsigned i, bool *sealed,
			char *err, size_t errlen)
{
	struct stat st;
	struct statfs sfs;
	uint64_t end;
	int seals;

	if (r->size == 0 || __builtin_add_overflow(r->gpa, r->size, &end) ||
	    __builtin_add_overflow(r->uva, r->size, &end) ||
	    __builtin_add_overflow(r->mmap_offset, r->size, &end) || end > (uint64_t)INT64_MAX) {
		snprintf(err, errlen, "region %u: size 0x%llx is 0 or overflows an address",
			 i, (unsigned long long)r->size);
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs) < 0 ||
	    (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC)) {
		snprintf(err, errlen, "region %u: fd is not a memfd, shared memory or hugetlbfs file", i);
		return -EINVAL;
	}
	if (end > (uint64_t)st.st_size) {
		snprintf(err, errlen, "region %u: offset+size 0x%llx is beyond the file's 0x%llx bytes",
			 i, (unsigned long long)end, (unsigned long long)st.st_size);
		return -EINVAL;
	}
	seals = fcntl(fd, F_GET_SEALS);
	*sealed = seals >= 0 && (seals & F_SEAL_SHRINK);
	return 0;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* The whole table by the rules every guest memory table obeys (memtable.h:
 * fds open read-write, not write-sealed, large enough, no gpa overlap,
 * page-aligned), unsealed files allowed: before anything changes. */
static int check_table_rules(const struct vu_region *tab, unsigned count, char *err,
			     size_t errlen)
{
	struct memtable_region_desc *d = calloc(count, sizeof(*d));
	int rc;

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < count; i++)
		d[i] = tab[i].d;
	rc = memtable_validate_flags(d, count, MEMTABLE_UNSEALED_OK, err, errlen);
	if (rc == 0)
		rc = memtable_check_pages(d, count, err, errlen);
	free(d);
	return rc;
}

/* Region n of tab (size count) against the others: no gpa or uva overlap. */
static int check_overlaps(const struct vu_region *tab, unsigned count, char *err, size_t errlen)
{
	for (unsigned i = 0; i < count; i++)
		for (unsigned j = i + 1; j < count; j++) {
			const struct vu_region *a = &tab[i], *b = &tab[j];

			if (ranges_overlap(a->d.gpa, a->d.size, b->d.gpa, b->d.size) ||
			    ranges_overlap(a->uva, a->d.size, b->uva, b->d.size)) {
				snprintf(err, errlen, "regions %u and %u overlap", i, j);
				return -EINVAL;
			}
		}
	return 0;
}

/* The whole new table in tmp (fds borrowed), then adopt. */
static int vu_mem_replace(struct vu_conn *c, struct vu_msg *m, struct vu_region *tmp,
			  unsigned n, int *adopt_from, const char *why)
{
	for (unsigned i = 0; i < c->nreg; i++)
		close_fd(&c->reg[i].d.fd);
	memcpy(c->reg, tmp, n * sizeof(*tmp));
	c->nreg = n;
	for (unsigned i = 0; i < n; i++)
		if (adopt_from[i] >= 0)
			m->fds[adopt_from[i]] = -1;
	return vu_reconfigure(c, m, why);
}

int h_set_mem_table(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_table *t = &m->p.mem;
	struct vu_region tmp[VU_MEM_BASELINE_REGIONS];
	int from[VU_MEM_BASELINE_REGIONS];
	char sub[160];

	if (t->nregions == 0 || t->nregions > VU_MEM_BASELINE_REGIONS ||
	    m->hdr.size != 8 + t->nregions * sizeof(struct vu_mem_region) ||
	    m->nfds != t->nregions) {
		snprintf(err, errlen, "SET_MEM_TABLE: %u regions in %u bytes with %u fds",
			 t->nregions, m->hdr.size, m->nfds);
		return -EINVAL;
	}
	for (unsigned i = 0; i < t->nregions; i++) {
		int rc = check_region(&t->r[i], m->fds[i], i, &tmp[i].sealed, sub, sizeof(sub));

		if (rc) {
			snprintf(err, errlen, "SET_MEM_TABLE: %s", sub);
			return rc;
		}
		tmp[i].d = (struct memtable_region_desc){ .gpa = t->r[i].gpa, .size = t->r[i].size,
							  .offset = t->r[i].mmap_offset,
							  .fd = m->fds[i] };
		tmp[i].uva = t->r[i].uva;
		from[i] = (int)i;
	}
	if (check_overlaps(tmp, t->nregions, sub, sizeof(sub)) ||
	    check_table_rules(tmp, t->nregions, sub, sizeof(sub)) ||
	    (vu_logging(c) && vu_log_covers(tmp, t->nregions, c->log_size, sub, sizeof(sub)))) {
		snprintf(err, errlen, "SET_MEM_TABLE: %s", sub);
		return -EINVAL;
	}
	return vu_mem_replace(c, m, tmp, t->nregions, from, "new memory table");
}

/* Region r, with fd, is one the table already holds: the same guest
 * range, front-end address and offset, in the same file. */
static bool vu_region_same(const struct vu_region *x, const struct vu_mem_region *r, int fd)
{
	struct stat a, b;

	return x->d.gpa == r->gpa && x->d.size == r->size && x->uva == r->uva &&
	       x->d.offset == r->mmap_offset && fstat(x->d.fd, &a) == 0 && fstat(fd, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* ADD_MEM_REG and REM_MEM_REG come once per queue pair from QEMU up to 8.0:
 * each of a virtio-net device's vhost_devs (one per pair) keeps its own
 * copy of the table and sends its own changes (QEMU later made them
 * one-time requests, as SET_MEM_TABLE is). So a region the table already
 * holds, in the same file, is added again as a no-op, and the removal of
 * a region already gone is one too; anything else that overlaps is still
 * refused. */
int h_add_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_region *r = &m->p.mreg.r;
	struct vu_region *tab;
	unsigned n = c->nreg;
	int from_one[1] = { 0 };
	char sub[160];
	int rc;

	for (unsigned i = 0; i < n; i++)
		if (vu_region_same(&c->reg[i], r, m->fds[0])) {
			log_debug("vhost-user %s: ADD_MEM_REG: region gpa 0x%llx already in the "
				  "table (another queue pair's copy): nothing to do", c->ep->cfg.id,
				  (unsigned long long)r->gpa);
			return 0; /* the dispatcher closes the fd */
		}
	if (n >= MEMTABLE_MAX_REGIONS) {
		snprintf(err, errlen, "ADD_MEM_REG: already %u regions (at most %u)", n,
			 MEMTABLE_MAX_REGIONS);
		return -ENOSPC;
	}
	tab = &c->reg[n];
	rc = check_region(r, m->fds[0], n, &tab->sealed, sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "ADD_MEM_REG: %s", sub);
		return rc;
	}
	tab->d = (struct memtable_region_desc){ .gpa = r->gpa, .size = r->size,
						.offset = r->mmap_offset, .fd = m->fds[0] };
	tab->uva = r->uva;
	if (check_overlaps(c->reg, n + 1, sub, sizeof(sub)) ||
	    check_table_rules(c->reg, n + 1, sub, sizeof(sub)) ||
	    (vu_logging(c) && vu_log_covers(tab, 1, c->log_size, sub, sizeof(sub)))) {
		tab->d.fd = -1;
		snprintf(err, errlen, "ADD_MEM_REG: %s", sub);
		return -EINVAL;
	}
	c->nreg = n + 1;
	m->fds[from_one[0]] = -1;
	return vu_reconfigure(c, m, "memory region added");
}

int h_rem_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_region *r = &m->p.mreg.r;

	for (unsigned i = 0; i < c->nreg; i++) {
		struct vu_region *x = &c->reg[i];

		if (x->d.gpa != r->gpa || x->d.size != r->size || x->uva != r->uva)
			continue;
		close_fd(&x->d.fd);
		memmove(x, x + 1, (c->nreg - i - 1) * sizeof(*x));
		c->nreg--;
		return vu_reconfigure(c, m, "memory region removed");
	}
	/* Already removed (by another queue pair's copy of the table, see
	 * h_add_mem_reg): the table is as asked. */
	log_debug("vhost-user %s: REM_MEM_REG: no region gpa 0x%llx size 0x%llx uva 0x%llx "
		  "(already removed): nothing to do", c->ep->cfg.id, (unsigned long long)r->gpa,
		  (unsigned long long)r->size, (unsigned long long)r->uva);
	(void)err;
	(void)errlen;
	return 0;
}

int h_get_max_mem_slots(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t v = MEMTABLE_MAX_REGIONS;

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &v, sizeof(v));
}

/* ------------------------------------------------------ the dirty log */

/* QEMU grows the log before the table and shrinks it after, so a table
 * the log does not cover is a front end's mistake: no page a worker could
 * write may lack its bit. */
int vu_log_covers(const struct vu_region *tab, unsigned count, uint64_t log_size, char *err,
		  size_t errlen)
{
	for (unsigned i = 0; i < count; i++) {
		int rc = validate_log_covers(&tab[i].d, 1, log_size, err, errlen);

		if (rc)
			return rc;
	}
	return 0;
}

void vu_conn_forget_log(struct vu_conn *c)
{
	close_fd(&c->log_fd);
	c->log_size = c->log_offset = 0;
}

bool vu_log_pending(const struct vu_endpoint *ep)
{
	for (unsigned k = 0; k < ep->max_pairs; k++)
		if (ep->p[k].log_pending)
			return true;
	return false;
}

int vu_live_log(struct vu_conn *c, const struct vu_msg *m, int fd, uint64_t size, uint64_t offset,
		char *err, size_t errlen)
{
	struct vu_endpoint *ep = c->ep;
	char sub[160];
	int rc = 0;

	/* Set before the calls: a NIC with no worker running answers with
	 * dirty_log_set at once, from inside nic_set_dirty_log. The answer is
	 * sent from ev_resume once no pair is pending. */
	int dups[NIC_MAX_PAIRS];     /* max_pairs <= NIC_MAX_PAIRS (--max-queue-pairs) */

	/* Everything that can fail first, so that the change reaches every
	 * running pair or none: a pair still busy with the last change, an
	 * fd we cannot duplicate. */
	for (unsigned k = 0; k < ep->max_pairs; k++)
		dups[k] = -1;
	for (unsigned k = 0; k < ep->max_pairs && rc == 0; k++) {
		struct vu_pair *p = &ep->p[k];

		if (!p->nic || p->stopping)
			continue;
		if (p->nic->log_pending) {
			rc = -EBUSY;
			snprintf(sub, sizeof(sub), "pair %u: a dirty log change is still in progress",
				 k);
		} else if (fd >= 0 && (dups[k] = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
			rc = -errno;
			snprintf(sub, sizeof(sub), "duplicating the log fd: %s", strerror(errno));
		}
	}
	if (rc) {
		for (unsigned k = 0; k < ep->max_pairs; k++)
			if (dups[k] >= 0)
				close(dups[k]);
		snprintf(err, errlen, "%s", sub);
		return rc; /* nothing changed */
	}
	/* Set before the calls: a NIC with no worker running answers with
	 * dirty_log_set at once, from inside nic_set_dirty_log. The answer is
	 * sent from ev_resume once no pair is pending. */
	vu_wait(c, m, -1, -1);
	c->wait_log = true;
	c->log_want = fd >= 0;
	c->log_failed = false;
	for (unsigned k = 0; k < ep->max_pairs; k++) {
		struct vu_pair *p = &ep->p[k];

		if (!p->nic || p->stopping)
			continue;
		p->log_pending = true;
		/* Cannot fail: not pending (checked above); takes dups[k]. */
		nic_set_dirty_log(p->nic, dups[k], fd >= 0 ? size : 0, fd >= 0 ? offset : 0, sub,
				  sizeof(sub));
	}
	return VU_WAIT;
}

/* SET_LOG_BASE (with LOG_SHMFD): u64 mmap_size, u64 mmap_offset, the log
 * memfd. Checked whole (validate_dirty_log; with logging on, it covers the
 * memory table); refused, nothing changes and the dispatcher closes the fd.
 * Kept on the connection, replacing an older log; with LOG_ALL acked and a
 * worker running, the worker switches to it live and the answer follows
 * its DirtyLogSet. Always answered (row VU_ROW_ANSWERED). */
int h_set_log_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_log *l = &m->p.log;
	struct vu_endpoint *ep = c->ep;
	bool live = vu_log_all(c) && vu_any_running(ep);
	char sub[200];
	int rc;

	rc = validate_dirty_log(m->fds[0], l->mmap_size, l->mmap_offset, sub, sizeof(sub));
	if (rc == 0 && vu_log_all(c))
		rc = vu_log_covers(c->reg, c->nreg, l->mmap_size, sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "SET_LOG_BASE: %s", sub);
		return -EINVAL;
	}
	/* The NICs first: refused (a change in progress), nothing changes. */
	rc = live ? vu_live_log(c, m, m->fds[0], l->mmap_size, l->mmap_offset, err, errlen) : 0;
	if (rc < 0)
		return rc;
	close_fd(&c->log_fd);
	c->log_fd = m->fds[0];
	c->log_size = l->mmap_size;
	c->log_offset = l->mmap_offset;
	m->fds[0] = -1;
	log_ratelimited(&ep->msg_rl, LOG_LEVEL_INFO,
			"vhost-user %s: dirty log of %llu bytes at offset %llu%s", ep->cfg.id,
			(unsigned long long)c->log_size, (unsigned long long)c->log_offset,
			live ? ": the worker switches to it" :
			vu_log_all(c) ? "" : " (LOG_ALL not acked)");
	return rc;
}
