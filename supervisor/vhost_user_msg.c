/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_msg: framing, the request table and the checks every message
 * passes before a handler sees it (see vhost_user_msg.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "log.h"
#include "vhost_user_msg.h"

#define N VU_ROW_NEEDS_OWNER
#define R VU_ROW_REPLIES
#define A VU_ROW_ANSWERED
/* ROW(request without VU_, handler, min_size, max_size, min_fds, max_fds,
 * proto_bit, flags): the name is the request's, and a row without a
 * handler does not compile. */
#define ROW(req, handler, ...) [VU_##req] = { #req, __VA_ARGS__, handler }

/* What a well-formed message of each request we know looks like. A
 * request not in this table (or not offered: packed rings, SET_LOG_FD, IOTLB,
 * config space, back-end requests) is refused as
 * vu_unrowed_refusal says.
 * A request vnicd accepts is one with a row; a row is a handler. */
static const struct vu_row_spec rows[VU_REQUEST_MAX] = {
	ROW(GET_FEATURES, h_get_features, 0, 8, 0, 0, -1, R),
	ROW(SET_FEATURES, h_set_features, 8, 8, 0, 0, -1, 0),
	ROW(SET_OWNER, h_set_owner, 0, 8, 0, 0, -1, 0),
	ROW(RESET_OWNER, h_reset_owner, 0, 8, 0, 0, -1, 0),
	ROW(SET_MEM_TABLE, h_set_mem_table,
	    8 + sizeof(struct vu_mem_region), sizeof(struct vu_mem_table), 1, VU_MAX_FDS, -1, N),
	/* Issue 14: the dirty log memfd, exactly one; answered even when
	 * refused, since QEMU reads an answer whatever it holds. */
	ROW(SET_LOG_BASE, h_set_log_base, sizeof(struct vu_log), sizeof(struct vu_log), 1, 1,
	    VU_PROTO_LOG_SHMFD, N | A),
	ROW(SET_VRING_NUM, h_set_vring_num, 8, 8, 0, 0, -1, N),
	ROW(SET_VRING_ADDR, h_set_vring_addr,
	    sizeof(struct vu_vring_addr), sizeof(struct vu_vring_addr), 0, 0, -1, N),
	ROW(SET_VRING_BASE, h_set_vring_base, 8, 8, 0, 0, -1, N),
	/* DPDK virtio-user (server=1) stops the device on a new connection
	 * before SET_OWNER: these two hold no resource and are answered. */
	ROW(GET_VRING_BASE, h_get_vring_base, 8, 8, 0, 0, -1, R),
	ROW(SET_VRING_KICK, h_set_vring_kick, 8, 8, 0, 1, -1, N),
	ROW(SET_VRING_CALL, h_set_vring_call, 8, 8, 0, 1, -1, N),
	ROW(SET_VRING_ERR, h_set_vring_err, 8, 8, 0, 1, -1, N),
	ROW(GET_PROTOCOL_FEATURES, h_get_protocol_features, 0, 8, 0, 0, -1, R),
	ROW(SET_PROTOCOL_FEATURES, h_set_protocol_features, 8, 8, 0, 0, -1, 0),
	ROW(GET_QUEUE_NUM, h_get_queue_num, 0, 8, 0, 0, VU_PROTO_MQ, R),
	ROW(SET_VRING_ENABLE, h_set_vring_enable, 8, 8, 0, 0, -1, 0),
	ROW(SEND_RARP, h_send_rarp, 8, 8, 0, 0, VU_PROTO_RARP, N),
	ROW(NET_SET_MTU, h_net_set_mtu, 8, 8, 0, 0, VU_PROTO_NET_MTU, N),
	ROW(GET_MAX_MEM_SLOTS, h_get_max_mem_slots, 0, 8, 0, 0, VU_PROTO_CONFIGURE_MEM_SLOTS, R),
	ROW(ADD_MEM_REG, h_add_mem_reg, sizeof(struct vu_mem_single), sizeof(struct vu_mem_single),
	    1, 1, VU_PROTO_CONFIGURE_MEM_SLOTS, N),
	ROW(REM_MEM_REG, h_rem_mem_reg, sizeof(struct vu_mem_single), sizeof(struct vu_mem_single),
	    0, 1, VU_PROTO_CONFIGURE_MEM_SLOTS, N),
	ROW(SET_STATUS, h_set_status, 8, 8, 0, 0, VU_PROTO_STATUS, 0),
	ROW(GET_STATUS, h_get_status, 0, 8, 0, 0, VU_PROTO_STATUS, R),
	/* Issue 16: the region a front end keeps for its back end. GET
	 * takes no fd (one sent is closed unread, as any extra fd:
	 * CVE-2022-0669); SET exactly one. */
	ROW(GET_INFLIGHT_FD, h_get_inflight_fd, VU_INFLIGHT_MIN_SIZE, sizeof(struct vu_inflight),
	    0, 0, VU_PROTO_INFLIGHT_SHMFD, N | R),
	ROW(SET_INFLIGHT_FD, h_set_inflight_fd, VU_INFLIGHT_MIN_SIZE, sizeof(struct vu_inflight),
	    1, 1, VU_PROTO_INFLIGHT_SHMFD, N),
};

#undef N
#undef R
#undef A
#undef ROW

/* The requests of QEMU's docs/interop/vhost-user.rst with an answer the
 * front end always waits for, and no row here. */
static const uint8_t unrowed[VU_REQUEST_MAX] = {
	[VU_IOTLB_MSG] = VU_REFUSE_U64,           /* "zero for success, non-zero otherwise" */
	[VU_GET_CONFIG] = VU_REFUSE_EMPTY,        /* "zero length of payload ... an error" */
	[VU_CREATE_CRYPTO_SESSION] = VU_REFUSE_CLOSE, /* a session id */
	[VU_POSTCOPY_ADVISE] = VU_REFUSE_CLOSE,   /* a userfaultfd */
	[VU_POSTCOPY_END] = VU_REFUSE_U64,        /* "an error indication; 0 is success" */
	[VU_GET_SHARED_OBJECT] = VU_REFUSE_CLOSE, /* a dma-buf fd */
	[VU_SET_DEVICE_STATE_FD] = VU_REFUSE_U64, /* error code in bits 0-7 */
	[VU_CHECK_DEVICE_STATE] = VU_REFUSE_U64,  /* 0 success, non-zero failure */
};

enum vu_refusal vu_unrowed_refusal(uint32_t request)
{
	if (request >= VU_REQUEST_MAX || rows[request].name)
		return VU_REFUSE_PLAIN;
	return (enum vu_refusal)unrowed[request];
}

const struct vu_row_spec *vu_request_spec(uint32_t request)
{
	if (request >= VU_REQUEST_MAX || !rows[request].name)
		return NULL;
	return &rows[request];
}

const char *vu_request_name(uint32_t request, char *buf, size_t len)
{
	const struct vu_row_spec *r = vu_request_spec(request);

	if (r)
		return r->name;
	snprintf(buf, len, "request %u", request);
	return buf;
}

int vu_msg_check(const struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_row_spec *r = vu_request_spec(m->hdr.request);
	char nb[24];

	if ((m->hdr.flags & VU_FLAG_VERSION_MASK) != VU_VERSION ||
	    (m->hdr.flags & VU_FLAG_REPLY)) {
		snprintf(err, errlen, "%s: flags 0x%x: not a version-1 request",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), m->hdr.flags);
		return -EPROTO;
	}
	if (!r) {
		snprintf(err, errlen, "request %u is not supported", m->hdr.request);
		return -ENOSYS;
	}
	if (m->hdr.size < r->min_size || m->hdr.size > r->max_size) {
		snprintf(err, errlen, "%s: payload of %u bytes (%u..%u expected)", r->name,
			 m->hdr.size, r->min_size, r->max_size);
		return -EMSGSIZE;
	}
	if (m->nfds < r->min_fds || m->nfds > r->max_fds) {
		snprintf(err, errlen, "%s: %u fds (%u..%u expected)", r->name, m->nfds,
			 r->min_fds, r->max_fds);
		return -EBADF;
	}
	return 0;
}

void vu_rx_reset(struct vu_rx *rx)
{
	for (unsigned i = 0; i < rx->m.nfds; i++)
		if (rx->m.fds[i] >= 0)
			close(rx->m.fds[i]);
	rx->m.nfds = 0;
	rx->have = 0;
}

/* Take the SCM_RIGHTS fds of one recvmsg (fdpass_cmsg_parse: every fd the
 * kernel installed is kept or closed, however many came); false when
 * there were more than room, any arrived where none may, or the kernel
 * truncated the list (all closed then). */
static bool take_fds(struct msghdr *mh, struct vu_rx *rx, bool allowed)
{
	int fds[VU_MAX_FDS];
	unsigned n = 0;

	if (fdpass_cmsg_parse(mh, fds, allowed ? VU_MAX_FDS - rx->m.nfds : 0, &n) < 0)
		return false;
	if (mh->msg_flags & MSG_CTRUNC) {
		fdpass_close_all(fds, n);
		return false;
	}
	memcpy(rx->m.fds + rx->m.nfds, fds, n * sizeof(int));
	rx->m.nfds += n;
	return true;
}

int vu_recv(int fd, struct vu_rx *rx)
{
	for (;;) {
		size_t want;
		uint8_t *dst;
		union {
			char buf[CMSG_SPACE(sizeof(int) * (VU_MAX_FDS + 1))];
			struct cmsghdr align;
		} cm;
		struct iovec iov;
		struct msghdr mh = { 0 };
		ssize_t r;

		if (rx->have < VU_HDR_SIZE) {
			dst = (uint8_t *)&rx->m.hdr + rx->have;
			want = VU_HDR_SIZE - rx->have;
		} else {
			size_t got = rx->have - VU_HDR_SIZE;

			if (got == rx->m.hdr.size)
				return 1;
			dst = rx->m.p.bytes + got;
			want = rx->m.hdr.size - got;
		}
		iov.iov_base = dst;
		iov.iov_len = want;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* fds belong to the first bytes of a message only. */
		if (!take_fds(&mh, rx, rx->have == 0))
			return -EBADF;
		if (r == 0)
			return -EPIPE;
		rx->have += (size_t)r;
		if (rx->have == VU_HDR_SIZE && rx->m.hdr.size > VU_PAYLOAD_MAX)
			return -EMSGSIZE;
		if (rx->have >= VU_HDR_SIZE && rx->have - VU_HDR_SIZE == rx->m.hdr.size)
			return 1;
	}
}

int vu_send_reply(int fd, const struct vu_hdr *req, const void *payload, uint32_t size)
{
	return vu_send_reply_fd(fd, req, payload, size, -1);
}

int vu_send_reply_fd(int fd, const struct vu_hdr *req, const void *payload, uint32_t size,
		     int send_fd)
{
	struct vu_hdr h = { .request = req->request, .flags = VU_VERSION | VU_FLAG_REPLY,
			    .size = size };
	uint8_t buf[VU_HDR_SIZE + 64];
	size_t total = VU_HDR_SIZE + size;
	struct iovec iov = { .iov_base = buf, .iov_len = total };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	union fdpass_cbuf cbuf;
	ssize_t r;

	if (size > sizeof(buf) - VU_HDR_SIZE)
		return -EMSGSIZE;
	memcpy(buf, &h, VU_HDR_SIZE);
	if (size)
		memcpy(buf + VU_HDR_SIZE, payload, size);
	/* The fd rides with the header's bytes, as the front end reads it. */
	r = fdpass_cmsg_build(&mh, &cbuf, &send_fd, send_fd >= 0 ? 1 : 0);
	if (r < 0)
		return (int)r;
	do
		r = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (log_get_level() >= LOG_LEVEL_DEBUG) {
		char nb[24];

		log_debug("vhost-user fd %d: -> %s answer size %u", fd,
			  vu_request_name(req->request, nb, sizeof(nb)), size);
	}
	/* Replies are tiny; a socket that cannot take 20 bytes is a peer that
	 * does not read, and the connection is dropped. */
	return (size_t)r == total ? 0 : -EAGAIN;
}
