/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_msg: the vhost-user wire format (QEMU docs/interop/
 * vhost-user.rst) as vnicd's back end speaks it, and the table that says,
 * per request, what a well-formed message is.
 *
 * A message is a 12-byte header (request, flags, size; little-endian as
 * the host, x86 here) followed by exactly size payload bytes; fds ride in
 * SCM_RIGHTS with the header's bytes. Nothing here interprets a request:
 * each row of the table names its handler (vhost_user_handlers.c,
 * vhost_user_mem.c), which vhost_user.c calls after vu_msg_check() has
 * bounded the payload size and the fd count by the same row.
 */
#ifndef VNIC_VHOST_USER_MSG_H
#define VNIC_VHOST_USER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Requests, front end -> back end (spec "Front-end message types"). */
enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SEND_RARP = 19,
	VU_NET_SET_MTU = 20,
	VU_SET_BACKEND_REQ_FD = 21,
	VU_IOTLB_MSG = 22,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_CREATE_CRYPTO_SESSION = 26,
	VU_POSTCOPY_ADVISE = 28,
	VU_POSTCOPY_END = 30,
	VU_GET_INFLIGHT_FD = 31,
	VU_SET_INFLIGHT_FD = 32,
	VU_RESET_DEVICE = 34,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_STATUS = 39,
	VU_GET_STATUS = 40,
	VU_GET_SHARED_OBJECT = 41,
	VU_SET_DEVICE_STATE_FD = 42,
	VU_CHECK_DEVICE_STATE = 43,
	VU_REQUEST_MAX = 44,
};

/* Header flags. */
#define VU_FLAG_VERSION_MASK 0x3u
#define VU_VERSION 0x1u
#define VU_FLAG_REPLY (1u << 2)
#define VU_FLAG_NEED_REPLY (1u << 3)

/* Feature bit that enables protocol features (in GET_FEATURES). */
#define VU_F_PROTOCOL_FEATURES 30
/* vhost's VHOST_F_LOG_ALL: log every guest write (live migration). */
#define VU_F_LOG_ALL 26
/* SET_VRING_ADDR flags: VHOST_VRING_F_LOG, log used-ring writes at
 * log_guest_addr. */
#define VU_VRING_F_LOG 0

/* Protocol feature bits. */
#define VU_PROTO_MQ 0
#define VU_PROTO_LOG_SHMFD 1
#define VU_PROTO_RARP 2
#define VU_PROTO_REPLY_ACK 3
#define VU_PROTO_NET_MTU 4
#define VU_PROTO_INFLIGHT_SHMFD 12
#define VU_PROTO_CONFIGURE_MEM_SLOTS 15
#define VU_PROTO_STATUS 16

/* SET_VRING_KICK/CALL/ERR payload: ring index in bits 0-7; bit 8: no fd
 * follows (polling, which vnicd does not do for kicks). */
/* Device status bits (virtio 1.x, 2.1): the one vnicd sets itself. */
#define VU_STATUS_NEEDS_RESET 0x40u

#define VU_VRING_IDX_MASK 0xffull
#define VU_VRING_NOFD (1ull << 8)

#define VU_HDR_SIZE 12u
#define VU_MAX_FDS 8u              /* fds in one message (spec: 8 regions) */
#define VU_MEM_BASELINE_REGIONS 8u /* SET_MEM_TABLE's array */
#define VU_PAYLOAD_MAX 4096u       /* larger than any request we accept */

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
};

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_mem_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uva;
	uint64_t mmap_offset;
};

struct vu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region r[VU_MEM_BASELINE_REGIONS];
};

struct vu_mem_single {
	uint64_t padding;
	struct vu_mem_region r;
};

/* SET_LOG_BASE's payload (with LOG_SHMFD): the log is [mmap_offset,
 * mmap_offset + mmap_size) of the fd that comes with it. */
struct vu_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

/* GET_INFLIGHT_FD's payload and answer, SET_INFLIGHT_FD's payload
 * (INFLIGHT_SHMFD): the region is [mmap_offset, mmap_offset + mmap_size)
 * of the fd, made for num_queues rings of queue_size entries. 24 bytes as
 * QEMU sends it (its struct is padded to 8); 20 carry every field. */
struct vu_inflight {
	uint64_t mmap_size;
	uint64_t mmap_offset;
	uint16_t num_queues;
	uint16_t queue_size;
	uint32_t padding;
};
#define VU_INFLIGHT_MIN_SIZE 20u

/* One received message: header, payload (size bytes), fds (owned). */
struct vu_msg {
	struct vu_hdr hdr;
	union {
		uint64_t u64;
		struct vu_vring_state state;
		struct vu_vring_addr addr;
		struct vu_mem_table mem;
		struct vu_mem_single mreg;
		struct vu_log log;
		struct vu_inflight inflight;
		uint8_t bytes[VU_PAYLOAD_MAX];
	} p;
	int fds[VU_MAX_FDS];
	unsigned nfds;
};

/* The per-request contract: one row per request vnicd accepts, with its
 * handler, so that no row exists without one (as DPDK's vhost_user.c). */
#define VU_ROW_NEEDS_OWNER 1u  /* refused before SET_OWNER */
#define VU_ROW_REPLIES     2u  /* always answered (GET_*), REPLY_ACK or not */
#define VU_ROW_ANSWERED    4u  /* with its protocol feature: always a u64 answer, 0 done,
				  1 refused (SET_LOG_BASE: QEMU waits for one), and a
				  refusal keeps the connection */

struct vu_conn; /* vhost_user_priv.h */

/* A handler returns 0 (done; REPLY_ACK 0 when asked), a negative errno
 * (refused, err filled) or VU_WAIT (vhost_user_priv.h: the answer follows
 * the worker's reap). It checks its payload whole before it changes
 * anything; fds it keeps it sets to -1 in m. */
typedef int (*vu_handler_fn)(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);

struct vu_row_spec {
	const char *name;
	uint32_t min_size, max_size;   /* payload bytes */
	uint8_t min_fds, max_fds;
	int proto_bit;                 /* protocol feature it needs, or -1 */
	unsigned flags;
	vu_handler_fn handler;         /* never NULL (tests/check_vhost_user.c) */
};

/* The handlers, one per row. */
int h_get_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_reset_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_mem_table(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_log_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_addr(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_kick(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_call(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_err(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_queue_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_vring_enable(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_send_rarp(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_net_set_mtu(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_max_mem_slots(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_add_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_rem_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_get_inflight_fd(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);
int h_set_inflight_fd(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);

/* vu_request_spec - the row for a request, or NULL: not one vnicd knows. */
const struct vu_row_spec *vu_request_spec(uint32_t request);

/* A request vnicd has no row for, refused: what its front end is owed.
 * Some requests have an answer the spec makes mandatory, so the front end
 * waits for it whatever NEED_REPLY says; it must get one that says
 * "failed" in that request's own reply type or, where no value of the
 * type says so, see the connection close. Never a peer left waiting. */
enum vu_refusal {
	VU_REFUSE_PLAIN, /* nothing owed: the u64 failure answer with NEED_REPLY only */
	VU_REFUSE_U64,   /* a u64 status reply: the failure answer (1), always */
	VU_REFUSE_EMPTY, /* GET_CONFIG: a zero-length reply is its error */
	VU_REFUSE_CLOSE, /* a value or fd reply that nothing can fake: close */
};
enum vu_refusal vu_unrowed_refusal(uint32_t request);
/* Name for logs ("SET_MEM_TABLE", or "request 99"). */
const char *vu_request_name(uint32_t request, char *buf, size_t len);

/*
 * vu_msg_check - header and fds against the request's row.
 * Returns 0; -ENOSYS for a request vnicd does not know; -EPROTO for a bad
 * version or flags; -EMSGSIZE for a payload size outside the row's range;
 * -EBADF for a wrong fd count. err says which, for one log line.
 */
int vu_msg_check(const struct vu_msg *m, char *err, size_t errlen);

/*
 * Incremental receive on a non-blocking stream socket: a header (with its
 * fds), then its payload. vu_rx keeps the partial message between calls.
 */
struct vu_rx {
	struct vu_msg m;
	size_t have;      /* bytes of header + payload so far */
};

/* vu_rx_reset - close any fds held, forget the partial message. */
void vu_rx_reset(struct vu_rx *rx);
/*
 * vu_recv - read what is there. Returns 1: a whole message is in rx->m
 * (the caller owns its fds; reset before the next call); 0: not yet
 * (EAGAIN); -EPIPE: the peer closed; -EMSGSIZE: size beyond
 * VU_PAYLOAD_MAX; -EBADF: too many fds or fds in the middle of a
 * message; other negative errno: a socket error.
 */
int vu_recv(int fd, struct vu_rx *rx);

/* vu_send_reply - answer m's request with payload (size bytes), no fds;
 * vu_send_reply_fd with send_fd too (not consumed; -1: none). */
int vu_send_reply(int fd, const struct vu_hdr *req, const void *payload, uint32_t size);
int vu_send_reply_fd(int fd, const struct vu_hdr *req, const void *payload, uint32_t size,
		     int send_fd);

#endif
