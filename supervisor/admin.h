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
