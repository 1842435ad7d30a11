/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire.h"

/* ------------------------------------------------------------ errors */

static int wire_fail(struct wire_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int wire_fail(struct wire_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

static void wire_err_clear(struct wire_err *err)
{
	if (err) {
		err->code = 0;
		err->has_request_id = false;
		err->request_id = 0;
		err->msg[0] = '\0';
	}
}

void wire_fds_close(struct wire_fds *fds)
{
	fdpass_close_all(fds->fd, fds->n);
	fds->n = 0;
}

/* --------------------------------------------------------- allocator */

/*
 * The unpack allocator counts every byte protobuf-c asks for while
 * unpacking one frame, plus a per-allocation overhead for malloc's own
 * header, and fails once the total would pass the cap. Frees are not
 * credited back: the count is cumulative, which is simpler and only
 * stricter. protobuf-c (>= 1.4.1, CVE-2022-48468/CVE-2022-33070 fixed)
 * frees what it built when an allocation fails and returns NULL.
 *
 * Messages are freed with the same free function and no budget
 * (wire_free_allocator), so the budget lives only on the unpack stack.
 */
#define WIRE_ALLOC_OVERHEAD 16u

struct wire_budget {
	size_t used;
	size_t cap;
	bool exceeded;
	bool oom;
};

static void *wire_budget_alloc(void *data, size_t size)
{
	struct wire_budget *b = data;
	void *p;

	if (b) {
		size_t cost = size + WIRE_ALLOC_OVERHEAD;

		if (size > b->cap || cost > b->cap - b->used) {
			b->exceeded = true;
			return NULL;
		}
		b->used += cost;
	}
	p = malloc(size ? size : 1);
	if (!p && b)
		b->oom = true;
	return p;
}

static void wire_budget_free(void *data, void *p)
{
	free(p);
}

static ProtobufCAllocator wire_free_allocator = {
	.alloc = wire_budget_alloc,
	.free = wire_budget_free,
	.allocator_data = NULL,
};

static int wire_unpack(const ProtobufCMessageDescriptor *desc,
		       const struct wire_frame *f, ProtobufCMessage **ret_m,
		       struct wire_err *err)
{
	struct wire_budget b = { .cap = WIRE_UNPACK_MEM_MAX };
	ProtobufCAllocator a = {
		.alloc = wire_budget_alloc,
		.free = wire_budget_free,
		.allocator_data = &b,
	};
	ProtobufCMessage *m;

	m = protobuf_c_message_unpack(desc, &a, f->len, f->payload);
	if (!m) {
		if (b.exceeded)
			return wire_fail(err, -EMSGSIZE,
					 "%zu-byte %s would unpack to more than %u bytes",
					 f->len, desc->short_name, WIRE_UNPACK_MEM_MAX);
		if (b.oom)
			return wire_fail(err, -ENOMEM, "out of memory unpacking %s",
					 desc->short_name);
		return wire_fail(err, -EBADMSG, "%zu-byte payload is not a valid %s",
				 f->len, desc->short_name);
	}
	if (!protobuf_c_message_check(m)) {
		protobuf_c_message_free_unpacked(m, &wire_free_allocator);
		return wire_fail(err, -EBADMSG, "%s fails protobuf-c's check",
				 desc->short_name);
	}
	*ret_m = m;
	return 0;
}

/* ----------------------------------------------------------- strings */

/*
 * proto3 says a string is UTF-8; protobuf-c neither checks that nor keeps
 * the wire length (it hands out NUL-terminated copies, so "hv\0x" reads
 * as "hv"). The checks therefore run over the packed bytes, walked with
 * the message's own descriptors: every length-delimited field whose
 * descriptor says STRING is checked, every MESSAGE field is walked in
 * turn; unknown fields and scalars are skipped. Called only after
 * protobuf-c unpacked the same bytes, so the structure is already known
 * to be well-formed; the walk is still bounded on every read.
 */
#define WIRE_WALK_DEPTH_MAX 32u

bool wire_utf8_valid(const uint8_t *s, size_t n, size_t *ret_bad)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			if (c == 0)
				goto bad;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			goto bad;
		}
		if (n - i <= k)
			goto bad;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				goto bad;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		/* Overlong forms, UTF-16 surrogates, above U+10FFFF. */
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			goto bad;
		i += k + 1;
	}
	return true;
bad:
	if (ret_bad)
		*ret_bad = i;
	return false;
}

size_t wire_utf8_sanitize(char *str)
{
	uint8_t *s = (uint8_t *)str;
	size_t n = strlen(str), fixed = 0, i = 0, bad;

	while (i < n && !wire_utf8_valid(s + i, n - i, &bad)) {
		size_t at = i + bad, k = 0;
		uint8_t c = s[at];

		/* A sequence cut by a truncation at the very end: shorten the
		 * string to the last whole character. */
		if (c >= 0xc2 && c <= 0xf4) {
			k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
			if (n - at <= k) {
				bool prefix = true;

				for (size_t j = at + 1; j < n; j++)
					prefix &= (s[j] & 0xc0) == 0x80;
				if (prefix) {
					s[at] = '\0';
					return fixed + (n - at);
				}
			}
		}
		s[at] = '?';
		fixed++;
		i = at + 1;
	}
	return fixed;
}

static int wire_get_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (*pos >= len)
			return -EBADMSG;
		b = p[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -EBADMSG;
}

static int wire_walk_strings(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
			     unsigned depth, struct wire_err *err)
{
	size_t pos = 0;

	if (depth > WIRE_WALK_DEPTH_MAX)
		return wire_fail(err, -EBADMSG, "%s nested more than %u deep", d->short_name,
				 WIRE_WALK_DEPTH_MAX);
	while (pos < len) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, v;
		size_t bad = 0;
		int r;

		r = wire_get_varint(p, len, &pos, &key);
		if (r < 0)
			return wire_fail(err, r, "%s: truncated field key", d->short_name);
		switch (key & 7) {
		case 0: /* varint */
			r = wire_get_varint(p, len, &pos, &v);
			break;
		case 1: /* 64-bit */
			r = len - pos >= 8 ? 0 : -EBADMSG;
			pos += r ? 0 : 8;
			break;
		case 5: /* 32-bit */
			r = len - pos >= 4 ? 0 : -EBADMSG;
			pos += r ? 0 : 4;
			break;
		case 2: /* length-delimited */
			r = wire_get_varint(p, len, &pos, &v);
			if (r || v > len - pos) {
				r = -EBADMSG;
				break;
			}
			f = key >> 3 <= UINT32_MAX ?
				    protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) :
				    NULL;
			if (f && f->type == PROTOBUF_C_TYPE_STRING &&
			    !wire_utf8_valid(p + pos, (size_t)v, &bad))
				return wire_fail(err, -EBADMSG,
						 "%s.%s: string %s at byte %zu", d->short_name, f->name,
						 p[pos + bad] ? "is not valid UTF-8" : "contains a NUL",
						 bad);
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				r = wire_walk_strings(f->descriptor, p + pos, (size_t)v, depth + 1, err);
				if (r < 0)
					return r;
			}
			pos += (size_t)v;
			break;
		default: /* groups: not proto3 */
			r = -EBADMSG;
			break;
		}
		if (r < 0)
			return wire_fail(err, r, "%s: malformed field", d->short_name);
	}
	return 0;
}

int wire_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		       struct wire_err *err)
{
	return wire_walk_strings(d, buf, len, 0, err);
}

/* Every string field of m and its submessages, in place. */
static size_t wire_msg_sanitize_depth(ProtobufCMessage *m, unsigned depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	size_t fixed = 0;

	if (depth > WIRE_WALK_DEPTH_MAX)
		return 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *member = (char *)m + f->offset;
		size_t n = 1;
		void **items;

		if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t which;

			memcpy(&which, (char *)m + f->quantifier_offset, sizeof(which));
			if (which != f->id)
				continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			memcpy(&n, (char *)m + f->quantifier_offset, sizeof(n));
			memcpy(&items, member, sizeof(items));
		} else {
			items = (void **)(void *)member;
		}
		for (size_t k = 0; items && k < n; k++) {
			if (!items[k])
				continue;
			if (f->type == PROTOBUF_C_TYPE_STRING)
				fixed += wire_utf8_sanitize(items[k]);
			else
				fixed += wire_msg_sanitize_depth(items[k], depth + 1);
		}
	}
	return fixed;
}

size_t wire_msg_sanitize(ProtobufCMessage *m)
{
	return wire_msg_sanitize_depth(m, 0);
}

/* -------------------------------------------------------------- send */

int wire_send(int sock, const ProtobufCMessage *m, size_t max,
	      const int *fds, unsigned nfds)
{
	uint8_t stackbuf[512];
	uint8_t *buf = stackbuf;
	size_t len = protobuf_c_message_get_packed_size(m);
	int r;

	if (len > max || len > UINT32_MAX)
		return -EMSGSIZE;
	if (len > sizeof(stackbuf) - WIRE_HDR_LEN) {
		buf = malloc(WIRE_HDR_LEN + len);
		if (!buf)
			return -ENOMEM;
	}
	if (protobuf_c_message_pack(m, buf + WIRE_HDR_LEN) != len) {
		r = -EINVAL;
		goto out_free;
	}
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	r = fdpass_send(sock, buf, WIRE_HDR_LEN + len, fds, nfds);
out_free:
	if (buf != stackbuf)
		free(buf);
	return r;
}

/* ----------------------------------------------------------- receive */

/*
 * The receive itself. A frame whose ancillary data the kernel cut
 * (MSG_CTRUNC: more fds than the control buffer holds, or fds it could
 * not install because our fd table is full) comes back as 0 with
 * *ret_trunc set, no fd open, and its payload, so that the caller can
 * still answer the request it carries (issue 11 item 2).
 */
static int wire_recv_frame_trunc(int sock, size_t max, unsigned max_fds,
				 struct wire_frame *ret_f, bool *ret_trunc,
				 unsigned *ret_nfds_cut, struct wire_err *err)
{
	struct wire_frame f = { .buf = NULL };
	size_t buflen, n = 0;
	ssize_t peek;
	uint32_t prefix;
	int r;

	wire_err_clear(err);
	if (max > UINT32_MAX || max_fds > WIRE_MAX_FDS)
		return wire_fail(err, -EINVAL, "bad channel limits");
	/* One byte more than the frame, or than the largest frame when it is
	 * larger: anything longer shows as MSG_TRUNC instead of fitting
	 * exactly. The frame's size comes first: MSG_PEEK|MSG_TRUNC gives a
	 * datagram's whole length without taking it, so a
	 * 30-byte frame gets a 31-byte buffer, not 256 KiB (whose malloc and
	 * ASan poisoning were most of a fuzz run, issue 18). A reader that
	 * shares the socket with another thread could see the frame change
	 * between the two calls; a larger one then reads as too large. */
	buflen = WIRE_HDR_LEN + max + 1;
	do {
		/* recvmsg, the one receive call the worker's sandbox allows;
		 * a peek leaves the frame's fds queued for the real read. A
		 * pending socket error (ECONNRESET) is consumed here: the real
		 * read then returns the frames queued before it, or EOF. */
		struct msghdr pm = { .msg_iov = NULL, .msg_iovlen = 0 };

		peek = recvmsg(sock, &pm, MSG_PEEK | MSG_TRUNC);
	} while (peek < 0 && errno == EINTR);
	if (peek >= 0 && (size_t)peek < buflen)
		buflen = (size_t)peek + 1;
	f.buf = malloc(buflen);
	if (!f.buf)
		return wire_fail(err, -ENOMEM, "out of memory for a frame buffer");

	*ret_trunc = false;
	r = fdpass_recv(sock, f.buf, buflen, f.fds.fd, max_fds, &n, &f.fds.n);
	if (r == -ENOBUFS && n > 0) {
		/* fdpass closed what did arrive; the payload is intact. */
		*ret_trunc = true;
		*ret_nfds_cut = f.fds.n;
		f.fds.n = 0;
		r = 0;
	}
	if (r < 0) {
		free(f.buf);
		switch (r) {
		case -EAGAIN:
			return wire_fail(err, r, "no frame to read");
		case -EPIPE:
			return wire_fail(err, r, "peer closed the channel");
		case -EMSGSIZE:
			return wire_fail(err, r, "frame above the channel maximum of %zu bytes",
					 max);
		case -ENOBUFS:
			return wire_fail(err, r, "frame carried more than %u fds", max_fds);
		case -EBADMSG:
			return wire_fail(err, r, "frame carried control data other than fds");
		default:
			return wire_fail(err, r, "recvmsg: %s", strerror(-r));
		}
	}

	if (n < WIRE_HDR_LEN) {
		r = wire_fail(err, -EBADMSG,
			      "%zu-byte frame is shorter than its length prefix", n);
		goto out_release;
	}
	prefix = (uint32_t)f.buf[0] << 24 | (uint32_t)f.buf[1] << 16 |
		 (uint32_t)f.buf[2] << 8 | (uint32_t)f.buf[3];
	if (prefix > max) {
		r = wire_fail(err, -EMSGSIZE,
			      "length prefix %u above the channel maximum of %zu bytes",
			      prefix, max);
		goto out_release;
	}
	if (prefix != n - WIRE_HDR_LEN) {
		r = wire_fail(err, -EBADMSG,
			      "length prefix %u but %zu payload bytes", prefix,
			      n - WIRE_HDR_LEN);
		goto out_release;
	}
	f.payload = f.buf + WIRE_HDR_LEN;
	f.len = prefix;
	*ret_f = f;
	return 0;

out_release:
	wire_frame_release(&f);
	return r;
}

int wire_recv_frame(int sock, size_t max, unsigned max_fds,
		    struct wire_frame *ret_f, struct wire_err *err)
{
	struct wire_frame f;
	unsigned cut = 0;
	bool trunc;
	int r;

	r = wire_recv_frame_trunc(sock, max, max_fds, &f, &trunc, &cut, err);
	if (r < 0)
		return r;
	if (trunc) {
		wire_frame_release(&f);
		return wire_fail(err, -ENOBUFS, "frame carried more than %u fds", max_fds);
	}
	*ret_f = f;
	return 0;
}

/* A Request rejected after it unpacked: its id goes into err, so that
 * the supervisor can answer it (REJECT, TESTPLAN C2). */
static void wire_err_request(struct wire_err *err, const Vnic__Vmm__VmmMessage *m)
{
	if (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REQUEST && err) {
		err->has_request_id = true;
		err->request_id = m->request->request_id;
	}
}

/* A Request whose fds the kernel cut: unpack it anyway (with the fds it
 * lost, so the count check cannot pass) to answer its request_id with the
 * true reason. @cut: fds that did arrive (all closed). */
static int wire_truncated_reason(const Vnic__Vmm__VmmMessage *m, unsigned max_fds,
				 unsigned cut, struct wire_err *err)
{
	int want = wire_vmm_expected_fds(m);

	wire_err_request(err, m);
	if (max_fds == 0)
		return wire_fail(err, -ENOBUFS, "frame carried fds where none are accepted");
	if (want < 0)
		return wire_fail(err, -EPROTO, "message needs more than %u fds", WIRE_MAX_FDS);
	if ((unsigned)want <= max_fds)
		/* The sender passed no more than we make room for, yet the
		 * kernel cut them: it could not install them (our fd table is
		 * full). Not the peer's fault. */
		return wire_fail(err, -EMFILE,
				 "out of file descriptors: %u of the %d fds this message needs "
				 "could be received", cut, want);
	return wire_fail(err, -ENOBUFS, "frame carried more than %u fds", max_fds);
}

void wire_frame_release(struct wire_frame *f)
{
	wire_fds_close(&f->fds);
	free(f->buf);
	f->buf = NULL;
	f->payload = NULL;
	f->len = 0;
}

/* The end of both channels' recv: on success the frame's fds pass to
 * the caller (*ret_fds), and the frame is released either way (on failure
 * with its fds). Returns r. */
static int wire_recv_done(struct wire_frame *f, int r, struct wire_fds *ret_fds)
{
	if (r == 0) {
		*ret_fds = f->fds;
		f->fds.n = 0;
	}
	wire_frame_release(f);
	return r;
}

/* ------------------------------------------------------- VMM channel */

int wire_add_nic_layout(const Vnic__Vmm__AddNic *a, struct wire_fd_layout *ret)
{
	size_t r = a->n_regions, q = a->n_queues, b = 0;

	/* A socket or a tap fd per queue pair (issue 15): one for 2 queues. */
	if (a->backend &&
	    (a->backend->kind_case == VNIC__VMM__BACKEND__KIND_SOCKET ||
	     a->backend->kind_case == VNIC__VMM__BACKEND__KIND_TAP_FD))
		b = q > 2 ? q / 2 : 1;
	/* Each term bounded first, so the sum cannot wrap. */
	if (r > WIRE_MAX_FDS || q > WIRE_MAX_FDS || r + 2 * q + b > WIRE_MAX_FDS)
		return -E2BIG;
	ret->nregions = (unsigned)r;
	ret->queue0 = (unsigned)r;
	ret->nqueues = (unsigned)q;
	ret->backend = b ? (int)(r + 2 * q) : -1;
	ret->nbackend = (unsigned)b;
	ret->stats = ret->inflight = -1;
	ret->total = (unsigned)(r + 2 * q + b);
	return 0;
}

int wire_vmm_expected_fds(const Vnic__Vmm__VmmMessage *m)
{
	struct wire_fd_layout l;
	int r;

	switch (m->msg_case) {
	case VNIC__VMM__VMM_MESSAGE__MSG_REQUEST:
		if (!m->request)
			return -EINVAL;
		if (m->request->body_case == VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG)
			return m->request->set_dirty_log && m->request->set_dirty_log->size > 0;
		if (m->request->body_case != VNIC__VMM__REQUEST__BODY_ADD_NIC)
			return 0;
		if (!m->request->add_nic)
			return -EINVAL;
		r = wire_add_nic_layout(m->request->add_nic, &l);
		return r < 0 ? r : (int)l.total;
	case VNIC__VMM__VMM_MESSAGE__MSG_REPLY:
	case VNIC__VMM__VMM_MESSAGE__MSG_EVENT:
		return 0;
	default:
		return -EINVAL;
	}
}

/* Unpack, check direction and arm: step 4. */
static int wire_vmm_check_arm(const Vnic__Vmm__VmmMessage *m, enum wire_peer from,
			      struct wire_err *err)
{
	switch (m->msg_case) {
	case VNIC__VMM__VMM_MESSAGE__MSG_REQUEST:
		if (!m->request)
			break;
		if (from != WIRE_PEER_VMM)
			return wire_fail(err, -EPROTO, "a Request from the supervisor");
		return 0;
	case VNIC__VMM__VMM_MESSAGE__MSG_REPLY:
	case VNIC__VMM__VMM_MESSAGE__MSG_EVENT:
		if ((m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY && !m->reply) ||
		    (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_EVENT && !m->event))
			break;
		if (from != WIRE_PEER_SUPERVISOR)
			return wire_fail(err, -EPROTO, "a %s from the VMM",
					 m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY ?
					 "Reply" : "Event");
		return 0;
	default:
		break;
	}
	return wire_fail(err, -EBADMSG, "VmmMessage with no known message in it");
}

static int wire_vmm_unpack_x(struct wire_frame *f, enum wire_peer from,
			     Vnic__Vmm__VmmMessage **ret_m, bool check_fds,
			     struct wire_err *err)
{
	ProtobufCMessage *pm = NULL;
	Vnic__Vmm__VmmMessage *m;
	int r, want;

	wire_err_clear(err);
	if (from != WIRE_PEER_VMM && from != WIRE_PEER_SUPERVISOR) {
		r = wire_fail(err, -EINVAL, "bad peer for the VMM channel");
		goto out_close;
	}
	r = wire_unpack(&vnic__vmm__vmm_message__descriptor, f, &pm, err);
	if (r < 0)
		goto out_close;
	m = (Vnic__Vmm__VmmMessage *)pm;
	r = wire_vmm_check_arm(m, from, err);
	if (r < 0)
		goto out_free;
	/* Strings: no NUL, valid UTF-8, in every field (issue 11 item 3). */
	r = wire_check_strings(&vnic__vmm__vmm_message__descriptor, f->payload, f->len, err);
	if (r < 0) {
		wire_err_request(err, m);
		goto out_free;
	}

	/* Step 5: the exact fd count. A Request's id is reported so that the
	 * supervisor can answer it (REJECT, TESTPLAN C2). */
	want = wire_vmm_expected_fds(m);
	if (check_fds && (want < 0 || (unsigned)want != f->fds.n)) {
		wire_err_request(err, m);
		if (want < 0)
			r = wire_fail(err, -EPROTO,
				      "message needs more than %u fds", WIRE_MAX_FDS);
		else
			r = wire_fail(err, -EPROTO, "message needs %d fds, frame carried %u",
				      want, f->fds.n);
		goto out_free;
	}
	*ret_m = m;
	return 0;

out_free:
	wire_vmm_free(m);
out_close:
	wire_fds_close(&f->fds);
	return r;
}

int wire_vmm_unpack(struct wire_frame *f, enum wire_peer from,
		    Vnic__Vmm__VmmMessage **ret_m, struct wire_err *err)
{
	return wire_vmm_unpack_x(f, from, ret_m, true, err);
}

int wire_vmm_recv(int sock, enum wire_peer from, Vnic__Vmm__VmmMessage **ret_m,
		  struct wire_fds *ret_fds, struct wire_err *err)
{
	unsigned max_fds = from == WIRE_PEER_VMM ? WIRE_MAX_FDS : 0, cut = 0;
	struct wire_frame f;
	Vnic__Vmm__VmmMessage *m;
	bool trunc;
	int r;

	r = wire_recv_frame_trunc(sock, WIRE_VMM_MSG_MAX, max_fds, &f, &trunc, &cut, err);
	if (r < 0)
		return r;
	r = wire_vmm_unpack_x(&f, from, &m, !trunc, err);
	if (trunc) {
		/* Its fds are gone: it cannot be served, but it can be
		 * answered, with its own request_id and the true reason. */
		if (r == 0) {
			r = wire_truncated_reason(m, max_fds, cut, err);
			wire_vmm_free(m);
		} else {
			r = wire_fail(err, -ENOBUFS, "frame carried more than %u fds", max_fds);
		}
		wire_frame_release(&f);
		return r;
	}
	r = wire_recv_done(&f, r, ret_fds);
	if (r == 0)
		*ret_m = m;
	return r;
}

int wire_vmm_send(int sock, const Vnic__Vmm__VmmMessage *m,
		  const int *fds, unsigned nfds)
{
	int want = wire_vmm_expected_fds(m);

	if (want < 0)
		return want;
	if ((unsigned)want != nfds)
		return -EINVAL;
	return wire_send(sock, &m->base, WIRE_VMM_MSG_MAX, fds, nfds);
}

Vnic__Vmm__VmmMessage *wire_vmm_free(Vnic__Vmm__VmmMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(&m->base, &wire_free_allocator);
	return NULL;
}

void wire_region_pb(Vnic__Vmm__MemRegion *pb, uint64_t gpa, uint64_t size, uint64_t offset)
{
	vnic__vmm__mem_region__init(pb);
	pb->gpa = gpa;
	pb->size = size;
	pb->offset = offset;
}

void wire_queue_pb(Vnic__Vmm__Queue *pb, uint32_t index, uint32_t size, uint64_t desc_gpa,
		   uint64_t avail_gpa, uint64_t used_gpa, uint32_t avail_idx)
{
	vnic__vmm__queue__init(pb);
	pb->index = index;
	pb->size = size;
	pb->desc_gpa = desc_gpa;
	pb->avail_gpa = avail_gpa;
	pb->used_gpa = used_gpa;
	pb->avail_idx = avail_idx;
}

/* ---------------------------------------------------- worker channel */

int wire_config_layout(const Vnic__Worker__Config *c, struct wire_fd_layout *ret)
{
	size_t r = c->n_regions, q = c->n_queues, g = c->log_size > 0;
	size_t i = c->inflight_own_fd && c->inflight_size > 0;

	if (c->backend != VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP &&
	    c->backend != VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET &&
	    c->backend != VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_AF_PACKET)
		return -EINVAL;
	/* Deferred regions' memfds follow in RegionFds messages. */
	if (c->regions_deferred > r)
		return -EINVAL;
	r -= c->regions_deferred;
	if (c->inflight_own_fd && c->inflight_size == 0)
		return -EINVAL;
	if (r > WIRE_MAX_FDS || q > WIRE_MAX_FDS || r + 2 * q + 2 + i + g > WIRE_MAX_FDS)
		return -E2BIG;
	ret->nregions = (unsigned)r;
	ret->queue0 = (unsigned)r;
	ret->nqueues = (unsigned)q;
	ret->backend = (int)(r + 2 * q);
	ret->stats = (int)(r + 2 * q + 1);
	ret->inflight = !c->inflight_size ? -1 : i ? ret->stats + 1 : ret->stats;
	/* Optional and last: a Config without them is exactly the old one. */
	ret->log = g ? (int)(r + 2 * q + 2 + i) : -1;
	ret->total = (unsigned)(r + 2 * q + 2 + i + g);
	return 0;
}

/* The sender of each arm. */
static int wire_worker_arm_sender(Vnic__Worker__WorkerMessage__MsgCase c,
				  enum wire_peer *ret)
{
	switch (c) {
	case VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_START:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOP:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_POLICY:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_DIRTY_LOG:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS:
		*ret = WIRE_PEER_SUPERVISOR;
		return 0;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_READY:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_LOG:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_ERROR:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_FAULT_HIT:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_POLICY_SET:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_DIRTY_LOG_SET:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_CALL_FD_SET:
		*ret = WIRE_PEER_WORKER;
		return 0;
	default:
		return -EINVAL;
	}
}

int wire_worker_expected_fds(const Vnic__Worker__WorkerMessage *m)
{
	struct wire_fd_layout l;
	enum wire_peer sender;
	int r;

	if (wire_worker_arm_sender(m->msg_case, &sender) < 0)
		return -EINVAL;
	if (m->msg_case == VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS) {
		if (!m->region_fds || m->region_fds->count == 0)
			return -EINVAL;
		return m->region_fds->count > WIRE_MAX_FDS ? -E2BIG : (int)m->region_fds->count;
	}
	if (m->msg_case == VNIC__WORKER__WORKER_MESSAGE__MSG_SET_DIRTY_LOG)
		return m->set_dirty_log && m->set_dirty_log->size > 0 ? 1 : 0;
	if (m->msg_case == VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD)
		return 1; /* the new call eventfd */
	if (m->msg_case != VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG)
		return 0;
	if (!m->config)
		return -EINVAL;
	r = wire_config_layout(m->config, &l);
	return r < 0 ? r : (int)l.total;
}

/* A message from the supervisor carries exactly the fds its layout says
 * (wire_worker_expected_fds). Returns 0 or a negative errno, err set. */
static int supervisor_msg_fds(const Vnic__Worker__WorkerMessage *m, unsigned nfds,
			      struct wire_err *err)
{
	int want = wire_worker_expected_fds(m);

	if (want == -E2BIG)
		return wire_fail(err, -EPROTO, "Config needs more than %u fds", WIRE_MAX_FDS);
	if (want < 0)
		return wire_fail(err, -EBADMSG, "%s",
				 m->msg_case == VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS ?
				 "RegionFds with no fds" :
				 "Config without a backend kind, or more regions deferred than it has");
	if ((unsigned)want != nfds)
		return wire_fail(err, -EPROTO, "message needs %d fds, frame carried %u", want, nfds);
	return 0;
}

int wire_worker_unpack(struct wire_frame *f, enum wire_peer from,
		       Vnic__Worker__WorkerMessage **ret_m, struct wire_err *err)
{
	ProtobufCMessage *pm = NULL;
	Vnic__Worker__WorkerMessage *m;
	enum wire_peer sender;
	int r;

	wire_err_clear(err);
	if (from != WIRE_PEER_SUPERVISOR && from != WIRE_PEER_WORKER) {
		r = wire_fail(err, -EINVAL, "bad peer for the worker channel");
		goto out_close;
	}
	r = wire_unpack(&vnic__worker__worker_message__descriptor, f, &pm, err);
	if (r < 0)
		goto out_close;
	m = (Vnic__Worker__WorkerMessage *)pm;

	/* Step 4. protobuf-c allocates an empty submessage for a set arm, so a
	 * known case always has its pointer; any arm's pointer will do. */
	if (wire_worker_arm_sender(m->msg_case, &sender) < 0 || !m->config) {
		r = wire_fail(err, -EBADMSG, "WorkerMessage with no known message in it");
		goto out_free;
	}
	if (sender != from) {
		r = wire_fail(err, -EPROTO, "%s from the %s",
			      protobuf_c_message_descriptor_get_field(
				      &vnic__worker__worker_message__descriptor,
				      m->msg_case)->name,
			      from == WIRE_PEER_WORKER ? "worker" : "supervisor");
		goto out_free;
	}

	r = wire_check_strings(&vnic__worker__worker_message__descriptor, f->payload, f->len, err);
	if (r < 0)
		goto out_free;

	/* Step 5: the fds. Only the supervisor's messages carry any (Config,
	 * RegionFds, SetDirtyLog, SetCallFd); a worker's never do, and
	 * wire_worker_recv makes no room for them. */
	if (from == WIRE_PEER_SUPERVISOR)
		r = supervisor_msg_fds(m, f->fds.n, err);
	else if (f->fds.n)
		r = wire_fail(err, -EPROTO, "a worker's message carried %u fds", f->fds.n);
	if (r < 0)
		goto out_free;
	*ret_m = m;
	return 0;

out_free:
	wire_worker_free(m);
out_close:
	wire_fds_close(&f->fds);
	return r;
}

int wire_worker_recv(int sock, enum wire_peer from,
		     Vnic__Worker__WorkerMessage **ret_m,
		     struct wire_fds *ret_fds, struct wire_err *err)
{
	struct wire_frame f;
	Vnic__Worker__WorkerMessage *m;
	int r;

	/* Nothing a worker sends carries fds: make no room for any. */
	r = wire_recv_frame(sock, WIRE_WORKER_MSG_MAX,
			    from == WIRE_PEER_SUPERVISOR ? WIRE_MAX_FDS : 0, &f, err);
	if (r < 0)
		return r;
	r = wire_worker_unpack(&f, from, &m, err);
	r = wire_recv_done(&f, r, ret_fds);
	if (r == 0)
		*ret_m = m;
	return r;
}

int wire_worker_send(int sock, const Vnic__Worker__WorkerMessage *m,
		     const int *fds, unsigned nfds)
{
	int want = wire_worker_expected_fds(m);

	/* The receiver rejects a string that is not UTF-8 (a worker's Log
	 * may quote bytes it did not make): fix them here. */
	wire_msg_sanitize((ProtobufCMessage *)(uintptr_t)&m->base);

	if (want < 0)
		return want;
	if ((unsigned)want != nfds)
		return -EINVAL;
	return wire_send(sock, &m->base, WIRE_WORKER_MSG_MAX, fds, nfds);
}

Vnic__Worker__WorkerMessage *wire_worker_free(Vnic__Worker__WorkerMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(&m->base, &wire_free_allocator);
	return NULL;
}

int wire_worker_send_config(int sock, const Vnic__Worker__WorkerMessage *m, const int *fds,
			    unsigned nfds)
{
	Vnic__Worker__Config *c = m->config;
	Vnic__Worker__WorkerMessage rm;
	Vnic__Worker__RegionFds rf;
	size_t nr, others;
	uint32_t deferred, saved;
	int r;

	if (m->msg_case != VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG || !c ||
	    c->n_regions > WIRE_CONFIG_MAX_REGIONS)
		return -EINVAL;
	nr = c->n_regions;
	if (nfds < nr)
		return -EINVAL;
	others = nfds - nr;  /* eventfds, backend, stats, inflight */
	if (others >= WIRE_MAX_FDS)
		return -E2BIG;
	/* As many regions as fit in the Config frame; the rest follow. */
	deferred = nr + others > WIRE_MAX_FDS ? (uint32_t)(nr + others - WIRE_MAX_FDS) : 0;
	saved = c->regions_deferred;
	c->regions_deferred = deferred;
	{
		/* Config's fds: the regions it carries, then the others. */
		int *cf = malloc((nfds - deferred) * sizeof(*cf));

		if (!cf) {
			c->regions_deferred = saved;
			return -ENOMEM;
		}
		memcpy(cf, fds, (nr - deferred) * sizeof(*cf));
		memcpy(cf + (nr - deferred), fds + nr, others * sizeof(*cf));
		r = wire_worker_send(sock, m, cf, nfds - deferred);
		free(cf);
	}
	c->regions_deferred = saved;
	for (size_t first = nr - deferred; r == 0 && first < nr; first += rf.count) {
		vnic__worker__worker_message__init(&rm);
		vnic__worker__region_fds__init(&rf);
		rf.first = (uint32_t)first;
		rf.count = (uint32_t)(nr - first < WIRE_MAX_FDS ? nr - first : WIRE_MAX_FDS);
		rm.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS;
		rm.region_fds = &rf;
		r = wire_worker_send(sock, &rm, fds + first, rf.count);
	}
	return r;
}

