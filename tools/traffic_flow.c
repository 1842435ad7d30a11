/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_flow: the flows, one per NIC and direction. The guest side
 * builds g2h frames into its TX ring and checks the h2g frames of its RX
 * ring; the host side does the same on its end of the backend. Every frame
 * received is checked and recorded once in its flow's bitmap.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "traffic.h"

/* ---- flows ---- */

int tr_flow_reserve(struct tr_flow *f, uint64_t seq)
{
	size_t cap = f->seen_cap;
	uint8_t *p;

	if (seq < cap)
		return 0;
	while (cap <= seq)
		cap = cap ? cap * 2 : 65536;
	p = realloc(f->seen, cap / 8);
	if (!p)
		return -ENOMEM;
	memset(p + f->seen_cap / 8, 0, (cap - f->seen_cap) / 8);
	f->seen = p;
	f->seen_cap = cap;
	return 0;
}

void tr_flow_record(struct tr_run *r, struct tr_nic *n, unsigned dir, uint64_t seq,
			   size_t bytes)
{
	struct tr_flow *f = &n->f[dir];
	uint64_t now = bench_now_ns();

	if (seq >= f->sent) {
		f->corrupt++;
		tr_fail(r, "nic %u %s: seq %llu was never sent (sent %llu)", n->idx,
			dir == FRAMES_G2H ? "g2h" : "h2g", (unsigned long long)seq,
			(unsigned long long)f->sent);
		return;
	}
	if (f->seen[seq / 8] & (1u << (seq % 8))) {
		f->dup++;
		tr_fail(r, "nic %u %s: seq %llu arrived twice", n->idx,
			dir == FRAMES_G2H ? "g2h" : "h2g", (unsigned long long)seq);
		return;
	}
	f->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
	if (seq != f->next_seq)
		f->ooo++;
	f->next_seq = seq + 1;
	f->recv++;
	f->recv_bytes += bytes;
	if (!f->first_ns)
		f->first_ns = now;
	f->last_ns = now;
}

bool tr_may_send(const struct tr_run *r, const struct tr_flow *f, uint64_t now)
{
	if (!f->on || tr_stop || f->sent >= f->limit)
		return false;
	if (now >= r->t0 + (uint64_t)(r->seconds * TR_NS))
		return false;
	return f->sent - f->recv < r->window &&
	       f->sent_bytes - f->recv_bytes < TR_WINDOW_BYTES;
}

/* ---- guest side ---- */

void tr_guest_tx(struct tr_run *r, struct tr_nic *n, uint64_t now)
{
	struct tr_flow *f = &n->f[FRAMES_G2H];
	char err[200];
	unsigned added = 0;

	int got = guest_tx_reclaim(n->g, err, sizeof(err));

	if (got < 0) {
		tr_fail(r, "nic %u: %s", n->idx, err);
		f->on = false;
		return;
	}
	if (got > 0)
		n->tx_used_ns = now;
	n->tx_wait = false;
	for (unsigned round = 0; round < 4; round++) {
		while (added < TR_BURST && tr_may_send(r, f, now)) {
			unsigned slot;
			uint8_t *p = guest_tx_slot(n->g, &slot);
			uint32_t len;

			if (!p)
				break;
			if (tr_flow_reserve(f, f->sent) < 0) {
				tr_fail(r, "out of memory");
				f->on = false;
				break;
			}
			len = frames_size(n->idx, FRAMES_G2H, f->sent, r->fixed, r->maxsize);
			frames_build(p, len, n->idx, FRAMES_G2H, f->sent, n->host_mac);
			if (guest_tx_add(n->g, slot, len) < 0)
				break;
			f->sent++;
			f->sent_bytes += len;
			added++;
			/* --guest-batch: publish (and kick if asked) every N
			 * frames, as a Linux guest does without xmit_more. */
			if (r->guest_batch && added % r->guest_batch == 0)
				guest_tx_flush(n->g);
		}
		if (added)
			guest_tx_flush(n->g);
		/* Out of slots while we still want to send: ask for a TX
		 * interrupt; if slots came back meanwhile, go on. */
		if (n->g->ntxfree == 0 && tr_may_send(r, f, now)) {
			if (!guest_tx_wait(n->g)) {
				n->tx_wait = true;
				return;
			}
			if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0) {
				tr_fail(r, "nic %u: %s", n->idx, err);
				f->on = false;
				return;
			}
			continue;
		}
		return;
	}
}

void tr_guest_rx(struct tr_run *r, struct tr_nic *n)
{
	char err[200];

	n->rx_more = false;
	for (unsigned i = 0; i < 2 * GUEST_QUEUE_SIZE; i++) {
		const uint8_t *fr;
		size_t len;
		uint64_t seq;
		int rc = guest_rx_next(n->g, &fr, &len, err, sizeof(err));

		if (rc < 0) {
			tr_fail(r, "nic %u: %s", n->idx, err);
			return;
		}
		if (rc == 0) {
			if (!guest_rx_arm(n->g))
				return;
			continue; /* arrived while re-arming: drain again */
		}
		rc = frames_check(fr, len, n->idx, FRAMES_H2G, r->fixed, r->maxsize, n->host_mac,
				  r->backend == TR_SOCKET, &seq, err, sizeof(err));
		if (rc == -ENOMSG && r->backend != TR_SOCKET) {
			n->other_rx++;  /* the netns kernel's own traffic */
			n->other_rx_bytes += len;
			continue;
		}
		if (rc < 0) {
			n->f[FRAMES_H2G].corrupt++;
			tr_fail(r, "nic %u h2g: frame of %zu bytes: %s", n->idx, len,
				rc == -ENOMSG ? "not one of ours" : err);
			continue;
		}
		tr_flow_record(r, n, FRAMES_H2G, seq, len);
	}
	n->rx_more = true; /* budget spent: come back without sleeping */
}

/* ---- host side ---- */

void tr_host_rx(struct tr_run *r, struct tr_nic *n)
{
	char err[200];

	if (n->stalled)
		return; /* --stall-backend-after: the peer stops reading */
	for (unsigned i = 0; i < 256; i++) {
		ssize_t len = recv(n->host_fd, r->buf, FRAMES_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
		uint64_t seq;
		int rc;

		if (len < 0) {
			/* ECONNRESET: vnicd closed the worker's end with frames
			 * of ours unread, expected once the NIC is gone. */
			if (errno != EAGAIN && errno != EINTR && !(n->gone && errno == ECONNRESET))
				tr_fail(r, "nic %u: host recv: %s", n->idx, strerror(errno));
			return;
		}
		if (len == 0 && r->backend == TR_SOCKET) {
			/* End of file: vnicd closed the worker's end. The
			 * worker never sends an empty frame. */
			if (!n->gone)
				tr_fail(r, "nic %u: the worker's end of the backend closed",
					n->idx);
			return;
		}
		if (len > FRAMES_MAX) {
			n->f[FRAMES_G2H].corrupt++;
			tr_fail(r, "nic %u g2h: host received %zd bytes, more than any frame sent",
				n->idx, len);
			continue;
		}
		if (r->backend == TR_SOCKET)
			rc = frames_check(r->buf, (size_t)len, n->idx, FRAMES_G2H, r->fixed,
					  r->maxsize, n->host_mac, true, &seq, err, sizeof(err));
		else
			rc = frames_check_payload(r->buf, (size_t)len, n->idx, FRAMES_G2H, r->fixed,
						  r->maxsize, &seq, err, sizeof(err));
		if (rc < 0) {
			n->f[FRAMES_G2H].corrupt++;
			tr_fail(r, "nic %u g2h: %zd bytes: %s", n->idx, len,
				rc == -ENOMSG ? "not one of ours" : err);
			continue;
		}
		tr_flow_record(r, n, FRAMES_G2H, seq,
			       r->backend == TR_SOCKET ? (size_t)len : (size_t)len + FRAMES_HDRS);
	}
}

void tr_host_tx(struct tr_run *r, struct tr_nic *n, uint64_t now)
{
	struct tr_flow *f = &n->f[FRAMES_H2G];

	n->host_blocked = false;
	for (unsigned i = 0; i < TR_BURST && tr_may_send(r, f, now); i++) {
		uint32_t len = frames_size(n->idx, FRAMES_H2G, f->sent, r->fixed, r->maxsize);
		ssize_t w;

		if (tr_flow_reserve(f, f->sent) < 0) {
			tr_fail(r, "out of memory");
			f->on = false;
			return;
		}
		if (r->backend == TR_SOCKET) {
			frames_build(r->buf, len, n->idx, FRAMES_H2G, f->sent, n->host_mac);
			w = send(n->host_fd, r->buf, len, MSG_DONTWAIT);
		} else {
			frames_build_payload(r->buf, len, n->idx, FRAMES_H2G, f->sent);
			w = send(n->host_fd, r->buf, len - FRAMES_HDRS, MSG_DONTWAIT);
		}
		if (w < 0) {
			if (errno == EAGAIN || errno == ENOBUFS) {
				n->host_blocked = true;
				return;
			}
			tr_fail(r, "nic %u: host send: %s", n->idx, strerror(errno));
			f->on = false;
			return;
		}
		f->sent++;
		f->sent_bytes += len;
	}
}
