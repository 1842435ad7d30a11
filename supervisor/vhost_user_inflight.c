/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_inflight: the inflight region a front end keeps for its back
 * end (VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD; issue 16).
 *
 * GET_INFLIGHT_FD asks vnicd for a region made for num_queues rings of
 * queue_size entries; the front end keeps the fd and sends it back with
 * SET_INFLIGHT_FD whenever it (re)connects, before it starts the rings. A
 * front end that does so gets every chain a worker popped returned
 * exactly once even across vnicd's own death with no fd store: the region
 * outlives vnicd in the front end's hands, and a new worker recovers from
 * it as a worker restarted after a crash does (shm/inflight.h).
 *
 * Layout (the spec leaves it to the back end): one block per queue pair,
 * each the region of shm/inflight.h for the pair's two rings, rounded up
 * to the page size, pair k's at k x block. A worker maps only its own
 * pair's block. An all-zero block (a front end that cleared the region,
 * as QEMU does to reset one) is a fresh one and is initialised at start.
 *
 * Hostile input (TESTPLAN C13), with the anchors' CVEs in mind:
 * num_queues and queue_size are bounded before any size is computed
 * (CVE-2021-3839: unchecked num_queues); SET takes exactly one fd and the
 * message table closes any other (CVE-2022-0669); a connection holds at
 * most one region, so a GET flood replaces one memfd by another and holds
 * no more (GHSA-whmr-hj5c-pm9g). A refused GET is answered with
 * mmap_size 0 and no fd, which QEMU reads as "no region", and the
 * connection stays.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inflight.h"
#include "log.h"
#include "sealed_memfd.h"
#include "validate.h"
#include "vhost_user_priv.h"

static uint64_t page_size(void)
{
	return (uint64_t)sysconf(_SC_PAGESIZE);
}

int vu_inflight_geometry(unsigned nq, unsigned qsize, unsigned nrings, char *err, size_t errlen)
{
	/* CVE-2021-3839: the count bounds every block computed from it. */
	if (nq < NIC_NUM_QUEUES || nq % NIC_NUM_QUEUES || nq > nrings) {
		snprintf(err, errlen, "num_queues %u: need an even count in 2..%u (the rings of "
			 "whole queue pairs this endpoint serves)", nq, nrings);
		return -EINVAL;
	}
	if (qsize == 0 || qsize > 32768 || (qsize & (qsize - 1))) {
		snprintf(err, errlen, "queue_size %u: need a power of 2 in 1..32768", qsize);
		return -EINVAL;
	}
	return 0;
}

/* Bytes of one pair's block: its region, rounded up to a page. */
static uint64_t vu_inflight_block(unsigned qsize)
{
	unsigned qs[NIC_NUM_QUEUES] = { qsize, qsize };

	return inflight_region_pages(NIC_NUM_QUEUES, qs);
}

uint64_t vu_inflight_size(unsigned nq, unsigned qsize)
{
	return (uint64_t)(nq / NIC_NUM_QUEUES) * vu_inflight_block(qsize);
}

/* Is [p, p + len) all zero (a cleared region)? */
static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Pair block k of the region in fd at base: map it, and with init an
 * all-zero block is initialised (else it is only accepted); a block with
 * a header must be the region of shm/inflight.h for two rings of qsize.
 * Returns 0, or -EINVAL with err filled.
 */
static int vu_inflight_block_check(int fd, uint64_t base, unsigned k, unsigned qsize, bool init,
				   char *err, size_t errlen)
{
	unsigned qs[NIC_NUM_QUEUES] = { qsize, qsize };
	size_t len = inflight_region_size(NIC_NUM_QUEUES, qs);
	uint64_t off = base + (uint64_t)k * vu_inflight_block(qsize);
	struct inflight_queue *q[NIC_NUM_QUEUES];
	char sub[100];
	void *p;
	int rc = 0;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "pair %u's block: mmap: %s", k, strerror(errno));
		return -EINVAL;
	}
	if (all_zero(p, sizeof(struct inflight_header))) {
		if (init)
			rc = inflight_region_init(p, len, NIC_NUM_QUEUES, qs);
	} else if (inflight_region_check(p, len, NIC_NUM_QUEUES, qs, q, sub, sizeof(sub)) < 0) {
		snprintf(err, errlen, "pair %u's block is not a region vnicd made for rings of %u: "
			 "%s", k, qsize, sub);
		rc = -EINVAL;
	}
	munmap(p, len);
	return rc;
}

/* The front end's answer to a refused GET: no region (mmap_size 0, no fd;
 * QEMU goes on without one). */
static int vu_inflight_refuse_get(struct vu_conn *c, struct vu_msg *m, const char *why)
{
	struct vu_inflight none = { .num_queues = m->p.inflight.num_queues,
				    .queue_size = m->p.inflight.queue_size };

	c->ep->rejected++;
	vu_errorf(c->ep, "GET_INFLIGHT_FD: %s", why);
	log_ratelimited(&vu_rl, LOG_LEVEL_WARN, "vhost-user %s: refused: GET_INFLIGHT_FD: %s",
			c->ep->cfg.id, why);
	return vu_send_reply(c->fd, &m->hdr, &none, sizeof(none));
}

/* The connection's region is fd (owned) from now on; the old one closed. */
static void vu_inflight_set(struct vu_conn *c, int fd, uint64_t size, uint64_t offset,
			    unsigned nq, unsigned qsize)
{
	close_fd(&c->inflight_fd);
	c->inflight_fd = fd;
	c->inflight_size = size;
	c->inflight_offset = offset;
	c->inflight_nq = (uint16_t)nq;
	c->inflight_qsize = (uint16_t)qsize;
}

int h_get_inflight_fd(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_inflight *in = &m->p.inflight;
	struct vu_inflight out;
	char sub[200];
	uint64_t size;
	void *p;
	int fd, rc;

	(void)err;
	(void)errlen;
	if (vu_inflight_geometry(in->num_queues, in->queue_size, c->nrings, sub, sizeof(sub)) < 0)
		return vu_inflight_refuse_get(c, m, sub);
	/* A running worker writes the current region: it stays. */
	if (vu_any_nic(c->ep))
		return vu_inflight_refuse_get(c, m, "the device runs (a region is asked for "
					      "before the rings start)");
	size = vu_inflight_size(in->num_queues, in->queue_size);
	/* Sealed against shrinking and growing: no one can cut it under a
	 * worker that maps it (SIGBUS). Zero-filled: every block fresh. */
	fd = sealed_memfd_map("vnic-inflight", size, &p, "inflight region", sub, sizeof(sub));
	if (fd < 0)
		return vu_inflight_refuse_get(c, m, sub);
	for (unsigned k = 0; k < in->num_queues / NIC_NUM_QUEUES; k++) {
		unsigned qs[NIC_NUM_QUEUES] = { in->queue_size, in->queue_size };

		inflight_region_init((uint8_t *)p + k * vu_inflight_block(in->queue_size),
				     inflight_region_size(NIC_NUM_QUEUES, qs), NIC_NUM_QUEUES, qs);
	}
	munmap(p, size);
	out = (struct vu_inflight){ .mmap_size = size, .mmap_offset = 0,
				    .num_queues = in->num_queues, .queue_size = in->queue_size };
	rc = vu_send_reply_fd(c->fd, &m->hdr, &out, sizeof(out), fd);
	if (rc) {
		close(fd);
		return rc;
	}
	/* One region per connection: a second GET replaces the first
	 * (GHSA-whmr-hj5c-pm9g: a flood holds one memfd, not one each). */
	vu_inflight_set(c, fd, size, 0, in->num_queues, in->queue_size);
	log_ratelimited(&c->ep->msg_rl, LOG_LEVEL_INFO,
			"vhost-user %s: inflight region made: %u rings of %u, %llu bytes",
			c->ep->cfg.id, in->num_queues, in->queue_size, (unsigned long long)size);
	return 0;
}

int h_set_inflight_fd(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_inflight *in = &m->p.inflight;
	uint64_t size;
	char sub[256];
	int rc;

	rc = vu_inflight_geometry(in->num_queues, in->queue_size, c->nrings, sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "SET_INFLIGHT_FD: %s", sub);
		return rc;
	}
	size = vu_inflight_size(in->num_queues, in->queue_size);
	if (in->mmap_size != size || in->mmap_offset % page_size()) {
		snprintf(err, errlen, "SET_INFLIGHT_FD: %llu bytes at offset %llu: a region for %u "
			 "rings of %u is %llu bytes at a page boundary",
			 (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset,
			 in->num_queues, in->queue_size, (unsigned long long)size);
		return -EINVAL;
	}
	if (vu_any_nic(c->ep)) {
		snprintf(err, errlen, "SET_INFLIGHT_FD: the device runs (the region is set before "
			 "the rings start)");
		return -EBUSY;
	}
	/* A memfd sealed against shrinking, open read-write, and long
	 * enough: what a worker can map without a SIGBUS. */
	rc = validate_shared_memfd("inflight region", m->fds[0], size, in->mmap_offset,
				   VALIDATE_INFLIGHT_MAX, sub, sizeof(sub));
	for (unsigned k = 0; rc == 0 && k < in->num_queues / NIC_NUM_QUEUES; k++)
		rc = vu_inflight_block_check(m->fds[0], in->mmap_offset, k, in->queue_size, false,
					     sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "SET_INFLIGHT_FD: %s", sub);
		return -EINVAL;
	}
	vu_inflight_set(c, m->fds[0], size, in->mmap_offset, in->num_queues, in->queue_size);
	m->fds[0] = -1;
	log_ratelimited(&c->ep->msg_rl, LOG_LEVEL_INFO,
			"vhost-user %s: the front end's inflight region: %u rings of %u",
			c->ep->cfg.id, in->num_queues, in->queue_size);
	return 0;
}

int vu_inflight_for_pair(struct vu_conn *c, unsigned k, struct nic_spec *spec, char *err,
			 size_t errlen)
{
	unsigned qsize = c->inflight_qsize, qs[NIC_NUM_QUEUES] = { qsize, qsize };
	int rc;

	spec->inflight_len = 0;
	if (c->inflight_fd < 0 || k >= c->inflight_nq / NIC_NUM_QUEUES)
		return 0; /* vnicd's own region (nic.c: a memfd, or a state file) */
	for (unsigned j = 0; j < NIC_NUM_QUEUES; j++)
		if (c->r[2 * k + j].num != qsize) {
			snprintf(err, errlen, "ring %u has %u entries, the inflight region was made "
				 "for %u", 2 * k + j, c->r[2 * k + j].num, qsize);
			return -EINVAL;
		}
	rc = vu_inflight_block_check(c->inflight_fd, c->inflight_offset, k, qsize, true, err,
				     errlen);
	if (rc)
		return rc;
	spec->inflight_fd = dup_cloexec(c->inflight_fd);
	if (spec->inflight_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "dup: %s", strerror(-rc));
		return rc;
	}
	spec->inflight_len = inflight_region_size(NIC_NUM_QUEUES, qs);
	spec->inflight_off = c->inflight_offset + (uint64_t)k * vu_inflight_block(qsize);
	return 0;
}
