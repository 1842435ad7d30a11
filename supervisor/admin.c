/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin: the operator's requests and status fields (issue 10).
 *
 * - SetLogLevel (vnicctl log-level): uid 0 and vnicd's own uid only; a
 *   member of --group is a VMM, and the log level is the daemon's.
 * - The owner and device fields of NicStatus (20-29): who owns a NIC
 *   (the connection's SO_PEERCRED pid and uid), its backend, tap, MAC,
 *   negotiated features and the uid/gid its worker runs as.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "supervisor.h"

bool admin_conn_is_admin(const struct vmm_conn *c)
{
	return c->uid == 0 || c->uid == geteuid();
}

struct vmm_conn *admin_conn_by_id(struct sup *s, unsigned id)
{
	struct vmm_conn *c;

	TAILQ_FOREACH(c, &s->conns, link)
		if (c->id == id && !c->closing)
			return c;
	return NULL;
}

void vmm_handle_set_log_level(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			      struct wire_fds *fds)
{
	const Vnic__Vmm__SetLogLevel *sl = r->set_log_level;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__LogLevelReply lr;
	enum log_level old = log_get_level(), lv;
	char oldname[16], newname[16], why[96];

	if (!admin_conn_is_admin(c)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_PERMISSION_DENIED,
				     "uid %u may not change the log level: only root and uid %u",
				     (unsigned)c->uid, (unsigned)geteuid());
		return;
	}
	if (log_level_parse(sl->level, &lv) < 0) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "log level \"%.32s\": use error, warn, info or debug",
				     sl->level);
		return;
	}
	snprintf(why, sizeof(why), "conn %u (pid %d uid %u)", c->id, (int)c->pid,
		 (unsigned)c->uid);
	log_change_level(lv, why);
	snprintf(oldname, sizeof(oldname), "%s", log_level_name(old));
	snprintf(newname, sizeof(newname), "%s", log_level_name(lv));
	vnic__vmm__reply__init(&rep);
	vnic__vmm__log_level_reply__init(&lr);
	lr.old_level = oldname;
	lr.level = newname;
	rep.body_case = VNIC__VMM__REPLY__BODY_LOG_LEVEL;
	rep.log_level = &lr;
	vmm_conn_reply(c, &rep, r->request_id, VNIC__VMM__STATUS__STATUS_OK, NULL);
}

void vmm_handle_upgrade(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	struct sup *s = c->sup;
	char err[512];
	int rc;

	(void)fds;
	if (!admin_conn_is_admin(c)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_PERMISSION_DENIED,
				     "uid %u may not upgrade vnicd: only root and uid %u",
				     (unsigned)c->uid, (unsigned)geteuid());
		return;
	}
	if (!s->upgrade) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "this vnicd cannot upgrade in place");
		return;
	}
	log_info("conn %u (pid %d uid %u): upgrade in place asked", c->id, (int)c->pid,
		 (unsigned)c->uid);
	/* Returns only when nothing changed: the new process answers. */
	rc = s->upgrade(s, c, r->request_id, err, sizeof(err));
	vmm_conn_reply_error(c, r->request_id,
			     rc == -EBUSY ? VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION
					  : VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
			     "%s", err);
}

static const char *backend_name(enum nic_backend_type b)
{
	switch (b) {
	case NIC_BACKEND_TAP: return "tap";
	case NIC_BACKEND_SOCKET: return "socket";
	case NIC_BACKEND_TAP_FD: return "tap_fd";
	case NIC_BACKEND_AF_PACKET: return "af_packet";
	default: return "none";
	}
}

void admin_fill_status(const struct nic *n, Vnic__Vmm__NicStatus *ns, struct admin_status_buf *b)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->backend, sizeof(b->backend), "%s", backend_name(n->backend));
	snprintf(b->tap_name, sizeof(b->tap_name), "%s",
		 n->backend == NIC_BACKEND_TAP || n->backend == NIC_BACKEND_TAP_FD ||
		 n->backend == NIC_BACKEND_AF_PACKET ? n->ifname : "");
	memcpy(b->mac, n->mac, sizeof(b->mac));
	if (n->ops == &vmm_nic_owner && n->owner) {
		const struct vmm_conn *c = n->owner;

		ns->owner_pid = (int32_t)c->pid;
		ns->owner_uid = (uint32_t)c->uid;
	}
	/* A vhost-user endpoint's NIC: vmm_handlers.c's fill_vhost_status
	 * sets owner_path to the endpoint's socket afterwards. */
	ns->owner_path = b->owner_path;
	ns->backend = b->backend;
	ns->tap_name = b->tap_name;
	ns->mac.data = b->mac;
	ns->mac.len = sizeof(b->mac);
	ns->features = n->features;
	ns->worker_uid = n->worker_uid;
	ns->worker_gid = n->worker_gid;
	ns->mtu = n->mtu;
}
