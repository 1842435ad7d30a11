/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memtable: the guest physical memory table of one NIC.
 *
 * The VMM describes guest memory as a list of regions, each backed by a
 * memfd: guest physical address (gpa), size, and the offset of the region
 * inside the memfd. memtable validates such a list as a whole (nothing is
 * kept from a rejected list), maps it read/write and never executable, and
 * translates guest physical ranges into host pointers.
 *
 * The supervisor only validates (memtable_validate); it never maps guest
 * memory. The worker validates again and maps (memtable_map).
 *
 * Library code: no logging, no libevent. Functions return 0 or a negative
 * errno; a human-readable reason goes to the caller's err buffer.
 */
#ifndef VNIC_MEMTABLE_H
#define VNIC_MEMTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Most regions in one table: what vhost-user front ends use for memory
 * hotplug (QEMU's vhost-user limit with memory slots). */
#define MEMTABLE_MAX_REGIONS 509

/* Every region's gpa, size and memfd offset are multiples of this: the
 * smallest page of the hosts vnicd runs on (x86-64, arm64 4K). */
#define MEMTABLE_PAGE_SIZE 4096u

/* A region as the VMM describes it. */
struct memtable_region_desc {
	uint64_t gpa;    /* guest physical address of the first byte */
	uint64_t size;   /* bytes, > 0 */
	uint64_t offset; /* offset of the first byte inside fd */
	int fd;          /* sealed memfd (F_SEAL_SHRINK); not owned by memtable */
};

/* A mapped region, sorted by gpa inside struct memtable. */
struct mem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;     /* host address of gpa; size bytes are mapped */
	void *map_base;   /* whole reservation including guard pages */
	size_t map_len;
};

struct memtable {
	unsigned n;
	/* The region of the last successful lookup (a cache: buffers of a
	 * burst mostly lie in one region). Written with relaxed atomics
	 * through a const table: any value below n is correct. */
	unsigned last;
	struct mem_region r[]; /* n entries, sorted by gpa, non-overlapping */
};

/*
 * memtable_validate - check a region list without mapping it.
 * @d: regions in any order. @n: count.
 * Checks, per region and as a whole (TESTPLAN C6, F1, F2): n in
 * 1..MEMTABLE_MAX_REGIONS; size > 0; gpa+size and offset+size do not wrap;
 * no two regions overlap in gpa; fd is a memfd (shared memory file, not a
 * regular file, device, pipe or socket); fd is sealed with F_SEAL_SHRINK;
 * offset+size <= fstat(fd).st_size; fd is open O_RDWR and carries neither
 * F_SEAL_WRITE nor F_SEAL_FUTURE_WRITE (it is mapped read/write shared).
 * The library maps any byte granularity (the ring tests use 1-byte
 * regions); the channels add memtable_check_pages.
 * Returns: 0, or -EINVAL/-EBADF/-E2BIG with a message in err naming the
 * region (by its index in @d) and the rule it broke.
 */
int memtable_validate(const struct memtable_region_desc *d, unsigned n,
		      char *err, size_t errlen);

/*
 * memtable_check_pages - the channels' rule (issue 11 item 7): every
 * region's gpa, size and offset is a multiple of MEMTABLE_PAGE_SIZE, as
 * VMMs send them. Called by the supervisor's validation, the worker's
 * Config and the vhost-user door.
 * Returns: 0 or -EINVAL with err naming the region.
 */
int memtable_check_pages(const struct memtable_region_desc *d, unsigned n,
			 char *err, size_t errlen);

/*
 * memtable_map - validate and map a region list.
 * Each region is mapped MAP_SHARED with PROT_READ|PROT_WRITE (never
 * PROT_EXEC), with an inaccessible guard page on each side, so that a copy
 * that ran past a region would fault instead of touching other memory.
 * The fds are not consumed: the caller may close them after this returns.
 * Returns: 0 and *ret_mt (caller frees with memtable_free), or a negative
 * errno with err filled; on failure nothing stays mapped.
 */
int memtable_map(const struct memtable_region_desc *d, unsigned n,
		 struct memtable **ret_mt, char *err, size_t errlen);

/* vhost-user front ends (DPDK virtio-user) pass unsealed memfds and
 * hugetlbfs files. With this flag a region's fd need not carry
 * F_SEAL_SHRINK (nor be a memfd at all): the caller has checked what it
 * is; a front end that shrinks it then kills the process that maps it
 * with SIGBUS (for vnicd: that NIC's worker only). */
#define MEMTABLE_UNSEALED_OK 1u
int memtable_validate_flags(const struct memtable_region_desc *d, unsigned n, unsigned flags,
			    char *err, size_t errlen);
int memtable_map_flags(const struct memtable_region_desc *d, unsigned n, unsigned flags,
		       struct memtable **ret_mt, char *err, size_t errlen);

/* memtable_free - unmap every region and free the table. Accepts NULL.
 * Returns: NULL. */
struct memtable *memtable_free(struct memtable *mt);

/*
 * memtable_translate - host pointer for a guest physical address.
 * @len: in: bytes wanted; out: bytes contiguous from the returned pointer,
 * possibly fewer than asked when the range leaves the region.
 * O(log n).
 * Returns: the host pointer, or NULL when gpa is in no region (or *len is 0).
 */
void *memtable_translate(const struct memtable *mt, uint64_t gpa, uint64_t *len);

/*
 * memtable_translate_all - host pointer for a whole range that must lie
 * inside one region (rings, headers).
 * Returns: the pointer, or NULL when any byte of [gpa, gpa+len) is outside
 * one single region, or gpa+len wraps.
 */
void *memtable_translate_all(const struct memtable *mt, uint64_t gpa, uint64_t len);

/*
 * memtable_to_iov - split a guest range across regions into iovecs.
 * Appends to iov[*n .. max) and advances *n.
 * Returns: 0; -EFAULT when some byte is not in guest memory or gpa+len
 * wraps; -ENOBUFS when more than max entries would be needed. On error
 * *n is left unchanged.
 */
int memtable_to_iov(const struct memtable *mt, uint64_t gpa, uint64_t len,
		    struct iovec *iov, unsigned *n, unsigned max);

/*
 * memtable_gpa_of - the guest physical address of host bytes [hva,
 * hva + len) that lie inside one mapped region, as every iovec of
 * memtable_to_iov does (the dirty log needs guest addresses of what was
 * written through such iovecs). The region of the last lookup is tried
 * first, then every region: O(n).
 * Returns: 0 and *ret_gpa, or -EFAULT when no one region maps them.
 */
int memtable_gpa_of(const struct memtable *mt, const void *hva, uint64_t len,
		    uint64_t *ret_gpa);

#endif
