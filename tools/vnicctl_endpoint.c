/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicctl add / remove: vhost-user endpoints (issue 8).
 *
 *   vnicctl [--socket PATH] add ID --vhost-user PATH (--server | --client)
 *           (--tap NAME | --af-packet IFNAME) [--netns NS] [--mac M] [--mtu N]
 *           [--policy P]
 *   vnicctl [--socket PATH] remove ID [--deadline-ms MS]
 *
 * add       creates the endpoint; in server mode it returns once PATH
 *           accepts connections; with --netns the tap is created inside
 *           that existing named netns (the caller gives it an address and
 *           brings it up). Prints the tap's name. --af-packet: an existing
 *           interface (a veth end, a NIC) each session binds an AF_PACKET
 *           socket to (issue 17), one queue pair.
 * remove    disconnects the front end, stops and reaps the worker, removes
 *           the socket and the endpoint's state file.
 *
 * Both are rows of vnicctl's one command table (vnicctl.h): the hooks
 * here fill struct vnicctl from their options and run the command.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvnic.h"
#include "mac.h"
#include "vnicctl.h"

const struct option vnicctl_add_opts[] = {
	{ "vhost-user", required_argument, NULL, 'v' },
	{ "server", no_argument, NULL, 'S' },
	{ "client", no_argument, NULL, 'C' },
	{ "tap", required_argument, NULL, 't' },
	{ "af-packet", required_argument, NULL, 'A' },
	{ "netns", required_argument, NULL, 'n' },
	{ "mac", required_argument, NULL, 'm' },
	{ "mtu", required_argument, NULL, 'M' },
	{ "policy", required_argument, NULL, 'p' },
	{ NULL, 0, NULL, 0 },
};

int vnicctl_add_opt(struct vnicctl *v, int opt, const char *arg)
{
	struct vnic_vhost_user_config *cfg = &v->vu;
	char *end;

	switch (opt) {
	case 'v': cfg->path = arg; break;
	case 'S': v->vu_mode |= 1; break;
	case 'C': v->vu_mode |= 2; break;
	case 't': cfg->tap_name = arg; break;
	case 'A': cfg->tap_name = arg; cfg->af_packet = true; break;
	case 'n': cfg->netns = arg; break;
	case 'm':
		if (mac_parse(arg, cfg->mac)) {
			fprintf(stderr, "vnicctl: --mac %s: give six hex bytes a:b:c:d:e:f\n",
				arg);
			return 2;
		}
		cfg->mac_set = true;
		break;
	case 'M':
		cfg->mtu = (uint32_t)strtoul(arg, &end, 10);
		if (!arg[0] || *end) {
			fprintf(stderr, "vnicctl: --mtu %s: give a number\n", arg);
			return 2;
		}
		break;
	case 'p':
		if (vnicctl_parse_mode("policy", arg, &cfg->policy.mode))
			return 2;
		break;
	}
	return 0;
}

int vnicctl_add_run(struct vnicctl *v, char **args, unsigned nargs)
{
	struct vnic_vhost_user_config *cfg = &v->vu;
	char ifname[32] = "", err[256] = "";
	int rc;

	if (!cfg->path || (v->vu_mode != 1 && v->vu_mode != 2) || !cfg->tap_name)
		return vnicctl_usage_error(v);
	cfg->id = args[0];
	cfg->server = v->vu_mode == 1;
	if (vnicctl_connect(v))
		return 1;
	rc = vnic_add_vhost_user(v->conn, cfg, ifname, sizeof(ifname), err, sizeof(err));
	if (rc)
		fprintf(stderr, "vnicctl: add %s: %s\n", cfg->id, err[0] ? err : vnic_last_error(v->conn));
	else
		printf("%s\n", ifname);
	return rc ? 1 : 0;
}

const struct option vnicctl_remove_opts[] = {
	{ "deadline-ms", required_argument, NULL, 'd' },
	{ NULL, 0, NULL, 0 },
};

int vnicctl_remove_opt(struct vnicctl *v, int opt, const char *arg)
{
	char *end;

	v->deadline_ms = strtoul(arg, &end, 10);
	if (!arg[0] || *end || v->deadline_ms > 60000) {
		fprintf(stderr, "vnicctl: --deadline-ms %s: 0..60000\n", arg);
		return 2;
	}
	return 0;
}

int vnicctl_remove_run(struct vnicctl *v, char **args, unsigned nargs)
{
	uint64_t us = 0;
	int rc;

	if (vnicctl_connect(v))
		return 1;
	rc = vnic_remove_endpoint(v->conn, args[0], (uint32_t)v->deadline_ms, &us);
	if (rc)
		fprintf(stderr, "vnicctl: remove %s: %s\n", args[0], vnic_last_error(v->conn));
	return rc ? 1 : 0;
}
