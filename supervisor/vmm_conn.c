/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_conn: one connected client (a VMM through libvnic, or vnicctl).
 *
 * Accept: SO_PEERCRED decides. uid 0, our own uid, and members of --group
 * may talk; anyone else gets one PERMISSION_DENIED reply and is closed,
 * with a log line naming pid, uid and gid.
 *
 * Read: up to SUP_CONN_FRAMES_PER_WAKE frames per wake-up through
 * wire_vmm_recv (length, fd count and arm checks, every fd closed on a
 * bad frame), then the dispatch table below. A malformed frame gets an
 * error reply; SUP_CONN_MAX_ERRORS of them in a row drop the peer.
 *
 * Write: replies and events are packed into an output queue; EV_WRITE is
 * armed only while it is not empty (STYLE habit 12). A peer that does not
 * read its replies is dropped at SUP_CONN_OUTQ_MAX, so it cannot make the
 * supervisor block or grow without bound.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor.h"

typedef void (*vmm_handler_fn)(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			       struct wire_fds *fds);

#define VMM_NEEDS_HELLO 1u /* refused (FAILED_PRECONDITION) before Hello */
#define VMM_FDS_ADDNIC  -1 /* fd count from wire_add_nic_layout */
#define VMM_FDS_DIRTYLOG -2 /* 1 when size > 0, else 0: checked by the handler */

/* The dispatch table (STYLE habit 1): one row per request body. The fd
 * count was already enforced exactly by wire_vmm_recv; the column states
 * the contract and is checked again here so that a change in wire cannot
 * silently let fds through to a handler that does not adopt them. */
static const struct vmm_row {
	Vnic__Vmm__Request__BodyCase body;
	const char *name;
	unsigned flags;
	int nfds;
	vmm_handler_fn handler;
} vmm_table[] = {
	{ VNIC__VMM__REQUEST__BODY_HELLO, "Hello", 0, 0, vmm_handle_hello },
	{ VNIC__VMM__REQUEST__BODY_ADD_NIC, "AddNic", VMM_NEEDS_HELLO, VMM_FDS_ADDNIC,
	  vmm_handle_add_nic },
	{ VNIC__VMM__REQUEST__BODY_REMOVE_NIC, "RemoveNic", VMM_NEEDS_HELLO, 0,
	  vmm_handle_remove_nic },
	{ VNIC__VMM__REQUEST__BODY_GET_STATUS, "GetStatus", VMM_NEEDS_HELLO, 0,
	  vmm_handle_get_status },
	{ VNIC__VMM__REQUEST__BODY_SET_POLICY, "SetPolicy", VMM_NEEDS_HELLO, 0,
	  vmm_handle_set_policy },
	{ VNIC__VMM__REQUEST__BODY_SET_LOG_LEVEL, "SetLogLevel", VMM_NEEDS_HELLO, 0,
	  vmm_handle_set_log_level },
	{ VNIC__VMM__REQUEST__BODY_ADD_VHOST_USER, "AddVhostUser", VMM_NEEDS_HELLO, 0,
	  vmm_handle_add_vhost_user },
	{ VNIC__VMM__REQUEST__BODY_REMOVE_ENDPOINT, "RemoveEndpoint", VMM_NEEDS_HELLO, 0,
	  vmm_handle_remove_endpoint },
	{ VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG, "SetDirtyLog", VMM_NEEDS_HELLO,
	  VMM_FDS_DIRTYLOG, vmm_handle_set_dirty_log },
	{ VNIC__VMM__REQUEST__BODY_UPGRADE, "Upgrade", VMM_NEEDS_HELLO, 0, vmm_handle_upgrade },
	{ VNIC__VMM__REQUEST__BODY_ANNOUNCE, "Announce", VMM_NEEDS_HELLO, 0, vmm_handle_announce },
};

static void conn_write_cb(evutil_socket_t fd, short what, void *arg);
static void conn_read_cb(evutil_socket_t fd, short what, void *arg);

struct vmm_conn *vmm_conn_free(struct vmm_conn *c)
{
	struct outframe *o;

	if (!c)
		return NULL;
	/* NICs of this connection are stopped, not abandoned (DESIGN
	 * "VMM disconnect"). */
	nic_detach_owner(c->sup, c);
	vmm_pair_groups_drop(c);
	if (c->ev_read)
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	while ((o = STAILQ_FIRST(&c->outq))) {
		STAILQ_REMOVE_HEAD(&c->outq, link);
		free(o);
	}
	if (c->fd >= 0) {
		/* Whatever the peer sent and we did not read is dropped here,
		 * not left in the queue: closing an AF_UNIX socket with unread
		 * data resets the peer, which then never reads the reply queued
		 * for it (a refused client that sends before it reads).
		 * SHUT_RD first, so nothing new arrives meanwhile. */
		shutdown(c->fd, SHUT_RD);
		fdpass_drain(c->fd, SUP_CONN_OUTQ_MAX);
		close(c->fd);
	}
	TAILQ_REMOVE(&c->sup->conns, c, link);
	c->sup->nconns--;
	log_info("conn %u: closed", c->id);
	/* One fd is free again: a listener paused for EMFILE may resume. */
	sup_accept_resume(c->sup);
	free(c);
	return NULL;
}

static int conn_flush(struct vmm_conn *c)
{
	struct outframe *o;

	while ((o = STAILQ_FIRST(&c->outq))) {
		ssize_t n = send(c->fd, o->data, o->len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			event_add(c->ev_write, NULL);
			return 0;
		}
		if (n < 0)
			return -errno;
		STAILQ_REMOVE_HEAD(&c->outq, link);
		c->outq_len--;
		free(o);
	}
	event_del(c->ev_write);
	return 0;
}

void vmm_conn_send(struct vmm_conn *c, const Vnic__Vmm__VmmMessage *m)
{
	struct outframe *o;
	size_t len;
	uint32_t be;

	if (!c || c->closing)
		return;
	/* Every string that leaves is valid UTF-8 (issue 11 item 4): the one
	 * sanitiser, here, where every reply and event passes. */
	wire_msg_sanitize((ProtobufCMessage *)(uintptr_t)&m->base);
	len = protobuf_c_message_get_packed_size(&m->base);
	if (len > WIRE_VMM_MSG_MAX) {
		log_error_f("conn %u: reply of %zu bytes above the channel maximum", c->id, len);
		return;
	}
	if (c->outq_len >= SUP_CONN_OUTQ_MAX) {
		log_warn("conn %u: peer does not read its replies: dropping it", c->id);
		c->closing = true;
		event_active(c->ev_read, EV_READ, 0); /* freed from its callback */
		return;
	}
	o = malloc(sizeof(*o) + WIRE_HDR_LEN + len);
	if (!o) {
		log_error_f("out of memory");
		return;
	}
	/* The frame format of wire.h: u32 big-endian length, then payload. */
	be = htonl((uint32_t)len);
	memcpy(o->data, &be, WIRE_HDR_LEN);
	protobuf_c_message_pack(&m->base, o->data + WIRE_HDR_LEN);
	o->len = WIRE_HDR_LEN + len;
	STAILQ_INSERT_TAIL(&c->outq, o, link);
	c->outq_len++;
	/* While a frame is dispatched, its reply waits until the frame's
	 * unadopted fds are closed: a VMM that reads a rejection knows the
	 * supervisor holds none of the fds it sent. */
	if (c->in_dispatch)
		return;
	if (conn_flush(c) < 0) {
		c->closing = true;
		event_active(c->ev_read, EV_READ, 0);
	}
}

/* The header of every Reply, and its envelope. */
static void conn_send_reply(struct vmm_conn *c, Vnic__Vmm__Reply *r, uint64_t request_id,
			    Vnic__Vmm__Status code, char *text)
{
	Vnic__Vmm__VmmMessage m;

	r->request_id = request_id;
	r->code = code;
	r->error = text;
	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REPLY;
	m.reply = r;
	vmm_conn_send(c, &m);
}

void vmm_conn_reply(struct vmm_conn *c, Vnic__Vmm__Reply *r, uint64_t request_id,
		    Vnic__Vmm__Status code, const char *error)
{
	char text[256];

	snprintf(text, sizeof(text), "%s", error ? error : "");
	conn_send_reply(c, r, request_id, code, text);
}

void vmm_conn_reply_error(struct vmm_conn *c, uint64_t request_id,
			  Vnic__Vmm__Status code, const char *fmt, ...)
{
	Vnic__Vmm__Reply r;
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	vnic__vmm__reply__init(&r);
	conn_send_reply(c, &r, request_id, code, text);
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_conn *c = arg;

	if (conn_flush(c) < 0)
		vmm_conn_free(c);
}

static bool in_group(struct sup *s, uid_t uid, gid_t gid)
{
	struct passwd *pw;
	gid_t groups[256];
	int ng = 256;

	if (!s->have_group)
		return false;
	if (gid == s->group)
		return true;
	pw = getpwuid(uid);
	if (!pw || getgrouplist(pw->pw_name, pw->pw_gid, groups, &ng) < 0)
		return false;
	for (int i = 0; i < ng; i++)
		if (groups[i] == s->group)
			return true;
	return false;
}

/* One bad frame: answer it, count it, maybe drop the peer.
 * Returns: false when the connection was freed. */
static bool conn_bad_frame(struct vmm_conn *c, const struct wire_err *err)
{
	/* A peer can send bad frames as fast as it likes: rate-limited. */
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5000, 20);

	/* Out of fds (the kernel cut the frame's fds): our problem, not the
	 * peer's; the request still gets its one reply, its own request_id
	 * and the true reason (issue 11 item 2). */
	bool ours = err->code == -EMFILE;

	if (!ours)
		c->errors++;
	log_ratelimited(&rl, LOG_LEVEL_WARN, "conn %u: %s (%u/%d): %s", c->id,
			ours ? "request lost its fds" : "bad frame", c->errors, SUP_CONN_MAX_ERRORS,
			err->msg);
	vmm_conn_reply_error(c, err->has_request_id ? err->request_id : 0,
			     ours ? VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED
				  : VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
			     "rejected frame: %s", err->msg);
	if (c->errors >= SUP_CONN_MAX_ERRORS) {
		log_ratelimited(&rl, LOG_LEVEL_WARN,
				"conn %u: %u bad frames in a row: dropping the connection", c->id,
				c->errors);
		vmm_conn_free(c);
		return false;
	}
	return true;
}

static void conn_dispatch(struct vmm_conn *c, const Vnic__Vmm__VmmMessage *m,
			  struct wire_fds *fds)
{
	const Vnic__Vmm__Request *r = m->request;
	const struct vmm_row *row = NULL;

	for (size_t i = 0; i < sizeof(vmm_table) / sizeof(vmm_table[0]); i++)
		if (vmm_table[i].body == r->body_case)
			row = &vmm_table[i];
	if (!row) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_UNIMPLEMENTED,
				     "request body %d is not known to this supervisor",
				     (int)r->body_case);
		return;
	}
	if (row->nfds >= 0 && fds->n != (unsigned)row->nfds) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "%s carries %u fds, expected %d", row->name, fds->n, row->nfds);
		return;
	}
	if ((row->flags & VMM_NEEDS_HELLO) && !c->hello_done) {
		vmm_conn_reply_error(c, r->request_id,
				     VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "%s before Hello: send Hello first", row->name);
		return;
	}
	if ((row->flags & VMM_NEEDS_HELLO) && r->version != c->version) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "request version %u, but Hello negotiated %u", r->version,
				     c->version);
		return;
	}
	log_debug("conn %u: %s (request %llu)", c->id, row->name,
		  (unsigned long long)r->request_id);
	row->handler(c, r, fds);
}

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_conn *c = arg;

	sup_note_io(c->sup, fd);
	for (int i = 0; i < SUP_CONN_FRAMES_PER_WAKE && !c->closing; i++) {
		Vnic__Vmm__VmmMessage *m = NULL;
		struct wire_fds fds;
		struct wire_err err;
		int rc;

		memset(&err, 0, sizeof(err));
		fds.n = 0;
		rc = wire_vmm_recv(c->fd, WIRE_PEER_VMM, &m, &fds, &err);
		if (rc == -EAGAIN)
			return;
		if (rc == -EPIPE || rc == -ECONNRESET) {
			vmm_conn_free(c);
			return;
		}
		if (rc == -ENOMEM) {
			log_error_f("conn %u: out of memory", c->id);
			return;
		}
		if (rc) {
			if (!conn_bad_frame(c, &err))
				return;
			continue;
		}
		c->errors = 0;
		c->in_dispatch = true;
		conn_dispatch(c, m, &fds);
		c->in_dispatch = false;
		/* Every fd a handler did not adopt is closed here (habit 3),
		 * before the reply leaves. */
		wire_fds_close(&fds);
		wire_vmm_free(m);
		if (!c->closing && conn_flush(c) < 0)
			c->closing = true;
	}
	/* Asked to close (a peer that does not read), or the frame budget
	 * is used up: then level-triggered EV_READ brings us back after the
	 * other events had their turn. */
	if (c->closing)
		vmm_conn_free(c);
}

struct vmm_conn *vmm_conn_new(struct sup *s, int fd, pid_t pid, uid_t uid, gid_t gid,
			      unsigned id)
{
	struct vmm_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->sup = s;
	c->fd = fd;
	c->pid = pid;
	c->uid = uid;
	c->gid = gid;
	c->id = id;
	STAILQ_INIT(&c->outq);
	TAILQ_INSERT_TAIL(&s->conns, c, link);
	s->nconns++;
	c->ev_read = event_new(s->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->ev_write = event_new(s->base, fd, EV_WRITE, conn_write_cb, c);
	return c;
}

void vmm_conn_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct sup *s = arg;
	struct vmm_conn *c;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		/* Out of fds or memory: the pending connection stays pending
		 * and would wake us at once, forever. Stop listening for a
		 * while instead (limits.c). */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			sup_accept_pause(s, errno);
		else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("accept: %s", strerror(errno));
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("SO_PEERCRED: %s: closing the connection", strerror(errno));
		close(fd);
		return;
	}
	c = vmm_conn_new(s, fd, cred.pid, cred.uid, cred.gid, ++s->next_conn_id);
	if (!c) {
		close(fd);
		return;
	}
	if (!c->ev_read || !c->ev_write) {
		vmm_conn_free(c);
		return;
	}

	if (cred.uid != 0 && cred.uid != geteuid() && !in_group(s, cred.uid, cred.gid)) {
		log_warn("conn %u: rejected pid %d uid %u gid %u: not root%s%s", c->id,
			 (int)cred.pid, (unsigned)cred.uid, (unsigned)cred.gid,
			 s->have_group ? " and not in group " : " (no --group given)",
			 s->have_group ? s->group_name : "");
		vmm_conn_reply_error(c, 0, VNIC__VMM__STATUS__STATUS_PERMISSION_DENIED,
				     "uid %u may not use vnicd: only root%s%s", (unsigned)cred.uid,
				     s->have_group ? " and members of group " : "",
				     s->have_group ? s->group_name : "");
		vmm_conn_free(c);
		return;
	}
	if (s->nconns > s->lim.max_conns || s->shutting_down) {
		log_warn("conn %u: refused: %s", c->id,
			 s->shutting_down ? "shutting down" : "too many connections");
		vmm_conn_reply_error(c, 0, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
				     "%s", s->shutting_down ? "vnicd is shutting down"
							    : "too many connections");
		vmm_conn_free(c);
		return;
	}
	log_info("conn %u: accepted pid %d uid %u gid %u", c->id, (int)cred.pid,
		 (unsigned)cred.uid, (unsigned)cred.gid);
	event_add(c->ev_read, NULL);
}
