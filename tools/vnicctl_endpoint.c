/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicctl add / remove: vhost-user endpoints (issue 8).
 *
 *   vnicctl [--socket PATH] add ID --vhost-user PATH (--server | --client)
 *           --tap NAME [--netns NS] [--mac M] [--mtu N] [--policy P]
 *   vnicctl [--socket PATH] remove ID [--deadline-ms MS]
 *
 * add       creates the endpoint; in server mode it returns once PATH
 *           accepts connections; with --netns the tap is created inside
 *           that existing named netns (the caller gives it an address and
 *           brings it up). Prints the tap's name.
 * remove    disconnects the front end, stops and reaps the worker, removes
 *           the socket and the endpoint's state file.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvnic.h"
#include "vnicctl.h"

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int connect_hello(const char *sock, struct vnic_conn **conn)
{
	int rc = vnic_connect(sock, conn);

	if (rc) {
		fprintf(stderr, "vnicctl: cannot connect to %s: %s%s\n", sock, strerror(-rc),
			rc == -ENOENT || rc == -ECONNREFUSED ? " (is vnicd running?)" : "");
		return 1;
	}
	if (vnic_hello(*conn, "vnicctl", NULL)) {
		fprintf(stderr, "vnicctl: %s\n", vnic_last_error(*conn));
		vnic_close(*conn);
		return 1;
	}
	return 0;
}

static int cmd_add(const char *sock, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vhost-user", required_argument, NULL, 'v' },
		{ "server", no_argument, NULL, 'S' },
		{ "client", no_argument, NULL, 'C' },
		{ "tap", required_argument, NULL, 't' },
		{ "netns", required_argument, NULL, 'n' },
		{ "mac", required_argument, NULL, 'm' },
		{ "mtu", required_argument, NULL, 'M' },
		{ "policy", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	struct vnic_vhost_user_config cfg = { 0 };
	struct vnic_conn *conn;
	int mode = 0, opt, rc;
	char ifname[32] = "", err[256] = "", *end;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'v': cfg.path = optarg; break;
		case 'S': mode |= 1; break;
		case 'C': mode |= 2; break;
		case 't': cfg.tap_name = optarg; break;
		case 'n': cfg.netns = optarg; break;
		case 'm':
			if (parse_mac(optarg, cfg.mac)) {
				fprintf(stderr, "vnicctl: --mac %s: give six hex bytes a:b:c:d:e:f\n",
					optarg);
				return 2;
			}
			cfg.mac_set = true;
			break;
		case 'M':
			cfg.mtu = (uint32_t)strtoul(optarg, &end, 10);
			if (!optarg[0] || *end) {
				fprintf(stderr, "vnicctl: --mtu %s: give a number\n", optarg);
				return 2;
			}
			break;
		case 'p':
			if (vnicctl_parse_mode("policy", optarg, &cfg.policy.mode))
				return 2;
			break;
		default:
			vnicctl_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !cfg.path || (mode != 1 && mode != 2) || !cfg.tap_name) {
		fprintf(stderr, "vnicctl: add ID --vhost-user PATH (--server | --client) --tap NAME "
			"[--netns NS] [--mac M] [--mtu N] [--policy P]\n");
		return 2;
	}
	cfg.id = argv[optind];
	cfg.server = mode == 1;
	if (connect_hello(sock, &conn))
		return 1;
	rc = vnic_add_vhost_user(conn, &cfg, ifname, sizeof(ifname), err, sizeof(err));
	if (rc)
		fprintf(stderr, "vnicctl: add %s: %s\n", cfg.id, err[0] ? err : vnic_last_error(conn));
	else
		printf("%s\n", ifname);
	vnic_close(conn);
	return rc ? 1 : 0;
}

static int cmd_remove(const char *sock, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "deadline-ms", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	struct vnic_conn *conn;
	unsigned long ms = 0;
	uint64_t us = 0;
	char *end;
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt != 'd') {
			vnicctl_usage(stderr);
			return 2;
		}
		ms = strtoul(optarg, &end, 10);
		if (!optarg[0] || *end || ms > 60000) {
			fprintf(stderr, "vnicctl: --deadline-ms %s: 0..60000\n", optarg);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "vnicctl: remove ID [--deadline-ms MS]\n");
		return 2;
	}
	if (connect_hello(sock, &conn))
		return 1;
	rc = vnic_remove_endpoint(conn, argv[optind], (uint32_t)ms, &us);
	if (rc)
		fprintf(stderr, "vnicctl: remove %s: %s\n", argv[optind], vnic_last_error(conn));
	vnic_close(conn);
	return rc ? 1 : 0;
}

int vnicctl_endpoint_main(const char *sock, int argc, char **argv)
{
	if (!strcmp(argv[0], "add"))
		return cmd_add(sock, argc, argv);
	return cmd_remove(sock, argc, argv);
}
