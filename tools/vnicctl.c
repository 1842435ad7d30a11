/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicctl: the operator's tool for vnicd.
 *
 *   vnicctl [--socket PATH] [--json] COMMAND [ARGS]
 *
 *   list                      one line per NIC: id, state, worker pid and
 *                             uid, owner, backend, tap, MAC
 *   status [ID] [--watch [--interval S] [--count N]]
 *                             counters of every NIC (or of ID) and its queues;
 *                             --watch reprints every S seconds with per-second
 *                             rates and a timestamp line
 *   set-policy ID [--mode M] [--timer-us N] [--poll-us N]
 *                 [--budget-packets N] [--budget-bytes N]
 *                 [--latency-us N] [--safety-pct N] [--max-window N]
 *                 [--rx-irq-us N] [--rx-irq-frames N]
 *                 [--tx-irq-us N] [--tx-irq-frames N]
 *                             (fields not given take vnicd's defaults;
 *                             poll with poll_us 0 polls forever)
 *                             change a running NIC's TX policy and interrupt
 *                             coalescing (its owner, or
 *                             an administrator: uid 0 or vnicd's uid)
 *   log-level LEVEL           vnicd's log level until its next SIGHUP
 *                             (administrators only)
 *   upgrade [--wait S]        replace the running vnicd with the installed
 *                             binary in place: no worker stops, no
 *                             connection closes (administrators only);
 *                             while vnicd is busy, asks again for S s
 *   --version                 vnicctl's version; with a running vnicd, also
 *                             `vnicctl --json status` says vnicd's
 *
 *   add, remove               vhost-user endpoints (vnicctl_endpoint.c)
 *
 * --json: every output is one JSON object per line, made with json-c; the
 * schema (VNICCTL_JSON_SCHEMA) is in vnicctl(8), "JSON OUTPUT".
 * Errors: one line on stderr, exit status 1 (2 for usage).
 *
 * Every command is a row of vnicctl_cmds below (vnicctl.h): its name,
 * usage, operand count, options and hooks. main() is the one dispatcher,
 * and --help is printed from the table.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "libvnic.h"
#include "mac.h"
#include "version.h"
#include "vnicctl.h"

/* Bumped when a field changes meaning or goes away (adding one does not). */
#define VNICCTL_JSON_SCHEMA 1

/* "2026-12-01T08:40:00.123Z" */
static void utc_now(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (ts.tv_nsec / 1000000) % 1000);
}

static const struct {
	uint64_t bit;
	const char *name;
} feature_names[] = {
	{ VNIC_F_CSUM, "CSUM" },           { VNIC_F_GUEST_CSUM, "GUEST_CSUM" },
	{ VNIC_F_MTU, "MTU" },             { VNIC_F_MAC, "MAC" },
	{ VNIC_F_GUEST_TSO4, "GUEST_TSO4" }, { VNIC_F_GUEST_TSO6, "GUEST_TSO6" },
	{ VNIC_F_HOST_TSO4, "HOST_TSO4" }, { VNIC_F_HOST_TSO6, "HOST_TSO6" },
	{ VNIC_F_GUEST_UFO, "GUEST_UFO" }, { VNIC_F_HOST_UFO, "HOST_UFO" },
	{ VNIC_F_MRG_RXBUF, "MRG_RXBUF" }, { VNIC_F_INDIRECT_DESC, "INDIRECT_DESC" },
	{ VNIC_F_EVENT_IDX, "EVENT_IDX" }, { VNIC_F_VERSION_1, "VERSION_1" },
};

/* ------------------------------------------------------------------ JSON */

static void jadd(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

static json_object *json_nic(const struct vnic_nic_status *n, const struct vnic_nic_pairs *pr,
			     const char *inflight)
{
	json_object *o = json_object_new_object(), *qs = json_object_new_array();
	json_object *ps = json_object_new_array();
	json_object *pol = json_object_new_object(), *feat = json_object_new_array();
	char mac[24];

	jadd(o, "id", json_object_new_string(n->id));
	jadd(o, "state", json_object_new_string(vnic_nic_state_name(n->state)));
	jadd(o, "pid", json_object_new_int(n->pid));
	jadd(o, "policy", json_object_new_string(vnic_mitigation_name(n->policy.mode)));
	jadd(pol, "timer_us", json_object_new_int64(n->policy.timer_us));
	jadd(pol, "poll_us", json_object_new_int64(n->policy.poll_us));
	jadd(pol, "budget_packets", json_object_new_int64(n->policy.budget_packets));
	jadd(pol, "budget_bytes", json_object_new_int64(n->policy.budget_bytes));
	jadd(pol, "latency_us", json_object_new_int64(n->policy.latency_us));
	jadd(pol, "safety_pct", json_object_new_int64(n->policy.safety_pct));
	jadd(pol, "max_window", json_object_new_int64(n->policy.max_window));
	jadd(pol, "rx_irq_us", json_object_new_int64(n->policy.rx_irq_us));
	jadd(pol, "rx_irq_frames", json_object_new_int64(n->policy.rx_irq_frames));
	jadd(pol, "tx_irq_us", json_object_new_int64(n->policy.tx_irq_us));
	jadd(pol, "tx_irq_frames", json_object_new_int64(n->policy.tx_irq_frames));
	jadd(o, "policy_params", pol);
	jadd(o, "policy_switches", json_object_new_int64(n->policy_switches));
	jadd(o, "inflight", json_object_new_string(inflight));
	jadd(o, "restarts", json_object_new_int64(n->restarts));
	jadd(o, "uptime_s", json_object_new_uint64(n->uptime_s));
	jadd(o, "last_error", json_object_new_string(n->last_error));
	jadd(o, "sandboxed", json_object_new_boolean(n->sandboxed));
	jadd(o, "start_us", json_object_new_uint64(n->start_us));
	jadd(o, "restart_us", json_object_new_uint64(n->restart_us));
	if (n->owner_pid || n->owner_path[0]) {
		json_object *ow = json_object_new_object();

		jadd(ow, "pid", json_object_new_int(n->owner_pid));
		jadd(ow, "uid", json_object_new_int64(n->owner_uid));
		jadd(ow, "path", json_object_new_string(n->owner_path));
		jadd(o, "owner", ow);
	} else {
		jadd(o, "owner", NULL);
	}
	jadd(o, "backend", json_object_new_string(n->backend));
	jadd(o, "tap_name", json_object_new_string(n->tap_name));
	mac_format(n->mac, mac, sizeof(mac));
	jadd(o, "mac", json_object_new_string(mac));
	jadd(o, "mtu", json_object_new_int64(n->mtu));
	jadd(o, "features", json_object_new_uint64(n->features));
	for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if (n->features & feature_names[i].bit)
			json_object_array_add(feat, json_object_new_string(feature_names[i].name));
	jadd(o, "feature_names", feat);
	jadd(o, "worker_uid", json_object_new_int64(n->worker_uid));
	jadd(o, "worker_gid", json_object_new_int64(n->worker_gid));
	for (unsigned j = 0; j < n->nqueues; j++) {
		const struct vnic_queue_status *q = &n->queues[j];
		json_object *jq = json_object_new_object();

		jadd(jq, "name", json_object_new_string(q->name));
		/* Every counter, by its libvnic.h name. */
#define VNICCTL_JSON_COUNTER(type, name, kind) jadd(jq, #name, json_object_new_uint64(q->name));
		VNIC_QUEUE_COUNTERS(VNICCTL_JSON_COUNTER)
#undef VNICCTL_JSON_COUNTER
		jadd(jq, "broken", json_object_new_boolean(q->broken));
		jadd(jq, "broken_reason", json_object_new_string(q->broken_reason));
		json_object_array_add(qs, jq);
	}
	jadd(o, "queues", qs);
	/* Issue 15: each queue pair's worker (one row for a one-pair NIC). */
	for (unsigned j = 0; pr && j < pr->npairs; j++) {
		const struct vnic_pair_status *p = &pr->pairs[j];
		json_object *jp = json_object_new_object();

		jadd(jp, "pair", json_object_new_int64(p->pair));
		jadd(jp, "state", json_object_new_string(vnic_nic_state_name(p->state)));
		jadd(jp, "pid", json_object_new_int(p->pid));
		jadd(jp, "restarts", json_object_new_int64(p->restarts));
		jadd(jp, "uptime_s", json_object_new_uint64(p->uptime_s));
		jadd(jp, "last_error", json_object_new_string(p->last_error));
		json_object_array_add(ps, jp);
	}
	jadd(o, "pairs", ps);
	if (n->vhost_path[0]) {
		json_object *vu = json_object_new_object();

		jadd(vu, "path", json_object_new_string(n->vhost_path));
		jadd(vu, "mode", json_object_new_string(n->vhost_mode));
		jadd(vu, "state", json_object_new_string(n->vhost_state));
		jadd(vu, "connects", json_object_new_uint64(n->vhost_connects));
		jadd(vu, "messages", json_object_new_uint64(n->vhost_messages));
		jadd(vu, "rejected", json_object_new_uint64(n->vhost_rejected));
		jadd(vu, "reconfigs", json_object_new_uint64(n->vhost_reconfigs));
		jadd(vu, "last_error", json_object_new_string(n->vhost_last_error));
		jadd(o, "vhost_user", vu);
	}
	return o;
}

/* The envelope of every --json output line. */
static json_object *json_envelope(const struct vnic_hello_info *hi)
{
	json_object *o = json_object_new_object();
	char now[96];

	utc_now(now, sizeof(now));
	jadd(o, "schema", json_object_new_int(VNICCTL_JSON_SCHEMA));
	jadd(o, "time", json_object_new_string(now));
	jadd(o, "vnicd_version", json_object_new_string(hi->vnicd_version));
	jadd(o, "vnicctl_version", json_object_new_string(PACKAGE_VERSION));
	jadd(o, "protocol", json_object_new_int64(hi->version));
	return o;
}

static void json_print(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
					       JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static void print_json(const struct vnic_hello_info *hi, const struct vnic_status *st)
{
	json_object *o = json_envelope(hi), *nics = json_object_new_array();

	for (unsigned i = 0; i < st->nnics; i++)
		json_object_array_add(nics, json_nic(&st->nics[i], st->pairs ? &st->pairs[i] : NULL,
						     st->inflight ? st->inflight[i].where : ""));
	jadd(o, "nics", nics);
	json_print(o);
}

/* ----------------------------------------------------------------- text */

/* Text for a table cell: control characters from the wire become '?'. */
static const char *clean(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

static const char *owner_str(const struct vnic_nic_status *n, char *buf, size_t len)
{
	char p[120];

	if (n->owner_path[0])
		snprintf(buf, len, "%s", clean(n->owner_path, p, sizeof(p)));
	else if (n->owner_pid)
		snprintf(buf, len, "pid %" PRId32 " uid %" PRIu32, n->owner_pid, n->owner_uid);
	else
		snprintf(buf, len, "-");
	return buf;
}

static void print_list(const struct vnic_status *st)
{
	char b1[96], b2[140], b3[40], mac[24];

	if (st->nnics == 0) {
		printf("no NICs\n");
		return;
	}
	printf("%-20s %-17s %8s %8s %-22s %-7s %-15s %s\n", "ID", "STATE", "PID", "UID", "OWNER",
	       "BACKEND", "TAP", "MAC");
	for (unsigned i = 0; i < st->nnics; i++) {
		const struct vnic_nic_status *n = &st->nics[i];

		mac_format(n->mac, mac, sizeof(mac));
		printf("%-20s %-17s %8" PRId32 " %8" PRIu32 " %-22s %-7s %-15s %s\n",
		       clean(n->id, b1, sizeof(b1)), vnic_nic_state_name(n->state), n->pid,
		       n->worker_uid, owner_str(n, b2, sizeof(b2)), n->backend,
		       n->tap_name[0] ? clean(n->tap_name, b3, sizeof(b3)) : "-", mac);
	}
}

static const struct vnic_queue_status *find_prev_queue(const struct vnic_status *prev,
						       const char *id, const char *qname)
{
	if (!prev)
		return NULL;
	for (unsigned i = 0; i < prev->nnics; i++) {
		if (strcmp(prev->nics[i].id, id))
			continue;
		for (unsigned j = 0; j < prev->nics[i].nqueues; j++)
			if (!strcmp(prev->nics[i].queues[j].name, qname))
				return &prev->nics[i].queues[j];
	}
	return NULL;
}

static double rate(uint64_t now, uint64_t before, double secs)
{
	return now >= before && secs > 0 ? (double)(now - before) / secs : 0.0;
}

/* With one NIC asked for by id: its owner and device lines too. */
static void print_detail(const struct vnic_nic_status *n, const char *inflight)
{
	char b[140], mac[24];
	size_t used = 0;

	mac_format(n->mac, mac, sizeof(mac));
	printf("  owner %s, backend %s%s%s, mac %s, mtu %" PRIu32 ", worker uid %" PRIu32
	       " gid %" PRIu32 "\n", owner_str(n, b, sizeof(b)), n->backend,
	       n->tap_name[0] ? " " : "", n->tap_name[0] ? clean(n->tap_name, b, 32) : "", mac,
	       n->mtu, n->worker_uid, n->worker_gid);
	b[0] = '\0';
	for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if ((n->features & feature_names[i].bit) && used + 20 < sizeof(b))
			used += (size_t)snprintf(b + used, sizeof(b) - used, "%s%s", used ? " " : "",
						 feature_names[i].name);
	printf("  features 0x%" PRIx64 " (%s)\n", n->features, b);
	printf("  inflight region: %s\n", inflight[0] ? clean(inflight, b, 16) : "-");
}

/* The queue table is made from libvnic.h's VNIC_QUEUE_COUNTERS: one
 * column per counter every queue keeps (per second with --watch), and for
 * a TX queue a line with its policy's counters. */
#define VNICCTL_COL_WIDTH 12

/* A column's heading: the counter's name in capitals, "/S" for a rate. */
static void print_col_head(const char *name, bool rates)
{
	char h[40];
	size_t i;

	for (i = 0; name[i] && i + 3 < sizeof(h); i++)
		h[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
	snprintf(h + i, sizeof(h) - i, "%s", rates ? "/S" : "");
	printf(" %*s", VNICCTL_COL_WIDTH, h);
}

static void print_queue_head(bool rates)
{
	printf("  %-5s", "QUEUE");
#define VNICCTL_HEAD(type, name, kind) \
	if ((kind) == VNIC_QC_ALL) \
		print_col_head(#name, rates);
	VNIC_QUEUE_COUNTERS(VNICCTL_HEAD)
#undef VNICCTL_HEAD
	printf("  %s\n", "BROKEN");
}

/* One queue's row (rates against p when there is one) and, for TX, its
 * policy line. */
static void print_queue(const struct vnic_nic_status *n, const struct vnic_queue_status *q,
			const struct vnic_queue_status *p, double secs)
{
	char b1[96], b2[300];
	const char *brk = q->broken ? clean(q->broken_reason, b2, sizeof(b2)) : "no";
	const char *sep = "";

	printf("  %-5s", clean(q->name, b1, sizeof(b1)));
#define VNICCTL_CELL(type, name, kind) \
	if ((kind) == VNIC_QC_ALL) { \
		if (p) \
			printf(" %*.0f", VNICCTL_COL_WIDTH, rate(q->name, p->name, secs)); \
		else \
			printf(" %*" PRIu64, VNICCTL_COL_WIDTH, (uint64_t)q->name); \
	}
	VNIC_QUEUE_COUNTERS(VNICCTL_CELL)
#undef VNICCTL_CELL
	printf("  %s\n", q->broken && !q->broken_reason[0] ? "yes" : brk);
	if (strncmp(q->name, "tx", 2))
		return;
	printf("  %-5s policy %s:", "", vnic_mitigation_name(n->policy.mode));
#define VNICCTL_TX(type, name, kind) \
	if ((kind) & VNIC_QC_TX) { \
		printf("%s %s %" PRIu64, sep, #name, (uint64_t)q->name); \
		sep = ","; \
	}
	VNIC_QUEUE_COUNTERS(VNICCTL_TX)
#undef VNICCTL_TX
	if (n->policy.rx_irq_us || n->policy.tx_irq_us)
		printf("; interrupts coalesced: rx %" PRIu32 " us / %" PRIu32 " frames, tx %" PRIu32
		       " us / %" PRIu32 " frames", n->policy.rx_irq_us, n->policy.rx_irq_frames,
		       n->policy.tx_irq_us, n->policy.tx_irq_frames);
	printf("\n");
}

static void print_table(const struct vnic_status *st, const struct vnic_status *prev, double secs,
			bool detail)
{
	char b1[96], b2[300];

	if (st->nnics == 0) {
		printf("no NICs\n");
		return;
	}
	printf("%-20s %-17s %8s %-8s %-7s %9s %8s  %s\n", "ID", "STATE", "PID", "POLICY",
	       "SANDBOX", "UPTIME", "RESTARTS", "LAST ERROR");
	for (unsigned i = 0; i < st->nnics; i++) {
		const struct vnic_nic_status *n = &st->nics[i];

		/* A worker without its sandbox is shouted (issue 4); none
		 * running (FAILED, between restarts) has no sandbox to show. */
		printf("%-20s %-17s %8" PRId32 " %-8s %-7s %8" PRIu64 "s %8" PRIu32 "  %s\n",
		       clean(n->id, b1, sizeof(b1)), vnic_nic_state_name(n->state), n->pid,
		       vnic_mitigation_name(n->policy.mode),
		       n->pid == 0 ? "-" : n->sandboxed ? "yes" : "NO(OFF)", n->uptime_s, n->restarts,
		       n->last_error[0] ? clean(n->last_error, b2, sizeof(b2)) : "-");
		if (detail)
			print_detail(n, st->inflight[i].where);
		/* Several queue pairs: a line per pair's worker. */
		for (unsigned j = 0; st->pairs && st->pairs[i].npairs > 1 && j < st->pairs[i].npairs;
		     j++) {
			const struct vnic_pair_status *p = &st->pairs[i].pairs[j];

			printf("  pair %-3" PRIu32 " %-17s %8" PRId32 " %9" PRIu64 "s %8" PRIu32 "  %s\n",
			       p->pair, vnic_nic_state_name(p->state), p->pid, p->uptime_s,
			       p->restarts, p->last_error[0] ? clean(p->last_error, b2, sizeof(b2)) : "-");
		}
		if (n->vhost_path[0])
			printf("  vhost-user %s %s: %s, %" PRIu64 " connects, %" PRIu64 " messages, %"
			       PRIu64 " rejected, %" PRIu64 " reconfigs\n",
			       clean(n->vhost_mode, b1, sizeof(b1)), clean(n->vhost_path, b2, sizeof(b2)),
			       n->vhost_state, n->vhost_connects, n->vhost_messages, n->vhost_rejected,
			       n->vhost_reconfigs);
		print_queue_head(prev != NULL);
		for (unsigned j = 0; j < n->nqueues; j++) {
			const struct vnic_queue_status *q = &n->queues[j];

			print_queue(n, q, find_prev_queue(prev, n->id, q->name), secs);
		}
	}
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keep only the NIC named @id; false when it is not there. */
static bool keep_only(struct vnic_status *st, const char *id)
{
	for (unsigned i = 0; i < st->nnics; i++) {
		if (!strcmp(st->nics[i].id, id)) {
			if (i) {
				st->nics[0] = st->nics[i];
				if (st->pairs)
					st->pairs[0] = st->pairs[i];
			}
			st->nnics = 1;
			return true;
		}
	}
	st->nnics = 0;
	return false;
}

static int cmd_status(struct vnicctl *v, const char *id, bool list)
{
	struct vnic_status *prev = NULL;
	double t_prev = 0;
	bool watch = v->watch && !list;

	if (vnicctl_connect(v))
		return 1;
	for (long iter = 0;; iter++) {
		struct vnic_status *st = NULL;
		double t;
		int rc = vnic_status(v->conn, &st);

		if (rc) {
			fprintf(stderr, "vnicctl: status: %s\n", vnic_last_error(v->conn));
			vnic_status_free(prev);
			return 1;
		}
		t = mono();
		if (id && !keep_only(st, id)) {
			fprintf(stderr, "vnicctl: no NIC \"%s\"\n", id);
			vnic_status_free(st);
			vnic_status_free(prev);
			return 1;
		}
		if (v->json) {
			print_json(&v->hello, st);
		} else if (list) {
			print_list(st);
		} else {
			if (watch) {
				char now[96];

				utc_now(now, sizeof(now));
				printf("%s--- %s\n", iter ? "\n" : "", now);
			}
			print_table(st, prev, t - t_prev, id != NULL);
		}
		fflush(stdout);
		vnic_status_free(prev);
		prev = st;
		t_prev = t;
		if (!watch || (v->count > 0 && iter + 1 >= v->count))
			break;
		{
			struct timespec ts = { .tv_sec = (time_t)v->interval,
					       .tv_nsec = (long)((v->interval - (double)(time_t)v->interval) *
								 1e9) };
			nanosleep(&ts, NULL);
		}
	}
	vnic_status_free(prev);
	return 0;
}

static int run_list(struct vnicctl *v, char **args, unsigned nargs)
{
	return cmd_status(v, NULL, true);
}

static int run_status(struct vnicctl *v, char **args, unsigned nargs)
{
	return cmd_status(v, nargs ? args[0] : NULL, false);
}

static const struct option status_opts[] = {
	{ "watch", no_argument, NULL, 'w' },
	{ "interval", required_argument, NULL, 'i' },
	{ "count", required_argument, NULL, 'c' },
	{ NULL, 0, NULL, 0 },
};

static int status_opt(struct vnicctl *v, int opt, const char *arg)
{
	char *end;

	switch (opt) {
	case 'w': v->watch = true; break;
	case 'i':
		errno = 0;
		v->interval = strtod(arg, &end);
		if (errno || *end || v->interval < 0.1 || v->interval > 3600) {
			fprintf(stderr, "vnicctl: --interval %s: give seconds in 0.1..3600\n", arg);
			return 2;
		}
		break;
	case 'c':
		v->count = strtol(arg, &end, 10);
		if (*end || v->count < 1) {
			fprintf(stderr, "vnicctl: --count %s: give a positive number\n", arg);
			return 2;
		}
		break;
	}
	return 0;
}

static int run_set_policy(struct vnicctl *v, char **args, unsigned nargs)
{
	const char *id = args[0];
	int rc;

	if (!v->policy_set) {
		fprintf(stderr, "vnicctl: set-policy %s: give at least one of --mode, --timer-us, "
			"--poll-us, --budget-packets, --budget-bytes, --latency-us, --safety-pct, "
			"--max-window, --rx-irq-us, --rx-irq-frames, --tx-irq-us, --tx-irq-frames\n",
			id);
		return 2;
	}
	if (vnicctl_connect(v))
		return 1;
	rc = vnic_set_policy(v->conn, id, &v->policy);
	if (rc) {
		fprintf(stderr, "vnicctl: %s\n", vnic_last_error(v->conn));
		return 1;
	}
	if (!v->json)
		printf("nic %s: policy %s\n", id, vnic_mitigation_name(v->policy.mode));
	return 0;
}

static int run_log_level(struct vnicctl *v, char **args, unsigned nargs)
{
	const char *level = args[0];
	char old[32] = "";
	int rc;

	if (vnicctl_connect(v))
		return 1;
	rc = vnic_set_log_level(v->conn, level, old, sizeof(old));
	if (rc) {
		fprintf(stderr, "vnicctl: %s\n", vnic_last_error(v->conn));
		return 1;
	}
	if (v->json) {
		json_object *j = json_envelope(&v->hello);

		jadd(j, "old_level", json_object_new_string(old));
		jadd(j, "level", json_object_new_string(level));
		json_print(j);
	} else {
		printf("log level %s -> %s\n", old, level);
	}
	return 0;
}

static const struct option upgrade_opts[] = {
	{ "wait", required_argument, NULL, 'W' },
	{ NULL, 0, NULL, 0 },
};

static int upgrade_opt(struct vnicctl *v, int opt, const char *arg)
{
	char *end;

	(void)opt;
	v->wait_s = strtod(arg, &end);
	if (!arg[0] || *end || !(v->wait_s >= 0 && v->wait_s <= 3600)) {
		fprintf(stderr, "vnicctl: --wait %s: seconds, 0..3600\n", arg);
		return 2;
	}
	return 0;
}

/* upgrade: while vnicd says it is busy (a NIC starting, a request in
 * progress), ask again every 100 ms for --wait seconds (default 10). */
static int run_upgrade(struct vnicctl *v, char **args, unsigned nargs)
{
	struct vnic_upgrade_result u;
	struct timespec t0, t;
	unsigned tries = 0;
	int rc;

	(void)args;
	(void)nargs;
	if (vnicctl_connect(v))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		tries++;
		rc = vnic_upgrade(v->conn, &u);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (rc != VNIC_STATUS_FAILED_PRECONDITION ||
		    (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >=
			    v->wait_s)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	}
	if (rc) {
		fprintf(stderr, "vnicctl: upgrade: %s\n", vnic_last_error(v->conn));
		return 1;
	}
	if (v->json) {
		json_object *j = json_envelope(&v->hello);

		jadd(j, "from_version", json_object_new_string(u.from_version));
		jadd(j, "to_version", json_object_new_string(u.to_version));
		jadd(j, "pid", json_object_new_int64(u.pid));
		jadd(j, "nics", json_object_new_int64(u.nics));
		jadd(j, "endpoints", json_object_new_int64(u.endpoints));
		jadd(j, "connections", json_object_new_int64(u.connections));
		jadd(j, "pause_us", json_object_new_int64((int64_t)u.pause_us));
		jadd(j, "upgrades", json_object_new_int64(u.upgrades));
		jadd(j, "tries", json_object_new_int64(tries));
		json_print(j);
	} else {
		printf("vnicd %s -> %s upgraded in place (pid %u, upgrade %u): %u NIC(s), "
		       "%u endpoint(s), %u connection(s) taken over; paused %llu us\n",
		       u.from_version, u.to_version, u.pid, u.upgrades, u.nics, u.endpoints,
		       u.connections, (unsigned long long)u.pause_us);
	}
	return 0;
}

static int parse_u32(const char *opt, const char *v, uint32_t *ret)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || !v[0] || *end || x > UINT32_MAX) {
		fprintf(stderr, "vnicctl: --%s %s: give a number\n", opt, v);
		return -1;
	}
	*ret = (uint32_t)x;
	return 0;
}

/* A TX mode for --mode and add's --policy: libvnic's names, "default"
 * (vnicd's, bh) included. */
int vnicctl_parse_mode(const char *opt, const char *v, enum vnic_mitigation *ret)
{
	if (vnic_mitigation_from_name(v, ret) == 0)
		return 0;
	fprintf(stderr, "vnicctl: --%s %s: use default, bh, timer, adaptive or poll\n", opt, v);
	return -1;
}

static const struct option set_policy_opts[] = {
	{ "mode", required_argument, NULL, 'm' },
	{ "timer-us", required_argument, NULL, 'T' },
	{ "poll-us", required_argument, NULL, 'P' },
	{ "budget-packets", required_argument, NULL, 'B' },
	{ "budget-bytes", required_argument, NULL, 'Y' },
	{ "latency-us", required_argument, NULL, 'L' },
	{ "safety-pct", required_argument, NULL, 'F' },
	{ "max-window", required_argument, NULL, 'W' },
	{ "rx-irq-us", required_argument, NULL, 'r' },
	{ "rx-irq-frames", required_argument, NULL, 'R' },
	{ "tx-irq-us", required_argument, NULL, 't' },
	{ "tx-irq-frames", required_argument, NULL, 'X' },
	{ NULL, 0, NULL, 0 },
};

/* set-policy's numeric options: each option's field. */
static const struct {
	int opt;
	size_t off;
} set_policy_fields[] = {
	{ 'T', offsetof(struct vnic_policy, timer_us) },
	{ 'P', offsetof(struct vnic_policy, poll_us) },
	{ 'B', offsetof(struct vnic_policy, budget_packets) },
	{ 'Y', offsetof(struct vnic_policy, budget_bytes) },
	{ 'L', offsetof(struct vnic_policy, latency_us) },
	{ 'F', offsetof(struct vnic_policy, safety_pct) },
	{ 'W', offsetof(struct vnic_policy, max_window) },
	{ 'r', offsetof(struct vnic_policy, rx_irq_us) },
	{ 'R', offsetof(struct vnic_policy, rx_irq_frames) },
	{ 't', offsetof(struct vnic_policy, tx_irq_us) },
	{ 'X', offsetof(struct vnic_policy, tx_irq_frames) },
};

static int set_policy_opt(struct vnicctl *v, int opt, const char *arg)
{
	v->policy_set = true;
	if (opt == 'm')
		return vnicctl_parse_mode("mode", arg, &v->policy.mode) < 0 ? 2 : 0;
	for (size_t i = 0; i < sizeof(set_policy_fields) / sizeof(set_policy_fields[0]); i++) {
		const struct option *o = set_policy_opts;

		if (set_policy_fields[i].opt != opt)
			continue;
		while (o->val != opt)
			o++;
		return parse_u32(o->name, arg,
				 (uint32_t *)(void *)((char *)&v->policy +
						      set_policy_fields[i].off)) < 0
			       ? 2
			       : 0;
	}
	return 2;
}

/* The one command table: every command of vnicctl, in --help's order. */
static const struct vnicctl_cmd vnicctl_cmds[] = {
	{ "list", "", 0, 0, NULL, "", NULL, run_list },
	{ "status", "[ID] [--watch [--interval S] [--count N]]", 0, 1, status_opts, "wi:c:",
	  status_opt, run_status },
	{ "set-policy",
	  "ID [--mode default|bh|timer|adaptive|poll] [--timer-us N] [--poll-us N]\n"
	  "                [--budget-packets N] [--budget-bytes N]\n"
	  "                [--latency-us N] [--safety-pct N] [--max-window N]\n"
	  "                [--rx-irq-us N] [--rx-irq-frames N] [--tx-irq-us N] [--tx-irq-frames N]",
	  1, 1, set_policy_opts, "", set_policy_opt, run_set_policy },
	{ "log-level", "error|warn|info|debug", 1, 1, NULL, "", NULL, run_log_level },
	{ "upgrade", "[--wait S]", 0, 0, upgrade_opts, "", upgrade_opt, run_upgrade },
	{ "add", "ID --vhost-user PATH (--server | --client) (--tap NAME | --af-packet IFNAME)\n"
	  "         [--netns NS] [--mac M] [--mtu N] [--policy P]",
	  1, 1, vnicctl_add_opts, "", vnicctl_add_opt, vnicctl_add_run },
	{ "remove", "ID [--deadline-ms MS]", 1, 1, vnicctl_remove_opts, "", vnicctl_remove_opt,
	  vnicctl_remove_run },
};
#define VNICCTL_NCMDS (sizeof(vnicctl_cmds) / sizeof(vnicctl_cmds[0]))

/* Options every command takes, before or after its name. */
#define VNICCTL_GLOBAL_SHORT "s:jh"
static const struct option global_opts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};
#define VNICCTL_NGLOBAL (sizeof(global_opts) / sizeof(global_opts[0]))
#define VNICCTL_MAX_OPTS 32

static void print_cmd_usage(FILE *f, const struct vnicctl_cmd *c)
{
	fprintf(f, "  %s%s%s\n", c->name, c->usage[0] ? " " : "", c->usage);
}

void vnicctl_usage(FILE *f, const struct vnicctl_cmd *cmd)
{
	if (cmd) {
		fprintf(f, "usage: vnicctl [--socket PATH] [--json]\n");
		print_cmd_usage(f, cmd);
		return;
	}
	fprintf(f, "usage: vnicctl [--socket PATH] [--json] COMMAND\n");
	for (size_t i = 0; i < VNICCTL_NCMDS; i++)
		print_cmd_usage(f, &vnicctl_cmds[i]);
	fprintf(f, "  --version\n");
}

int vnicctl_usage_error(const struct vnicctl *v)
{
	vnicctl_usage(stderr, v->cmd);
	return 2;
}

int vnicctl_connect(struct vnicctl *v)
{
	int rc = vnic_connect(v->socket, &v->conn);

	if (rc) {
		fprintf(stderr, "vnicctl: cannot connect to %s: %s%s\n", v->socket, strerror(-rc),
			rc == -ENOENT || rc == -ECONNREFUSED ? " (is vnicd running?)" : "");
		return 1;
	}
	rc = vnic_hello(v->conn, "vnicctl " PACKAGE_VERSION, &v->hello);
	if (rc) {
		fprintf(stderr, "vnicctl: %s\n", vnic_last_error(v->conn));
		return 1;
	}
	return 0;
}

/* The global options and those of cmd (NULL: of every command), as one
 * getopt_long table and short option string. */
static void build_opts(const struct vnicctl_cmd *cmd, struct option *lo, char *so, size_t solen)
{
	size_t n = 0;

	for (size_t i = 0; i < VNICCTL_NGLOBAL; i++)
		lo[n++] = global_opts[i];
	snprintf(so, solen, "%s", VNICCTL_GLOBAL_SHORT);
	for (size_t c = 0; c < VNICCTL_NCMDS; c++) {
		const struct vnicctl_cmd *k = &vnicctl_cmds[c];

		if (cmd && cmd != k)
			continue;
		for (size_t i = 0; k->opts && k->opts[i].name && n + 1 < VNICCTL_MAX_OPTS; i++)
			lo[n++] = k->opts[i];
		snprintf(so + strlen(so), solen - strlen(so), "%s", k->shortopts);
	}
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
}

/* The one dispatcher: find the command (the first operand: options may
 * come before or after it), parse the global options and the command's,
 * check its operand count and run it. */
int main(int argc, char **argv)
{
	struct option lo[VNICCTL_MAX_OPTS];
	char so[64];
	struct vnicctl v = { .socket = VNIC_DEFAULT_SOCKET, .interval = 1.0, .wait_s = 10 };
	unsigned nargs;
	int opt, rc;

	/* Pass 1, quiet, knowing every command's options: where is the
	 * command, and was it --help or --version? */
	build_opts(NULL, lo, so, sizeof(so));
	opterr = 0;
	while ((opt = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		if (opt == 'h') {
			vnicctl_usage(stdout, NULL);
			return 0;
		}
		if (opt == 'V')
			return vnic_print_version("vnicctl");
	}
	for (size_t i = 0; optind < argc && i < VNICCTL_NCMDS; i++)
		if (!strcmp(argv[optind], vnicctl_cmds[i].name))
			v.cmd = &vnicctl_cmds[i];
	if (!v.cmd) {
		vnicctl_usage(stderr, NULL);
		return 2;
	}

	/* Pass 2: the global options and this command's only. */
	build_opts(v.cmd, lo, so, sizeof(so));
	opterr = 1;
	optind = 0;
	while ((opt = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		switch (opt) {
		case 's': v.socket = optarg; break;
		case 'j': v.json = true; break;
		case '?': return vnicctl_usage_error(&v);
		default:
			rc = v.cmd->opt ? v.cmd->opt(&v, opt, optarg) : 2;
			if (rc)
				return rc;
		}
	}
	/* argv[optind] is the command's name, its operands follow. */
	nargs = (unsigned)(argc - optind - 1);
	if (nargs < v.cmd->min_args || nargs > v.cmd->max_args)
		return vnicctl_usage_error(&v);
	signal(SIGPIPE, SIG_IGN);
	rc = v.cmd->run(&v, argv + optind + 1, nargs);
	vnic_close(v.conn);
	return rc;
}
