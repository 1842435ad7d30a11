/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin: operator requests (SetLogLevel) and the owner/device fields of
 * NicStatus. See admin.c.
 */
#ifndef VNIC_SUP_ADMIN_H
#define VNIC_SUP_ADMIN_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

struct nic;
struct vmm_conn;

/* uid 0 or vnicd's own uid: may change daemon-wide settings. */
bool admin_conn_is_admin(const struct vmm_conn *c);

/* admin_conn_by_id - the live connection with this id, or NULL (it
 * closed): replies to an administrator's request on someone else's NIC. */
struct sup;
struct vmm_conn *admin_conn_by_id(struct sup *s, unsigned id);

/* Storage for the strings of one NicStatus's admin fields. */
struct admin_status_buf {
	char owner_path[108];
	char backend[16];
	char tap_name[32];
	uint8_t mac[6];
};

/* admin_fill_status - NicStatus fields 20-29 of @n into @ns. */
void admin_fill_status(const struct nic *n, Vnic__Vmm__NicStatus *ns, struct admin_status_buf *b);

#endif
