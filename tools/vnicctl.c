/*
 * vnicctl: administration client of vnicd.
 *
 *   vnicctl [--socket PATH] status [--json] [--watch [--interval S] [--count N]]
 *
 * status    a table of every NIC: id, state, worker pid, policy, sandbox
 *           ("NO(OFF)" for a worker started with --sandbox=off), uptime,
 *           restarts, last error, and per queue packets, bytes, kicks,
 *           interrupts, suppressed notifications, drops, errors, broken.
 * --json    one JSON object: {"nics":[{"id","state","pid","policy",
 *           "restarts","uptime_s","last_error","sandboxed","start_us",
 *           "restart_us","policy_switches","policy_params":{"timer_us",
 *           "poll_us","latency_us","safety_pct","max_window",
 *           "budget_packets","budget_bytes"},"queues":[{"name",
 *           "packets","bytes","kicks","interrupts","suppressed","drops",
 *           "errors","window","flushes","timer_fires","timer_hits",
 *           "poll_spins","poll_hits","broken","broken_reason"}]}]}
 *           The table shows the TX policy counters on a line of their own
 *           under each TX queue.
 * --watch   reprint every --interval seconds (default 1) with per-second
 *           rates; with --json one object per line; --count N stops after
 *           N prints (default: until interrupted).
 *
 * Errors: one line on stderr, exit status 1 (2 for usage).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libvnic.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: vnicctl [--socket PATH] status [--json] [--watch [--interval S] [--count N]]\n");
}

/* JSON string with every control character escaped (RFC 8259 7). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void print_json(const struct vnic_status *st)
{
	printf("{\"nics\":[");
	for (unsigned i = 0; i < st->nnics; i++) {
		const struct vnic_nic_status *n = &st->nics[i];

		printf("%s{\"id\":", i ? "," : "");
		json_str(stdout, n->id);
		printf(",\"state\":");
		json_str(stdout, vnic_nic_state_name(n->state));
		printf(",\"pid\":%" PRId32 ",\"policy\":", n->pid);
		json_str(stdout, vnic_mitigation_name(n->policy.mode));
		printf(",\"restarts\":%" PRIu32 ",\"uptime_s\":%" PRIu64 ",\"last_error\":",
		       n->restarts, n->uptime_s);
		json_str(stdout, n->last_error);
		printf(",\"sandboxed\":%s,\"start_us\":%" PRIu64 ",\"restart_us\":%" PRIu64
		       ",\"policy_switches\":%" PRIu32 ",\"policy_params\":{\"timer_us\":%" PRIu32
		       ",\"poll_us\":%" PRIu32 ",\"latency_us\":%" PRIu32 ",\"safety_pct\":%" PRIu32
		       ",\"max_window\":%" PRIu32 ",\"budget_packets\":%" PRIu32
		       ",\"budget_bytes\":%" PRIu32 "},\"queues\":[",
		       n->sandboxed ? "true" : "false", n->start_us, n->restart_us,
		       n->policy_switches, n->policy.timer_us, n->policy.poll_us,
		       n->policy.latency_us, n->policy.safety_pct, n->policy.max_window,
		       n->policy.budget_packets, n->policy.budget_bytes);
		for (unsigned j = 0; j < n->nqueues; j++) {
			const struct vnic_queue_status *q = &n->queues[j];

			printf("%s{\"name\":", j ? "," : "");
			json_str(stdout, q->name);
			printf(",\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"kicks\":%" PRIu64
			       ",\"interrupts\":%" PRIu64 ",\"suppressed\":%" PRIu64
			       ",\"drops\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"window\":%" PRIu32
			       ",\"flushes\":%" PRIu64 ",\"timer_fires\":%" PRIu64
			       ",\"timer_hits\":%" PRIu64 ",\"poll_spins\":%" PRIu64
			       ",\"poll_hits\":%" PRIu64 ",\"broken\":%s,\"broken_reason\":",
			       q->packets, q->bytes, q->kicks, q->interrupts, q->suppressed,
			       q->drops, q->errors, q->window, q->flushes, q->timer_fires,
			       q->timer_hits, q->poll_spins, q->poll_hits,
			       q->broken ? "true" : "false");
			json_str(stdout, q->broken_reason);
			printf("}");
		}
		printf("]}");
	}
	printf("]}\n");
}

/* Text for a table cell: control characters from the wire become '?'. */
static const char *clean(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	buf[i] = '\0';
	return buf;
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

static void print_table(const struct vnic_status *st, const struct vnic_status *prev, double secs)
{
	char b1[96], b2[300];

	if (st->nnics == 0) {
		printf("no NICs\n");
		return;
	}
	printf("%-20s %-10s %8s %-8s %-7s %9s %8s  %s\n", "ID", "STATE", "PID", "POLICY",
	       "SANDBOX", "UPTIME", "RESTARTS", "LAST ERROR");
	for (unsigned i = 0; i < st->nnics; i++) {
		const struct vnic_nic_status *n = &st->nics[i];

		/* A worker without its sandbox is shouted (issue 4); none
		 * running (FAILED, between restarts) has no sandbox to show. */
		printf("%-20s %-10s %8" PRId32 " %-8s %-7s %8" PRIu64 "s %8" PRIu32 "  %s\n",
		       clean(n->id, b1, sizeof(b1)), vnic_nic_state_name(n->state), n->pid,
		       vnic_mitigation_name(n->policy.mode),
		       n->pid == 0 ? "-" : n->sandboxed ? "yes" : "NO(OFF)", n->uptime_s, n->restarts,
		       n->last_error[0] ? clean(n->last_error, b2, sizeof(b2)) : "-");
		if (prev)
			printf("  %-5s %12s %14s %10s %10s %10s %8s %8s  %s\n", "QUEUE", "PKT/S",
			       "BYTES/S", "KICKS/S", "IRQ/S", "SUPPR/S", "DROPS", "ERRORS", "BROKEN");
		else
			printf("  %-5s %12s %14s %10s %10s %10s %8s %8s  %s\n", "QUEUE", "PACKETS",
			       "BYTES", "KICKS", "INTERRUPTS", "SUPPRESSED", "DROPS", "ERRORS",
			       "BROKEN");
		for (unsigned j = 0; j < n->nqueues; j++) {
			const struct vnic_queue_status *q = &n->queues[j];
			const struct vnic_queue_status *p = find_prev_queue(prev, n->id, q->name);
			const char *brk = q->broken ? clean(q->broken_reason, b2, sizeof(b2)) : "no";

			if (prev && p)
				printf("  %-5s %12.0f %14.0f %10.0f %10.0f %10.0f %8" PRIu64 " %8" PRIu64
				       "  %s\n", clean(q->name, b1, sizeof(b1)),
				       rate(q->packets, p->packets, secs), rate(q->bytes, p->bytes, secs),
				       rate(q->kicks, p->kicks, secs),
				       rate(q->interrupts, p->interrupts, secs),
				       rate(q->suppressed, p->suppressed, secs), q->drops, q->errors,
				       q->broken && !q->broken_reason[0] ? "yes" : brk);
			else
				printf("  %-5s %12" PRIu64 " %14" PRIu64 " %10" PRIu64 " %10" PRIu64
				       " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 "  %s\n",
				       clean(q->name, b1, sizeof(b1)), q->packets, q->bytes, q->kicks,
				       q->interrupts, q->suppressed, q->drops, q->errors,
				       q->broken && !q->broken_reason[0] ? "yes" : brk);
			if (!strncmp(q->name, "tx", 2))
				printf("  %-5s policy %s: window %" PRIu32 ", flushes %" PRIu64
				       ", timer fires %" PRIu64 " (found frames %" PRIu64
				       "), poll spins %" PRIu64 " (found frames %" PRIu64 ")\n", "",
				       vnic_mitigation_name(n->policy.mode), q->window, q->flushes,
				       q->timer_fires, q->timer_hits, q->poll_spins, q->poll_hits);
		}
	}
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmd_status(struct vnic_conn *conn, bool json, bool watch, double interval, long count)
{
	struct vnic_status *prev = NULL;
	double t_prev = 0;

	for (long iter = 0; !watch || count <= 0 || iter < count; iter++) {
		struct vnic_status *st = NULL;
		double t;
		int rc = vnic_status(conn, &st);

		if (rc) {
			fprintf(stderr, "vnicctl: status: %s\n", vnic_last_error(conn));
			vnic_status_free(prev);
			return 1;
		}
		t = mono();
		if (json) {
			print_json(st);
		} else {
			if (watch)
				printf("%s--- %s", iter ? "\n" : "", ctime(&(time_t){ time(NULL) }));
			print_table(st, prev, t - t_prev);
		}
		fflush(stdout);
		vnic_status_free(prev);
		prev = st;
		t_prev = t;
		if (!watch)
			break;
		if (count > 0 && iter + 1 >= count)
			break;
		{
			struct timespec ts = { .tv_sec = (time_t)interval,
					       .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9) };
			nanosleep(&ts, NULL);
		}
	}
	vnic_status_free(prev);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "watch", no_argument, NULL, 'w' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = VNIC_DEFAULT_SOCKET;
	bool json = false, watch = false;
	double interval = 1.0;
	long count = 0;
	struct vnic_conn *conn = NULL;
	char *end;
	int opt, rc;

	/* Options may come before or after the command ("+" not used). */
	while ((opt = getopt_long(argc, argv, "s:jwi:c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': path = optarg; break;
		case 'j': json = true; break;
		case 'w': watch = true; break;
		case 'i':
			errno = 0;
			interval = strtod(optarg, &end);
			if (errno || *end || interval < 0.1 || interval > 3600) {
				fprintf(stderr, "vnicctl: --interval %s: give seconds in 0.1..3600\n", optarg);
				return 2;
			}
			break;
		case 'c':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1) {
				fprintf(stderr, "vnicctl: --count %s: give a positive number\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || strcmp(argv[optind], "status")) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = vnic_connect(path, &conn);
	if (rc) {
		fprintf(stderr, "vnicctl: cannot connect to %s: %s%s\n", path, strerror(-rc),
			rc == -ENOENT || rc == -ECONNREFUSED ? " (is vnicd running?)" : "");
		return 1;
	}
	rc = vnic_hello(conn, "vnicctl", NULL);
	if (rc) {
		fprintf(stderr, "vnicctl: %s\n", vnic_last_error(conn));
		vnic_close(conn);
		return 1;
	}
	rc = cmd_status(conn, json, watch, interval, count);
	vnic_close(conn);
	return rc;
}
