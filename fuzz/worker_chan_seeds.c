/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_chan_seeds: writes the seeds of fuzz/worker_chan.c into DIR
 * (usage: fuzz/worker_chan_seeds fuzz/corpus/worker_chan).
 *
 * Each seed is a sequence of datagram records (fuzz/sim_worker.h) whose
 * frames are real WorkerMessages packed by the generated protobuf-c code,
 * so a frame is exactly what a worker built from this tree sends. One
 * seed per message type a worker sends, each first as a healthy worker
 * sends it, then the hostile variants: a wrong state or answer, the wrong
 * direction, broken framing, fds, report-pipe bytes, exits and silence.
 */
#include "config.h"

#include <errno.h>
#include <linux/audit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "wire.h"
#include "worker_msg.h"

/* fdkind bits (sim_worker.h). */
#define K_EXIT1 0x20u
#define K_SYS 0x40u
#define K_CLOSE 0x60u
#define K_HANG 0x70u
#define K_REPORT 0x80u

struct seed {
	uint8_t buf[8192];
	size_t len;
};

static void raw(struct seed *s, unsigned nfds, unsigned kind, const void *p, size_t n)
{
	if (s->len + 4 + n > sizeof(s->buf)) {
		fprintf(stderr, "worker_chan_seeds: seed too long\n");
		exit(1);
	}
	s->buf[s->len++] = (uint8_t)nfds;
	s->buf[s->len++] = (uint8_t)kind;
	s->buf[s->len++] = (uint8_t)(n & 0xff);
	s->buf[s->len++] = (uint8_t)(n >> 8);
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* A record of one packed WorkerMessage: u32 big-endian length, payload. */
static void msg(struct seed *s, unsigned nfds, unsigned kind, const Vnic__Worker__WorkerMessage *m)
{
	uint8_t frame[4096];
	size_t n = vnic__worker__worker_message__get_packed_size(m);

	if (n + 4 > sizeof(frame)) {
		fprintf(stderr, "worker_chan_seeds: message too long\n");
		exit(1);
	}
	frame[0] = (uint8_t)(n >> 24);
	frame[1] = (uint8_t)(n >> 16);
	frame[2] = (uint8_t)(n >> 8);
	frame[3] = (uint8_t)n;
	vnic__worker__worker_message__pack(m, frame + 4);
	raw(s, nfds, kind, frame, n + 4);
}

static void ready(struct seed *s, unsigned kind)
{
	struct wmsg m;

	msg(s, 0, kind, wmsg_ready(&m, true));
}

static void log_line(struct seed *s, unsigned nfds, unsigned kind, const char *text)
{
	struct wmsg m;

	msg(s, nfds, kind, wmsg_log(&m, VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_INFO, text));
}

static void log_at(struct seed *s, Vnic__Worker__LogLevel level, const char *text)
{
	struct wmsg m;

	msg(s, 0, 0, wmsg_log(&m, level, text));
}

/* Stopped for rx0 and tx0 (or a queue the NIC does not have). */
static void stopped(struct seed *s, uint32_t bad_queue)
{
	struct wmsg m;
	Vnic__Vmm__QueueIndex qi[2], *qp[2];

	for (unsigned j = 0; j < 2; j++) {
		wmsg_queue_index(&qi[j], j == 1 && bad_queue ? bad_queue : j, 0, 0);
		qp[j] = &qi[j];
	}
	msg(s, 0, 0, wmsg_stopped(&m, qp, 2));
}

/* The answer to the harness's first SetPolicy: timer mode with the
 * defaults nic_policy_resolve gives (or another mode: a wrong answer). */
static void policy_set(struct seed *s, Vnic__Vmm__Mitigation mode)
{
	struct wmsg m;
	Vnic__Vmm__Policy p;

	vnic__vmm__policy__init(&p);
	p.mode = mode;
	p.timer_us = 1000;
	p.budget_packets = 256;
	p.budget_bytes = 512 * 1024;
	msg(s, 0, 0, wmsg_policy_set(&m, &p));
}

static void dirty_log_set(struct seed *s, bool on, const char *error)
{
	struct wmsg m;

	msg(s, 0, 0, wmsg_dirty_log_set(&m, on, error));
}

static void call_fd_set(struct seed *s, uint32_t queue)
{
	struct wmsg m;

	msg(s, 0, 0, wmsg_call_fd_set(&m, queue));
}

static void queue_broken(struct seed *s, uint32_t queue, const char *reason)
{
	struct wmsg m;

	msg(s, 0, 0, wmsg_queue_broken(&m, queue, reason));
}

static void error_msg(struct seed *s, unsigned kind, int errnum, const char *text)
{
	struct wmsg m;

	msg(s, 0, kind, wmsg_error(&m, errnum, text));
}

static void fault_hit(struct seed *s)
{
	struct wmsg m;

	msg(s, 0, 0, wmsg_fault_hit(&m, "worker.stop", "sigkill", 0));
}

/* Messages of the other direction, which a worker must never send. */
static void wrong_direction(struct seed *s)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__Start st;
	Vnic__Worker__RegionFds rf;

	vnic__worker__worker_message__init(&m);
	vnic__worker__start__init(&st);
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_START;
	m.start = &st;
	msg(s, 0, 0, &m);
	vnic__worker__region_fds__init(&rf);
	rf.first = 0;
	rf.count = 1;
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS;
	m.region_fds = &rf;
	msg(s, 1, 3, &m);
}

/* What the worker's SIGSYS handler writes (sandbox.h). */
static void report(struct seed *s, unsigned kind, int32_t nr)
{
	struct sandbox_report r = { .magic = SANDBOX_REPORT_MAGIC, .arch = AUDIT_ARCH_X86_64,
				    .nr = nr, .reserved = 0, .ip = 0x401000 };

	raw(s, 0, K_REPORT | kind, &r, sizeof(r));
}

static void put(const char *dir, const char *name, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		fprintf(stderr, "worker_chan_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

#define SEED(name, ...) do { struct seed s_ = { .len = 0 }; struct seed *s = &s_; \
	__VA_ARGS__; put(dir, name, s); } while (0)

static void healthy(const char *dir)
{
	SEED("ready-then-stopped", ready(s, 0); stopped(s, 0));
	SEED("log-ready-log-stopped", log_line(s, 0, 0, "nic fz0: mapped 1 region");
	     ready(s, 0); log_line(s, 0, 0, "nic fz0: started, 2 queues"); stopped(s, 0));
	SEED("policy-set", ready(s, 0); policy_set(s, VNIC__VMM__MITIGATION__MITIGATION_TIMER);
	     stopped(s, 0));
	SEED("dirty-log-set-on-off", ready(s, 0); dirty_log_set(s, true, NULL);
	     dirty_log_set(s, false, NULL); stopped(s, 0));
	SEED("call-fd-set-rx0", ready(s, 0); call_fd_set(s, 0); stopped(s, 0));
	SEED("queue-broken-tx0", ready(s, 0); queue_broken(s, 1, "descriptor chain loops");
	     stopped(s, 0));
	SEED("crash-restart-ready", ready(s, 0); ready(s, 0); stopped(s, 0));
}

static void hostile(const char *dir)
{
	static const uint8_t bad_prefix[] = { 0, 0, 0, 9, 0x52, 0x02, 0x08, 0x01 };
	static const uint8_t not_pb[] = { 0, 0, 0, 3, 0xff, 0xff, 0xff };

	SEED("policy-set-unasked", ready(s, 0); policy_set(s, VNIC__VMM__MITIGATION__MITIGATION_POLL));
	SEED("dirty-log-set-error", ready(s, 0); dirty_log_set(s, false, "mmap: Cannot allocate memory"));
	SEED("call-fd-set-wrong-queue", ready(s, 0); call_fd_set(s, 7));
	SEED("queue-broken-no-such-queue", ready(s, 0); queue_broken(s, 9, "no such queue"));
	SEED("stopped-no-such-queue", ready(s, 0); stopped(s, 5));
	SEED("stopped-before-ready", stopped(s, 0));
	SEED("error-before-ready-exit1", error_msg(s, K_EXIT1, EINVAL, "config: bad region"));
	SEED("error-twice", ready(s, 0); error_msg(s, 0, 0, "one"); error_msg(s, 0, 0, "two"));
	SEED("fault-hit", ready(s, 0); fault_hit(s));
	SEED("wrong-direction-start-regionfds", wrong_direction(s));
	SEED("bad-prefix", raw(s, 0, 0, bad_prefix, sizeof(bad_prefix)));
	SEED("not-protobuf", ready(s, 0); raw(s, 0, 0, not_pb, sizeof(not_pb)));
	SEED("empty-datagram-running", ready(s, 0); raw(s, 0, 0, "", 0));
	SEED("log-with-fds", log_line(s, 3, 0, "fds"); log_line(s, 8, 5, "more fds"); ready(s, 0));
	SEED("sigsys-with-report", ready(s, 0); report(s, K_SYS, 41); log_line(s, 0, 0, "x"));
	SEED("sigsys-short-report", raw(s, 0, K_REPORT | K_SYS, "VSBX", 4); ready(s, 0));
	SEED("hang-before-ready", log_line(s, 0, K_HANG, "hangs"));
	SEED("close-ctrl-running", ready(s, 0); log_line(s, 0, K_CLOSE, "closes fd 3"));
	SEED("crash-loop-to-failed", for (int i = 0; i < 8; i++) ready(s, 0));
	SEED("log-every-level", ready(s, 0); log_at(s, VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_ERROR, "e");
	     log_at(s, VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_WARN, "w");
	     log_at(s, VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_DEBUG, "d"); log_at(s, 77, "?"));
}

int main(int argc, char **argv)
{
	const char *dir;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	healthy(dir);
	hostile(dir);
	return 0;
}
