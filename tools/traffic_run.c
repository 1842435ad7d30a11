/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_run: one run of vnic-bench traffic or hostile. Setup (a
 * connection to vnicd, AddNic per NIC), vnicd's events, the loop that
 * drives every flow, teardown; the options both subcommands take.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "traffic.h"

bool tr_worker_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t len;
	int fd;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0)
		return errno == ESRCH;
	/* A zombie has let go of every fd and all its memory: only its exit
	 * status waits for its parent, which is not vnicd when vnicd took
	 * the worker over from systemd's fd store. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

bool tr_worker_gone_soon(pid_t pid)
{
	/* A worker vnicd took over from the fd store is not its child: vnicd
	 * sees its end when its pidfd turns readable, which the kernel does
	 * in exit_notify() a moment before the task becomes a zombie, with
	 * its memory and fds already released (exit_mm and exit_files come
	 * first in do_exit). A RemoveNic answered in that moment finds the
	 * task in its last state letter: give it 100 ms to turn Z. */
	for (int i = 0; i < 100; i++) {
		struct timespec ms = { 0, 1000000 };

		if (tr_worker_gone(pid))
			return true;
		nanosleep(&ms, NULL);
	}
	return tr_worker_gone(pid);
}

volatile sig_atomic_t tr_stop;

static void tr_on_signal(int sig)
{
	(void)sig;
	tr_stop = 1;
}

void tr_fail(struct tr_run *r, const char *fmt, ...)
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

/* CPU seconds (user + system) of pid, -1 when unknown. */
double tr_cpu_seconds(pid_t pid)
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

/* ---- events ---- */

/* The lane of NIC id that runs queue pair `pair`, NULL when none. */
static struct tr_nic *tr_find(struct tr_run *r, const char *id, uint32_t pair)
{
	for (unsigned i = 0; i < r->nnics; i++)
		if (r->nics[i].pair == pair && !strcmp(r->nics[i].id, id))
			return &r->nics[i];
	return NULL;
}

static void tr_on_event(struct vnic_conn *conn, const struct vnic_event *ev, void *arg)
{
	struct tr_run *r = arg;
	struct tr_nic *n = tr_find(r, ev->id, ev->pair);

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

/* ---- NICs and their workers ---- */

/* AddNic for the NIC whose lanes are l[0 .. l->npairs): one guest memory
 * region, two queues and (socket backend) one socketpair per pair. */
static int tr_nic_add(struct tr_run *r, struct tr_nic *l)
{
	struct vnic_region reg[TR_MAX_NICS];
	struct vnic_queue q[2 * TR_MAX_NICS];
	int bf[TR_MAX_NICS];
	struct vnic_nic_config cfg = { 0 };
	unsigned np = l->npairs;
	char err[256];
	int rc = 0;

	for (unsigned k = 0; k < np; k++)
		bf[k] = -1;
	for (unsigned k = 0; k < np && rc == 0; k++) {
		struct tr_nic *n = &l[k];

		if (guest_new_pair(n->idx, k, &n->g, err, sizeof(err)) < 0) {
			fprintf(stderr, "vnic-bench: nic %u pair %u: %s\n", l->idx, k, err);
			rc = -EIO;
			break;
		}
		if (r->id_prefix)
			snprintf(n->id, sizeof(n->id), "%s%u", r->id_prefix, l->idx / np);
		else
			snprintf(n->id, sizeof(n->id), "bench%d-%u", (int)getpid(), l->idx / np);
		snprintf(n->qname[FRAMES_G2H], sizeof(n->qname[0]), "tx%u", k);
		snprintf(n->qname[FRAMES_H2G], sizeof(n->qname[0]), "rx%u", k);
		snprintf(n->tap, sizeof(n->tap), "vnicb%u", l->idx);
		snprintf(n->veth, sizeof(n->veth), "vnicv%u", l->idx);
		if (r->backend == TR_SOCKET && tr_socket_pair(r, n, &bf[k]) < 0)
			rc = -EIO;
		else if (r->backend == TR_AFP && tr_veth_add(r, n) < 0)
			rc = -EIO;
		else
			guest_vnic_memory(n->g, &reg[k], &q[2 * k]);
	}
	if (rc == 0) {
		cfg.id = l->id;
		frames_guest_mac(l->idx, cfg.mac);
		cfg.mtu = r->mtu;
		cfg.features_offered = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF |
				       VNIC_F_MAC | VNIC_F_MTU;
		cfg.features_acked = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF;
		cfg.nregions = np;
		cfg.regions = reg;
		cfg.nqueues = 2 * np;
		cfg.queues = q;
		cfg.policy = r->pol;
		cfg.policy.mode = r->policy;
		if (r->backend == TR_SOCKET) {
			cfg.backend = VNIC_BACKEND_SOCKET;
			cfg.backend_fd = bf[0];
		} else if (r->backend == TR_AFP) {
			cfg.backend = VNIC_BACKEND_AF_PACKET;
			cfg.tap_name = l->veth;
			cfg.netns = r->netns;
			cfg.backend_fd = -1;
		} else {
			cfg.backend = VNIC_BACKEND_TAP;
			cfg.tap_name = l->tap;
			cfg.netns = r->netns;
			cfg.backend_fd = -1;
		}
		rc = r->backend == TR_SOCKET && np > 1
			     ? vnic_add_nic_backends(l->conn, &cfg, bf, np, err, sizeof(err))
			     : vnic_add_nic(l->conn, &cfg, err, sizeof(err));
		if (rc != 0) {
			fprintf(stderr, "vnic-bench: AddNic %s: %s\n", l->id,
				err[0] ? err : vnic_last_error(l->conn));
			rc = -EIO;
		}
	}
	/* libvnic borrowed the VMM ends; vnicd has its own now. */
	for (unsigned k = 0; k < np; k++)
		if (bf[k] >= 0)
			close(bf[k]);
	if (rc < 0)
		return rc;
	for (unsigned k = 0; k < np; k++)
		l[k].added = true;
	if (r->backend != TR_SOCKET && tr_tap_setup(r, l) < 0)
		return -EIO;
	for (unsigned k = 0; k < np; k++)
		guest_rx_fill(l[k].g);
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
		const struct vnic_nic_pairs *ps = st->pairs ? &st->pairs[i] : NULL;
		unsigned np = ps && ps->npairs ? ps->npairs : 1;

		for (unsigned j = 0; j < np; j++) {
			uint32_t pair = ps && ps->npairs ? ps->pairs[j].pair : 0;
			pid_t pid = ps && ps->npairs ? ps->pairs[j].pid : st->nics[i].pid;
			struct tr_nic *n = tr_find(r, st->nics[i].id, pair);

			if (!n)
				continue;
			if (n->pid > 0 && pid != n->pid) {
				/* A new worker: bank what the old one used (up
				 * to its last sample), count the new one from
				 * its start. */
				if (n->cpu0 >= 0 && n->cpu_last >= n->cpu0)
					n->cpu_dead += n->cpu_last - n->cpu0;
				n->cpu0 = n->cpu_last = 0;
			}
			n->pid = pid;
		}
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
	p.mode = order[r->switch_next % 4];
	/* Interrupt coalescing as asked in the even cycles of the four
	 * modes, off in the odd ones, so every mode runs with and without
	 * it; interrupts held back go out at each switch (workers/irq.c). */
	if ((r->switch_next / 4) & 1u)
		p.rx_irq_us = p.rx_irq_frames = p.tx_irq_us = p.tx_irq_frames = 0;
	r->switch_next++;
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		int rc;

		if (n->gone || n->hostile || n->failed || n->pair != 0)
			continue; /* per NIC: SetPolicy reaches all its pairs */
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

bool tr_sending(const struct tr_run *r, uint64_t now)
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

/* What is due at now besides the frames: lifecycle steps, CPU samples,
 * policy switches, a restarted worker's pid, the hostile chain. */
static void tr_loop_due(struct tr_run *r, uint64_t now)
{
	tr_lifecycle(r, now);
	tr_dirty_log_due(r, now);
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
}

/* Is the run over? Every sender done and every frame in (or nothing
 * arrived for TR_DRAIN_NS since), a stall, or the absolute bound.
 * *last_total and *last_progress follow the frames received. */
static bool tr_loop_over(struct tr_run *r, uint64_t now, uint64_t *last_total,
			 uint64_t *last_progress)
{
	uint64_t total = tr_total_recv(r);

	if (total != *last_total) {
		*last_total = total;
		*last_progress = now;
	}
	if (now - r->t0 > (uint64_t)(r->seconds * TR_NS) + TR_HARD_EXTRA_NS) {
		tr_fail(r, "did not finish within %.0f s of the sending time",
			TR_HARD_EXTRA_NS / TR_NS);
		return true;
	}
	if (!tr_sending(r, now)) {
		if (tr_all_received(r) && !tr_lifecycle_pending(r))
			return true;
		if (now - *last_progress > TR_DRAIN_NS)
			return true; /* the rest is lost: reported by the caller */
	} else if (now - *last_progress > TR_STALL_NS) {
		tr_fail(r, "stall: no frame arrived for %.0f s", TR_STALL_NS / TR_NS);
		return true;
	}
	return false;
}

/* The poll set: per NIC its two call fds and its host end (3 * i), then
 * per NIC its own connection to vnicd if it has one (3 * nnics + i), then
 * the run's connection (last). Returns: the count; *more when a guest has
 * frames left to read without waiting. */
static unsigned tr_poll_set(const struct tr_run *r, struct pollfd *pfd, bool *more)
{
	unsigned np = 0;

	*more = false;
	for (unsigned i = 0; i < r->nnics; i++) {
		const struct tr_nic *n = &r->nics[i];

		*more |= n->rx_more && !n->gone;
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
	/* A NIC's own connection once, at its first lane. */
	for (unsigned i = 0; i < r->nnics; i++)
		pfd[np++] = (struct pollfd){
			.fd = r->nics[i].pair == 0 && r->nics[i].conn && r->nics[i].conn != r->conn
				      ? vnic_fd(r->nics[i].conn) : -1,
			.events = POLLIN };
	pfd[np++] = (struct pollfd){ .fd = vnic_fd(r->conn), .events = POLLIN };
	return np;
}

/* Act on what poll saw in the set tr_poll_set made. Returns: 0, or -EIO
 * when the run cannot go on (failed). */
static int tr_poll_handle(struct tr_run *r, const struct pollfd *pfd, unsigned np)
{
	int rc;

	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		const struct pollfd *p = &pfd[3 * i];

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
			return -EIO;
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
			return -EIO;
		}
	}
	if (pfd[np - 1].revents & (POLLIN | POLLHUP | POLLERR)) {
		rc = vnic_dispatch(r->conn);
		if (rc < 0) {
			tr_fail(r, "connection to vnicd lost: %s", strerror(-rc));
			return -EIO;
		}
	}
	return 0;
}

/* Run until every sender is done and every frame is in, a stall, or a
 * failure. Every wait is bounded: poll at most 10 ms, the whole loop at
 * most seconds + TR_DRAIN_NS after the last progress. */
void tr_loop(struct tr_run *r)
{
	struct pollfd pfd[4 * TR_MAX_NICS + 1];
	uint64_t last_progress = bench_now_ns(), last_total = 0;

	for (;;) {
		uint64_t now = bench_now_ns();
		unsigned np;
		bool more;
		int rc;

		if (r->failures)
			return;
		tr_loop_due(r, now);
		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_nic *n = &r->nics[i];

			if (n->hostile || n->gone)
				continue;
			if (n->f[FRAMES_G2H].on && !n->tx_wait)
				tr_guest_tx(r, n, now);
			if (n->f[FRAMES_H2G].on && !n->host_blocked)
				tr_host_tx(r, n, now);
		}
		if (tr_loop_over(r, now, &last_total, &last_progress))
			return;
		np = tr_poll_set(r, pfd, &more);
		rc = poll(pfd, np, more ? 0 : 10);
		if (rc < 0 && errno != EINTR) {
			tr_fail(r, "poll: %s", strerror(errno));
			return;
		}
		if (tr_poll_handle(r, pfd, np) < 0)
			return;
		if (r->nic_errors) {
			tr_fail(r, "a NIC failed or broke during traffic (see the events above)");
			return;
		}
	}
}

/* ---- teardown ---- */

/* RemoveNic per NIC (its first lane). The reply promises every worker of
 * the NIC is gone: no lane's worker may exist any more, but as a zombie
 * whose parent is not vnicd (tr_worker_gone_soon). */
static void tr_remove_all(struct tr_run *r)
{
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		struct vnic_remove_result res;
		bool alive = false;
		int rc;

		if (!n->added || n->pair != 0)
			continue;
		for (unsigned k = 0; k < n->npairs; k++)
			n[k].added = false;
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
		for (unsigned k = 0; k < n->npairs; k++)
			if (n[k].pid > 0 && !tr_worker_gone_soon(n[k].pid)) {
				tr_fail(r, "RemoveNic %s replied while the worker of pair %u, pid %d, "
					   "still exists", n->id, k, (int)n[k].pid);
				alive = true;
			}
		if (alive)
			continue;
		if (n->pid <= 0)
			printf("  removed %s\n", n->id);
		else if (n->npairs == 1)
			printf("  removed %s: unplug %.1f ms, worker pid %d gone\n", n->id,
			       res.unplug_latency_us / 1000.0, (int)n->pid);
		else
			printf("  removed %s: unplug %.1f ms, the workers of its %u pairs gone\n",
			       n->id, res.unplug_latency_us / 1000.0, n->npairs);
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
		/* After RemoveNic: the worker's last bits are in. */
		if (!n->failed)
			tr_dirty_log_check(r, n);
		tr_dirty_log_free(n);
		/* A NIC's own connection (--disconnect-after) is its first
		 * lane's; the others borrow it. */
		if (n->pair == 0 && n->conn && n->conn != r->conn)
			vnic_close(n->conn);
		n->conn = NULL;
		guest_free(n->g);
		if (n->host_fd >= 0)
			close(n->host_fd);
		free(n->f[0].seen);
		free(n->f[1].seen);
		if (r->backend == TR_AFP && !r->netns_created && n->veth[0]) {
			/* A namespace we did not make keeps nothing of ours. */
			const char *a[] = { "ip", "-n", r->netns, "link", "del", n->veth, NULL };

			tr_cmd(a);
		}
	}
	free(r->nics);
	free(r->buf);
	vnic_close(r->conn);
	if (r->netns_created) {
		const char *a[] = { "ip", "netns", "del", r->netns, NULL };

		tr_cmd(a);
	}
}

/* ---- setup ---- */

int tr_setup(struct tr_run *r)
{
	struct vnic_hello_info hi;
	struct stat sb;
	char path[128];
	int rc;

	r->buf = malloc(FRAMES_MAX + 64);
	r->nics = calloc(r->nnics, sizeof(*r->nics));
	if (!r->buf || !r->nics)
		return -EIO;
	if (!r->pairs || r->nnics % r->pairs)
		return -EIO; /* bench_traffic_main makes nnics NICs x pairs */
	for (unsigned i = 0; i < r->nnics; i++) {
		r->nics[i].idx = i;
		r->nics[i].pair = i % r->pairs;
		r->nics[i].npairs = r->pairs;
		r->nics[i].host_fd = -1;
		r->nics[i].log_fd = -1;
	}
	if (r->backend != TR_SOCKET) {
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

		unsigned nic = i / r->pairs; /* lanes of one NIC share these */

		n->conn = n->pair ? n[-(int)n->pair].conn : r->conn;
		n->faulty = r->fault_nic == (int)nic ||
			    (nic == 0 && (r->unplug_after >= 0 || r->disconnect_after >= 0));
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
		if (n->pair == 0 && tr_nic_add(r, n) < 0)
			return -EIO;
	}
	if (tr_read_pids(r) < 0)
		return -EIO;
	for (unsigned i = 0; i < r->nnics; i++)
		r->nics[i].cpu0 = r->nics[i].cpu_last = tr_cpu_seconds(r->nics[i].pid);
	return 0;
}

/* ---- what both subcommands share: options, the end ---- */

const char *tr_backend_name(enum tr_backend b)
{
	return b == TR_TAP ? "tap" : b == TR_AFP ? "afpacket" : "socket";
}

int tr_backend_limits(struct tr_run *r)
{
	r->maxsize = r->backend == TR_TAP ? FRAMES_TAP_MAX
		     : r->backend == TR_AFP ? FRAMES_AFP_MAX : FRAMES_MAX;
	if (r->fixed > r->maxsize) {
		fprintf(stderr, "vnic-bench: a %s carries frames of at most %u bytes (MTU %u)\n",
			r->backend == TR_AFP ? "veth with AF_PACKET" : "tap", r->maxsize,
			r->maxsize - FRAMES_ETH_HLEN);
		return -EINVAL;
	}
	if (r->backend == TR_AFP && !r->window_set)
		r->window = TR_AFP_WINDOW;
	r->mtu = (r->fixed && r->fixed <= 1514) ? 1500
		 : r->backend == TR_SOCKET ? 65535 : r->maxsize - FRAMES_ETH_HLEN;
	return 0;
}

int tr_parse_common(struct tr_run *r, int opt, const char *arg)
{
	static const char *const backends[] = { "socket", "tap", "afpacket" };
	static const enum tr_backend kinds[] = { TR_SOCKET, TR_TAP, TR_AFP };
	unsigned long v;
	int i;

	switch (opt) {
	case 'b':
		i = tr_name_index(backends, 3, arg);
		if (i < 0)
			return -EIO;
		r->backend = kinds[i];
		return 0;
	case 'N':
		if (!arg[0] || strlen(arg) >= sizeof(r->netns) || strchr(arg, '/'))
			return -EIO;
		snprintf(r->netns, sizeof(r->netns), "%s", arg);
		return 0;
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
		r->window_set = true;
		return 0;
	}
	return -EIO;
}

/* tr_init_common - signals (SIGINT/SIGTERM end the run cleanly: sending
 * stops, NICs are removed, the netns we made is deleted) and the socket. */
void tr_init_common(struct tr_run *r)
{
	struct sigaction sa = { .sa_handler = tr_on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!r->socket_path)
		r->socket_path = bench_socket_path ? bench_socket_path : VNIC_DEFAULT_SOCKET;
}

/* tr_name_index - s's index in names[0..n), -1 when not there. */
int tr_name_index(const char *const *names, unsigned n, const char *s)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -1;
}

/* tr_finish - the end of a subcommand's run: NICs removed (the worker of
 * each gone), everything freed, the netns we made deleted, PASS or FAIL.
 * Returns: the exit code, 0 or 1. */
int tr_finish(struct tr_run *r, const char *name)
{
	int rc;

	tr_cleanup(r);
	rc = r->failures ? 1 : 0;
	printf("vnic-bench %s: %s\n", name, rc ? "FAIL" : "PASS");
	return rc;
}

/* tr_run_init - the defaults both subcommands start from: the socket
 * backend, both directions, 3 s, nnics NICs, no NIC under fault. */
void tr_run_init(struct tr_run *r, unsigned nnics)
{
	*r = (struct tr_run){ .backend = TR_SOCKET, .dirs = 3, .seconds = 3, .nnics = nnics,
			      .window = TR_DEFAULT_WINDOW, .fault_nic = -1, .unplug_after = -1,
			      .disconnect_after = -1, .stall_after = -1,
			      .remove_deadline_ms = 5000, .dirty_log_after = -1, .pairs = 1 };
}

/* tr_usage_exit - a command line that ends the subcommand: rc 1 (--help)
 * prints the usage on stdout, rc < 0 (a usage error) on stderr.
 * Returns: the exit code, 0 or 2. */
int tr_usage_exit(int rc, bench_usage_fn *usage)
{
	usage(rc > 0 ? stdout : stderr);
	return rc > 0 ? 0 : 2;
}
