/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memtable: validation, mapping and translation of guest memory regions.
 * See memtable.h for the contract.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtable.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Sort helper: indices into the caller's array, ordered by gpa. */
static int cmp_by_gpa(const void *a, const void *b, void *arg)
{
	const struct memtable_region_desc *d = arg;
	uint64_t ga = d[*(const unsigned *)a].gpa;
	uint64_t gb = d[*(const unsigned *)b].gpa;

	return ga < gb ? -1 : ga > gb;
}

/* One region on its own: sizes, overflow, and the fd it names. */
static int check_region(const struct memtable_region_desc *r, unsigned i, unsigned flags,
			char *err, size_t errlen)
{
	struct stat st;
	uint64_t end;
	int seals, fl;

	if (r->size == 0) {
		set_err(err, errlen, "region %u: size is 0", i);
		return -EINVAL;
	}
	/* The last byte must be addressable: gpa + size may be 2^64 only if
	 * the region ends exactly at the top, which we refuse too. */
	if (__builtin_add_overflow(r->gpa, r->size, &end)) {
		set_err(err, errlen, "region %u: gpa 0x%llx + size 0x%llx wraps around",
			i, (unsigned long long)r->gpa, (unsigned long long)r->size);
		return -EINVAL;
	}
	if (__builtin_add_overflow(r->offset, r->size, &end) || end > (uint64_t)INT64_MAX) {
		set_err(err, errlen, "region %u: offset 0x%llx + size 0x%llx overflows",
			i, (unsigned long long)r->offset, (unsigned long long)r->size);
		return -EINVAL;
	}
	if (r->fd < 0 || fstat(r->fd, &st) < 0) {
		set_err(err, errlen, "region %u: fd %d is not open", i, r->fd);
		return -EBADF;
	}
	/* A memfd is a regular file on shmem or hugetlbfs; devices (/dev/zero),
	 * pipes and sockets are not. */
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "region %u: fd %d is not a memfd (not a regular file)", i, r->fd);
		return -EINVAL;
	}
	/* F_GET_SEALS fails on files of ordinary file systems; a shmem file
	 * that was not created by memfd_create reports F_SEAL_SEAL and can
	 * never carry F_SEAL_SHRINK. So requiring F_SEAL_SHRINK requires a
	 * memfd, and guarantees it cannot be truncated under the worker
	 * (which would kill it with SIGBUS: TESTPLAN F2). */
	seals = fcntl(r->fd, F_GET_SEALS);
	if (flags & MEMTABLE_UNSEALED_OK) {
		/* Sealed or not: only the size check below applies. */
	} else if (seals < 0) {
		set_err(err, errlen, "region %u: fd %d is not a memfd (it cannot be sealed)", i, r->fd);
		return -EINVAL;
	} else if (!(seals & F_SEAL_SHRINK)) {
		set_err(err, errlen, "region %u: memfd is not sealed against shrinking (F_SEAL_SHRINK)", i);
		return -EINVAL;
	}
	/* The worker maps it PROT_READ|PROT_WRITE, MAP_SHARED (issue 11 item
	 * 6): a write seal or a read-only file makes that mmap fail, so refuse
	 * it here, before a worker is started for nothing. */
	if (seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) {
		set_err(err, errlen, "region %u: memfd is sealed against writing (%s): guest memory "
			"must be mappable read/write shared", i,
			seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
		return -EINVAL;
	}
	fl = fcntl(r->fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR) {
		set_err(err, errlen, "region %u: memfd is open %s, not read/write: guest memory must "
			"be mappable read/write shared", i,
			fl >= 0 && (fl & O_ACCMODE) == O_WRONLY ? "write-only" : "read-only");
		return -EINVAL;
	}
	if (end > (uint64_t)st.st_size) {
		set_err(err, errlen, "region %u: offset+size 0x%llx is beyond the memfd's size 0x%llx",
			i, (unsigned long long)end, (unsigned long long)st.st_size);
		return -EINVAL;
	}
	return 0;
}

/* Validate every region, then the whole set; on success *ret_order holds
 * the indices sorted by gpa (caller frees). */
static int validate_sorted(const struct memtable_region_desc *d, unsigned n, unsigned flags,
			   unsigned **ret_order, char *err, size_t errlen)
{
	unsigned *order;
	int r;

	if (n == 0) {
		set_err(err, errlen, "memory table is empty");
		return -EINVAL;
	}
	if (n > MEMTABLE_MAX_REGIONS) {
		set_err(err, errlen, "memory table has %u regions, at most %u are allowed",
			n, MEMTABLE_MAX_REGIONS);
		return -E2BIG;
	}
	for (unsigned i = 0; i < n; i++) {
		r = check_region(&d[i], i, flags, err, errlen);
		if (r < 0)
			return r;
	}
	order = malloc(n * sizeof(*order));
	if (!order) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_by_gpa, (void *)(uintptr_t)d);
	for (unsigned i = 1; i < n; i++) {
		const struct memtable_region_desc *a = &d[order[i - 1]], *b = &d[order[i]];

		/* a->gpa + a->size cannot wrap: checked above. */
		if (a->gpa + a->size > b->gpa) {
			set_err(err, errlen, "region %u [0x%llx, +0x%llx) overlaps region %u at 0x%llx",
				order[i - 1], (unsigned long long)a->gpa,
				(unsigned long long)a->size, order[i],
				(unsigned long long)b->gpa);
			free(order);
			return -EINVAL;
		}
	}
	*ret_order = order;
	return 0;
}

int memtable_check_pages(const struct memtable_region_desc *d, unsigned n,
			 char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++) {
		const struct memtable_region_desc *r = &d[i];

		/* Page-aligned, as every VMM hands them out (issue 11 item 7):
		 * an odd offset would put guest-aligned rings at misaligned
		 * host addresses. */
		if ((r->gpa | r->size | r->offset) & (MEMTABLE_PAGE_SIZE - 1)) {
			set_err(err, errlen, "region %u: gpa 0x%llx, size 0x%llx and offset 0x%llx "
				"must each be a multiple of the %u-byte page", i,
				(unsigned long long)r->gpa, (unsigned long long)r->size,
				(unsigned long long)r->offset, MEMTABLE_PAGE_SIZE);
			return -EINVAL;
		}
	}
	return 0;
}

int memtable_validate_flags(const struct memtable_region_desc *d, unsigned n, unsigned flags,
			    char *err, size_t errlen)
{
	unsigned *order = NULL;
	int r = validate_sorted(d, n, flags, &order, err, errlen);

	free(order);
	return r;
}

int memtable_validate(const struct memtable_region_desc *d, unsigned n,
		      char *err, size_t errlen)
{
	return memtable_validate_flags(d, n, 0, err, errlen);
}

/* Map one region with a PROT_NONE guard page on each side. */
/* The mapping granule of fd: the page, or the huge page of a hugetlbfs
 * file (its st_blksize; fstat is allowed where fstatfs is not), which
 * mmap requires for address, offset and length. */
static size_t map_granule(int fd)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_blksize > (blksize_t)page &&
	    st.st_blksize <= (blksize_t)(1 << 30) && !(st.st_blksize & (st.st_blksize - 1)))
		return (size_t)st.st_blksize;
	return page;
}

/* Map one region with an inaccessible guard (at least one granule) on
 * each side. */
static int map_region(const struct memtable_region_desc *d, struct mem_region *m,
		      char *err, size_t errlen, unsigned i)
{
	size_t gran = map_granule(d->fd);
	uint64_t aligned_off = d->offset & ~(uint64_t)(gran - 1);
	uint64_t delta = d->offset - aligned_off;
	uint64_t len = delta + d->size;
	size_t maplen, total;
	uint8_t *base, *start;
	void *p;

	/* Sizes were bounded by the memfd's real size in check_region. */
	len = (len + gran - 1) & ~(uint64_t)(gran - 1);
	if (len > SIZE_MAX - 3 * gran) {
		set_err(err, errlen, "region %u: too large to map", i);
		return -ENOMEM;
	}
	maplen = (size_t)len;
	/* Room to align the start to the granule with a guard before it
	 * and after it. */
	total = maplen + (gran == (size_t)sysconf(_SC_PAGESIZE) ? 2 : 3) * gran;
	base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		set_err(err, errlen, "region %u: reserving %zu bytes: %s", i, total, strerror(errno));
		return -ENOMEM;
	}
	start = (uint8_t *)(((uintptr_t)base + gran + gran - 1) & ~(uintptr_t)(gran - 1));
	/* Never PROT_EXEC: guest memory is data to the device. */
	p = mmap(start, maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 d->fd, (off_t)aligned_off);
	if (p == MAP_FAILED) {
		int e = errno;

		munmap(base, total);
		set_err(err, errlen, "region %u: mmap: %s", i, strerror(e));
		return -e;
	}
	m->gpa = d->gpa;
	m->size = d->size;
	m->hva = start + delta;
	m->map_base = base;
	m->map_len = total;
	return 0;
}

int memtable_map(const struct memtable_region_desc *d, unsigned n,
		 struct memtable **ret_mt, char *err, size_t errlen)
{
	return memtable_map_flags(d, n, 0, ret_mt, err, errlen);
}

int memtable_map_flags(const struct memtable_region_desc *d, unsigned n, unsigned flags,
		       struct memtable **ret_mt, char *err, size_t errlen)
{
	struct memtable *mt;
	unsigned *order = NULL;
	int r;

	r = validate_sorted(d, n, flags, &order, err, errlen);
	if (r < 0)
		return r;
	mt = calloc(1, sizeof(*mt) + n * sizeof(mt->r[0]));
	if (!mt) {
		free(order);
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		r = map_region(&d[order[i]], &mt->r[i], err, errlen, order[i]);
		if (r < 0)
			goto out_unmap;
		mt->n = i + 1;
	}
	free(order);
	*ret_mt = mt;
	return 0;

out_unmap:
	free(order);
	memtable_free(mt);
	return r;
}

struct memtable *memtable_free(struct memtable *mt)
{
	if (!mt)
		return NULL;
	for (unsigned i = 0; i < mt->n; i++)
		munmap(mt->r[i].map_base, mt->r[i].map_len);
	free(mt);
	return NULL;
}

/* The region containing gpa, or NULL: the last hit first, then a binary
 * search over sorted regions. */
static const struct mem_region *find(const struct memtable *mt, uint64_t gpa)
{
	unsigned lo = 0, hi = mt->n, last = __atomic_load_n(&mt->last, __ATOMIC_RELAXED);

	if (last < mt->n && gpa - mt->r[last].gpa < mt->r[last].size && gpa >= mt->r[last].gpa)
		return &mt->r[last];

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct mem_region *r = &mt->r[mid];

		if (gpa < r->gpa)
			hi = mid;
		else if (gpa - r->gpa >= r->size)
			lo = mid + 1;
		else {
			/* The cache is a hint: casting const away for it
			 * changes no translation. */
			__atomic_store_n((unsigned *)(uintptr_t)&mt->last, mid, __ATOMIC_RELAXED);
			return r;
		}
	}
	return NULL;
}

void *memtable_translate(const struct memtable *mt, uint64_t gpa, uint64_t *len)
{
	const struct mem_region *r;
	uint64_t avail;

	if (!mt || *len == 0)
		return NULL;
	r = find(mt, gpa);
	if (!r)
		return NULL;
	avail = r->size - (gpa - r->gpa);
	if (*len > avail)
		*len = avail;
	return r->hva + (gpa - r->gpa);
}

void *memtable_translate_all(const struct memtable *mt, uint64_t gpa, uint64_t len)
{
	uint64_t got = len, end;
	void *p;

	if (len == 0 || __builtin_add_overflow(gpa, len, &end))
		return NULL;
	p = memtable_translate(mt, gpa, &got);
	return p && got == len ? p : NULL;
}

/* Does region r map the host bytes [p, p + len)? */
static inline bool region_holds_hva(const struct mem_region *r, uintptr_t p, uint64_t len)
{
	uintptr_t base = (uintptr_t)r->hva;

	return p >= base && p - base <= r->size && len <= r->size - (p - base);
}

int memtable_gpa_of(const struct memtable *mt, const void *hva, uint64_t len,
		    uint64_t *ret_gpa)
{
	unsigned last = __atomic_load_n(&mt->last, __ATOMIC_RELAXED);
	uintptr_t p = (uintptr_t)hva;

	if (last < mt->n && region_holds_hva(&mt->r[last], p, len)) {
		*ret_gpa = mt->r[last].gpa + (p - (uintptr_t)mt->r[last].hva);
		return 0;
	}
	/* Regions are sorted by gpa, not by host address: a scan, bounded
	 * by MEMTABLE_MAX_REGIONS (only while migration logs). */
	for (unsigned i = 0; i < mt->n; i++) {
		if (region_holds_hva(&mt->r[i], p, len)) {
			*ret_gpa = mt->r[i].gpa + (p - (uintptr_t)mt->r[i].hva);
			return 0;
		}
	}
	return -EFAULT;
}

int memtable_to_iov(const struct memtable *mt, uint64_t gpa, uint64_t len,
		    struct iovec *iov, unsigned *n, unsigned max)
{
	unsigned k = *n;
	uint64_t end;

	if (len && __builtin_add_overflow(gpa, len - 1, &end))
		return -EFAULT;
	while (len > 0) {
		uint64_t l = len;
		void *p = memtable_translate(mt, gpa, &l);

		if (!p)
			return -EFAULT;
		if (k >= max)
			return -ENOBUFS;
		iov[k].iov_base = p;
		iov[k].iov_len = (size_t)l;
		k++;
		gpa += l;
		len -= l;
	}
	*n = k;
	return 0;
}
