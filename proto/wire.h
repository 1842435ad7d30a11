/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire: frames of the two control channels (VMM <-> supervisor and
 * supervisor <-> worker).
 *
 * Transport: AF_UNIX SOCK_SEQPACKET. A frame is ONE seqpacket message:
 *
 *     u32 length, big-endian | length bytes of a packed protobuf-c message
 *
 * with its fds in SCM_RIGHTS ancillary data of the same message. Why
 * seqpacket: the fds belong to exactly one frame, there is no reassembly
 * state, and the kernel flags an oversized frame (MSG_TRUNC) or too many
 * fds (MSG_CTRUNC). The length prefix is kept, and must equal the payload
 * actually received, so the format is the documented one and a stream
 * transport could reuse it.
 *
 * Receive checks, in order, each before anything is allocated for the
 * payload (TESTPLAN C1, C2; STYLE habits 2 and 3):
 *   1. the message fits the channel's maximum (a buffer of max + 5 bytes
 *      shows MSG_TRUNC for anything longer) and its fds fit the fds the
 *      receiver accepts (MSG_CTRUNC otherwise);
 *   2. at least the 4-byte prefix; prefix <= channel max; prefix == bytes
 *      received after it;
 *   3. protobuf-c unpack through an allocator capped at
 *      WIRE_UNPACK_MEM_MAX bytes in all (a 200 KB frame of empty repeated
 *      entries cannot turn into megabytes of structs);
 *   4. the envelope has a known arm, sent in the right direction; every
 *      string field, at any depth, is valid UTF-8 without a NUL byte,
 *      checked on the wire bytes (wire_check_strings: protobuf-c's copies
 *      are NUL-terminated and would hide an embedded NUL);
 *   5. the fd count equals exactly what the message type requires
 *      (wire_vmm_expected_fds / wire_worker_expected_fds).
 * Any failure closes EVERY fd the frame carried.
 *
 * Zero-length payload (prefix 0): a valid frame (STYLE habit 2); it
 * unpacks to an envelope with no arm set, which step 4 rejects. A
 * zero-byte seqpacket message (no prefix at all) cannot be told apart from
 * end of file and is treated as the peer closing (-EPIPE).
 *
 * Errors are a negative errno and a line for a person in struct wire_err:
 *   -EAGAIN   nothing to read (non-blocking socket)
 *   -EPIPE    the peer closed
 *   -EMSGSIZE frame or prefix above the channel maximum, or the unpacked
 *             message above WIRE_UNPACK_MEM_MAX
 *   -ENOBUFS  more fds than the receiver accepts for any message (CTRUNC)
 *   -EBADMSG  malformed: shorter than the prefix, prefix mismatch, not a
 *             valid protobuf message, envelope with no known arm, or a
 *             control message other than SCM_RIGHTS
 *   -EPROTO   well-formed but not allowed: wrong direction, or an fd count
 *             that differs from the message type's
 *   -EMFILE   (VMM channel) the frame's fds were cut by the kernel although
 *             the sender stayed within the limit: this process is out of
 *             file descriptors; has_request_id is set for a Request, so it
 *             can be answered (RESOURCE_EXHAUSTED), not the peer's fault
 *   -ENOMEM   out of memory
 *
 * Messages are initialised with the generated *__init() functions (the
 * *__INIT macros trip -Wcast-qual) and received messages are freed with
 * wire_vmm_free()/wire_worker_free(), never protobuf_c_message_free_unpacked
 * with the default allocator.
 *
 * Library code: no logging, no libevent.
 */
#ifndef VNIC_WIRE_H
#define VNIC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "fdpass.h"
#include "vmm.pb-c.h"
#include "worker.pb-c.h"

/* Bytes of the big-endian length prefix. */
#define WIRE_HDR_LEN 4u

/* Largest payload per channel. Large enough for an AddNic at the fd limit
 * (a few hundred regions and queues take ~20 KB) and for a page of status;
 * small enough that one frame buffer per connection is cheap. */
#define WIRE_VMM_MSG_MAX (256u * 1024u)
#define WIRE_WORKER_MSG_MAX (256u * 1024u)

/* Most fds in one frame: SCM_MAX_FD (see fdpass.h). */
#define WIRE_MAX_FDS FDPASS_MAX_FDS

/* Most bytes protobuf-c may allocate while unpacking one frame. A legit
 * frame needs a small multiple of its size; 4 MiB covers the largest
 * status page with room to spare. */
#define WIRE_UNPACK_MEM_MAX (4u * 1024u * 1024u)

/* The VMM protocol version this tree speaks (Request.version, Hello). */
#define WIRE_VMM_VERSION 1u

/* Who sent a frame: selects the arms a receiver accepts and how many fds
 * it makes room for. */
enum wire_peer {
	WIRE_PEER_VMM,        /* on the VMM channel: Requests, up to WIRE_MAX_FDS fds */
	WIRE_PEER_SUPERVISOR, /* VMM channel: Replies, Events, 0 fds;
	                         worker channel: Config, Start, Stop, up to WIRE_MAX_FDS */
	WIRE_PEER_WORKER,     /* worker channel: Ready, Stopped, QueueBroken, Log, Error; 0 fds */
};

/* The fds of one frame, in frame order. An entry the caller adopted is
 * set to -1 by the caller; wire_fds_close() closes the rest. */
struct wire_fds {
	int fd[WIRE_MAX_FDS];
	unsigned n;
};

/* One received frame. */
struct wire_frame {
	uint8_t *buf;           /* owned: prefix and payload */
	const uint8_t *payload; /* buf + WIRE_HDR_LEN */
	size_t len;             /* payload bytes (== the prefix) */
	struct wire_fds fds;
};

/* Why a receive failed, for a log line or a Reply.error. */
struct wire_err {
	int code;             /* the negative errno returned */
	bool has_request_id;  /* a Request unpacked, then was rejected (fd count):
	                         the supervisor can answer request_id */
	uint64_t request_id;
	char msg[192];
};

/* Where each fd of an AddNic or a Config sits in the frame. */
struct wire_fd_layout {
	unsigned nregions; /* regions[i]'s memfd is fd i */
	unsigned queue0;   /* queues[j]: kick at queue0 + 2j, call at queue0 + 2j + 1 */
	unsigned nqueues;
	int backend;       /* backend fd index, -1 if none */
	unsigned nbackend; /* backend fds from there: one per queue pair (issue 15), or 0 */
	int stats;         /* Config only: stats page (and inflight region) memfd index, -1 if none */
	int inflight;      /* Config only: inflight region's memfd index (stats: in that one), -1 if none */
	int log;           /* Config only: dirty log memfd index, -1 if none */
	unsigned total;    /* exact fd count of the frame */
};

static inline unsigned wire_fd_kick(const struct wire_fd_layout *l, unsigned j)
{
	return l->queue0 + 2 * j;
}

static inline unsigned wire_fd_call(const struct wire_fd_layout *l, unsigned j)
{
	return l->queue0 + 2 * j + 1;
}

/* wire_fds_close - close every fd >= 0 in the set and empty it. */
void wire_fds_close(struct wire_fds *fds);

/*
 * wire_send - pack m and send it as one frame with nfds fds.
 * @max: the channel's payload maximum; a larger message is not sent.
 * The fds are not consumed. Never raises SIGPIPE.
 * Returns: 0; -EMSGSIZE (packed size > max); -EINVAL/-EBADF (fd list);
 * -EAGAIN (non-blocking socket full: nothing was sent, retry later);
 * -ENOMEM; or another negative errno from sendmsg() (-EPIPE: peer gone).
 */
int wire_send(int sock, const ProtobufCMessage *m, size_t max,
	      const int *fds, unsigned nfds);

/*
 * wire_recv_frame - receive one frame: checks 1 and 2 above.
 * @max: the channel's payload maximum. @max_fds: the most fds accepted.
 * Returns: 0 and *ret_f (release with wire_frame_release), or a negative
 * errno with err filled (err may be NULL); on failure no fd stays open and
 * *ret_f is untouched.
 */
int wire_recv_frame(int sock, size_t max, unsigned max_fds,
		    struct wire_frame *ret_f, struct wire_err *err);

/* wire_frame_release - free the buffer and close the fds still in f. */
void wire_frame_release(struct wire_frame *f);

/*
 * wire_vmm_unpack - unpack a VMM-channel frame: checks 3 to 5 above.
 * @from: WIRE_PEER_VMM (the supervisor receiving) or WIRE_PEER_SUPERVISOR
 *        (libvnic receiving).
 * On success *ret_m is the message (free with wire_vmm_free) and the
 * frame's fds stay in f->fds, in the order documented in vmm.proto, for
 * the caller to adopt. On failure every fd in f is closed, *ret_m is
 * untouched and err (may be NULL) says why.
 * A Request, Reply or Event whose body this version does not know unpacks
 * with its body case unset and 0 fds expected; the receiver decides (the
 * supervisor answers STATUS_UNIMPLEMENTED; a client ignores the event).
 */
int wire_vmm_unpack(struct wire_frame *f, enum wire_peer from,
		    Vnic__Vmm__VmmMessage **ret_m, struct wire_err *err);

/*
 * wire_vmm_recv - wire_recv_frame + wire_vmm_unpack on the VMM channel.
 * On success the frame's fds move to *ret_fds (caller adopts or closes
 * them with wire_fds_close) and *ret_m is the message.
 */
int wire_vmm_recv(int sock, enum wire_peer from, Vnic__Vmm__VmmMessage **ret_m,
		  struct wire_fds *ret_fds, struct wire_err *err);

/* wire_vmm_send - wire_send with WIRE_VMM_MSG_MAX, after checking that
 * nfds is exactly wire_vmm_expected_fds(m) (-EINVAL otherwise). */
int wire_vmm_send(int sock, const Vnic__Vmm__VmmMessage *m,
		  const int *fds, unsigned nfds);

/* wire_vmm_free - free a message from wire_vmm_unpack/recv. Accepts NULL.
 * Returns: NULL. */
Vnic__Vmm__VmmMessage *wire_vmm_free(Vnic__Vmm__VmmMessage *m);

/*
 * wire_vmm_expected_fds - the exact fd count of a VMM-channel message.
 * AddNic: regions + 2 * queues + (1 if backend is socket or tap_fd);
 * every other message: 0.
 * Returns: the count, or -E2BIG if it would exceed WIRE_MAX_FDS (such a
 * message cannot be sent or received), or -EINVAL if the envelope has no
 * arm.
 */
int wire_vmm_expected_fds(const Vnic__Vmm__VmmMessage *m);

/* wire_add_nic_layout - where each fd of an AddNic sits (see vmm.proto).
 * Returns: 0 and *ret, or -E2BIG (more than WIRE_MAX_FDS). */
int wire_add_nic_layout(const Vnic__Vmm__AddNic *a, struct wire_fd_layout *ret);

/* Worker channel: the same as the VMM functions above.
 * @from: WIRE_PEER_SUPERVISOR (the worker receiving) or WIRE_PEER_WORKER
 * (the supervisor receiving; 0 fds accepted). On this channel a message
 * with no body arm set is rejected (-EBADMSG): no version skew is possible. */
int wire_worker_unpack(struct wire_frame *f, enum wire_peer from,
		       Vnic__Worker__WorkerMessage **ret_m, struct wire_err *err);
int wire_worker_recv(int sock, enum wire_peer from,
		     Vnic__Worker__WorkerMessage **ret_m,
		     struct wire_fds *ret_fds, struct wire_err *err);
int wire_worker_send(int sock, const Vnic__Worker__WorkerMessage *m,
		     const int *fds, unsigned nfds);
Vnic__Worker__WorkerMessage *wire_worker_free(Vnic__Worker__WorkerMessage *m);

/*
 * wire_worker_expected_fds - the exact fd count of a worker-channel message.
 * Config: regions + 2 * queues + 1 (backend) + 1 (stats page)
 * + 1 (inflight region, only when inflight_size > 0) + 1 (dirty log, only
 * when log_size > 0); SetDirtyLog: 1 when size > 0, else 0; others: 0.
 * Returns: the count, -E2BIG (above WIRE_MAX_FDS), or -EINVAL (no arm, or
 * a Config without a backend kind).
 */
int wire_worker_expected_fds(const Vnic__Worker__WorkerMessage *m);

/* wire_config_layout - where each fd of a Config sits (see worker.proto).
 * Returns: 0 and *ret, -E2BIG or -EINVAL as above. */
int wire_config_layout(const Vnic__Worker__Config *c, struct wire_fd_layout *ret);

/*
 * wire_region_pb, wire_queue_pb - initialise and fill one MemRegion or
 * Queue (vmm.proto), as AddNic (libvnic) and Config (the supervisor) both
 * carry them. Their fds travel apart, in the order wire_add_nic_layout and
 * wire_config_layout give.
 */
void wire_region_pb(Vnic__Vmm__MemRegion *pb, uint64_t gpa, uint64_t size, uint64_t offset);
void wire_queue_pb(Vnic__Vmm__Queue *pb, uint32_t index, uint32_t size, uint64_t desc_gpa,
		   uint64_t avail_gpa, uint64_t used_gpa, uint32_t avail_idx);

/* Most regions a Config can describe: the memory table's limit. Their
 * memfds may span several frames (wire_worker_send_config). */
#define WIRE_CONFIG_MAX_REGIONS 509u /* == MEMTABLE_MAX_REGIONS (static assert in the worker) */

/*
 * wire_worker_send_config - send a Config whose fds (regions, then the
 * rest, as wire_config_layout orders them, with regions_deferred ignored)
 * may exceed one frame: the Config frame carries as many region memfds as
 * fit, and RegionFds messages carry the rest (at most WIRE_MAX_FDS each).
 * m->config->regions_deferred is set for the send and restored.
 * Returns: 0 or a negative errno from wire_worker_send.
 */
int wire_worker_send_config(int sock, const Vnic__Worker__WorkerMessage *m, const int *fds,
			    unsigned nfds);

/*
 * Strings (issue 11). proto3 strings are UTF-8; protobuf-c checks neither
 * that nor embedded NULs.
 * wire_utf8_valid - s[0..n) is strict UTF-8 (no overlong form, surrogate
 *   or code point above U+10FFFF) and holds no NUL byte; else false and
 *   *ret_bad (may be NULL) = offset of the first bad byte.
 * wire_utf8_sanitize - make a C string valid UTF-8 in place: an incomplete
 *   sequence at the very end (a cut) is removed, so the string ends on a
 *   character boundary; any other bad byte becomes '?'. Returns the bytes
 *   changed or removed.
 * wire_check_strings - walk the packed message buf (already unpacked once
 *   by protobuf-c) with descriptor d: every STRING field at any depth must
 *   be wire_utf8_valid. Returns 0 or -EBADMSG with err naming the field.
 * wire_msg_sanitize - wire_utf8_sanitize every string field of m and its
 *   submessages, in place, before m is packed: the one sanitiser every
 *   message vnicd sends passes through (vmm_conn_send, wire_worker_send).
 *   String literals are valid UTF-8 and never written. Returns the bytes
 *   changed.
 */
bool wire_utf8_valid(const uint8_t *s, size_t n, size_t *ret_bad);
size_t wire_utf8_sanitize(char *s);
int wire_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		       struct wire_err *err);
size_t wire_msg_sanitize(ProtobufCMessage *m);

#endif
