/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_state: an endpoint's state file in vnicd's state directory,
 * so that it comes back after a vnicd restart (vu_init).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vhost_user_priv.h"

#define VU_STATE_SUFFIX ".endpoint"

/* ------------------------------------------------------- state files */

void vu_state_path(const struct sup *s, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s" VU_STATE_SUFFIX, s->state_dir, id);
}

/* One "key value" per line; values have no newline (validated). The id
 * is printable (validate_nic_id) and contains no '/'. */
int vu_state_save(struct sup *s, const struct vu_config *cfg, char *err, size_t errlen)
{
	char path[512], tmp[520];
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
	fprintf(f, "id %s\npath %s\nmode %s\ntap %s\nnetns %s\n", cfg->id, cfg->path,
		cfg->server ? "server" : "client", cfg->tap, cfg->netns);
	fprintf(f, "mac %02x:%02x:%02x:%02x:%02x:%02x\nmtu %u\npolicy %u %u %u %u %u %u %u %u\n",
		cfg->mac[0], cfg->mac[1], cfg->mac[2], cfg->mac[3], cfg->mac[4], cfg->mac[5],
		cfg->mtu, cfg->policy.mode, cfg->policy.timer_us, cfg->policy.poll_us,
		cfg->policy.budget_packets, cfg->policy.budget_bytes, cfg->policy.latency_us,
		cfg->policy.safety_pct, cfg->policy.max_window);
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path)) {
		snprintf(err, errlen, "state file %s: %s", path, strerror(errno));
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

static int vu_state_load(const char *file, struct vu_config *cfg)
{
	char line[256];
	FILE *f = fopen(file, "re");
	int have = 0;

	if (!f)
		return -errno;
	memset(cfg, 0, sizeof(*cfg));
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
		else if (!strcmp(line, "policy"))
			sscanf(v, "%u %u %u %u %u %u %u %u", &cfg->policy.mode, &cfg->policy.timer_us,
			       &cfg->policy.poll_us, &cfg->policy.budget_packets,
			       &cfg->policy.budget_bytes, &cfg->policy.latency_us,
			       &cfg->policy.safety_pct, &cfg->policy.max_window);
	}
	fclose(f);
	return have == 3 ? 0 : -EINVAL;
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
		char path[512], err[256], ifname[16];

		if (l <= sl || strcmp(e->d_name + l - sl, VU_STATE_SUFFIX))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->state_dir, e->d_name);
		if (vu_state_load(path, &cfg) < 0) {
			log_warn("state file %s: unreadable, ignored", path);
			continue;
		}
		if (vu_endpoint_add(s, &cfg, ifname, sizeof(ifname), err, sizeof(err)) < 0)
			log_warn("state file %s: endpoint %s not restored: %s", path, cfg.id, err);
		else
			log_info("vhost-user %s: restored from %s (%s %s, tap %s)", cfg.id, path,
				 cfg.server ? "server" : "client", cfg.path, ifname);
	}
	closedir(d);
}
