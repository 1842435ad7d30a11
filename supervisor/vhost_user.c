/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user: the vhost-user back end for net devices (vhost_user.h).
 *
 * One struct vu_endpoint per endpoint, one struct vu_conn for the front
 * end connected to it (at most one). Every message passes, in order:
 *   1. framing (vu_recv): header, size <= VU_PAYLOAD_MAX, fds only with
 *      the first bytes, at most VU_MAX_FDS;
 *   2. the request table (vu_msg_check): known request, version-1 flags,
 *      payload size and fd count in the row's range;
 *   3. negotiation: a request whose protocol feature was not negotiated,
 *      or that needs SET_OWNER first, is refused;
 *   4. the handler, which checks its own payload whole (indices, sizes,
 *      regions, ring addresses) before it changes anything.
 * A refused message: with NEED_REPLY, the u64 failure answer (1); a
 * request that always has an answer (GET_*) cannot be answered wrongly,
 * so the connection is closed; SET_LOG_BASE (VU_ROW_ANSWERED) gets the
 * failure answer even without NEED_REPLY (QEMU waits for one, C11); a
 * request with no row whose answer the spec makes mandatory gets the
 * failure in its own reply type, or the connection closes
 * (vu_unrowed_refusal); otherwise the message is dropped. Each
 * gets one rate-limited log line and counts in status (vhost_rejected).
 * A framing error closes the connection (one log line). Every fd of a
 * message that a handler did not adopt is closed after it.
 *
 * The NIC: when both rings are ready (size, addresses, kick fd, enabled,
 * memory table set), the endpoint builds a struct nic_spec from what the
 * front end sent (ring addresses translated from the front end's virtual
 * addresses to guest physical ones through the memory table; every fd
 * duplicated, so that the NIC owns its own), validates it with
 * validate_nic_spec like any AddNic, and starts it with nic_start as its
 * owner. The tap is passed as a tap fd (vnicd opened it at endpoint add).
 * Stopping it (GET_VRING_BASE, a new configuration, a disconnect) is
 * nic_stop; the owner's gone() callback says the worker is reaped, and
 * only then is the waiting answer sent and reading resumed (messages are
 * handled strictly in order; while one waits, none is read).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vhost_user_priv.h"

#define VU_MSGS_PER_WAKE 64

struct log_ratelimit vu_rl = LOG_RATELIMIT_INIT(5000, 20);

uint64_t vu_offered_features(bool af_packet)
{
	/* VIRTIO_NET_F_MQ: QEMU shows the guest only what the back end
	 * offers of it (hw/net/vhost_net.c user_feature_bits); its control
	 * queue stays in QEMU, each pair's rings come here (issue 15). */
	return validate_nic_offered(af_packet ? NIC_BACKEND_AF_PACKET : NIC_BACKEND_TAP_FD) |
	       (1ull << VU_F_PROTOCOL_FEATURES) |
	       (1ull << VU_F_LOG_ALL) | (1ull << VIRTIO_NET_F_MQ);
}

uint64_t vu_offered_protocol_features(void)
{
	return (1ull << VU_PROTO_MQ) | (1ull << VU_PROTO_LOG_SHMFD) | (1ull << VU_PROTO_RARP) |
	       (1ull << VU_PROTO_REPLY_ACK) |
	       (1ull << VU_PROTO_NET_MTU) | (1ull << VU_PROTO_CONFIGURE_MEM_SLOTS) |
	       (1ull << VU_PROTO_STATUS) | (1ull << VU_PROTO_INFLIGHT_SHMFD);
}

void vu_errorf(struct vu_endpoint *ep, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ep->last_error, sizeof(ep->last_error), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------- answering messages */

/* Does a row answer this message whatever NEED_REPLY says (its protocol
 * feature negotiated: QEMU reads SET_LOG_BASE's answer only then)? */
static bool vu_always_answered(const struct vu_conn *c, const struct vu_row_spec *row)
{
	return row && (row->flags & VU_ROW_ANSWERED) &&
	       (row->proto_bit < 0 || (c->proto & (1ull << row->proto_bit)));
}

int vu_wait(struct vu_conn *c, const struct vu_msg *m, int pair, int ring)
{
	c->waiting = true;
	c->wait_hdr = m->hdr;
	c->wait_pair = pair;
	c->wait_ring = ring;
	c->wait_log = c->wait_call = false;
	return VU_WAIT;
}

/* Is the waiting answer due? After the reap (of the pair waited for, or
 * of every pair); a log change: once every running pair took the log, or,
 * when one could not map it, once all are reaped: this stops them (and
 * forgets the log, so none starts on it), because no worker may write
 * unlogged while the front end believes in its log. */
static bool vu_wait_over(struct vu_endpoint *ep, struct vu_conn *c)
{
	if (c->wait_call)
		return c->call_done || !ep->p[c->wait_pair].nic;
	if (!c->wait_log)
		return c->wait_pair >= 0 ? !ep->p[c->wait_pair].nic : !vu_any_nic(ep);
	if (vu_log_pending(ep))
		return false;
	if (!c->log_failed || !vu_any_nic(ep))
		return true;
	vu_conn_forget_log(c); /* no new worker on it either */
	vu_stop_nic(ep, SUP_STOP_DEFAULT_MS, "a worker could not map the dirty log");
	return false;
}

/* The answer that waited for a reap, then resume reading. */
void vu_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	struct vu_conn *c = ep->conn;

	(void)fd;
	(void)what;
	if (ep->removing || ep->shutting_down) {
		if (ep->removing && !vu_any_nic(ep))
			vu_finish_remove(ep);
		return;
	}
	if (!c)
		return;
	if (c->waiting && vu_wait_over(ep, c)) {
		uint64_t failed = c->wait_log && c->log_failed;
		int rc;

		c->waiting = c->wait_log = c->wait_call = false;
		if (c->wait_ring >= 0) {
			struct vu_vring_state st = { .index = (uint32_t)c->wait_ring,
						     .num = c->r[c->wait_ring].base };

			rc = vu_send_reply(c->fd, &c->wait_hdr, &st, sizeof(st));
			log_info("vhost-user %s: GET_VRING_BASE ring %d answered: %u (worker reaped)",
				 ep->cfg.id, c->wait_ring, st.num);
		} else if ((c->wait_hdr.flags & VU_FLAG_NEED_REPLY) ||
			   vu_always_answered(c, vu_request_spec(c->wait_hdr.request))) {
			rc = vu_send_reply(c->fd, &c->wait_hdr, &failed, sizeof(failed));
		} else {
			rc = 0; /* no answer asked for: only the order waited */
		}
		if (rc) {
			vu_conn_close(ep, "cannot send a reply");
			return;
		}
		event_add(c->ev_read, NULL);
		/* Messages may already be waiting in the socket. */
		event_active(c->ev_read, EV_READ, 0);
	}
	vu_try_start(ep);
}

/* One message. Returns false when the connection was closed. */
static bool vu_dispatch(struct vu_conn *c, struct vu_msg *m)
{
	struct vu_endpoint *ep = c->ep;
	const struct vu_row_spec *row;
	char err[256];
	bool answer;
	int rc;

	ep->messages++;
	if (log_get_level() >= LOG_LEVEL_DEBUG) {
		/* The migration timeline (doc/benchmarks.md): every request,
		 * with its first 8 payload bytes (ring index and number, or
		 * the u64 argument). Debug only: never shown by default. */
		uint64_t a = 0;
		char nb[24];

		memcpy(&a, m->p.bytes, m->hdr.size < sizeof(a) ? m->hdr.size : sizeof(a));
		log_debug("vhost-user %s: <- %s size %u fds %u flags 0x%x arg 0x%llx", ep->cfg.id,
			  vu_request_name(m->hdr.request, nb, sizeof(nb)), m->hdr.size, m->nfds,
			  m->hdr.flags, (unsigned long long)a);
	}
	rc = vu_msg_check(m, err, sizeof(err));
	row = vu_request_spec(m->hdr.request);
	if (rc == 0 && row->proto_bit >= 0 && !(c->proto & (1ull << row->proto_bit))) {
		snprintf(err, sizeof(err), "%s: protocol feature %d was not negotiated", row->name,
			 row->proto_bit);
		rc = -ENOTSUP;
	}
	if (rc == 0 && (row->flags & VU_ROW_NEEDS_OWNER) && !c->owner) {
		/* The spec makes SET_OWNER first; DPDK virtio-user (server=1)
		 * never sends it again when a back end reconnects, and DPDK's
		 * own back end does not insist. The connection is the owner. */
		log_debug("vhost-user %s: %s before SET_OWNER: taken as the owner", ep->cfg.id,
			  row->name);
		c->owner = true;
	}
	if (rc == 0)
		rc = row->handler(c, m, err, sizeof(err));
	if (rc == VU_WAIT) {
		log_debug("vhost-user %s: %s waits (answer and reading deferred)", ep->cfg.id,
			  row->name);
		event_del(c->ev_read);
		return true;
	}
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -EAGAIN) {
		vu_conn_close(ep, "cannot send a reply");
		return false;
	}
	answer = (m->hdr.flags & VU_FLAG_NEED_REPLY) || vu_always_answered(c, row);
	if (rc < 0) {
		enum vu_refusal how = row ? VU_REFUSE_PLAIN : vu_unrowed_refusal(m->hdr.request);

		ep->rejected++;
		vu_errorf(ep, "%s", err);
		log_ratelimited(&vu_rl, LOG_LEVEL_WARN, "vhost-user %s: refused: %s", ep->cfg.id, err);
		if (rc == -EPROTO || (row && (row->flags & VU_ROW_REPLIES)) ||
		    how == VU_REFUSE_CLOSE) {
			/* Nothing we could answer is right: drop the peer. */
			vu_conn_close(ep, err);
			return false;
		}
		if (how == VU_REFUSE_EMPTY && vu_send_reply(c->fd, &m->hdr, NULL, 0)) {
			vu_conn_close(ep, "cannot send a reply");
			return false;
		}
		answer = how == VU_REFUSE_U64 || (answer && how == VU_REFUSE_PLAIN);
	} else if (!(row->flags & VU_ROW_REPLIES)) {
		/* Something changed: a start that failed may work now. */
		ep->start_failed = false;
	}
	if (answer && !(row && (row->flags & VU_ROW_REPLIES))) {
		uint64_t v = rc < 0 ? 1 : 0;

		if (vu_send_reply(c->fd, &m->hdr, &v, sizeof(v))) {
			vu_conn_close(ep, "cannot send a reply");
			return false;
		}
	}
	vu_try_start(ep);
	return true;
}

static void vu_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	struct vu_conn *c = ep->conn;

	(void)what;
	if (c)
		sup_note_io(ep->sup, fd);
	for (int k = 0; c && !c->waiting && k < VU_MSGS_PER_WAKE; k++) {
		int rc = vu_recv(c->fd, &c->rx);
		bool alive;

		if (rc == 0)
			return;
		if (rc < 0) {
			char why[96];

			if (rc == -EPIPE || rc == -ECONNRESET)
				snprintf(why, sizeof(why), "front end disconnected");
			else
				snprintf(why, sizeof(why), "bad framing: %s", strerror(-rc));
			if (rc != -EPIPE && rc != -ECONNRESET)
				ep->rejected++;
			vu_conn_close(ep, why);
			return;
		}
		alive = vu_dispatch(c, &c->rx.m);
		if (!alive)
			return;
		vu_rx_reset(&c->rx);
	}
	/* More may be there: fairness with other endpoints. */
	if (c && !c->waiting)
		event_active(c->ev_read, EV_READ, 0);
}

/* ------------------------------------------------------- connections */

struct vu_conn *vu_conn_new(struct vu_endpoint *ep, int fd)
{
	struct vu_conn *c = calloc(1, sizeof(*c));

	if (c) {
		c->reg = calloc(MEMTABLE_MAX_REGIONS, sizeof(*c->reg));
		c->nrings = 2 * ep->max_pairs;
		c->r = calloc(c->nrings, sizeof(*c->r));
		c->ev_read = event_new(ep->sup->base, fd, EV_READ | EV_PERSIST, vu_read_cb, ep);
	}
	if (!c || !c->reg || !c->r || !c->ev_read) {
		log_warn("vhost-user %s: out of memory for a connection", ep->cfg.id);
		if (c) {
			if (c->ev_read)
				event_free(c->ev_read);
			free(c->reg);
			free(c->r);
			free(c);
		}
		return NULL;
	}
	c->ep = ep;
	c->fd = fd;
	for (unsigned i = 0; i < c->nrings; i++)
		c->r[i].kick_fd = c->r[i].call_fd = c->r[i].err_fd = -1;
	c->log_fd = c->inflight_fd = -1;
	worker_spare_init(&c->spare);
	event_add(c->ev_read, NULL);
	ep->conn = c;
	return c;
}

void vu_conn_open(struct vu_endpoint *ep, int fd)
{
	if (!vu_conn_new(ep, fd)) {
		close(fd);
		return;
	}
	ep->conn_gen++;
	ep->connects++;
	ep->start_failed = false;
	ep->backoff_ms = 0;
	log_info("vhost-user %s: front end connected (%s %s)", ep->cfg.id,
		 ep->cfg.server ? "accepted on" : "connected to", ep->cfg.path);
}

void vu_conn_close(struct vu_endpoint *ep, const char *why)
{
	struct vu_conn *c = ep->conn;

	if (!c)
		return;
	log_info("vhost-user %s: connection closed: %s", ep->cfg.id, why);
	ep->conn = NULL;
	event_free(c->ev_read);
	close(c->fd);
	worker_spare_discard(ep->sup, &c->spare, "front end disconnected");
	vu_rx_reset(&c->rx);
	vu_conn_forget_device(c);
	close_fd(&c->inflight_fd);
	free(c->reg);
	free(c->r);
	free(c);
	/* The worker stops; its reap frees everything the NIC holds. */
	vu_stop_nic(ep, SUP_STOP_DEFAULT_MS, "front end disconnected");
	/* Pairs past the first go with the front end that asked for them:
	 * no host->guest flow may be steered to a queue the next one may
	 * never read (a worker's own copy keeps a queue until its exit). */
	for (unsigned k = 1; k < ep->max_pairs; k++) {
		close_fd(&ep->p[k].tap_fd);
		ep->p[k].detached = false;
	}
	/* A log change this connection waited for answers nobody now: the
	 * next connection's wait must not count a stopping worker's. */
	for (unsigned k = 0; k < ep->max_pairs; k++)
		ep->p[k].log_pending = false;
	if (!ep->cfg.server && !ep->removing && !ep->shutting_down)
		vu_client_schedule(ep);
}
