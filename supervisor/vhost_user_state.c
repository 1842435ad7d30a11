/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_state: an endpoint's state file in vnicd's state directory,
 * so that it comes back after a vnicd restart (vu_init).
 */
#include "config.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "mac.h"
#include "vhost_user_priv.h"

#define VU_STATE_SUFFIX ".endpoint"

/* ------------------------------------------------------- state files */

void vu_state_path(const struct sup *s, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s" VU_STATE_SUFFIX, s->state_dir, id);
}

/*
 * Format 2, written since format 1's release: daemon_conf_parse's strict
 * "KEY = VALUE" lines (an unknown key or a bad value: the endpoint is not
 * restored, one log line names file:line):
 *   id, path, mode (server | client), tap, netns, mac, mtu,
 *   policy (a mode by name: bh, timer, adaptive, poll) and each of its
 *   parameters by name (policy-timer-us ... policy-max-window, and, since
 *   interrupt coalescing (issue 17), policy-rx-irq-us ...
 *   policy-tx-irq-frames: absent = 0; a vnicd from before them refuses a
 *   file that has them, as any unknown key).
 * Format 1 (vnicd 0.1.0): "KEY VALUE" lines, "id" first, the policy as
 * eight positional integers. It is read for the upgrade only: restoring
 * the endpoint saves it again in format 2.
 */
#define VU_STATE_FORMAT 2

/* The policy's parameters, by their names in the file. */
static const struct {
	const char *key;
	size_t off;
} vu_policy_keys[] = {
	{ "policy-timer-us", offsetof(struct vnic_policy, timer_us) },
	{ "policy-poll-us", offsetof(struct vnic_policy, poll_us) },
	{ "policy-budget-packets", offsetof(struct vnic_policy, budget_packets) },
	{ "policy-budget-bytes", offsetof(struct vnic_policy, budget_bytes) },
	{ "policy-latency-us", offsetof(struct vnic_policy, latency_us) },
	{ "policy-safety-pct", offsetof(struct vnic_policy, safety_pct) },
	{ "policy-max-window", offsetof(struct vnic_policy, max_window) },
	{ "policy-rx-irq-us", offsetof(struct vnic_policy, rx_irq_us) },
	{ "policy-rx-irq-frames", offsetof(struct vnic_policy, rx_irq_frames) },
	{ "policy-tx-irq-us", offsetof(struct vnic_policy, tx_irq_us) },
	{ "policy-tx-irq-frames", offsetof(struct vnic_policy, tx_irq_frames) },
};
#define VU_NPOLICY_KEYS (sizeof(vu_policy_keys) / sizeof(vu_policy_keys[0]))

static uint32_t *policy_field(struct vnic_policy *p, size_t off)
{
	return (uint32_t *)(void *)((char *)p + off);
}

/* The values have no newline: validate_* refused them at endpoint add. */
int vu_state_save(struct sup *s, const struct vu_config *cfg, char *err, size_t errlen)
{
	char path[512], tmp[520], mac[MAC_STR_LEN];
	struct vnic_policy pol = cfg->policy;
	FILE *f;

	if (!s->state_dir)
		return 0;
	if (mkdir(s->state_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "state directory %s: %s", s->state_dir, strerror(errno));
		return -errno;
	}
	vu_state_path(s, cfg->id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f) {
		snprintf(err, errlen, "state file %s: %s", tmp, strerror(errno));
		return -errno;
	}
	fprintf(f, "# vnicd vhost-user endpoint, state file format %d (vnicd writes it)\n",
		VU_STATE_FORMAT);
	fprintf(f, "id = %s\npath = %s\nmode = %s\ntap = %s\nnetns = %s\n", cfg->id, cfg->path,
		cfg->server ? "server" : "client", cfg->tap, cfg->netns);
	mac_format(cfg->mac, mac, sizeof(mac));
	fprintf(f, "mac = %s\nmtu = %u\npolicy = %s\n", mac, cfg->mtu,
		vnic_mitigation_name(cfg->policy.mode));
	if (cfg->af_packet)
		fprintf(f, "backend = af_packet\n");
	for (size_t i = 0; i < VU_NPOLICY_KEYS; i++)
		fprintf(f, "%s = %u\n", vu_policy_keys[i].key,
			*policy_field(&pol, vu_policy_keys[i].off));
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path)) {
		snprintf(err, errlen, "state file %s: %s", path, strerror(errno));
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* ---- format 2: one setter per kind of value; k->off/size: the field */

static int set_str(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
		   size_t errlen)
{
	if (strlen(v) >= k->size) {
		snprintf(err, errlen, "%s: longer than %zu bytes", k->name, k->size - 1);
		return -EINVAL;
	}
	memcpy((char *)ctx + k->off, v, strlen(v) + 1);
	return 0;
}

static int parse_u32(const char *key, const char *v, uint32_t *out, char *err, size_t errlen)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (!*v || *v == '-' || *end || errno || x > UINT32_MAX) {
		snprintf(err, errlen, "%s: \"%.32s\" is not a number from 0 to %u", key, v,
			 UINT32_MAX);
		return -EINVAL;
	}
	*out = (uint32_t)x;
	return 0;
}

static int set_u32(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
		   size_t errlen)
{
	return parse_u32(k->name, v, (uint32_t *)(void *)((char *)ctx + k->off), err, errlen);
}

static int set_policy_param(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
			    size_t errlen)
{
	struct vu_config *cfg = ctx;

	return parse_u32(k->name, v, policy_field(&cfg->policy, k->off), err, errlen);
}

static int set_mode(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
		    size_t errlen)
{
	struct vu_config *cfg = ctx;

	if (strcmp(v, "server") && strcmp(v, "client")) {
		snprintf(err, errlen, "%s: \"%.32s\": server or client", k->name, v);
		return -EINVAL;
	}
	cfg->server = !strcmp(v, "server");
	return 0;
}

static int set_backend(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
		       size_t errlen)
{
	struct vu_config *cfg = ctx;

	if (strcmp(v, "tap") && strcmp(v, "af_packet")) {
		snprintf(err, errlen, "%s: \"%.32s\": tap or af_packet", k->name, v);
		return -EINVAL;
	}
	cfg->af_packet = !strcmp(v, "af_packet");
	return 0;
}

static int set_mac(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
		   size_t errlen)
{
	struct vu_config *cfg = ctx;

	if (mac_parse(v, cfg->mac)) {
		snprintf(err, errlen, "%s: \"%.32s\" is not xx:xx:xx:xx:xx:xx", k->name, v);
		return -EINVAL;
	}
	cfg->mac_set = true;
	return 0;
}

static int set_policy_mode(void *ctx, const struct daemon_conf_key *k, const char *v, char *err,
			   size_t errlen)
{
	struct vu_config *cfg = ctx;

	if (vnic_mitigation_from_name(v, &cfg->policy.mode) == 0)
		return 0;
	snprintf(err, errlen, "%s: \"%.32s\" is not a policy mode (bh, timer, adaptive, poll)",
		 k->name, v);
	return -EINVAL;
}

#define STR_KEY(name, field) \
	{ name, set_str, offsetof(struct vu_config, field), sizeof(((struct vu_config *)0)->field) }

static int vu_state_load_v2(const char *file, struct vu_config *cfg, char *err, size_t errlen)
{
	struct daemon_conf_key keys[10 + VU_NPOLICY_KEYS] = {
		STR_KEY("id", id),
		STR_KEY("path", path),
		{ "mode", set_mode, 0, 0 },
		STR_KEY("tap", tap),
		STR_KEY("netns", netns),
		{ "mac", set_mac, 0, 0 },
		{ "mtu", set_u32, offsetof(struct vu_config, mtu), sizeof(uint32_t) },
		{ "policy", set_policy_mode, 0, 0 },
		{ "backend", set_backend, 0, 0 },
	};
	size_t n = 9;

	for (size_t i = 0; i < VU_NPOLICY_KEYS; i++)
		keys[n++] = (struct daemon_conf_key){ vu_policy_keys[i].key, set_policy_param,
						      vu_policy_keys[i].off, sizeof(uint32_t) };
	return daemon_conf_parse(file, keys, n, cfg, err, errlen);
}

#undef STR_KEY

/* Format 1, as vnicd 0.1.0 read it. */
static int vu_state_load_v1(FILE *f, struct vu_config *cfg)
{
	char line[256];
	int have = 0;

	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ' '), *nl = strchr(line, '\n');

		if (!v)
			continue;
		*v++ = '\0';
		if (nl)
			*nl = '\0';
		if (!strcmp(line, "id"))
			have |= snprintf(cfg->id, sizeof(cfg->id), "%s", v) > 0;
		else if (!strcmp(line, "path"))
			have |= (snprintf(cfg->path, sizeof(cfg->path), "%s", v) > 0) << 1;
		else if (!strcmp(line, "mode"))
			cfg->server = !strcmp(v, "server");
		else if (!strcmp(line, "tap"))
			snprintf(cfg->tap, sizeof(cfg->tap), "%s", v);
		else if (!strcmp(line, "netns"))
			snprintf(cfg->netns, sizeof(cfg->netns), "%s", v);
		else if (!strcmp(line, "mac"))
			cfg->mac_set = sscanf(v, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &cfg->mac[0],
					      &cfg->mac[1], &cfg->mac[2], &cfg->mac[3],
					      &cfg->mac[4], &cfg->mac[5]) == 6;
		else if (!strcmp(line, "mtu"))
			cfg->mtu = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(line, "policy")) {
			unsigned mode = 0;

			sscanf(v, "%u %u %u %u %u %u %u %u", &mode, &cfg->policy.timer_us,
			       &cfg->policy.poll_us, &cfg->policy.budget_packets,
			       &cfg->policy.budget_bytes, &cfg->policy.latency_us,
			       &cfg->policy.safety_pct, &cfg->policy.max_window);
			cfg->policy.mode = (enum vnic_mitigation)mode; /* validated at restore */
		}
	}
	return have == 3 ? 0 : -EINVAL;
}

/* Returns 0, or a negative errno with err naming the file (and the line). */
static int vu_state_load(const char *file, struct vu_config *cfg, char *err, size_t errlen)
{
	char first[8] = "";
	FILE *f = fopen(file, "re");
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", file, strerror(errno));
		return rc;
	}
	/* Format 1 begins "id <id>"; format 2 with its comment (or "id ="). */
	if (fgets(first, sizeof(first), f) && !strncmp(first, "id ", 3) && first[3] != '=') {
		rewind(f);
		rc = vu_state_load_v1(f, cfg);
		fclose(f);
		if (rc)
			snprintf(err, errlen, "%s: format 1 without an id and a path", file);
		else
			log_info("state file %s: format 1 (vnicd 0.1.0): read once, saved again in "
				 "format %d", file, VU_STATE_FORMAT);
		return rc;
	}
	fclose(f);
	rc = vu_state_load_v2(file, cfg, err, errlen);
	if (rc == 0 && (!cfg->id[0] || !cfg->path[0])) {
		snprintf(err, errlen, "%s: no %s", file, cfg->id[0] ? "path" : "id");
		rc = -EINVAL;
	}
	return rc;
}

void vu_init(struct sup *s)
{
	DIR *d;
	struct dirent *e;

	if (!s->state_dir)
		return;
	d = opendir(s->state_dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), sl = strlen(VU_STATE_SUFFIX);
		struct vu_config cfg;
		char path[512], err[768], ifname[16];

		if (l <= sl || strcmp(e->d_name + l - sl, VU_STATE_SUFFIX))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->state_dir, e->d_name);
		if (vu_state_load(path, &cfg, err, sizeof(err)) < 0) {
			log_warn("vhost-user endpoint not restored: state file %s", err);
			continue;
		}
		if (vu_endpoint_add(s, &cfg, ifname, sizeof(ifname), err, sizeof(err)) < 0) {
			log_warn("state file %s: endpoint %s not restored: %s", path, cfg.id, err);
		} else {
			log_info("vhost-user %s: restored from %s (%s %s, tap %s)", cfg.id, path,
				 cfg.server ? "server" : "client", cfg.path, ifname);
		}
	}
	closedir(d);
}
