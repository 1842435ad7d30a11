/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * validate: every check an AddNic request must pass before the supervisor
 * changes any state (TESTPLAN C4-C7, C9, C10, F1).
 *
 * The request arrives as protobuf; vmm_handlers.c decodes it into a struct
 * nic_spec (plain C, fds borrowed from the frame) and validate_nic_spec()
 * checks it as a whole. Nothing here keeps a pointer, opens, closes or
 * logs: a function returns 0 or a negative errno and writes a reason a
 * person can read into err.
 *
 * The supervisor never maps guest memory, so ring addresses are checked
 * against the region descriptors only (validate_ring_addrs).
 */
#ifndef VNIC_VALIDATE_H
#define VNIC_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libvnic.h"
#include "memtable.h"
#include "virtio_net.h"
#include "worker_abi.h"

/* sup_errf - print fmt into err (when err and errlen) and return rc: the
 * one way vnicd's validators and backend openers say why. */
int sup_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Longest NIC id, without the terminating NUL. Ids are also used in log
 * lines and in the worker's argv, so they are short and printable. */
#define VALIDATE_ID_MAX 64


/* MTU range: IPv4 minimum (RFC 791: 68) to the largest value virtio-net's
 * 16-bit config field can carry (virtio 5.1.4: mtu is le16). */
#define VALIDATE_MTU_MIN 68u
#define VALIDATE_MTU_MAX 65535u



/* TX mitigation policies are libvnic.h's struct vnic_policy and enum
 * vnic_mitigation, the one contract (proto/policy_pb.h converts). The
 * mode is kept as sent, so validate_policy can refuse an unknown one. */
/* Work per wake-up a policy may ask for: a whole queue, 64 MiB. More would
 * let one queue starve the others and the control channel (G21). */
#define NIC_POLICY_MAX_BUDGET_PKTS 32768u
#define NIC_POLICY_MAX_BUDGET_BYTES (64u * 1024u * 1024u)

/* One virtqueue as the VMM configures it. */
struct nic_queue_spec {
	uint32_t index;      /* as sent; must be looked up with nic_queue_slot() */
	uint32_t size;
	uint64_t desc, avail, used;   /* guest physical addresses */
	uint32_t avail_idx;           /* first avail index, <= 0xffff */
	int kick_fd, call_fd;         /* borrowed */
	bool polled;                  /* vhost-user: no kicks come (worker.proto polled_queues) */
};

struct worker_spare;

/* An AddNic request in plain C. Every fd is borrowed from the frame. */
struct nic_spec {
	char id[VALIDATE_ID_MAX + 1];
	size_t id_len;               /* as sent, to reject overlong ids */
	bool id_has_nul;             /* an embedded NUL in the sent bytes */
	uint8_t mac[6];
	size_t mac_len;              /* as sent: must be 6 */
	uint32_t mtu;                /* 0 was already replaced by the default */
	uint64_t features_offered;   /* what the VMM offered the guest */
	uint64_t features;           /* what the guest acked */
	unsigned nregions;
	struct memtable_region_desc *regions; /* nregions, borrowed */
	uint32_t pair;               /* the queue pair this NIC serves (issue 15): its
				      * queues are virtqueues 2 x pair, 2 x pair + 1 */
	bool tap_multi;              /* backend TAP, one pair of several: a queue of a
				      * multi-queue tap */
	unsigned nqueues;
	struct nic_queue_spec *queues;        /* nqueues, borrowed */
	enum nic_backend_type backend;
	char tap_name[32];           /* tap: interface name, may be empty; af_packet:
				      * the interface to bind, required */
	char netns[64];              /* tap, af_packet: /run/netns/<netns>, empty = ours */
	int backend_fd;              /* socket / tap_fd backend: borrowed, else -1 */
	const int *backend_fds;      /* several pairs: one per pair (backend_fds[0] ==
				      * backend_fd), borrowed; NULL: one pair */
	unsigned nbackend;
	bool memory_unsealed_ok;     /* vhost-user: MEMTABLE_UNSEALED_OK (memtable.h) */
	bool base_from_used_idx;     /* vhost-user: see worker.proto Config */
	int log_fd;                  /* dirty log (worker.proto Config), borrowed; */
	                             /*   meaningful only when log_size > 0 */
	uint64_t log_size, log_offset; /* validate_nic_spec: as validate_dirty_log, and the */
	                             /*   log covers every region (validate_log_covers) */
	/* The inflight region a vhost-user front end keeps (INFLIGHT_SHMFD):
	 * meaningful only when inflight_len > 0; borrowed, a page-aligned
	 * block of inflight_len bytes at inflight_off, initialised and
	 * checked by its owner (vhost_user_inflight.c). 0: vnicd's own
	 * region in the stats memfd. */
	int inflight_fd;
	uint64_t inflight_off;
	size_t inflight_len;
	struct vnic_policy policy;
	/* Not from the wire: a vhost-user connection's pre-started worker
	 * (worker_spare.h), which the first launch takes when it can; NULL:
	 * spawn one. */
	struct worker_spare *spare;
};

/*
 * validate_nic_offered - feature bits this supervisor offers for a backend.
 * VERSION_1, EVENT_IDX, INDIRECT_DESC, MRG_RXBUF, MAC, MTU always; the
 * checksum, TSO and UFO bits only with a tap backend (a socket backend carries
 * the virtio-net header but nothing on the other side would honour it).
 */
uint64_t validate_nic_offered(enum nic_backend_type backend);

/* nic_queue_slot - the one lookup from a queue index as sent to the slot
 * in the queue array of a NIC that is queue pair @pair (issue 15: its
 * queues are virtqueues 2 x pair and 2 x pair + 1; STYLE habit 4).
 * Returns: 0..NIC_NUM_QUEUES-1, or -1 when idx is not a queue of this NIC
 * (C4: any u32 at all). */
int nic_queue_slot(uint32_t pair, uint32_t idx);

int validate_nic_id(const char *id, size_t len, bool has_nul, char *err, size_t errlen);
int validate_mac(const uint8_t *mac, size_t len, char *err, size_t errlen);
int validate_mtu(uint32_t mtu, char *err, size_t errlen);
int validate_features(uint64_t features, enum nic_backend_type backend,
		      char *err, size_t errlen);
/* Interface name: 1..IFNAMSIZ-1 bytes, no '/', ':', whitespace, not "."/"..". */
int validate_ifname(const char *name, char *err, size_t errlen);
/* Network namespace name as `ip netns` makes them: one path component. */
int validate_netns_name(const char *name, char *err, size_t errlen);
/* A policy for AddNic or SetPolicy: -EINVAL for an unknown mode or a
 * parameter out of its bounds (workers/policy.h; 0 = the default), err
 * naming it. Every mode is implemented. */
int validate_policy(const struct vnic_policy *p, char *err, size_t errlen);

/*
 * validate_ring_addrs - spec 2.7 ring placement, checked against the
 * region descriptors only (TESTPLAN C5, C7).
 * @num: a power of 2 in 1..VRING_MAX_SIZE. Each of desc/avail/used is
 * aligned 16/2/4, does not wrap, lies wholly inside one region, and the
 * three do not overlap each other.
 */
int validate_ring_addrs(const struct memtable_region_desc *r, unsigned nr,
			uint32_t num, uint64_t desc, uint64_t avail, uint64_t used,
			char *err, size_t errlen);

/* validate_eventfd - fd is open and is an eventfd (F1). */
int validate_eventfd(int fd, char *err, size_t errlen);

/* validate_tap_fd - fd is a tap (TUNGETIFF) with IFF_TAP, IFF_NO_PI and
 * IFF_VNET_HDR (F1: "non-tap fd as the tap"). */
int validate_tap_fd(int fd, char *err, size_t errlen);

/* validate_backend_socket - fd is an AF_UNIX socket of type SOCK_SEQPACKET
 * or SOCK_DGRAM (one frame per packet) (F1). */
int validate_backend_socket(int fd, char *err, size_t errlen);

/*
 * validate_nic_spec - every check above, in order, over the whole request.
 * Does not look at other NICs (the duplicate id check needs the table and
 * is the caller's), does not open the tap.
 * Returns: 0, or -EINVAL / -EBADF / -E2BIG / -ENOTSUP with err filled.
 */
int validate_nic_spec(const struct nic_spec *s, char *err, size_t errlen);

/*
 * validate_nic_pairs - an AddNic of several queue pairs (issue 15), before
 * it is split into one spec per pair (each then passes validate_nic_spec):
 * an even number of queues, 4..2 x max_pairs, each index 0..nqueues-1
 * given once, and a tap by name as the backend or a socket or tap fd per
 * pair.
 * Returns: 0 and *ret_npairs, or -EINVAL with err filled.
 */
int validate_nic_pairs(const struct nic_spec *s, unsigned max_pairs, unsigned *ret_npairs,
		       char *err, size_t errlen);

/* validate_dirty_log - a dirty log from a front end (issue 14): size in
 * 1..VALIDATE_LOG_MAX, offset + size without overflow, fd a regular file on
 * tmpfs (a memfd) sealed with F_SEAL_SHRINK (so it can never become shorter
 * under a worker that maps it) and at least offset + size bytes by fstat.
 * Nothing is closed. Returns 0, or -EINVAL with err filled. */
#define VALIDATE_LOG_MAX (1ull << 30) /* 1 GiB of log: 32 TiB of guest memory */
int validate_dirty_log(int fd, uint64_t size, uint64_t offset, char *err, size_t errlen);
/* validate_shared_memfd - the same rules for any memfd a front end hands
 * over for a worker to map (what: its name in err), size in 1..max. */
int validate_shared_memfd(const char *what, int fd, uint64_t size, uint64_t offset, uint64_t max,
			  char *err, size_t errlen);
/* A front end's inflight region (INFLIGHT_SHMFD): every pair's block
 * (under 1 MiB at 32768 entries) for NIC_MAX_PAIRS pairs. */
#define VALIDATE_INFLIGHT_MAX ((uint64_t)NIC_MAX_PAIRS << 20)

/* validate_log_covers - a log of log_size bytes (one bit per
 * VALIDATE_LOG_PAGE of guest physical memory, from address 0) has a bit for
 * the last page of every region: vhost-user's rule that the log "covers
 * all known guest addresses". Returns 0, or -EINVAL with err filled. */
#define VALIDATE_LOG_PAGE 4096ull
int validate_log_covers(const struct memtable_region_desc *r, unsigned nr, uint64_t log_size,
			char *err, size_t errlen);

#endif
