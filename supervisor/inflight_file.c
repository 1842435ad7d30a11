/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inflight_file: without the fd store, a NIC's inflight region is a file
 * in vnicd's state directory on tmpfs, so that it outlives vnicd (issue
 * 16; see inflight_file.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "inflight.h"
#include "inflight_file.h"
#include "log.h"

#define IF_SUFFIX ".inflight"
#define IF_PREV_SUFFIX ".inflight.prev"

/* Queue j's ring as the region records it, in reserved words no worker
 * writes: desc, avail and used guest-physical addresses. */
#define IF_RING_DESC 0
#define IF_RING_AVAIL 1
#define IF_RING_USED 2

static bool ends_with(const char *s, const char *suffix)
{
	size_t l = strlen(s), sl = strlen(suffix);

	return l > sl && !strcmp(s + l - sl, suffix);
}

static int if_path(const struct sup *s, const char *id, unsigned pair, const char *suffix,
		   char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.pair%u%s", s->state_dir, id, pair, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Files are used: a state directory, no fd store, regions on. */
static bool if_enabled(const struct sup *s)
{
	return s->state_dir && !s->fd_store && !s->inflight_off;
}

void inflight_files_age(struct sup *s)
{
	DIR *d;
	struct dirent *e;
	unsigned kept = 0;

	if (!if_enabled(s) || !(d = opendir(s->state_dir)))
		return;
	/* The generation before the last: never claimed, never will be. */
	while ((e = readdir(d)))
		if (ends_with(e->d_name, IF_PREV_SUFFIX))
			unlinkat(dirfd(d), e->d_name, 0);
	rewinddir(d);
	while ((e = readdir(d))) {
		char prev[NAME_MAX + 16];

		if (!ends_with(e->d_name, IF_SUFFIX) ||
		    snprintf(prev, sizeof(prev), "%s.prev", e->d_name) >= (int)sizeof(prev))
			continue;
		if (renameat(dirfd(d), e->d_name, dirfd(d), prev) == 0)
			kept++;
	}
	closedir(d);
	if (kept)
		log_info("inflight regions left by the previous vnicd: %u, in %s (each resumes "
			 "when its NIC comes back on the same rings)", kept, s->state_dir);
}

void inflight_file_unlink(const struct sup *s, const char *id, unsigned pair)
{
	char path[PATH_MAX];

	if (s->state_dir && if_path(s, id, pair, IF_SUFFIX, path, sizeof(path)) == 0)
		unlink(path);
}

/*
 * May the first worker after vnicd's restart resume on the region the
 * previous vnicd's worker left? Only when it was written for these very
 * rings (same sizes and guest-physical addresses) and what the guest
 * shows agrees: its used->idx at the committed used position, or ahead
 * of it by no more than was in flight. A VMM that reset the device while
 * vnicd was down fails one of these (new rings, used index 0), and the
 * region then starts fresh. The region is the last worker's (hostile):
 * only read here, every value bounded.
 */
static bool if_matches(void *p, size_t len, const struct nic_spec *spec, const unsigned *qs,
		       char *why, size_t whylen)
{
	struct inflight_queue *q[NIC_NUM_QUEUES];
	char sub[100];

	if (inflight_region_check(p, len, NIC_NUM_QUEUES, qs, q, sub, sizeof(sub)) < 0) {
		snprintf(why, whylen, "%s", sub);
		return false;
	}
	for (unsigned j = 0; j < NIC_NUM_QUEUES; j++) {
		const struct nic_queue_spec *r = &spec->queues[j];
		unsigned slot = r->index % NIC_NUM_QUEUES;
		struct inflight_queue *iq = q[slot];
		uint64_t avail = iq->avail_seq, used = iq->used_seq;
		uint16_t guest_used;

		if (iq->reserved[IF_RING_DESC] != r->desc || iq->reserved[IF_RING_AVAIL] != r->avail ||
		    iq->reserved[IF_RING_USED] != r->used) {
			snprintf(why, whylen, "queue %u's ring is not the one it was written for",
				 r->index);
			return false;
		}
		if (iq->state != INFLIGHT_QUEUE_LIVE)
			continue;
		if (used > avail || avail - used > qs[slot] ||
		    sup_read_guest_u16(spec->regions, spec->nregions, r->used + 2, &guest_used) < 0 ||
		    (uint16_t)(guest_used - (uint16_t)used) > avail - used) {
			snprintf(why, whylen, "queue %u: the guest's used index is not where the "
				 "region left it", r->index);
			return false;
		}
	}
	return true;
}

int inflight_file_open(struct sup *s, const struct nic_spec *spec, int *ret_fd, size_t *ret_len,
		       char *err, size_t errlen)
{
	unsigned qs[NIC_NUM_QUEUES];
	size_t len, flen;
	char path[PATH_MAX], prev[PATH_MAX], why[160] = "";
	bool resume;
	struct statfs sfs;
	struct stat st;
	void *p;
	int fd;

	*ret_fd = -1;
	*ret_len = 0;
	if (!if_enabled(s) || spec->nqueues != NIC_NUM_QUEUES)
		return 0;
	/* Slot order: rx (even index) first, as the NIC keeps them. */
	for (unsigned j = 0; j < NIC_NUM_QUEUES; j++)
		qs[spec->queues[j].index % NIC_NUM_QUEUES] = spec->queues[j].size;
	len = inflight_region_size(NIC_NUM_QUEUES, qs);
	flen = inflight_region_pages(NIC_NUM_QUEUES, qs);
	if (len == 0 || if_path(s, spec->id, spec->pair, IF_SUFFIX, path, sizeof(path)) ||
	    if_path(s, spec->id, spec->pair, IF_PREV_SUFFIX, prev, sizeof(prev)))
		return 0;
	/* The previous vnicd's region (inflight_files_age) is this NIC's to
	 * resume, once: taking it renames it back. */
	resume = rename(prev, path) == 0;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		static struct log_ratelimit rl = LOG_RATELIMIT_INIT(3600000, 1);

		log_ratelimited(&rl, LOG_LEVEL_INFO, "inflight regions stay in memory: %s is %s",
				s->state_dir, fd < 0 ? strerror(errno)
				: "not on tmpfs (they would not outlive vnicd)");
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		return 0;
	}
	if ((uint64_t)st.st_size != flen) {
		resume = false;
		if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)flen) < 0) {
			snprintf(err, errlen, "inflight region %s: %s", path, strerror(errno));
			close(fd);
			return -EIO;
		}
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "inflight region %s: mmap: %s", path, strerror(errno));
		close(fd);
		return -EIO;
	}
	if (resume && if_matches(p, len, spec, qs, why, sizeof(why))) {
		log_info("nic %s: pair %u resumes on the inflight region the previous vnicd left "
			 "(%s)", spec->id, spec->pair, path);
	} else {
		struct inflight_queue *q[NIC_NUM_QUEUES];
		char sub[100];

		if (resume)
			log_info("nic %s: pair %u: the inflight region the previous vnicd left is not "
				 "used: %s", spec->id, spec->pair, why);
		inflight_region_init(p, len, NIC_NUM_QUEUES, qs);
		inflight_region_check(p, len, NIC_NUM_QUEUES, qs, q, sub, sizeof(sub));
		for (unsigned j = 0; j < NIC_NUM_QUEUES; j++) {
			const struct nic_queue_spec *r = &spec->queues[j];
			struct inflight_queue *iq = q[r->index % NIC_NUM_QUEUES];

			iq->reserved[IF_RING_DESC] = r->desc;
			iq->reserved[IF_RING_AVAIL] = r->avail;
			iq->reserved[IF_RING_USED] = r->used;
		}
	}
	munmap(p, len);
	*ret_fd = fd;
	*ret_len = len;
	return 0;
}
