/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_handlers: one handler per request vnicd accepts (features,
 * owner, rings, status, MTU, RARP); the memory table's are in
 * vhost_user_mem.c. Each checks its own payload whole before it changes
 * anything (step 4 of vhost_user.c's comment).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "announce.h"
#include "vhost_user_priv.h"

/* Stop the NIC, if one runs, before a change it cannot take live: a
 * planned restart. Returns VU_WAIT when the answer must wait. */
int vu_reconfigure(struct vu_conn *c, const struct vu_msg *m, const char *why)
{
	struct vu_endpoint *ep = c->ep;

	if (!vu_any_nic(ep))
		return 0;
	ep->reconfigs++;
	log_info("vhost-user %s: %s: stopping the workers (they start again once the rings are ready)",
		 ep->cfg.id, why);
	vu_stop_nic(ep, SUP_STOP_DEFAULT_MS, why);
	return vu_wait(c, m, -1, -1);
}

int vu_reconfigure_pair(struct vu_conn *c, const struct vu_msg *m, unsigned k, const char *why)
{
	struct vu_endpoint *ep = c->ep;

	if (!ep->p[k].nic)
		return 0;
	ep->reconfigs++;
	log_info("vhost-user %s: pair %u: %s: stopping its worker (it starts again once the rings "
		 "are ready)", ep->cfg.id, k, why);
	vu_stop_pair(ep, k, SUP_STOP_DEFAULT_MS, why);
	return vu_wait(c, m, (int)k, -1);
}

static int ring_index(const struct vu_conn *c, const struct vu_msg *m, uint64_t idx, char *err,
		      size_t errlen)
{
	char nb[24];

	if (idx >= c->nrings) {
		snprintf(err, errlen, "%s: ring %llu does not exist (%u queue pairs: rings 0..%u)",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), (unsigned long long)idx,
			 c->nrings / 2, c->nrings - 1);
		return -ERANGE;
	}
	return (int)idx;
}

int h_get_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = vu_offered_features(c->ep->cfg.af_packet);

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &f, sizeof(f));
}

/* Only VHOST_F_LOG_ALL changes while a worker runs (live migration
 * starts or ends): no planned restart; the worker starts or stops logging
 * and the answer (REPLY_ACK, or simply the next message read) follows its
 * DirtyLogSet. QEMU sends SET_LOG_BASE first, so turning logging on with
 * no log is refused: nothing would say where the bits go. */
static int set_log_all(struct vu_conn *c, struct vu_msg *m, uint64_t f, char *err, size_t errlen)
{
	bool on = f & (1ull << VU_F_LOG_ALL);
	char sub[200];
	int rc;

	if (on && c->log_fd < 0) {
		snprintf(err, errlen, "SET_FEATURES: VHOST_F_LOG_ALL while the rings run needs "
			 "SET_LOG_BASE first");
		return -EINVAL;
	}
	if (on) {
		rc = vu_log_covers(c->reg, c->nreg, c->log_size, sub, sizeof(sub));
		if (rc) {
			snprintf(err, errlen, "SET_FEATURES: VHOST_F_LOG_ALL: %s", sub);
			return rc;
		}
	}
	rc = vu_live_log(c, m, on ? c->log_fd : -1, c->log_size, c->log_offset, err, errlen);
	if (rc < 0)
		return rc;
	log_ratelimited(&c->ep->msg_rl, LOG_LEVEL_INFO,
			"vhost-user %s: VHOST_F_LOG_ALL %s: the worker %s logging, no restart",
			c->ep->cfg.id, on ? "acked" : "cleared", on ? "starts" : "stops");
	c->features = f;
	return rc;
}

int h_set_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = m->p.u64, extra = f & ~vu_offered_features(c->ep->cfg.af_packet);
	bool changed = c->features_set && f != c->features;

	if (extra) {
		snprintf(err, errlen, "SET_FEATURES 0x%llx: bits 0x%llx were not offered",
			 (unsigned long long)f, (unsigned long long)extra);
		return -ENOTSUP;
	}
	if (!(f & (1ull << VIRTIO_F_VERSION_1))) {
		snprintf(err, errlen, "SET_FEATURES 0x%llx: VERSION_1 is required", (unsigned long long)f);
		return -ENOTSUP;
	}
	if (changed && (f ^ c->features) == (1ull << VU_F_LOG_ALL) && vu_any_running(c->ep))
		return set_log_all(c, m, f, err, errlen);
	c->features = f;
	c->features_set = true;
	return changed ? vu_reconfigure(c, m, "new features") : 0;
}

int h_get_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = vu_offered_protocol_features();

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &f, sizeof(f));
}

int h_set_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t extra = m->p.u64 & ~vu_offered_protocol_features();

	if (extra) {
		snprintf(err, errlen, "SET_PROTOCOL_FEATURES: bits 0x%llx were not offered",
			 (unsigned long long)extra);
		return -ENOTSUP;
	}
	c->proto = m->p.u64;
	return 0;
}

int h_set_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	(void)m;
	(void)err;
	(void)errlen;
	c->owner = true;
	/* The front end announces its device: start pair 0's worker process
	 * now, so that the device's start (a migration's switch-over, on a
	 * destination that runs the guest already) waits for none. */
	if (!c->ep->p[0].nic)
		worker_spare_start(c->ep->sup, &c->spare, c->ep->cfg.id);
	return 0;
}

void vu_conn_forget_device(struct vu_conn *c)
{
	vu_conn_forget_log(c);
	for (unsigned i = 0; i < c->nreg; i++)
		close_fd(&c->reg[i].d.fd);
	c->nreg = 0;
	for (unsigned i = 0; i < c->nrings; i++) {
		close_fd(&c->r[i].kick_fd);
		close_fd(&c->r[i].call_fd);
		close_fd(&c->r[i].err_fd);
		memset(&c->r[i], 0, sizeof(c->r[i]));
		c->r[i].kick_fd = c->r[i].call_fd = c->r[i].err_fd = -1;
	}
	c->features_set = false;
	c->features = 0;
	c->status = 0;
	c->mtu = 0;
}

/* RESET_OWNER (deprecated; old QEMU sent it when it stopped the device):
 * the spec recommends ignoring it or disabling every ring, and warns that
 * reading it as "forget the connection" leads to bugs. vnicd disables and
 * stops every ring: the worker stops (the answer, with REPLY_ACK, waits
 * for its reap) and each ring keeps its final index as its base; the
 * owner, features, memory table and ring layout stay. A ring runs again
 * after a new SET_VRING_KICK and, with PROTOCOL_FEATURES, SET_VRING_ENABLE 1. */
int h_reset_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	for (unsigned i = 0; i < c->nrings; i++)
		c->r[i].started = c->r[i].enabled = false;
	return vu_reconfigure(c, m, "RESET_OWNER: every ring disabled");
}

/* A ring's layout may change only while no worker uses it. */
static int ring_idle(struct vu_conn *c, int i, const char *what, char *err, size_t errlen)
{
	if (c->ep->p[i / 2].nic && c->r[i].started) {
		snprintf(err, errlen, "%s: ring %d is running (GET_VRING_BASE first)", what, i);
		return -EBUSY;
	}
	return 0;
}

int h_set_vring_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(c, m, m->p.state.index, err, errlen);
	uint32_t num = m->p.state.num;

	if (i < 0)
		return i;
	if (num == 0 || num > VRING_MAX_SIZE || (num & (num - 1))) {
		snprintf(err, errlen, "SET_VRING_NUM: %u is not a power of 2 in 1..%u", num,
			 VRING_MAX_SIZE);
		return -EINVAL;
	}
	if (ring_idle(c, i, "SET_VRING_NUM", err, errlen))
		return -EBUSY;
	c->r[i].num = num;
	c->r[i].num_set = true;
	return 0;
}

/* The worker logs used-ring writes at the used ring's guest-physical
 * address (it knows no other): log_guest_addr must be that address. */
static int vring_log_addr_check(int i, uint64_t log_addr, uint64_t used_gpa, char *err,
				size_t errlen)
{
	if (log_addr == used_gpa)
		return 0;
	snprintf(err, errlen, "SET_VRING_ADDR: ring %d: log_guest_addr 0x%llx is not the used "
		 "ring's guest-physical address 0x%llx, where vnicd logs used-ring writes", i,
		 (unsigned long long)log_addr, (unsigned long long)used_gpa);
	return -EINVAL;
}

/* A running ring: the same rings, only VHOST_VRING_F_LOG may change (QEMU
 * sends it when migration starts and ends). No restart: the worker logs
 * used-ring writes whenever it logs, so the flag only needs its address
 * checked. Anything else is a layout change, refused while running. */
static int set_vring_log_live(struct vu_conn *c, int i, const struct vu_vring_addr *a, char *err,
			      size_t errlen)
{
	struct vu_ring *r = &c->r[i];
	bool log = a->flags & (1u << VU_VRING_F_LOG);
	uint64_t g[3];

	if (a->desc != r->desc || a->avail != r->avail || a->used != r->used) {
		snprintf(err, errlen, "SET_VRING_ADDR: ring %d is running (GET_VRING_BASE first)", i);
		return -EBUSY;
	}
	if (log && (vu_ring_gpas(c, r, g, err, errlen) ||
		    vring_log_addr_check(i, a->log, g[2], err, errlen)))
		return -EINVAL;
	if (r->log != log)
		log_ratelimited(&c->ep->msg_rl, LOG_LEVEL_INFO,
				"vhost-user %s: ring %d: used-ring logging %s (no restart)",
				c->ep->cfg.id, i, log ? "on" : "off");
	r->log = log;
	r->log_addr = a->log;
	return 0;
}

int h_set_vring_addr(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_vring_addr *a = &m->p.addr;
	int i = ring_index(c, m, a->index, err, errlen);
	bool log = a->flags & (1u << VU_VRING_F_LOG);
	struct vu_ring r;
	uint64_t g[3];

	if (i < 0)
		return i;
	if (log && !vu_log_all(c)) {
		snprintf(err, errlen, "SET_VRING_ADDR: ring %d: VHOST_VRING_F_LOG without "
			 "VHOST_F_LOG_ALL acked", i);
		return -EINVAL;
	}
	if (c->ep->p[i / 2].nic && c->r[i].started)
		return set_vring_log_live(c, i, a, err, errlen);
	if ((a->desc & 15) || (a->avail & 1) || (a->used & 3)) {
		snprintf(err, errlen, "SET_VRING_ADDR: ring %d: misaligned (desc 16, avail 2, used 4)", i);
		return -EINVAL;
	}
	r = c->r[i];
	r.desc = a->desc;
	r.avail = a->avail;
	r.used = a->used;
	/* Checked against the table now when both are known (the table may
	 * also come later; vu_try_start checks again). */
	if (c->nreg && r.num_set && vu_ring_gpas(c, &r, g, err, errlen))
		return -EFAULT;
	if (log && c->nreg && r.num_set && vring_log_addr_check(i, a->log, g[2], err, errlen))
		return -EINVAL;
	c->r[i].desc = a->desc;
	c->r[i].avail = a->avail;
	c->r[i].used = a->used;
	c->r[i].addr_set = true;
	c->r[i].log = log;
	c->r[i].log_addr = a->log;
	return 0;
}

int h_set_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(c, m, m->p.state.index, err, errlen);

	if (i < 0)
		return i;
	if (m->p.state.num > 0xffff) {
		snprintf(err, errlen, "SET_VRING_BASE: %u does not fit 16 bits", m->p.state.num);
		return -EINVAL;
	}
	if (ring_idle(c, i, "SET_VRING_BASE", err, errlen))
		return -EBUSY;
	c->r[i].base = (uint16_t)m->p.state.num;
	return 0;
}

/* GET_VRING_BASE: the ring stops. With a worker, the answer waits until
 * its pair's worker is reaped (it stops both rings of the pair; the other
 * one keeps its final index as its base and waits for its own
 * GET_VRING_BASE or a new kick); the other pairs go on. */
int h_get_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(c, m, m->p.state.index, err, errlen);
	struct vu_vring_state st;

	if (i < 0)
		return i;
	c->r[i].started = false;
	if (c->ep->p[i / 2].nic) {
		vu_stop_pair(c->ep, (unsigned)i / 2, SUP_STOP_DEFAULT_MS, "GET_VRING_BASE");
		return vu_wait(c, m, i / 2, i);
	}
	st.index = (uint32_t)i;
	st.num = c->r[i].base;
	log_info("vhost-user %s: GET_VRING_BASE ring %d answered: %u (no worker)", c->ep->cfg.id, i,
		 st.num);
	return vu_send_reply(c->fd, &m->hdr, &st, sizeof(st));
}

/* KICK, CALL, ERR: index and the fd (or NOFD with none). */
static int vring_fd(struct vu_conn *c, struct vu_msg *m, int *ring, int *fd, char *err,
		    size_t errlen)
{
	uint64_t v = m->p.u64;
	char nb[24], sub[128];
	int i;

	if (v & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD)) {
		snprintf(err, errlen, "%s: unknown bits 0x%llx",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), (unsigned long long)v);
		return -EINVAL;
	}
	i = ring_index(c, m, v & VU_VRING_IDX_MASK, err, errlen);
	if (i < 0)
		return i;
	if (!!(v & VU_VRING_NOFD) != (m->nfds == 0)) {
		snprintf(err, errlen, "%s: the no-fd flag and the %u fds sent disagree",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), m->nfds);
		return -EBADF;
	}
	*ring = i;
	*fd = -1;
	if (m->nfds) {
		if (validate_eventfd(m->fds[0], sub, sizeof(sub))) {
			snprintf(err, errlen, "%s: %s", vu_request_name(m->hdr.request, nb, sizeof(nb)),
				 sub);
			return -EBADF;
		}
		*fd = m->fds[0];
		m->fds[0] = -1;
	}
	(void)c;
	return 0;
}

int h_set_vring_kick(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);
	bool live;

	if (rc)
		return rc;
	/* No fd (VHOST_USER_VRING_NOFD_MASK): the front end will not kick,
	 * and the ring starts now; its worker polls it (vu_try_start). */
	live = c->ep->p[i / 2].nic && c->r[i].started;
	close_fd(&c->r[i].kick_fd);
	c->r[i].kick_fd = fd;
	c->r[i].kick_polled = fd < 0;
	c->r[i].started = true;
	return live ? vu_reconfigure_pair(c, m, (unsigned)i / 2, "new kick fd") : 0;
}

/* A new call fd for a running ring (QEMU's interrupt mask/unmask, and its
 * device start on a migration's destination): the worker swaps it live,
 * no planned restart; the answer follows its CallFdSet (ev_resume), so
 * messages stay in order. A worker still starting swaps before its first
 * ring run, so the answer comes at once (nic_set_call_fd). The NIC gets
 * its own copy of fd. */
static int set_vring_call_live(struct vu_conn *c, struct vu_msg *m, int i, int fd, char *err,
			       size_t errlen)
{
	struct vu_endpoint *ep = c->ep;
	char sub[160];
	int dup_fd, rc;

	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dup_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "SET_VRING_CALL: duplicating the fd: %s", strerror(errno));
		close(fd);
		return rc;
	}
	/* Set before the call: with no worker running, or one not yet
	 * READY, call_fd_set comes at once, from inside it. */
	vu_wait(c, m, i / 2, -1);
	c->wait_call = true;
	c->call_done = false;
	rc = nic_set_call_fd(ep->p[i / 2].nic, (uint32_t)i, dup_fd, sub, sizeof(sub));
	if (rc) {
		c->waiting = c->wait_call = false;
		close(dup_fd);
		close(fd);
		snprintf(err, errlen, "SET_VRING_CALL: %s", sub);
		return rc;
	}
	close_fd(&c->r[i].call_fd);
	c->r[i].call_fd = fd;
	log_ratelimited(&ep->msg_rl, LOG_LEVEL_DEBUG,
			"vhost-user %s: ring %d: new call fd: the worker swaps it, no restart",
			ep->cfg.id, i);
	return VU_WAIT;
}

/* SET_VRING_CALL: a running ring with an fd swaps it live; without one
 * (VHOST_USER_VRING_NOFD_MASK: the front end polls) it is a planned
 * restart, as before (vu_try_start gives the NIC an eventfd nobody reads). */
int h_set_vring_call(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);
	bool live;

	if (rc)
		return rc;
	live = c->ep->p[i / 2].nic && c->r[i].started;
	if (live && fd >= 0 && !c->ep->p[i / 2].stopping)
		return set_vring_call_live(c, m, i, fd, err, errlen);
	close_fd(&c->r[i].call_fd);
	c->r[i].call_fd = fd; /* -1: vu_try_start makes one that nobody reads */
	return live ? vu_reconfigure_pair(c, m, (unsigned)i / 2, "new call fd") : 0;
}

int h_set_vring_err(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);

	if (rc)
		return rc;
	close_fd(&c->r[i].err_fd);
	c->r[i].err_fd = fd;
	return 0;
}

/* GET_QUEUE_NUM: front ends read the answer two ways. QEMU and DPDK
 * virtio-user count queue pairs (QEMU 7.2 net/vhost-user.c: "you are
 * asking more queues than supported" when its queues= is larger);
 * cloud-hypervisor counts virtqueues (virtio-devices/src/vhost_user/net.rs:
 * "requested too many queues" when 2 x pairs is larger), as libvhost-user
 * and rust-vmm's vhost-user-backend answer. vnicd answers virtqueues:
 * every front end then attaches with its default and with as many pairs
 * as vnicd serves; one that reads pairs may ask for more than that, and
 * then its first ring past the last gets a clear refusal (ring_index). */
int h_get_queue_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t v = c->nrings;

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &v, sizeof(v));
}

int h_set_vring_enable(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(c, m, m->p.state.index, err, errlen);
	bool on = m->p.state.num != 0;

	if (i < 0)
		return i;
	if (m->p.state.num > 1) {
		snprintf(err, errlen, "SET_VRING_ENABLE: %u is neither 0 nor 1", m->p.state.num);
		return -EINVAL;
	}
	/* No worker: the pair's tap queue leaves the steering now (with
	 * one, when it is reaped: vu_nic_gone). Also when the ring was off
	 * already: after a device reset (SET_STATUS 0) every ring reads off
	 * while a stopped pair's queue may still be attached. */
	if (!on && i / 2 > 0 && !c->ep->p[i / 2].nic)
		vu_tap_queue(c->ep, &c->ep->p[i / 2], false);
	if (c->r[i].enabled == on)
		return 0;
	c->r[i].enabled = on;
	if (on)
		return 0;
	return vu_reconfigure_pair(c, m, (unsigned)i / 2, "ring disabled");
}

/* SEND_RARP: announce the guest's MAC after a migration, as QEMU's own
 * device does, by a RARP broadcast out of the backend: the tap's pair-0
 * queue, or on an AF_PACKET endpoint a packet socket of its own on the
 * interface. Answered whatever happens (the spec gives SEND_RARP no
 * failure answer); a failure is logged, rate-limited, as the front end
 * may send it at will. */
int h_send_rarp(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	struct vu_endpoint *ep = c->ep;
	char why[160];
	int rc;

	(void)err;
	(void)errlen;
	/* The guest's MAC is the front end's (QEMU's mac=), not
	 * necessarily the endpoint's; checked as AddNic checks a MAC. */
	rc = validate_mac(m->p.bytes, 6, why, sizeof(why));
	if (rc == 0)
		rc = announce_send(ep->cfg.af_packet ? -1 : ep->p[0].tap_fd, TAP_VNET_HDR_LEN,
				   ep->ifname, ep->cfg.netns, m->p.bytes, why, sizeof(why));
	if (rc)
		log_ratelimited(&ep->msg_rl, LOG_LEVEL_WARN, "vhost-user %s: SEND_RARP: %s", ep->cfg.id,
				why);
	else
		log_debug("vhost-user %s: SEND_RARP: announced on %s", ep->cfg.id, ep->ifname);
	return 0;
}

int h_net_set_mtu(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t mtu = m->p.u64;

	if (mtu < VALIDATE_MTU_MIN || mtu > VALIDATE_MTU_MAX) {
		snprintf(err, errlen, "NET_SET_MTU: %llu is outside %u..%u", (unsigned long long)mtu,
			 VALIDATE_MTU_MIN, VALIDATE_MTU_MAX);
		return -EINVAL;
	}
	if (c->mtu == mtu)
		return 0;
	c->mtu = (uint32_t)mtu;
	return vu_reconfigure(c, m, "new MTU");
}

/* SET_STATUS 0 is the driver's device reset. QEMU sends it at every
 * device stop (driver reset or reload, VM stop, a migration's switch-over),
 * before GET_VRING_BASE, and then starts the device again with features,
 * rings and enables but, with CONFIGURE_MEM_SLOTS, no memory table: it
 * sends only changes to the table it believes the back end holds. So it
 * stops the device as RESET_OWNER does, and keeps what the front end will
 * not send again: every ring is stopped and disabled (the answer waits for
 * the workers' reap) and keeps its final index as its base, for the
 * GET_VRING_BASE that follows; NEEDS_RESET and a failed start are cleared;
 * the memory table, features, dirty log and error eventfds stay. Any other
 * value is the driver's status. */
int h_set_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int rc;

	if (m->p.u64 > 0xff) {
		snprintf(err, errlen, "SET_STATUS: 0x%llx is not a status byte",
			 (unsigned long long)m->p.u64);
		return -EINVAL;
	}
	c->status = m->p.u64;
	if (m->p.u64 != 0)
		return 0;
	for (unsigned i = 0; i < c->nrings; i++)
		c->r[i].started = c->r[i].enabled = false;
	rc = vu_reconfigure(c, m, "SET_STATUS 0: device reset");
	c->needs_reset = false;
	c->ep->start_failed = false;
	return rc;
}

int h_get_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t st = c->status | (c->needs_reset ? VU_STATUS_NEEDS_RESET : 0);

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &st, sizeof(st));
}
