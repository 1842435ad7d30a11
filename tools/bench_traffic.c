/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench traffic / hostile: a simulated VMM and guests on top of
 * libvnic, moving checked Ethernet/IPv4/UDP frames through real vnicd
 * workers.
 *
 *   vnic-bench --socket PATH traffic --nics N --backend socket|tap
 *       --direction g2h|h2g|both --size BYTES|random --seconds S
 *       [--count N] [--netns NAME] [--window N]
 *       [--expect-json FILE] [--before-remove CMD]
 *       [--id-prefix P] [--fault-nic I] [--unplug-after S]
 *       [--remove-deadline MS] [--disconnect-after S]
 *       [--stall-backend-after S] [--policy P] [--timer-us N] [--poll-us N]
 *       [--latency-us N] [--switch-policy MS]
 *   vnic-bench --socket PATH hostile --kind loop|selfloop [--victim 0|1]
 *       [--seconds S]
 *
 * One thread plays every guest and every host end. Per NIC the "VMM"
 * (guest.c) makes sealed memfd guest memory, rings and eventfds, and sends
 * AddNic. The host end is the other half of a SOCK_SEQPACKET socketpair
 * (socket backend) or a UDP socket inside the network namespace where
 * vnicd created the tap (tap backend).
 *
 * Every frame carries (nic, direction, seq, length) and a pattern derived
 * from them; the receiver checks every byte and records each seq in a
 * bitmap, so loss, duplication and corruption are all counted. Senders keep
 * at most --window frames (and TR_WINDOW_BYTES) in flight per direction and
 * NIC: the host kernel drops rather than blocks on a full UDP receive
 * buffer or tap queue, and the window keeps the test's rate below that.
 *
 * Lifecycle (issue 5): --unplug-after removes NIC 0 while traffic runs,
 * checks its worker is gone when the reply arrives, then writes a canary
 * over all of its guest memory and checks nothing changes it;
 * --disconnect-after puts NIC 0 on its own connection and closes it
 * mid-frame; --stall-backend-after stops reading NIC 0's host end so its
 * worker sits on a full backend. The NIC under fault (--fault-nic, or the
 * one unplugged or disconnected) may fail, restart or lose frames: its
 * losses are printed on their own line; a descriptor returned twice or
 * never (its TX stalls while it runs), a doubled or corrupted frame still
 * fail. Every other NIC is held to the full standard.
 *
 * Exit: 0 when every frame arrived exactly once and intact (and the
 * worker counters agree), 1 on any failure, 2 on a usage error. A frame
 * lost on the tap path (the host kernel drops, it cannot block) is counted
 * and reported as a warning, not a failure; on the socket backend, which
 * cannot drop, any loss fails. Duplicates, corruption and stalls (no
 * frame for 5 s) always fail.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"

#define TR_MAX_NICS 64u
#define TR_STALL_NS (5ull * 1000000000ull)   /* no progress for 5 s: stall */
#define TR_DRAIN_NS (5ull * 1000000000ull)   /* after sending: wait this long */
#define TR_CPU_SAMPLE_NS 100000000ull        /* worker CPU sampled every 100 ms */
#define TR_COUNTER_WAIT_NS 2000000000ull     /* counters settle within 2 s */
#define TR_RESET_BOUND_NS 2000000000ull      /* hostile: needs-reset within 2 s */
#define TR_HARD_EXTRA_NS (30ull * 1000000000ull) /* the loop's absolute bound */
#define TR_BURST 64u                         /* frames per sender per round */
/* In flight per NIC and direction: frames below a tap's default queue
 * (txqueuelen 1000), bytes well below the UDP receive buffer we force
 * (64 MiB, counted at up to twice the frame size: skb truesize). */
#define TR_DEFAULT_WINDOW 768u
#define TR_WINDOW_BYTES (16ull << 20)
#define TR_NS 1000000000.0
#define TR_CANARY_NS 200000000ull            /* canary must hold this long */
#define TR_GONE_BOUND_NS (15ull * 1000000000ull) /* disconnect: worker gone by then */

enum tr_backend { TR_SOCKET, TR_TAP };

/* What the hostile guest posts on its tx0 (TESTPLAN ids). */
enum tr_kind {
	TR_KIND_LOOP,     /* G1: two descriptors pointing at each other */
	TR_KIND_SELFLOOP, /* G1: one zero-length descriptor pointing at itself */
	TR_KIND_BADHEAD,  /* G3: an avail entry >= queue size */
	TR_KIND_OOB,      /* G7: a descriptor past the end of guest memory */
};
static const char *const tr_kind_names[] = { "loop", "selfloop", "badhead", "oob" };

struct tr_flow {
	bool on;
	uint64_t limit;             /* frames to send, UINT64_MAX: until time */
	uint64_t sent, sent_bytes;  /* handed to the transport */
	uint64_t recv, recv_bytes;  /* received, checked, first time */
	uint64_t dup, corrupt, ooo, next_seq;
	uint64_t recv_at_reset;     /* hostile: recv when the victim broke */
	uint8_t *seen;              /* bitmap of received seqs */
	size_t seen_cap;            /* bits */
	uint64_t first_ns, last_ns; /* first and last frame received */
};

struct tr_nic {
	unsigned idx;
	char id[48];
	struct guest *g;
	int host_fd;                /* socketpair end or UDP socket; -1 */
	char tap[IFNAMSIZ];
	uint8_t host_mac[6];
	struct tr_flow f[2];        /* [FRAMES_G2H], [FRAMES_H2G] */
	uint64_t other_rx, other_rx_bytes; /* kernel frames the guest ignored */
	bool host_blocked;          /* h2g send hit EAGAIN: wait for POLLOUT */
	bool rx_more, tx_wait;
	bool added, hostile;
	pid_t pid;
	double cpu0, cpu1;
	/* Worker CPU across restarts: a dead worker's /proc entry is gone,
	 * so the loop samples the live one (cpu_last, every
	 * TR_CPU_SAMPLE_NS) and a pid change banks the old one's last
	 * sample (cpu_dead). */
	double cpu_last, cpu_dead;
	/* events */
	bool needs_reset, failed;
	uint32_t reset_queue;
	uint64_t reset_ns;
	char reset_reason[256];
	/* lifecycle */
	struct vnic_conn *conn;     /* r->conn, or its own (--disconnect-after) */
	bool faulty;                /* under fault: may fail, restart, lose frames */
	bool gone;                  /* unplugged or disconnected: no more traffic */
	bool stalled;               /* host end stopped reading (--stall-backend-after) */
	bool disc_wait;             /* disconnected, worker not yet seen gone */
	uint64_t disc_ns;
	bool canary_set, canary_checked;
	uint64_t canary_ns;
	uint64_t resume_ns;         /* last restart: per-flow stall clock restarts */
	uint64_t tx_used_ns;        /* last time TX descriptors came back */
	uint64_t g2h_at_restart;    /* g2h frames received before the last restart */
	unsigned restarts, deaths;
	bool reread_pid;
};

struct tr_run {
	uint64_t cpu_sampled_ns;    /* tr_cpu_sample */
	const char *socket_path;
	struct vnic_conn *conn;
	enum tr_backend backend;
	unsigned dirs;              /* bit 0: g2h, bit 1: h2g */
	uint32_t fixed;             /* frame size, 0 = random */
	uint32_t maxsize;           /* largest frame: FRAMES_MAX, or FRAMES_TAP_MAX */
	double seconds;
	uint64_t count;
	unsigned window;
	char netns[64];
	bool netns_created;
	unsigned nnics;
	struct tr_nic *nics;
	uint8_t *buf;               /* host scratch, one frame */
	uint32_t mtu;
	enum vnic_mitigation policy;  /* --policy, DEFAULT: the supervisor's */
	struct vnic_policy pol;       /* its parameters (--timer-us ...) */
	double switch_ms;             /* --switch-policy: SetPolicy every MS, 0 off */
	uint64_t rr;                  /* --rr N: request/response transactions, 0 off */
	unsigned guest_batch;         /* --guest-batch: frames per publish (0: a burst) */
	uint64_t next_switch_ns;
	unsigned switches, switch_next, switch_sets; /* rounds; SetPolicy calls */
	const char *expect_json, *before_remove;
	uint64_t t0, inject_ns;
	/* hostile: the victim gets its looping chain at inject_at, half-way
	 * through, so the other NIC's rate before and after can be compared. */
	struct tr_nic *victim;
	enum tr_kind victim_kind;
	bool injected;
	uint64_t inject_at;
	uint64_t recv_at_inject;    /* the other NIC's frames, both directions */
	double victim_cpu_at_inject;
	unsigned failures;
	int nic_errors;             /* events for NICs that should be fine */
	/* lifecycle (issue 5) */
	const char *id_prefix;
	int fault_nic;              /* -1: none */
	double unplug_after, disconnect_after, stall_after; /* < 0: off */
	uint32_t remove_deadline_ms;
	bool unplug_done, disconnect_done, stall_done;
};

static volatile sig_atomic_t tr_stop;

static void tr_on_signal(int sig)
{
	(void)sig;
	tr_stop = 1;
}

static void tr_fail(struct tr_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tr_fail(struct tr_run *r, const char *fmt, ...)
{
	va_list ap;

	r->failures++;
	if (r->failures > 20)
		return; /* the first ones explain the rest */
	fprintf(stderr, "vnic-bench: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- helpers: commands, namespaces, /proc ---- */

/* tr_cmd - run argv (NULL-terminated) and wait; output goes to ours.
 * Returns: 0 when it exited 0, -EIO otherwise (reason printed). */
static int tr_cmd(const char *const *argv)
{
	pid_t pid = fork();
	int st;

	if (pid < 0) {
		fprintf(stderr, "vnic-bench: fork: %s\n", strerror(errno));
		return -EIO;
	}
	if (pid == 0) {
		char *v[16];
		unsigned i;

		/* exec wants char *: copies, in the child only. */
		for (i = 0; argv[i] && i < 15; i++)
			v[i] = strdup(argv[i]);
		v[i] = NULL;
		execvp(v[0], v);
		fprintf(stderr, "vnic-bench: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -EIO;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "vnic-bench: command failed:");
	for (unsigned i = 0; argv[i]; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	return -EIO;
}

/* tr_ns_enter - switch this (single-threaded) process into netns name.
 * Returns: an fd of the namespace we left (give it to tr_ns_leave), or
 * -EIO (reason printed). */
static int tr_ns_enter(const char *name)
{
	char path[128];
	int self, fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "vnic-bench: entering netns %s: %s\n", name, strerror(errno));
		if (self >= 0)
			close(self);
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
	return self;
}

static void tr_ns_leave(int self)
{
	if (setns(self, CLONE_NEWNET) < 0) {
		/* Staying in the wrong namespace would send the rest of the run
		 * somewhere else: stop here. */
		fprintf(stderr, "vnic-bench: cannot return to our netns: %s\n", strerror(errno));
		abort();
	}
	close(self);
}

/* CPU seconds (user + system) of pid, -1 when unknown. */
static double tr_cpu_seconds(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, stt;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* After "(comm)": state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime (fields 3..15 of proc(5)). */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &stt) != 2)
		return -1;
	return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- flows ---- */

static int tr_flow_reserve(struct tr_flow *f, uint64_t seq)
{
	size_t cap = f->seen_cap;
	uint8_t *p;

	if (seq < cap)
		return 0;
	while (cap <= seq)
		cap = cap ? cap * 2 : 65536;
	p = realloc(f->seen, cap / 8);
	if (!p)
		return -ENOMEM;
	memset(p + f->seen_cap / 8, 0, (cap - f->seen_cap) / 8);
	f->seen = p;
	f->seen_cap = cap;
	return 0;
}

static void tr_flow_record(struct tr_run *r, struct tr_nic *n, unsigned dir, uint64_t seq,
			   size_t bytes)
{
	struct tr_flow *f = &n->f[dir];
	uint64_t now = bench_now_ns();

	if (seq >= f->sent) {
		f->corrupt++;
		tr_fail(r, "nic %u %s: seq %llu was never sent (sent %llu)", n->idx,
			dir == FRAMES_G2H ? "g2h" : "h2g", (unsigned long long)seq,
			(unsigned long long)f->sent);
		return;
	}
	if (f->seen[seq / 8] & (1u << (seq % 8))) {
		f->dup++;
		tr_fail(r, "nic %u %s: seq %llu arrived twice", n->idx,
			dir == FRAMES_G2H ? "g2h" : "h2g", (unsigned long long)seq);
		return;
	}
	f->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
	if (seq != f->next_seq)
		f->ooo++;
	f->next_seq = seq + 1;
	f->recv++;
	f->recv_bytes += bytes;
	if (!f->first_ns)
		f->first_ns = now;
	f->last_ns = now;
}

static bool tr_may_send(const struct tr_run *r, const struct tr_flow *f, uint64_t now)
{
	if (!f->on || tr_stop || f->sent >= f->limit)
		return false;
	if (now >= r->t0 + (uint64_t)(r->seconds * TR_NS))
		return false;
	return f->sent - f->recv < r->window &&
	       f->sent_bytes - f->recv_bytes < TR_WINDOW_BYTES;
}

/* ---- guest side ---- */

static void tr_guest_tx(struct tr_run *r, struct tr_nic *n, uint64_t now)
{
	struct tr_flow *f = &n->f[FRAMES_G2H];
	char err[200];
	unsigned added = 0;

	int got = guest_tx_reclaim(n->g, err, sizeof(err));

	if (got < 0) {
		tr_fail(r, "nic %u: %s", n->idx, err);
		f->on = false;
		return;
	}
	if (got > 0)
		n->tx_used_ns = now;
	n->tx_wait = false;
	for (unsigned round = 0; round < 4; round++) {
		while (added < TR_BURST && tr_may_send(r, f, now)) {
			unsigned slot;
			uint8_t *p = guest_tx_slot(n->g, &slot);
			uint32_t len;

			if (!p)
				break;
			if (tr_flow_reserve(f, f->sent) < 0) {
				tr_fail(r, "out of memory");
				f->on = false;
				break;
			}
			len = frames_size(n->idx, FRAMES_G2H, f->sent, r->fixed, r->maxsize);
			frames_build(p, len, n->idx, FRAMES_G2H, f->sent, n->host_mac);
			if (guest_tx_add(n->g, slot, len) < 0)
				break;
			f->sent++;
			f->sent_bytes += len;
			added++;
			/* --guest-batch: publish (and kick if asked) every N
			 * frames, as a Linux guest does without xmit_more. */
			if (r->guest_batch && added % r->guest_batch == 0)
				guest_tx_flush(n->g);
		}
		if (added)
			guest_tx_flush(n->g);
		/* Out of slots while we still want to send: ask for a TX
		 * interrupt; if slots came back meanwhile, go on. */
		if (n->g->ntxfree == 0 && tr_may_send(r, f, now)) {
			if (!guest_tx_wait(n->g)) {
				n->tx_wait = true;
				return;
			}
			if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0) {
				tr_fail(r, "nic %u: %s", n->idx, err);
				f->on = false;
				return;
			}
			continue;
		}
		return;
	}
}

static void tr_guest_rx(struct tr_run *r, struct tr_nic *n)
{
	char err[200];

	n->rx_more = false;
	for (unsigned i = 0; i < 2 * GUEST_QUEUE_SIZE; i++) {
		const uint8_t *fr;
		size_t len;
		uint64_t seq;
		int rc = guest_rx_next(n->g, &fr, &len, err, sizeof(err));

		if (rc < 0) {
			tr_fail(r, "nic %u: %s", n->idx, err);
			return;
		}
		if (rc == 0) {
			if (!guest_rx_arm(n->g))
				return;
			continue; /* arrived while re-arming: drain again */
		}
		rc = frames_check(fr, len, n->idx, FRAMES_H2G, r->fixed, r->maxsize, n->host_mac,
				  r->backend == TR_SOCKET, &seq, err, sizeof(err));
		if (rc == -ENOMSG && r->backend == TR_TAP) {
			n->other_rx++;  /* the netns kernel's own traffic */
			n->other_rx_bytes += len;
			continue;
		}
		if (rc < 0) {
			n->f[FRAMES_H2G].corrupt++;
			tr_fail(r, "nic %u h2g: frame of %zu bytes: %s", n->idx, len,
				rc == -ENOMSG ? "not one of ours" : err);
			continue;
		}
		tr_flow_record(r, n, FRAMES_H2G, seq, len);
	}
	n->rx_more = true; /* budget spent: come back without sleeping */
}

/* ---- host side ---- */

static void tr_host_rx(struct tr_run *r, struct tr_nic *n)
{
	char err[200];

	if (n->stalled)
		return; /* --stall-backend-after: the peer stops reading */
	for (unsigned i = 0; i < 256; i++) {
		ssize_t len = recv(n->host_fd, r->buf, FRAMES_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
		uint64_t seq;
		int rc;

		if (len < 0) {
			/* ECONNRESET: vnicd closed the worker's end with frames
			 * of ours unread, expected once the NIC is gone. */
			if (errno != EAGAIN && errno != EINTR && !(n->gone && errno == ECONNRESET))
				tr_fail(r, "nic %u: host recv: %s", n->idx, strerror(errno));
			return;
		}
		if (len == 0 && r->backend == TR_SOCKET) {
			/* End of file: vnicd closed the worker's end. The
			 * worker never sends an empty frame. */
			if (!n->gone)
				tr_fail(r, "nic %u: the worker's end of the backend closed",
					n->idx);
			return;
		}
		if (len > FRAMES_MAX) {
			n->f[FRAMES_G2H].corrupt++;
			tr_fail(r, "nic %u g2h: host received %zd bytes, more than any frame sent",
				n->idx, len);
			continue;
		}
		if (r->backend == TR_SOCKET)
			rc = frames_check(r->buf, (size_t)len, n->idx, FRAMES_G2H, r->fixed,
					  r->maxsize, n->host_mac, true, &seq, err, sizeof(err));
		else
			rc = frames_check_payload(r->buf, (size_t)len, n->idx, FRAMES_G2H, r->fixed,
						  r->maxsize, &seq, err, sizeof(err));
		if (rc < 0) {
			n->f[FRAMES_G2H].corrupt++;
			tr_fail(r, "nic %u g2h: %zd bytes: %s", n->idx, len,
				rc == -ENOMSG ? "not one of ours" : err);
			continue;
		}
		tr_flow_record(r, n, FRAMES_G2H, seq,
			       r->backend == TR_SOCKET ? (size_t)len : (size_t)len + FRAMES_HDRS);
	}
}

static void tr_host_tx(struct tr_run *r, struct tr_nic *n, uint64_t now)
{
	struct tr_flow *f = &n->f[FRAMES_H2G];

	n->host_blocked = false;
	for (unsigned i = 0; i < TR_BURST && tr_may_send(r, f, now); i++) {
		uint32_t len = frames_size(n->idx, FRAMES_H2G, f->sent, r->fixed, r->maxsize);
		ssize_t w;

		if (tr_flow_reserve(f, f->sent) < 0) {
			tr_fail(r, "out of memory");
			f->on = false;
			return;
		}
		if (r->backend == TR_SOCKET) {
			frames_build(r->buf, len, n->idx, FRAMES_H2G, f->sent, n->host_mac);
			w = send(n->host_fd, r->buf, len, MSG_DONTWAIT);
		} else {
			frames_build_payload(r->buf, len, n->idx, FRAMES_H2G, f->sent);
			w = send(n->host_fd, r->buf, len - FRAMES_HDRS, MSG_DONTWAIT);
		}
		if (w < 0) {
			if (errno == EAGAIN || errno == ENOBUFS) {
				n->host_blocked = true;
				return;
			}
			tr_fail(r, "nic %u: host send: %s", n->idx, strerror(errno));
			f->on = false;
			return;
		}
		f->sent++;
		f->sent_bytes += len;
	}
}

/* ---- events ---- */

static struct tr_nic *tr_find(struct tr_run *r, const char *id)
{
	for (unsigned i = 0; i < r->nnics; i++)
		if (!strcmp(r->nics[i].id, id))
			return &r->nics[i];
	return NULL;
}

static void tr_on_event(struct vnic_conn *conn, const struct vnic_event *ev, void *arg)
{
	struct tr_run *r = arg;
	struct tr_nic *n = tr_find(r, ev->id);

	(void)conn;
	if (!n)
		return;
	switch (ev->type) {
	case VNIC_EVENT_QUEUE_NEEDS_RESET:
		fprintf(stderr, "vnic-bench: event: nic %s queue %u needs reset: %s\n", ev->id,
			ev->queue, ev->reason);
		if (n->faulty)
			break; /* under fault: reported, tolerated */
		if (!n->needs_reset) {
			n->needs_reset = true;
			n->reset_queue = ev->queue;
			n->reset_ns = bench_now_ns();
			snprintf(n->reset_reason, sizeof(n->reset_reason), "%s", ev->reason);
			for (unsigned i = 0; i < r->nnics; i++)
				for (unsigned d = 0; d < 2; d++)
					r->nics[i].f[d].recv_at_reset = r->nics[i].f[d].recv;
		}
		if (!n->hostile)
			r->nic_errors++;
		break;
	case VNIC_EVENT_NIC_FAILED:
		fprintf(stderr, "vnic-bench: event: nic %s failed: %s (signal %d, exit %d)\n",
			ev->id, ev->reason, ev->signal, ev->exit_status);
		n->deaths++;
		if (n->faulty)
			break; /* a restart may follow: NIC_STATE_CHANGED says */
		n->failed = true;
		r->nic_errors++;
		break;
	case VNIC_EVENT_NIC_STATE_CHANGED:
		if (ev->new_state != VNIC_NIC_FAILED || !n->faulty)
			break; /* a bystander's FAILED came with its NIC_FAILED */
		/* Failed for good (no restart, or the limit): its flows end
		 * here; what was in flight is lost to the fault (printed
		 * apart), the rest of the run goes on. */
		n->failed = true;
		for (unsigned d = 0; d < 2; d++)
			n->f[d].on = false;
		break;
	case VNIC_EVENT_NIC_RESTARTED:
		fprintf(stderr, "vnic-bench: event: nic %s restarted (%u restarts): %s\n", ev->id,
			ev->restarts, ev->reason);
		n->restarts++;
		n->reread_pid = true;
		n->g2h_at_restart = n->f[FRAMES_G2H].recv;
		n->resume_ns = bench_now_ns();
		if (!n->faulty)
			r->nic_errors++;
		break;
	default:
		break;
	}
}

/* ---- setup ---- */

static int tr_socket_pair(struct tr_run *r, struct tr_nic *n, int *ret_vmm_end)
{
	int sv[2], sz = 4 << 20;

	(void)r;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		fprintf(stderr, "vnic-bench: socketpair: %s\n", strerror(errno));
		return -EIO;
	}
	for (unsigned i = 0; i < 2; i++) {
		/* Room for several 64 KiB frames each way; FORCE needs root,
		 * the plain call is the fallback. */
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
			setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		if (setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
			setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	n->host_fd = sv[0];
	*ret_vmm_end = sv[1];
	/* The socket backend's host end: a made-up MAC for the frames. */
	memcpy(n->host_mac, (const uint8_t[6]){ 0x52, 0x54, 0x00, 0xbb, 0xff, (uint8_t)n->idx }, 6);
	return 0;
}

/* After AddNic created tap n->tap in r->netns: address, MTU, a static
 * neighbour for the guest, no IPv6 chatter; then the host's UDP socket. */
static int tr_tap_setup(struct tr_run *r, struct tr_nic *n)
{
	char mtu[16], addr[32], gip[32], gmac[32];
	uint8_t m[6];
	struct ifreq ifr;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int self, fd, sz = 64 << 20;
	char path[128];

	snprintf(mtu, sizeof(mtu), "%u", r->mtu);
	snprintf(addr, sizeof(addr), "198.18.%u.1/24", n->idx);
	snprintf(gip, sizeof(gip), "198.18.%u.2", n->idx);
	frames_guest_mac(n->idx, m);
	snprintf(gmac, sizeof(gmac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
		 m[5]);

	self = tr_ns_enter(r->netns);
	if (self < 0)
		return -EIO;
	/* Inside the netns, /proc/sys/net is the netns's own. */
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", n->tap);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			fprintf(stderr, "vnic-bench: %s: %s\n", path, strerror(errno));
		close(fd);
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "vnic-bench: socket in netns: %s\n", strerror(errno));
		tr_ns_leave(self);
		return -EIO;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", n->tap);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		fprintf(stderr, "vnic-bench: %s: SIOCGIFHWADDR: %s\n", n->tap, strerror(errno));
		close(fd);
		tr_ns_leave(self);
		return -EIO;
	}
	memcpy(n->host_mac, ifr.ifr_hwaddr.sa_data, 6);
	tr_ns_leave(self);

	{
		const char *a1[] = { "ip", "-n", r->netns, "link", "set", "dev", n->tap, "mtu", mtu,
				     "up", NULL };
		const char *a2[] = { "ip", "-n", r->netns, "addr", "replace", addr, "dev", n->tap,
				     NULL };
		const char *a3[] = { "ip", "-n", r->netns, "neigh", "replace", gip, "lladdr", gmac,
				     "dev", n->tap, "nud", "permanent", NULL };

		if (tr_cmd(a1) < 0 || tr_cmd(a2) < 0 || tr_cmd(a3) < 0) {
			close(fd);
			return -EIO;
		}
	}

	/* The socket was made inside the netns and stays bound to it. Large
	 * buffers as root: the window must fit in them (see the top). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		fprintf(stderr, "vnic-bench: socket buffers: %s\n", strerror(errno));
	sa.sin_port = htons((uint16_t)(FRAMES_UDP_PORT + n->idx));
	sa.sin_addr.s_addr = htonl(frames_host_ip(n->idx));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vnic-bench: bind %s:%u: %s\n", addr, FRAMES_UDP_PORT + n->idx,
			strerror(errno));
		close(fd);
		return -EIO;
	}
	sa.sin_addr.s_addr = htonl(frames_guest_ip(n->idx));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vnic-bench: connect %s: %s\n", gip, strerror(errno));
		close(fd);
		return -EIO;
	}
	n->host_fd = fd;
	return 0;
}

static int tr_nic_add(struct tr_run *r, struct tr_nic *n)
{
	struct vnic_region reg;
	struct vnic_queue q[2];
	struct vnic_nic_config cfg = { 0 };
	char err[256];
	int vmm_end = -1, rc;

	rc = guest_new(n->idx, &n->g, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "vnic-bench: nic %u: %s\n", n->idx, err);
		return -EIO;
	}
	if (r->id_prefix)
		snprintf(n->id, sizeof(n->id), "%s%u", r->id_prefix, n->idx);
	else
		snprintf(n->id, sizeof(n->id), "bench%d-%u", (int)getpid(), n->idx);
	snprintf(n->tap, sizeof(n->tap), "vnicb%u", n->idx);
	if (r->backend == TR_SOCKET && tr_socket_pair(r, n, &vmm_end) < 0)
		return -EIO;

	guest_vnic_memory(n->g, &reg, q);
	cfg.id = n->id;
	frames_guest_mac(n->idx, cfg.mac);
	cfg.mtu = r->mtu;
	cfg.features_offered = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF |
			       VNIC_F_MAC | VNIC_F_MTU;
	cfg.features_acked = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF;
	cfg.nregions = 1;
	cfg.regions = &reg;
	cfg.nqueues = 2;
	cfg.queues = q;
	cfg.policy = r->pol;
	cfg.policy.mode = r->policy;
	if (r->backend == TR_SOCKET) {
		cfg.backend = VNIC_BACKEND_SOCKET;
		cfg.backend_fd = vmm_end;
	} else {
		cfg.backend = VNIC_BACKEND_TAP;
		cfg.tap_name = n->tap;
		cfg.netns = r->netns;
		cfg.backend_fd = -1;
	}
	rc = vnic_add_nic(n->conn, &cfg, err, sizeof(err));
	if (vmm_end >= 0)
		close(vmm_end); /* libvnic borrowed it; vnicd has its own now */
	if (rc != 0) {
		fprintf(stderr, "vnic-bench: AddNic %s: %s\n", n->id,
			err[0] ? err : vnic_last_error(n->conn));
		return -EIO;
	}
	n->added = true;
	if (r->backend == TR_TAP && tr_tap_setup(r, n) < 0)
		return -EIO;
	guest_rx_fill(n->g);
	return 0;
}

/* Worker pids and the CPU time they used so far. */
static int tr_read_pids(struct tr_run *r)
{
	struct vnic_status *st = NULL;
	int rc = vnic_status(r->conn, &st);

	if (rc != 0) {
		fprintf(stderr, "vnic-bench: status: %s\n", vnic_last_error(r->conn));
		return -EIO;
	}
	for (unsigned i = 0; i < st->nnics; i++) {
		struct tr_nic *n = tr_find(r, st->nics[i].id);

		if (!n)
			continue;
		if (n->pid > 0 && st->nics[i].pid != n->pid) {
			/* A new worker: bank what the old one used (up to its
			 * last sample), count the new one from its start. */
			if (n->cpu0 >= 0 && n->cpu_last >= n->cpu0)
				n->cpu_dead += n->cpu_last - n->cpu0;
			n->cpu0 = n->cpu_last = 0;
		}
		n->pid = st->nics[i].pid;
	}
	vnic_status_free(st);
	return 0;
}

/* Sample each live worker's CPU (see struct tr_nic cpu_last). */
static void tr_cpu_sample(struct tr_run *r, uint64_t now)
{
	if (now - r->cpu_sampled_ns < TR_CPU_SAMPLE_NS)
		return;
	r->cpu_sampled_ns = now;
	for (unsigned i = 0; i < r->nnics; i++) {
		double c = tr_cpu_seconds(r->nics[i].pid);

		if (c >= 0)
			r->nics[i].cpu_last = c;
	}
}

static const struct vnic_queue_status *tr_queue(const struct vnic_nic_status *s, const char *name)
{
	for (unsigned i = 0; i < s->nqueues; i++)
		if (!strcmp(s->queues[i].name, name))
			return &s->queues[i];
	return NULL;
}

static const struct vnic_nic_status *tr_nic_status(const struct vnic_status *st, const char *id)
{
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id))
			return &st->nics[i];
	return NULL;
}

/* Do the worker's counters say what the guests and hosts saw? TX: every
 * frame the guest sent was written (packets, Ethernet bytes); RX: every
 * frame the guest received, ours and the kernel's. */
static bool tr_counters_match(struct tr_run *r, const struct vnic_status *st, bool report)
{
	bool ok = true;

	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		const struct vnic_nic_status *s = tr_nic_status(st, n->id);
		const struct vnic_queue_status *tx, *rx;
		uint64_t rxp = n->f[FRAMES_H2G].recv + n->other_rx;
		uint64_t rxb = n->f[FRAMES_H2G].recv_bytes + n->other_rx_bytes;

		if (n->hostile || n->faulty || n->gone)
			continue;
		tx = s ? tr_queue(s, "tx0") : NULL;
		rx = s ? tr_queue(s, "rx0") : NULL;
		if (!tx || !rx) {
			if (report)
				tr_fail(r, "nic %s missing from status", n->id);
			ok = false;
			continue;
		}
		if (tx->packets != n->f[FRAMES_G2H].sent || tx->bytes != n->f[FRAMES_G2H].sent_bytes ||
		    rx->packets != rxp || rx->bytes != rxb) {
			if (report)
				tr_fail(r,
					"nic %s counters: tx0 %llu pkts %llu B (guest sent %llu, %llu B), "
					"rx0 %llu pkts %llu B (guest got %llu, %llu B)",
					n->id, (unsigned long long)tx->packets,
					(unsigned long long)tx->bytes,
					(unsigned long long)n->f[FRAMES_G2H].sent,
					(unsigned long long)n->f[FRAMES_G2H].sent_bytes,
					(unsigned long long)rx->packets, (unsigned long long)rx->bytes,
					(unsigned long long)rxp, (unsigned long long)rxb);
			ok = false;
		}
		if (report && r->backend == TR_SOCKET &&
		    (tx->drops || tx->errors || rx->drops || rx->errors)) {
			tr_fail(r, "nic %s: drops/errors tx0 %llu/%llu rx0 %llu/%llu on a lossless backend",
				n->id, (unsigned long long)tx->drops, (unsigned long long)tx->errors,
				(unsigned long long)rx->drops, (unsigned long long)rx->errors);
			ok = false;
		}
		for (unsigned q = 0; report && q < s->nqueues; q++)
			if (s->queues[q].broken) {
				tr_fail(r, "nic %s %s broken: %s", n->id, s->queues[q].name,
					s->queues[q].broken_reason);
				ok = false;
			}
	}
	return ok;
}

static int tr_write_expect(struct tr_run *r)
{
	FILE *f = fopen(r->expect_json, "w");

	if (!f) {
		fprintf(stderr, "vnic-bench: %s: %s\n", r->expect_json, strerror(errno));
		return -EIO;
	}
	fprintf(f, "{\"nics\": [");
	for (unsigned i = 0, first = 1; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		if (n->hostile)
			continue;
		fprintf(f,
			"%s\n {\"id\": \"%s\", \"queues\": {\"tx0\": {\"packets\": %llu, \"bytes\": %llu}, "
			"\"rx0\": {\"packets\": %llu, \"bytes\": %llu}}}",
			first ? "" : ",", n->id, (unsigned long long)n->f[FRAMES_G2H].sent,
			(unsigned long long)n->f[FRAMES_G2H].sent_bytes,
			(unsigned long long)(n->f[FRAMES_H2G].recv + n->other_rx),
			(unsigned long long)(n->f[FRAMES_H2G].recv_bytes + n->other_rx_bytes));
		first = 0;
	}
	fprintf(f, "\n]}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- lifecycle: unplug, disconnect, stalled backend (issue 5) ---- */

/* The canary: a pattern no device write produces by chance, a function of
 * the offset so that a moved block shows too. */
static uint64_t tr_canary_word(size_t i)
{
	return 0xc0ffee5a00000000ull ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
}

static void tr_canary_set(struct tr_nic *n)
{
	uint64_t *w = (uint64_t *)(void *)n->g->mem;
	size_t nw = n->g->memsize / 8, one = 1;

	for (size_t i = 0; i < nw; i++)
		w[i] = tr_canary_word(i);
	/* Late kicks on both queues (TESTPLAN L2): nobody may act on them. */
	for (unsigned q = 0; q < 2; q++)
		if (write(n->g->kick[q], &one, sizeof(uint64_t)) < 0)
			fprintf(stderr, "vnic-bench: late kick: %s\n", strerror(errno));
	n->canary_set = true;
	n->canary_ns = bench_now_ns();
}

/* Has anything written the NIC's guest memory since tr_canary_set? */
static void tr_canary_check(struct tr_run *r, struct tr_nic *n)
{
	const uint64_t *w = (const uint64_t *)(const void *)n->g->mem;
	size_t nw = n->g->memsize / 8, bad = 0, first = 0;
	double ms = (bench_now_ns() - n->canary_ns) / 1e6;

	for (size_t i = 0; i < nw; i++)
		if (w[i] != tr_canary_word(i) && bad++ == 0)
			first = i * 8;
	n->canary_checked = true;
	if (bad) {
		tr_fail(r, "CANARY nic %s: %zu words of guest memory changed after the worker was "
			"gone (first at offset %#zx; rings at desc %#llx used %#llx)", n->id, bad, first,
			(unsigned long long)(n->g->lay[GUEST_TX].desc - GUEST_GPA_BASE),
			(unsigned long long)(n->g->lay[GUEST_TX].used - GUEST_GPA_BASE));
		return;
	}
	printf("CANARY nic=%s bytes=%zu intact_ms=%.0f\n", n->id, nw * 8, ms);
}

/* The NIC is out of the run: its in-flight frames are lost to the
 * operation (counted apart), frames already on the host end are still
 * read. */
static void tr_retire(struct tr_run *r, struct tr_nic *n)
{
	n->gone = true;
	n->faulty = true;
	n->stalled = false;
	for (unsigned d = 0; d < 2; d++)
		n->f[d].on = false;
	/* Whatever reached the host end before the worker went. Bounded:
	 * at most 64 rounds of 256 frames. */
	for (unsigned i = 0; i < 64; i++) {
		uint64_t before = n->f[FRAMES_G2H].recv;

		tr_host_rx(r, n);
		if (n->f[FRAMES_G2H].recv == before)
			break;
	}
}

static bool tr_pid_gone(pid_t pid)
{
	return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

/* RemoveNic on NIC 0 while the others run. */
static void tr_unplug(struct tr_run *r, struct tr_nic *n)
{
	struct vnic_remove_result res;
	uint64_t t0, t1;
	char err[200];
	int rc;

	memset(&res, 0, sizeof(res));
	t0 = bench_now_ns();
	rc = vnic_remove_nic(n->conn, n->id, r->remove_deadline_ms, &res);
	t1 = bench_now_ns();
	n->added = false;
	if (rc < 0 || (rc > 0 && rc != VNIC_STATUS_DEADLINE_EXCEEDED)) {
		tr_fail(r, "RemoveNic %s: %s", n->id, vnic_last_error(n->conn));
		tr_retire(r, n);
		return;
	}
	/* Bounded: the deadline, then a SIGKILL and a reap (1 s is ample). */
	if (t1 - t0 > (uint64_t)(r->remove_deadline_ms + 1000) * 1000000ull)
		tr_fail(r, "RemoveNic %s took %.1f ms, bound %u ms (deadline + 1 s)", n->id,
			(t1 - t0) / 1e6, r->remove_deadline_ms + 1000);
	/* The promise: the reply comes after the worker was reaped. */
	if (!tr_pid_gone(n->pid))
		tr_fail(r, "RemoveNic %s replied while worker pid %d still exists", n->id,
			(int)n->pid);
	printf("UNPLUG nic=%s status=%s latency_ms=%.3f reply_latency_ms=%.3f worker_pid=%d "
	       "gone=%s\n", n->id, rc ? "DEADLINE_EXCEEDED" : "OK", (t1 - t0) / 1e6,
	       res.unplug_latency_us / 1000.0, (int)n->pid, tr_pid_gone(n->pid) ? "yes" : "NO");
	for (unsigned q = 0; q < res.nqueues; q++) {
		const struct vnic_queue_index *qi = &res.queues[q];
		unsigned slot = qi->index == 1 ? GUEST_TX : GUEST_RX;
		uint16_t seen = __atomic_load_n(&n->g->q[slot].used->idx, __ATOMIC_ACQUIRE);

		printf("  final %s: avail %u used %u (guest sees used %u)\n",
		       qi->index == 1 ? "tx0" : "rx0", qi->avail_idx, qi->used_idx, seen);
		if (qi->index > 1)
			continue;
		if ((uint16_t)qi->used_idx != seen)
			tr_fail(r, "nic %s q%u: reply says used %u, the ring says %u", n->id, qi->index,
				qi->used_idx, seen);
		/* A clean stop finishes the packet in hand: every TX chain
		 * the device consumed is back. */
		if (qi->index == 1 && (uint16_t)qi->used_idx != (uint16_t)qi->avail_idx)
			tr_fail(r, "nic %s tx0: stopped with %u chains consumed and not returned",
				n->id, (uint16_t)(qi->avail_idx - qi->used_idx));
	}
	/* Take back what was returned before the stop: a double or bogus
	 * id fails here. */
	if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0)
		tr_fail(r, "nic %s after unplug: %s", n->id, err);
	tr_retire(r, n);
	tr_canary_set(n);
}

/* Close NIC 0's own connection in the middle of a frame. */
static void tr_disconnect(struct tr_run *r, struct tr_nic *n)
{
	/* A length prefix announcing 64 bytes, and 2 of them. */
	static const uint8_t half[] = { 0, 0, 0, 64, 0x0a, 0x02 };

	if (write(vnic_fd(n->conn), half, sizeof(half)) < 0)
		fprintf(stderr, "vnic-bench: half frame: %s\n", strerror(errno));
	n->conn = vnic_close(n->conn);
	n->added = false;
	n->disc_wait = true;
	n->disc_ns = bench_now_ns();
	printf("DISCONNECT nic=%s closed mid-frame\n", n->id);
	tr_retire(r, n);
}

/* After a disconnect: the worker must be gone within a bound; then the
 * canary. */
static void tr_disconnect_poll(struct tr_run *r, struct tr_nic *n)
{
	uint64_t now = bench_now_ns(); /* disc_ns may be later than the loop's clock */

	if (!n->disc_wait)
		return;
	if (tr_pid_gone(n->pid)) {
		n->disc_wait = false;
		printf("DISCONNECT nic=%s teardown_ms=%.3f worker_pid=%d gone=yes\n", n->id,
		       (now - n->disc_ns) / 1e6, (int)n->pid);
		tr_canary_set(n);
	} else if (now - n->disc_ns > TR_GONE_BOUND_NS) {
		n->disc_wait = false;
		tr_fail(r, "nic %s: worker pid %d still exists %.0f s after its VMM disconnected",
			n->id, (int)n->pid, TR_GONE_BOUND_NS / TR_NS);
	}
}

/* Lifecycle steps due at now; the per-flow stall check of NICs that run. */
static bool tr_sending(const struct tr_run *r, uint64_t now);

/* --switch-policy: every NIC goes to the next of timer, bh, adaptive,
 * poll, round and round, while the frames flow (each checked as always). */
static void tr_switch_policy(struct tr_run *r, uint64_t now)
{
	static const enum vnic_mitigation order[] = { VNIC_MITIGATION_TIMER, VNIC_MITIGATION_BH,
						      VNIC_MITIGATION_ADAPTIVE,
						      VNIC_MITIGATION_POLL };
	struct vnic_policy p = r->pol;

	if (r->switch_ms <= 0 || now < r->next_switch_ns || !tr_sending(r, now))
		return;
	r->next_switch_ns = now + (uint64_t)(r->switch_ms * 1e6);
	p.mode = order[r->switch_next++ % 4];
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		int rc;

		if (n->gone || n->hostile || n->failed)
			continue;
		rc = vnic_set_policy(n->conn, n->id, &p);
		if (rc) {
			tr_fail(r, "nic %u: SetPolicy %s: %s", n->idx, vnic_mitigation_name(p.mode),
				vnic_last_error(n->conn));
			return;
		}
		r->switch_sets++;
	}
	r->switches++;
}

static void tr_lifecycle(struct tr_run *r, uint64_t now)
{
	struct tr_nic *n0 = &r->nics[0];
	double t = (now - r->t0) / TR_NS;

	if (r->stall_after >= 0 && !r->stall_done && t >= r->stall_after) {
		r->stall_done = true;
		n0->stalled = true;
		printf("STALL nic=%s host end stops reading at %.2f s\n", n0->id, t);
	}
	if (r->unplug_after >= 0 && !r->unplug_done && t >= r->unplug_after) {
		r->unplug_done = true;
		tr_unplug(r, n0);
	}
	if (r->disconnect_after >= 0 && !r->disconnect_done && t >= r->disconnect_after) {
		r->disconnect_done = true;
		tr_disconnect(r, n0);
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		tr_disconnect_poll(r, n);
		if (n->canary_set && !n->canary_checked &&
		    bench_now_ns() - n->canary_ns >= TR_CANARY_NS)
			tr_canary_check(r, n);
		/* Per NIC, since the others keep the global progress clock
		 * moving. TX: a descriptor never returned stalls the guest's
		 * ring for good, frames dropped by the device do not. */
		if (n->gone || n->failed || n->hostile)
			continue;
		{
			unsigned out = n->g->ntxslots - n->g->ntxfree;
			uint64_t since = n->tx_used_ns > r->t0 ? n->tx_used_ns : r->t0;

			if (n->resume_ns > since)
				since = n->resume_ns;
			if (n->f[FRAMES_G2H].on && out && !n->stalled && now - since > TR_STALL_NS) {
				tr_fail(r, "stall: nic %u: %u TX descriptors out, none came back for "
					"%.0f s", n->idx, out, TR_STALL_NS / TR_NS);
				n->f[FRAMES_G2H].on = false;
			}
		}
		if (n->f[FRAMES_H2G].on && tr_may_send(r, &n->f[FRAMES_H2G], now)) {
			struct tr_flow *f = &n->f[FRAMES_H2G];
			uint64_t since = f->last_ns > r->t0 ? f->last_ns : r->t0;

			if (n->resume_ns > since)
				since = n->resume_ns;
			if (f->recv < f->sent && now - since > TR_STALL_NS) {
				tr_fail(r, "stall: nic %u h2g: %llu frames in flight, none arrived for "
					"%.0f s", n->idx, (unsigned long long)(f->sent - f->recv),
					TR_STALL_NS / TR_NS);
				f->on = false;
			}
		}
	}
}

/* ---- the loop ---- */

static bool tr_all_received(const struct tr_run *r)
{
	for (unsigned i = 0; i < r->nnics; i++) {
		const struct tr_nic *n = &r->nics[i];

		for (unsigned d = 0; d < 2; d++) {
			/* Under fault the device may drop a TX frame (and return
			 * its descriptor): every descriptor back is the end. */
			if (d == FRAMES_G2H && n->faulty && n->g->ntxfree == n->g->ntxslots)
				continue;
			if (n->f[d].on && n->f[d].recv < n->f[d].sent)
				return false;
		}
	}
	return true;
}

static bool tr_sending(const struct tr_run *r, uint64_t now)
{
	for (unsigned i = 0; i < r->nnics; i++)
		for (unsigned d = 0; d < 2; d++) {
			const struct tr_flow *f = &r->nics[i].f[d];

			if (f->on && !tr_stop && f->sent < f->limit &&
			    now < r->t0 + (uint64_t)(r->seconds * TR_NS))
				return true;
		}
	return false;
}

static uint64_t tr_total_recv(const struct tr_run *r)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < r->nnics; i++)
		t += r->nics[i].f[0].recv + r->nics[i].f[1].recv;
	return t;
}

static void tr_inject(struct tr_nic *n, enum tr_kind kind);

/* A lifecycle step still to come or to finish (the run waits for it). */
static bool tr_lifecycle_pending(const struct tr_run *r)
{
	if ((r->unplug_after >= 0 && !r->unplug_done) ||
	    (r->disconnect_after >= 0 && !r->disconnect_done))
		return true;
	for (unsigned i = 0; i < r->nnics; i++)
		if (r->nics[i].disc_wait || (r->nics[i].canary_set && !r->nics[i].canary_checked))
			return true;
	return false;
}

/* Run until every sender is done and every frame is in, a stall, or a
 * failure. Every wait is bounded: poll at most 10 ms, the whole loop at
 * most seconds + TR_DRAIN_NS after the last progress. */
static void tr_loop(struct tr_run *r)
{
	struct pollfd pfd[4 * TR_MAX_NICS + 1];
	uint64_t last_progress = bench_now_ns(), last_total = 0;

	for (;;) {
		uint64_t now = bench_now_ns(), total;
		unsigned np = 0;
		bool more = false;
		int rc;

		if (r->failures)
			return;
		tr_lifecycle(r, now);
		tr_cpu_sample(r, now);
		tr_switch_policy(r, now);
		for (unsigned i = 0; i < r->nnics; i++)
			if (r->nics[i].reread_pid && !r->nics[i].gone) {
				r->nics[i].reread_pid = false;
				if (tr_read_pids(r) == 0)
					printf("  nic %s: worker restarted, now pid %d\n",
					       r->nics[i].id, (int)r->nics[i].pid);
			}
		if (r->victim && !r->injected && now >= r->inject_at) {
			r->recv_at_inject = tr_total_recv(r);
			r->victim_cpu_at_inject = tr_cpu_seconds(r->victim->pid);
			r->inject_ns = now;
			tr_inject(r->victim, r->victim_kind);
			r->injected = true;
		}
		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_nic *n = &r->nics[i];

			if (n->hostile || n->gone)
				continue;
			if (n->f[FRAMES_G2H].on && !n->tx_wait)
				tr_guest_tx(r, n, now);
			if (n->f[FRAMES_H2G].on && !n->host_blocked)
				tr_host_tx(r, n, now);
		}
		total = tr_total_recv(r);
		if (total != last_total) {
			last_total = total;
			last_progress = now;
		}
		if (now - r->t0 > (uint64_t)(r->seconds * TR_NS) + TR_HARD_EXTRA_NS) {
			tr_fail(r, "did not finish within %.0f s of the sending time",
				TR_HARD_EXTRA_NS / TR_NS);
			return;
		}
		if (!tr_sending(r, now)) {
			if (tr_all_received(r) && !tr_lifecycle_pending(r))
				return;
			if (now - last_progress > TR_DRAIN_NS)
				return; /* the rest is lost: reported by the caller */
		} else if (now - last_progress > TR_STALL_NS) {
			tr_fail(r, "stall: no frame arrived for %.0f s", TR_STALL_NS / TR_NS);
			return;
		}

		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_nic *n = &r->nics[i];

			more |= n->rx_more && !n->gone;
			/* A gone NIC's fds are left out (negative fd: ignored). */
			pfd[np++] = (struct pollfd){ .fd = n->gone ? -1 : n->g->call[GUEST_RX],
						     .events = POLLIN };
			pfd[np++] = (struct pollfd){ .fd = n->gone ? -1 : n->g->call[GUEST_TX],
						     .events = POLLIN };
			pfd[np++] = (struct pollfd){
				.fd = n->gone ? -1 : n->host_fd,
				.events = (short)((n->stalled ? 0 : POLLIN) |
						  (n->host_blocked ? POLLOUT : 0)),
			};
		}
		for (unsigned i = 0; i < r->nnics; i++)
			pfd[np++] = (struct pollfd){
				.fd = r->nics[i].conn && r->nics[i].conn != r->conn
					      ? vnic_fd(r->nics[i].conn) : -1,
				.events = POLLIN };
		pfd[np++] = (struct pollfd){ .fd = vnic_fd(r->conn), .events = POLLIN };
		rc = poll(pfd, np, more ? 0 : 10);
		if (rc < 0 && errno != EINTR) {
			tr_fail(r, "poll: %s", strerror(errno));
			return;
		}
		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_nic *n = &r->nics[i];
			struct pollfd *p = &pfd[3 * i];

			if (p[0].revents & POLLIN)
				guest_read_call(n->g, GUEST_RX);
			if ((p[0].revents & POLLIN) || n->rx_more)
				tr_guest_rx(r, n);
			if (p[1].revents & POLLIN) {
				guest_read_call(n->g, GUEST_TX);
				n->tx_wait = false;
			}
			if (p[2].revents & POLLIN)
				tr_host_rx(r, n);
			if (p[2].revents & POLLOUT)
				n->host_blocked = false;
			if ((p[2].revents & (POLLERR | POLLHUP)) && !n->faulty) {
				tr_fail(r, "nic %u: the host end of the backend hung up", n->idx);
				return;
			}
		}
		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_nic *n = &r->nics[i];

			if (!(pfd[3 * r->nnics + i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			rc = vnic_dispatch(n->conn);
			if (rc < 0) {
				tr_fail(r, "nic %u: its connection to vnicd was lost: %s", n->idx,
					strerror(-rc));
				return;
			}
		}
		if (pfd[np - 1].revents & (POLLIN | POLLHUP | POLLERR)) {
			rc = vnic_dispatch(r->conn);
			if (rc < 0) {
				tr_fail(r, "connection to vnicd lost: %s", strerror(-rc));
				return;
			}
		}
		if (r->nic_errors) {
			tr_fail(r, "a NIC failed or broke during traffic (see the events above)");
			return;
		}
	}
}

/* ---- teardown ---- */

static void tr_remove_all(struct tr_run *r)
{
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		struct vnic_remove_result res;
		int rc;

		if (!n->added)
			continue;
		n->added = false;
		rc = vnic_remove_nic(n->conn, n->id, 5000, &res);
		if (rc != 0 && n->faulty && n->failed) {
			printf("  removed %s (failed under fault): %s\n", n->id,
			       vnic_last_error(n->conn));
			continue;
		}
		if (rc != 0) {
			tr_fail(r, "RemoveNic %s: %s", n->id, vnic_last_error(n->conn));
			continue;
		}
		/* The reply promises the worker is gone (reaped): its pid must
		 * not exist any more, not even as a zombie. */
		if (n->pid <= 0)
			printf("  removed %s\n", n->id);
		else if (kill(n->pid, 0) == 0 || errno != ESRCH)
			tr_fail(r, "RemoveNic %s replied while worker pid %d still exists", n->id,
				(int)n->pid);
		else
			printf("  removed %s: unplug %.1f ms, worker pid %d gone\n", n->id,
			       res.unplug_latency_us / 1000.0, (int)n->pid);
	}
}

static void tr_cleanup(struct tr_run *r)
{
	tr_remove_all(r);
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		if (n->canary_set && !n->canary_checked) {
			uint64_t left = n->canary_ns + TR_CANARY_NS;

			while (bench_now_ns() < left)
				usleep(10000);
			tr_canary_check(r, n);
		} else if (n->canary_set) {
			tr_canary_check(r, n); /* again, over the whole run */
		}
		if (n->conn && n->conn != r->conn)
			n->conn = vnic_close(n->conn);
		guest_free(n->g);
		if (n->host_fd >= 0)
			close(n->host_fd);
		free(n->f[0].seen);
		free(n->f[1].seen);
	}
	free(r->nics);
	free(r->buf);
	vnic_close(r->conn);
	if (r->netns_created) {
		const char *a[] = { "ip", "netns", "del", r->netns, NULL };

		tr_cmd(a);
	}
}

static int tr_setup(struct tr_run *r)
{
	struct vnic_hello_info hi;
	struct stat sb;
	char path[128];
	int rc;

	r->buf = malloc(FRAMES_MAX + 64);
	r->nics = calloc(r->nnics, sizeof(*r->nics));
	if (!r->buf || !r->nics)
		return -EIO;
	for (unsigned i = 0; i < r->nnics; i++) {
		r->nics[i].idx = i;
		r->nics[i].host_fd = -1;
	}
	if (r->backend == TR_TAP) {
		if (!r->netns[0])
			snprintf(r->netns, sizeof(r->netns), "vnicbench%d", (int)getpid());
		snprintf(path, sizeof(path), "/run/netns/%s", r->netns);
		if (stat(path, &sb) < 0) {
			const char *a[] = { "ip", "netns", "add", r->netns, NULL };

			if (tr_cmd(a) < 0)
				return -EIO;
			r->netns_created = true;
		}
	}
	rc = vnic_connect(r->socket_path, &r->conn);
	if (rc < 0) {
		fprintf(stderr, "vnic-bench: connect %s: %s\n", r->socket_path, strerror(-rc));
		return -EIO;
	}
	vnic_set_event_cb(r->conn, tr_on_event, r);
	rc = vnic_hello(r->conn, "vnic-bench", &hi);
	if (rc != 0) {
		fprintf(stderr, "vnic-bench: hello: %s\n", vnic_last_error(r->conn));
		return -EIO;
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		n->conn = r->conn;
		n->faulty = r->fault_nic == (int)i ||
			    (i == 0 && (r->unplug_after >= 0 || r->disconnect_after >= 0));
		if (i == 0 && r->disconnect_after >= 0) {
			/* Its own connection, so that closing it takes only
			 * this NIC away. */
			rc = vnic_connect(r->socket_path, &n->conn);
			if (rc < 0) {
				fprintf(stderr, "vnic-bench: connect: %s\n", strerror(-rc));
				n->conn = NULL;
				return -EIO;
			}
			vnic_set_event_cb(n->conn, tr_on_event, r);
			if (vnic_hello(n->conn, "vnic-bench-nic0", &hi) != 0) {
				fprintf(stderr, "vnic-bench: hello: %s\n", vnic_last_error(n->conn));
				return -EIO;
			}
		}
		if (tr_nic_add(r, n) < 0)
			return -EIO;
	}
	if (tr_read_pids(r) < 0)
		return -EIO;
	for (unsigned i = 0; i < r->nnics; i++)
		r->nics[i].cpu0 = r->nics[i].cpu_last = tr_cpu_seconds(r->nics[i].pid);
	return 0;
}

/* Sum of a counter over all queues of our (non-hostile) NICs. */
static void tr_sum_counters(struct tr_run *r, const struct vnic_status *st, uint64_t *kicks,
			    uint64_t *irqs, uint64_t *supp, uint64_t *drops)
{
	*kicks = *irqs = *supp = *drops = 0;
	for (unsigned i = 0; i < r->nnics; i++) {
		const struct vnic_nic_status *s = tr_nic_status(st, r->nics[i].id);

		if (!s || r->nics[i].hostile)
			continue;
		for (unsigned q = 0; q < s->nqueues; q++) {
			*kicks += s->queues[q].kicks;
			*irqs += s->queues[q].interrupts;
			*supp += s->queues[q].suppressed;
			*drops += s->queues[q].drops;
		}
	}
}

/* The TX policy counters (a line of its own: the RESULT lines keep their
 * format). */
static void tr_report_policy(struct tr_run *r, const struct vnic_status *st)
{
	uint64_t fl = 0, tf = 0, th = 0, ps = 0, ph = 0;
	uint32_t win = 0, sw = 0;
	const char *name = "?";

	for (unsigned i = 0; i < r->nnics; i++) {
		const struct vnic_nic_status *s = tr_nic_status(st, r->nics[i].id);
		const struct vnic_queue_status *q = s ? tr_queue(s, "tx0") : NULL;

		if (!q || r->nics[i].hostile)
			continue;
		name = vnic_mitigation_name(s->policy.mode);
		fl += q->flushes;
		tf += q->timer_fires;
		th += q->timer_hits;
		ps += q->poll_spins;
		ph += q->poll_hits;
		sw += s->policy_switches;
		if (q->window > win)
			win = q->window;
	}
	printf("POLICY policy=%s window=%u flushes=%llu timer_fires=%llu timer_hits=%llu "
	       "poll_spins=%llu poll_hits=%llu switches=%u status_switches=%u\n", name, win,
	       (unsigned long long)fl, (unsigned long long)tf, (unsigned long long)th,
	       (unsigned long long)ps, (unsigned long long)ph, r->switches, sw);
	if (sw != r->switch_sets)
		tr_fail(r, "%u SetPolicy calls answered OK, status counts %u switches", r->switch_sets,
			sw);
}

/* After the loop: losses, counters, summary. */
static void tr_report(struct tr_run *r, const char *mode)
{
	static const char *const dname[2] = { "g2h", "h2g" };
	struct vnic_status *st = NULL;
	uint64_t deadline = bench_now_ns() + TR_COUNTER_WAIT_NS;
	uint64_t bytes_all = 0, kicks, irqs, supp, drops;
	double cpu = 0;
	bool have_cpu = true;

	for (unsigned d = 0; d < 2; d++) {
		uint64_t fr = 0, by = 0, lost = 0, dup = 0, bad = 0, ooo = 0, t0 = 0, t1 = 0;
		bool on = false;

		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_flow *f = &r->nics[i].f[d];

			if (!f->on && !f->sent)
				continue;
			on = true;
			fr += f->recv;
			by += f->recv_bytes;
			if (!r->nics[i].faulty)
				lost += f->sent - f->recv;
			dup += f->dup;
			bad += f->corrupt;
			ooo += f->ooo;
			if (f->first_ns && (!t0 || f->first_ns < t0))
				t0 = f->first_ns;
			if (f->last_ns > t1)
				t1 = f->last_ns;
		}
		if (!on)
			continue;
		{
			double secs = t1 > r->t0 ? (t1 - r->t0) / TR_NS : 0;

			printf("  %s: %llu frames, %llu bytes in %.2f s: %.3f Gbit/s, %.0f packets/s; "
			       "lost %llu, duplicated %llu, corrupt %llu, reordered %llu\n",
			       dname[d], (unsigned long long)fr, (unsigned long long)by, secs,
			       secs > 0 ? by * 8 / secs / 1e9 : 0, secs > 0 ? fr / secs : 0,
			       (unsigned long long)lost, (unsigned long long)dup,
			       (unsigned long long)bad, (unsigned long long)ooo);
			printf("RESULT %s dir=%s frames=%llu bytes=%llu seconds=%.3f gbps=%.3f pps=%.0f "
			       "lost=%llu dup=%llu corrupt=%llu\n",
			       mode, dname[d], (unsigned long long)fr, (unsigned long long)by, secs,
			       secs > 0 ? by * 8 / secs / 1e9 : 0, secs > 0 ? fr / secs : 0,
			       (unsigned long long)lost, (unsigned long long)dup,
			       (unsigned long long)bad);
		}
		bytes_all += by;
		if (lost && r->backend == TR_SOCKET) {
			tr_fail(r, "%s: %llu frames lost on the lossless socket backend", dname[d],
				(unsigned long long)lost);
		} else if (lost) {
			/* Through a tap the host kernel drops instead of blocking
			 * (a full UDP receive buffer, a full tap queue while the
			 * guest has no RX buffers). Counted and reported; the
			 * window keeps the tests' rate below it and e2e_tap
			 * asserts that every frame arrived. */
			printf("  WARNING: %s: %llu frames lost in the host kernel (tap path)\n",
			       dname[d], (unsigned long long)lost);
		}
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		if (!n->faulty)
			continue;
		/* At most once across unplug, crash and restart: frames in
		 * flight then may be lost, never doubled (checked per frame). */
		printf("LOST-TO-FAULTS nic=%s g2h=%llu h2g=%llu deaths=%u restarts=%u failed=%s "
		       "gone=%s g2h_after_restart=%llu rx_empty_buffers=%llu\n", n->id,
		       (unsigned long long)(n->f[FRAMES_G2H].sent - n->f[FRAMES_G2H].recv),
		       (unsigned long long)(n->f[FRAMES_H2G].sent - n->f[FRAMES_H2G].recv),
		       n->deaths, n->restarts, n->failed ? "yes" : "no", n->gone ? "yes" : "no",
		       (unsigned long long)(n->f[FRAMES_G2H].recv - n->g2h_at_restart),
		       (unsigned long long)n->g->rx_empty);
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		char err[200];
		int rc = 0;

		/* Every TX descriptor of a running NIC is back (exactly once:
		 * a second return fails in guest_tx_reclaim). */
		if (n->gone || n->failed || n->hostile || !n->g)
			continue;
		/* The worker publishes a run's used entries after its last
		 * send, so the host end may hold the last frame before its
		 * descriptor is back: give it a moment (bounded). */
		for (uint64_t until = bench_now_ns() + TR_COUNTER_WAIT_NS;;) {
			rc = guest_tx_reclaim(n->g, err, sizeof(err));
			if (rc < 0 || n->g->ntxfree == n->g->ntxslots || bench_now_ns() > until)
				break;
			usleep(1000);
		}
		if (rc < 0)
			tr_fail(r, "nic %u: %s", i, err);
		else if (n->g->ntxfree != n->g->ntxslots)
			tr_fail(r, "nic %u: %u TX descriptors never came back", i,
				n->g->ntxslots - n->g->ntxfree);
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		/* Empty RX buffers come only from a restarted worker. */
		if (r->nics[i].g->rx_empty && !r->nics[i].restarts)
			tr_fail(r, "nic %u: %llu receive buffers came back empty without a restart",
				i, (unsigned long long)r->nics[i].g->rx_empty);
	}
	for (unsigned i = 0; i < r->nnics; i++)
		if (r->nics[i].other_rx)
			printf("  nic %u: guest ignored %llu frames from the host kernel\n", i,
			       (unsigned long long)r->nics[i].other_rx);

	/* Counters: the worker updates them after the frame moved, so give
	 * them a moment to settle. */
	for (;;) {
		st = vnic_status_free(st);
		if (vnic_status(r->conn, &st) != 0) {
			tr_fail(r, "status: %s", vnic_last_error(r->conn));
			return;
		}
		if (tr_counters_match(r, st, false) || bench_now_ns() > deadline)
			break;
		usleep(20000);
	}
	tr_counters_match(r, st, true);
	tr_sum_counters(r, st, &kicks, &irqs, &supp, &drops);
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		const struct vnic_nic_status *s = tr_nic_status(st, n->id);

		if (n->hostile || n->gone)
			continue;
		n->cpu1 = tr_cpu_seconds(n->pid);
		if (n->cpu1 < 0)
			n->cpu1 = n->cpu_last; /* gone since the last sample */
		if (n->cpu0 < 0 || n->cpu1 < 0)
			have_cpu = false;
		else
			cpu += n->cpu_dead + n->cpu1 - n->cpu0;
		for (unsigned q = 0; s && q < s->nqueues; q++) {
			const struct vnic_queue_status *qs = &s->queues[q];

			printf("  %s %s: %llu pkts %llu B, kicks %llu, interrupts %llu, suppressed %llu, "
			       "drops %llu, errors %llu\n",
			       n->id, qs->name, (unsigned long long)qs->packets,
			       (unsigned long long)qs->bytes, (unsigned long long)qs->kicks,
			       (unsigned long long)qs->interrupts, (unsigned long long)qs->suppressed,
			       (unsigned long long)qs->drops, (unsigned long long)qs->errors);
		}
		printf("  %s worker pid %d (%s), guest: kicks sent rx %llu tx %llu, "
		       "interrupts seen rx %llu tx %llu\n",
		       n->id, (int)n->pid, s && s->sandboxed ? "sandboxed" : "NOT sandboxed",
		       (unsigned long long)n->g->kicks_sent[0],
		       (unsigned long long)n->g->kicks_sent[1],
		       (unsigned long long)n->g->irqs_seen[0], (unsigned long long)n->g->irqs_seen[1]);
	}
	{
		double mb = bytes_all / 1e6;

		printf("  per MB (10^6 bytes moved): %.2f kicks, %.2f interrupts; worker CPU %.2f s\n",
		       mb > 0 ? kicks / mb : 0, mb > 0 ? irqs / mb : 0, have_cpu ? cpu : -1.0);
		printf("RESULT %s kicks_per_mb=%.3f irqs_per_mb=%.3f worker_cpu_s=%.3f drops=%llu\n",
		       mode, mb > 0 ? kicks / mb : 0, mb > 0 ? irqs / mb : 0, have_cpu ? cpu : -1.0,
		       (unsigned long long)drops);
	}
	tr_report_policy(r, st);
	vnic_status_free(st);
}

/* ---- request/response (--rr) ---- */

static int tr_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Wait (bounded) for fd to be readable; 0 ready, -1 timeout or error. */
static int tr_wait_fd(int fd, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = bench_now_ns();
		int rc;

		if (now >= deadline)
			return -1;
		rc = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

/*
 * tr_rr - netperf TCP_RR over one NIC and the socket backend: one frame in
 * flight. The guest sends request i (g2h), the host end answers with
 * response i (h2g) as soon as it has the request, the guest waits for it
 * on its RX interrupt; the time from the request's kick to the response
 * in the guest is one transaction. The --direction's frame is --size,
 * the other one the smallest frame (60 B). Every frame is checked.
 */
static void tr_rr(struct tr_run *r)
{
	struct tr_nic *n = &r->nics[0];
	uint32_t req = r->dirs == 2 ? FRAMES_MIN : r->fixed;
	uint32_t rsp = r->dirs == 2 ? r->fixed : FRAMES_MIN;
	uint64_t *lat = calloc(r->rr, sizeof(*lat)), deadline, sum = 0;
	uint64_t t_all = bench_now_ns();
	char err[200];

	if (!lat) {
		tr_fail(r, "out of memory");
		return;
	}
	for (unsigned d = 0; d < 2; d++)
		if (tr_flow_reserve(&n->f[d], r->rr) < 0) {
			tr_fail(r, "out of memory");
			goto out;
		}
	for (uint64_t i = 0; i < r->rr && !tr_stop; i++) {
		uint64_t t0, seq;
		unsigned slot;
		uint8_t *p;
		ssize_t len;
		const uint8_t *fr;
		size_t flen;
		int rc;

		if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0) {
			tr_fail(r, "nic 0: %s", err);
			goto out;
		}
		p = guest_tx_slot(n->g, &slot);
		if (!p) {
			tr_fail(r, "rr: no free TX slot with one frame in flight");
			goto out;
		}
		frames_build(p, req, n->idx, FRAMES_G2H, i, n->host_mac);
		deadline = bench_now_ns() + TR_STALL_NS;
		t0 = bench_now_ns();
		if (guest_tx_add(n->g, slot, req) < 0) {
			tr_fail(r, "rr: guest_tx_add failed");
			goto out;
		}
		n->f[FRAMES_G2H].sent++;
		n->f[FRAMES_G2H].sent_bytes += req;
		guest_tx_flush(n->g);
		/* The host end: the request, then the response at once. */
		if (tr_wait_fd(n->host_fd, deadline) < 0) {
			tr_fail(r, "rr %llu: the request did not arrive within %.0f s",
				(unsigned long long)i, TR_STALL_NS / TR_NS);
			goto out;
		}
		len = recv(n->host_fd, r->buf, FRAMES_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
		if (len < 0 || frames_check(r->buf, (size_t)len, n->idx, FRAMES_G2H, req, r->maxsize,
					    n->host_mac, true, &seq, err, sizeof(err)) < 0) {
			tr_fail(r, "rr %llu: request: %s", (unsigned long long)i,
				len < 0 ? strerror(errno) : err);
			goto out;
		}
		tr_flow_record(r, n, FRAMES_G2H, seq, (size_t)len);
		frames_build(r->buf, rsp, n->idx, FRAMES_H2G, i, n->host_mac);
		n->f[FRAMES_H2G].sent++;
		n->f[FRAMES_H2G].sent_bytes += rsp;
		if (send(n->host_fd, r->buf, rsp, MSG_DONTWAIT) != (ssize_t)rsp) {
			tr_fail(r, "rr %llu: host send: %s", (unsigned long long)i, strerror(errno));
			goto out;
		}
		/* The guest: its RX interrupt, then the response. */
		for (;;) {
			rc = guest_rx_next(n->g, &fr, &flen, err, sizeof(err));
			if (rc < 0) {
				tr_fail(r, "nic 0: %s", err);
				goto out;
			}
			if (rc == 1)
				break;
			if (guest_rx_arm(n->g))
				continue;
			if (tr_wait_fd(n->g->call[GUEST_RX], deadline) < 0) {
				tr_fail(r, "rr %llu: the response did not arrive within %.0f s",
					(unsigned long long)i, TR_STALL_NS / TR_NS);
				goto out;
			}
			guest_read_call(n->g, GUEST_RX);
		}
		lat[i] = bench_now_ns() - t0;
		if (frames_check(fr, flen, n->idx, FRAMES_H2G, rsp, r->maxsize, n->host_mac, true,
				 &seq, err, sizeof(err)) < 0) {
			tr_fail(r, "rr %llu: response: %s", (unsigned long long)i, err);
			goto out;
		}
		tr_flow_record(r, n, FRAMES_H2G, seq, flen);
		sum += lat[i];
	}
	if (r->failures)
		goto out;
	{
		uint64_t nn = n->f[FRAMES_H2G].recv;
		double secs = (bench_now_ns() - t_all) / TR_NS;

		qsort(lat, nn, sizeof(*lat), tr_cmp_u64);
		printf("  rr: %llu transactions (request %u B, response %u B) in %.2f s: "
		       "p50 %.1f us, p99 %.1f us, mean %.1f us\n", (unsigned long long)nn, req, rsp,
		       secs, lat[nn / 2] / 1e3, lat[(nn * 99) / 100] / 1e3, nn ? sum / 1e3 / nn : 0);
		printf("RESULT rr transactions=%llu req_bytes=%u rsp_bytes=%u p50_us=%.2f "
		       "p99_us=%.2f mean_us=%.2f\n", (unsigned long long)nn, req, rsp,
		       lat[nn / 2] / 1e3, lat[(nn * 99) / 100] / 1e3, nn ? sum / 1e3 / nn : 0);
	}
out:
	free(lat);
}

/* ---- traffic ---- */

void bench_traffic_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench [--socket PATH] traffic [--nics N] [--backend socket|tap]\n"
		"           [--direction g2h|h2g|both] [--size BYTES|random] [--seconds S]\n"
		"           [--count N] [--netns NAME] [--window N]\n"
		"           [--policy default|timer|bh|adaptive|poll]\n"
		"           [--expect-json FILE] [--before-remove CMD]\n"
		"  Simulated VMM + guests: N NICs on vnicd, checked UDP frames each way.\n"
		"  --size       frame size %u..%u (tap: ..%u), or random (default)\n"
		"  --seconds    sending time (default 3); --count stops a flow earlier\n"
		"  --netns      tap backend: namespace for the taps (created and removed\n"
		"               if missing; default a private one)\n"
		"  --policy     TX mitigation asked for in AddNic (default: vnicd's)\n"
		"  --timer-us N, --poll-us N, --latency-us N  its parameters (0: vnicd's\n"
		"               defaults; poll: --poll-us 0 polls forever; default here 50)\n"
		"  --switch-policy MS  every MS ms SetPolicy timer, bh, adaptive, poll, ...\n"
		"               on every NIC while the frames flow (all checked as always)\n"
		"  --guest-batch N  the guest publishes its TX frames (and kicks when the\n"
		"               device asks) every N frames (default: once per burst of %u)\n"
		"  --rr N       request/response instead (netperf TCP_RR): N transactions,\n"
		"               one frame in flight, 1 NIC, socket backend, --size for the\n"
		"               --direction (g2h: the request), 60 B the other way; prints\n"
		"               p50/p99 latency in a 'RESULT rr' line\n"
		"  --window     frames in flight per NIC and direction (default %u;\n"
		"               also at most %llu MiB)\n"
		"  --expect-json  write the counters vnicctl status must show\n"
		"  --before-remove  run CMD (sh -c) after traffic, before RemoveNic\n"
		"  --id-prefix P  NIC ids P0, P1, ... (default bench<pid>-<n>)\n"
		"  --fault-nic I  NIC I is under fault injection: it may fail, restart\n"
		"               and lose frames (printed apart); doubles, corruption and\n"
		"               a TX stall while it runs still fail\n"
		"  --unplug-after S  RemoveNic on NIC 0 at S s; its worker must be gone\n"
		"               at the reply; then a canary over its guest memory\n"
		"  --remove-deadline MS  the stop deadline of that RemoveNic (default 5000)\n"
		"  --disconnect-after S  NIC 0 on its own connection, closed mid-frame\n"
		"               at S s; its worker must go, then the canary\n"
		"  --stall-backend-after S  NIC 0's host end stops reading at S s\n"
		"  Exit 0: every frame arrived once and intact (tap losses: a warning);\n"
		"  1: failure; 2: usage.\n",
		FRAMES_MIN, FRAMES_MAX, FRAMES_TAP_MAX, TR_BURST, TR_DEFAULT_WINDOW,
		TR_WINDOW_BYTES >> 20);
}

static int tr_parse_common(struct tr_run *r, int opt, const char *arg)
{
	unsigned long v;

	switch (opt) {
	case 'S':
		r->socket_path = arg;
		return 0;
	case 't':
		return bench_parse_double(arg, 0.1, 3600, &r->seconds);
	case 'n':
		if (bench_parse_ulong(arg, 1, TR_MAX_NICS, &v) < 0)
			return -EIO;
		r->nnics = (unsigned)v;
		return 0;
	case 'w':
		if (bench_parse_ulong(arg, 1, GUEST_QUEUE_SIZE * 4, &v) < 0)
			return -EIO;
		r->window = (unsigned)v;
		return 0;
	}
	return -EIO;
}

/* tr_init_common - signals (SIGINT/SIGTERM end the run cleanly: sending
 * stops, NICs are removed, the netns we made is deleted) and the socket. */
static void tr_init_common(struct tr_run *r)
{
	struct sigaction sa = { .sa_handler = tr_on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!r->socket_path)
		r->socket_path = bench_socket_path ? bench_socket_path : VNIC_DEFAULT_SOCKET;
}

int bench_traffic_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "nics", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'b' },
		{ "direction", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'c' },
		{ "netns", required_argument, NULL, 'N' },
		{ "window", required_argument, NULL, 'w' },
		{ "policy", required_argument, NULL, 'P' },
		{ "expect-json", required_argument, NULL, 'E' },
		{ "before-remove", required_argument, NULL, 'B' },
		{ "id-prefix", required_argument, NULL, 'I' },
		{ "fault-nic", required_argument, NULL, 'F' },
		{ "unplug-after", required_argument, NULL, 'U' },
		{ "remove-deadline", required_argument, NULL, 'R' },
		{ "disconnect-after", required_argument, NULL, 'D' },
		{ "stall-backend-after", required_argument, NULL, 'T' },
		{ "timer-us", required_argument, NULL, 1000 },
		{ "poll-us", required_argument, NULL, 1001 },
		{ "latency-us", required_argument, NULL, 1002 },
		{ "switch-policy", required_argument, NULL, 1003 },
		{ "rr", required_argument, NULL, 1004 },
		{ "guest-batch", required_argument, NULL, 1005 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tr_run r = { .backend = TR_SOCKET, .dirs = 3, .seconds = 3, .nnics = 1,
			    .window = TR_DEFAULT_WINDOW, .fault_nic = -1, .unplug_after = -1,
			    .disconnect_after = -1, .stall_after = -1,
			    .remove_deadline_ms = 5000,
			    .pol = { .poll_us = 50 } };
	unsigned long v;
	int opt, rc = 1;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'b':
			if (!strcmp(optarg, "socket"))
				r.backend = TR_SOCKET;
			else if (!strcmp(optarg, "tap"))
				r.backend = TR_TAP;
			else
				goto usage;
			break;
		case 'd':
			if (!strcmp(optarg, "g2h"))
				r.dirs = 1;
			else if (!strcmp(optarg, "h2g"))
				r.dirs = 2;
			else if (!strcmp(optarg, "both"))
				r.dirs = 3;
			else
				goto usage;
			break;
		case 's':
			if (!strcmp(optarg, "random"))
				r.fixed = 0;
			else if (bench_parse_ulong(optarg, FRAMES_MIN, FRAMES_MAX, &v) < 0)
				goto usage;
			else
				r.fixed = (uint32_t)v;
			break;
		case 'c':
			if (bench_parse_ulong(optarg, 1, 1ul << 40, &v) < 0)
				goto usage;
			r.count = v;
			break;
		case 'N':
			if (!optarg[0] || strlen(optarg) >= sizeof(r.netns) || strchr(optarg, '/'))
				goto usage;
			snprintf(r.netns, sizeof(r.netns), "%s", optarg);
			break;
		case 'P': {
			static const char *const names[] = { "default", "timer", "bh", "adaptive",
							     "poll" };
			unsigned i;

			for (i = 0; i < 5 && strcmp(optarg, names[i]); i++)
				;
			if (i == 5)
				goto usage;
			r.policy = (enum vnic_mitigation)i;
			break;
		}
		case 'E':
			r.expect_json = optarg;
			break;
		case 'B':
			r.before_remove = optarg;
			break;
		case 'I':
			if (!optarg[0] || strlen(optarg) > 40)
				goto usage;
			r.id_prefix = optarg;
			break;
		case 'F':
			if (bench_parse_ulong(optarg, 0, TR_MAX_NICS - 1, &v) < 0)
				goto usage;
			r.fault_nic = (int)v;
			break;
		case 'U':
			if (bench_parse_double(optarg, 0, 3600, &r.unplug_after) < 0)
				goto usage;
			break;
		case 'D':
			if (bench_parse_double(optarg, 0, 3600, &r.disconnect_after) < 0)
				goto usage;
			break;
		case 'T':
			if (bench_parse_double(optarg, 0, 3600, &r.stall_after) < 0)
				goto usage;
			break;
		case 'R':
			if (bench_parse_ulong(optarg, 1, 60000, &v) < 0)
				goto usage;
			r.remove_deadline_ms = (uint32_t)v;
			break;
		case 1000:
		case 1001:
		case 1002:
			if (bench_parse_ulong(optarg, 0, 1000000, &v) < 0)
				goto usage;
			if (opt == 1000)
				r.pol.timer_us = (uint32_t)v;
			else if (opt == 1001)
				r.pol.poll_us = (uint32_t)v;
			else
				r.pol.latency_us = (uint32_t)v;
			break;
		case 1003:
			if (bench_parse_double(optarg, 1, 60000, &r.switch_ms) < 0)
				goto usage;
			break;
		case 1005:
			if (bench_parse_ulong(optarg, 1, TR_BURST, &v) < 0)
				goto usage;
			r.guest_batch = (unsigned)v;
			break;
		case 1004:
			if (bench_parse_ulong(optarg, 1, 10000000, &v) < 0)
				goto usage;
			r.rr = v;
			break;
		case 'h':
			bench_traffic_usage(stdout);
			return 0;
		default:
			if (opt == '?' || tr_parse_common(&r, opt, optarg) < 0)
				goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if (r.unplug_after >= 0 && r.disconnect_after >= 0) {
		fprintf(stderr, "vnic-bench: --unplug-after and --disconnect-after both act on NIC 0\n");
		return 2;
	}
	if (r.fault_nic >= (int)r.nnics) {
		fprintf(stderr, "vnic-bench: --fault-nic %d: only %u NICs\n", r.fault_nic, r.nnics);
		return 2;
	}
	if (r.rr && (r.nnics != 1 || r.backend != TR_SOCKET || r.dirs == 3 || !r.fixed)) {
		fprintf(stderr, "vnic-bench: --rr takes 1 NIC, the socket backend, --direction "
				"g2h or h2g and a fixed --size\n");
		return 2;
	}
	tr_init_common(&r);
	/* Frames above 1514 bytes need a larger MTU on the tap and NIC; a
	 * tap's MTU stops at 65521. */
	r.maxsize = r.backend == TR_TAP ? FRAMES_TAP_MAX : FRAMES_MAX;
	if (r.fixed > r.maxsize) {
		fprintf(stderr, "vnic-bench: a tap carries frames of at most %u bytes (MTU %u)\n",
			FRAMES_TAP_MAX, FRAMES_TAP_MTU);
		return 2;
	}
	r.mtu = (r.fixed && r.fixed <= 1514) ? 1500 : r.backend == TR_TAP ? FRAMES_TAP_MTU : 65535;

	printf("vnic-bench traffic: %u NIC(s), %s backend, %s, size %s%s, %.1f s\n", r.nnics,
	       r.backend == TR_TAP ? "tap" : "socket",
	       r.dirs == 3 ? "both directions" : r.dirs == 1 ? "guest->host" : "host->guest",
	       r.fixed ? "" : "random", r.fixed ? "" : "", r.seconds);
	if (r.fixed)
		printf("  frame size %u bytes\n", r.fixed);
	if (tr_setup(&r) < 0) {
		tr_fail(&r, "setup failed");
		goto out;
	}
	for (unsigned i = 0; i < r.nnics; i++)
		for (unsigned d = 0; d < 2; d++) {
			r.nics[i].f[d].on = r.dirs & (1u << d);
			r.nics[i].f[d].limit = r.count ? r.count : UINT64_MAX;
		}
	r.t0 = bench_now_ns();
	if (r.rr) {
		tr_rr(&r);
		if (!r.failures)
			tr_report(&r, "traffic");
	} else {
		tr_loop(&r);
		tr_report(&r, "traffic");
	}
	if (r.expect_json && tr_write_expect(&r) < 0)
		tr_fail(&r, "cannot write %s", r.expect_json);
	if (r.before_remove) {
		int st;

		fflush(stdout);
		st = system(r.before_remove);
		if (st != 0)
			tr_fail(&r, "--before-remove command failed (status %d)", st);
	}
out:
	tr_cleanup(&r);
	rc = r.failures ? 1 : 0;
	printf("vnic-bench traffic: %s\n", rc ? "FAIL" : "PASS");
	return rc;
usage:
	bench_traffic_usage(stderr);
	return 2;
}

/* ---- hostile ---- */

void bench_hostile_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench [--socket PATH] hostile [--kind loop|selfloop|badhead|oob]\n"
		"           [--victim 0|1] [--seconds S]\n"
		"  Two NICs on the socket backend. The victim's guest posts a bad TX\n"
		"  chain and kicks: loop (G1, default): two descriptors pointing at each\n"
		"  other; selfloop (G1): one zero-length descriptor pointing at itself;\n"
		"  badhead (G3): an avail entry beyond the queue; oob (G7): a buffer\n"
		"  running past the end of guest memory. Passes when vnicd reports\n"
		"  QUEUE_NEEDS_RESET for the victim within %.0f s, the\n"
		"  victim's tx0 shows broken with a reason, its worker does not spin,\n"
		"  and the other NIC's frames keep flowing (at least a quarter of the\n"
		"  rate before the break), all checked (TESTPLAN L10, L11). The\n"
		"  chain is posted half-way through --seconds (default 3).\n",
		TR_RESET_BOUND_NS / TR_NS);
}

/* Write a bad chain straight into the victim's TX ring, as a hostile
 * guest would, publish it and kick. */
static void tr_inject(struct tr_nic *n, enum tr_kind kind)
{
	struct vring_drv *d = &n->g->q[GUEST_TX];
	uint64_t gpa = n->g->txslot_gpa, one = 1;
	uint16_t head = d->avail_idx, entry = 0; /* nothing was sent on this queue */

	switch (kind) {
	case TR_KIND_LOOP:
		d->desc[0] = (struct vring_desc){ .addr = gpa, .len = 64,
						  .flags = VRING_DESC_F_NEXT, .next = 1 };
		d->desc[1] = (struct vring_desc){ .addr = gpa + 64, .len = 64,
						  .flags = VRING_DESC_F_NEXT, .next = 0 };
		break;
	case TR_KIND_SELFLOOP:
		d->desc[0] = (struct vring_desc){ .addr = gpa, .len = 0,
						  .flags = VRING_DESC_F_NEXT, .next = 0 };
		break;
	case TR_KIND_BADHEAD:
		entry = (uint16_t)(d->num + 7);
		break;
	case TR_KIND_OOB:
		d->desc[0] = (struct vring_desc){ .addr = GUEST_GPA_BASE + n->g->memsize - 32,
						  .len = 100, .flags = 0, .next = 0 };
		break;
	}
	d->avail->ring[head % d->num] = entry;
	/* Entries before the index (pairs with the device's read barrier). */
	__atomic_store_n(&d->avail->idx, (uint16_t)(head + 1), __ATOMIC_RELEASE);
	d->avail_idx = (uint16_t)(head + 1);
	if (write(n->g->kick[GUEST_TX], &one, sizeof(one)) == sizeof(one))
		n->g->kicks_sent[GUEST_TX]++;
}

int bench_hostile_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "kind", required_argument, NULL, 'k' },
		{ "victim", required_argument, NULL, 'v' },
		{ "seconds", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tr_run r = { .backend = TR_SOCKET, .dirs = 3, .seconds = 3, .nnics = 2,
			    .window = TR_DEFAULT_WINDOW, .mtu = 65535, .maxsize = FRAMES_MAX,
			    .fault_nic = -1, .unplug_after = -1, .disconnect_after = -1,
			    .stall_after = -1, .remove_deadline_ms = 5000 };
	struct vnic_status *st = NULL;
	unsigned long v;
	unsigned victim = 0;
	enum tr_kind kind = TR_KIND_LOOP;
	struct tr_nic *vn, *on;
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'k': {
			unsigned i;

			for (i = 0; i < 4 && strcmp(optarg, tr_kind_names[i]); i++)
				;
			if (i == 4)
				goto usage;
			kind = (enum tr_kind)i;
			break;
		}
		case 'v':
			if (bench_parse_ulong(optarg, 0, 1, &v) < 0)
				goto usage;
			victim = (unsigned)v;
			break;
		case 'h':
			bench_hostile_usage(stdout);
			return 0;
		default:
			if (opt == '?' || opt == 'n' || tr_parse_common(&r, opt, optarg) < 0)
				goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	tr_init_common(&r);
	printf("vnic-bench hostile: a '%s' chain on nic %u's tx0, nic %u carries traffic for %.1f s\n",
	       tr_kind_names[kind], victim, 1 - victim, r.seconds);
	if (tr_setup(&r) < 0) {
		tr_fail(&r, "setup failed");
		goto out;
	}
	vn = &r.nics[victim];
	on = &r.nics[1 - victim];
	vn->hostile = true;
	for (unsigned d = 0; d < 2; d++) {
		on->f[d].on = true;
		on->f[d].limit = UINT64_MAX;
	}
	r.t0 = bench_now_ns();
	r.victim = vn;
	r.victim_kind = kind;
	r.inject_at = r.t0 + (uint64_t)(r.seconds * TR_NS / 2);
	tr_loop(&r);
	if (!r.injected)
		tr_fail(&r, "the run ended before the bad chain was posted");
	if (!vn->needs_reset) {
		/* Give a late event its last chance (bounded) before failing. */
		uint64_t end = r.inject_ns + TR_RESET_BOUND_NS;

		while (!vn->needs_reset && bench_now_ns() < end) {
			struct pollfd p = { .fd = vnic_fd(r.conn), .events = POLLIN };

			if (poll(&p, 1, 10) > 0 && vnic_dispatch(r.conn) < 0)
				break;
		}
	}
	if (!vn->needs_reset)
		tr_fail(&r, "no QUEUE_NEEDS_RESET event for nic %u within %.0f s", victim,
			TR_RESET_BOUND_NS / TR_NS);
	else {
		printf("  needs-reset for %s queue %u after %.1f ms: %s\n", vn->id, vn->reset_queue,
		       (vn->reset_ns - r.inject_ns) / 1e6, vn->reset_reason);
		if (vn->reset_queue != GUEST_TX)
			tr_fail(&r, "needs-reset names queue %u, the loop was on tx0 (1)",
				vn->reset_queue);
		if (vn->reset_ns - r.inject_ns > TR_RESET_BOUND_NS)
			tr_fail(&r, "needs-reset came after %.1f ms, bound %.0f ms",
				(vn->reset_ns - r.inject_ns) / 1e6, TR_RESET_BOUND_NS / 1e6);
		for (unsigned d = 0; d < 2; d++)
			if (on->f[d].recv <= on->f[d].recv_at_reset)
				tr_fail(&r, "nic %u %s: no frame arrived after the victim broke",
					on->idx, d == FRAMES_G2H ? "g2h" : "h2g");
	}
	if (r.injected && vn->needs_reset) {
		/* Blast radius (TESTPLAN L11): the other NIC's frame rate after
		 * the break against before it. Loose (a quarter) because the
		 * two cores are shared with everything else; a victim that
		 * spins is caught by the CPU check below. */
		uint64_t end = 0, after = 0;
		double before_rate, after_rate, cpu;

		for (unsigned d = 0; d < 2; d++) {
			after += on->f[d].recv - on->f[d].recv_at_reset;
			if (on->f[d].last_ns > end)
				end = on->f[d].last_ns;
		}
		before_rate = r.recv_at_inject / ((r.inject_ns - r.t0) / TR_NS);
		after_rate = end > vn->reset_ns ? after / ((end - vn->reset_ns) / TR_NS) : 0;
		printf("  nic %u: %.0f frames/s before the break, %.0f after\n", on->idx, before_rate,
		       after_rate);
		if (after_rate < before_rate / 4)
			tr_fail(&r, "nic %u slowed from %.0f to %.0f frames/s when nic %u broke",
				on->idx, before_rate, after_rate, vn->idx);
		/* G1: no CPU spin. The broken queue consumes nothing more. */
		cpu = tr_cpu_seconds(vn->pid);
		if (cpu >= 0 && r.victim_cpu_at_inject >= 0) {
			printf("  victim worker CPU since the chain was posted: %.2f s\n",
			       cpu - r.victim_cpu_at_inject);
			if (cpu - r.victim_cpu_at_inject > 0.3)
				tr_fail(&r, "victim worker used %.2f s of CPU after its queue broke",
					cpu - r.victim_cpu_at_inject);
		}
	}
	tr_report(&r, "hostile");
	rc = vnic_status(r.conn, &st);
	if (rc != 0) {
		tr_fail(&r, "status: %s", vnic_last_error(r.conn));
	} else {
		const struct vnic_nic_status *s = tr_nic_status(st, vn->id);
		const struct vnic_queue_status *tx = s ? tr_queue(s, "tx0") : NULL;

		if (!tx || !tx->broken || !tx->broken_reason[0])
			tr_fail(&r, "status does not show %s tx0 broken with a reason", vn->id);
		else
			printf("  status: %s tx0 broken: %s\n", vn->id, tx->broken_reason);
	}
	vnic_status_free(st);
out:
	tr_cleanup(&r);
	rc = r.failures ? 1 : 0;
	printf("vnic-bench hostile: %s\n", rc ? "FAIL" : "PASS");
	return rc;
usage:
	bench_hostile_usage(stderr);
	return 2;
}
