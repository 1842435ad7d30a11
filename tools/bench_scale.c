/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench scale: many NICs on one vnicd (issue 10).
 *
 *   vnic-bench [--socket PATH] scale --nics N [--queue-pairs P] [--frames F]
 *                                    [--status-reps R]
 *
 * ceil(N / 32) VMM connections (32 NICs each: vnicd limits one
 * connection's share of its NICs) add N NICs of P queue pairs each (issue
 * 15; socket backends, a simulated guest and a socket per pair: a "lane"),
 * passes F checked frames each way on every lane, takes the status of all
 * NICs R times (vnic_status: every page), and removes them all.
 * Printed: the time of each step; vnicd's RSS and PSS before and with the
 * N NICs; each worker's PSS (min / median / max) idle after AddNic and
 * after the frames; one RESULT line with everything for scripts.
 * Raises its own RLIMIT_NOFILE soft limit to the hard one (6 fds per NIC).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"

#define SC_FRAME_LEN 128u
#define SC_MAX_NICS 1024u
#define SC_MAX_PAIRS 8u
#define SC_TIMEOUT_NS (20ull * 1000 * 1000 * 1000)
/* NICs per VMM connection: vnicd gives one connection a share of its NIC
 * budget (a quarter), so N NICs come from ceil(N / SC_PER_CONN) "VMMs". */
#define SC_PER_CONN 32u

/* One queue pair of a NIC: its guest, its socket, its worker. */
struct sc_nic {
	char id[64];                /* the NIC's */
	unsigned pair;
	struct vnic_conn *conn;     /* the VMM connection that owns it */
	struct guest *g;
	int host_fd;
	uint8_t host_mac[6];
	pid_t pid;
	unsigned g2h_sent, g2h_recv, h2g_sent, h2g_recv;
	double pss_idle_kb, pss_busy_kb;
};

void bench_scale_usage(FILE *f)
{
	fprintf(f, "usage: vnic-bench [--socket PATH] scale --nics N [--queue-pairs P] [--frames F]\n"
		   "                                   [--status-reps R]\n"
		   "  N NICs of P queue pairs (default 1; a worker each) from N/32 connections:\n"
		   "  add, F frames each way per pair (default 4), R status listings of all\n"
		   "  NICs (default 10), remove; prints the time of each step, vnicd's memory\n"
		   "  and each worker's PSS\n");
}

static double ms_since(uint64_t t0)
{
	return (double)(bench_now_ns() - t0) / 1e6;
}

/* Open fds of a process (entries of /proc/PID/fd); -1 when unreadable. */
static int fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* "Pss:" or "Rss:" of /proc/PID/smaps_rollup in KiB; -1 when unreadable. */
static double smaps_kb(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	double v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = strtod(line + kl + 1, NULL);
	fclose(f);
	return v;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* NIC @idx: lanes l[0..np-1], a guest and a socket per pair, one AddNic. */
static int sc_add(struct vnic_conn *conn, struct sc_nic *l, unsigned idx, unsigned np)
{
	struct vnic_region reg[SC_MAX_PAIRS];
	struct vnic_queue q[2 * SC_MAX_PAIRS];
	struct vnic_nic_config cfg = { 0 };
	int bf[SC_MAX_PAIRS];
	char err[256];
	int sv[2], rc;

	for (unsigned k = 0; k < np; k++) {
		bf[k] = -1;
		l[k].host_fd = -1;
		l[k].g = NULL;
	}
	for (unsigned k = 0; k < np; k++) {
		struct sc_nic *n = &l[k];
		unsigned lane = idx * np + k;

		n->host_fd = -1;
		n->pair = k;
		if (guest_new_pair(lane, k, &n->g, err, sizeof(err)) < 0) {
			fprintf(stderr, "vnic-bench: nic %u pair %u: %s\n", idx, k, err);
			goto fail;
		}
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
			fprintf(stderr, "vnic-bench: socketpair: %s\n", strerror(errno));
			goto fail;
		}
		n->host_fd = sv[0];
		bf[k] = sv[1];
		memcpy(n->host_mac, (const uint8_t[6]){ 0x52, 0x54, 0x00, 0xcc, (uint8_t)(lane >> 8),
							(uint8_t)lane }, 6);
		snprintf(n->id, sizeof(n->id), "scale%d-%u", (int)getpid(), idx);
		guest_vnic_memory(n->g, &reg[k], &q[2 * k]);
	}
	cfg.id = l[0].id;
	frames_guest_mac(idx * np, cfg.mac);
	cfg.features_offered = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF;
	cfg.features_acked = cfg.features_offered;
	cfg.nregions = np;
	cfg.regions = reg;
	cfg.nqueues = 2 * np;
	cfg.queues = q;
	cfg.backend = VNIC_BACKEND_SOCKET;
	cfg.backend_fd = bf[0];
	rc = np == 1 ? vnic_add_nic(conn, &cfg, err, sizeof(err))
		     : vnic_add_nic_backends(conn, &cfg, bf, np, err, sizeof(err));
	for (unsigned k = 0; k < np; k++)
		close(bf[k]);
	if (rc) {
		fprintf(stderr, "vnic-bench: AddNic %s: %s\n", l[0].id,
			err[0] ? err : vnic_last_error(conn));
		return -EIO;
	}
	for (unsigned k = 0; k < np; k++)
		guest_rx_fill(l[k].g);
	return 0;

fail:
	/* What this call made: the caller cleans up only NICs it added. */
	for (unsigned k = 0; k < np; k++) {
		if (bf[k] >= 0)
			close(bf[k]);
		if (l[k].host_fd >= 0)
			close(l[k].host_fd);
		l[k].host_fd = -1;
		l[k].g = guest_free(l[k].g);
	}
	return -EIO;
}

/* F frames each way on every lane (queue pair), each checked; bounded by
 * SC_TIMEOUT_NS. */
static int sc_frames(struct sc_nic *nics, unsigned nn, unsigned frames)
{
	uint8_t buf[GUEST_MAX_FRAME];
	uint64_t t0 = bench_now_ns(), seq;
	char err[200];
	bool done = false;

	for (unsigned i = 0; i < nn; i++) {
		struct sc_nic *n = &nics[i];

		for (unsigned k = 0; k < frames; k++) {
			unsigned slot;
			uint8_t *p = guest_tx_slot(n->g, &slot);

			if (!p)
				break;
			frames_build(p, SC_FRAME_LEN, i, FRAMES_G2H, k, n->host_mac);
			guest_tx_add(n->g, slot, SC_FRAME_LEN);
			n->g2h_sent++;
			frames_build(buf, SC_FRAME_LEN, i, FRAMES_H2G, k, n->host_mac);
			if (send(n->host_fd, buf, SC_FRAME_LEN, MSG_DONTWAIT) == (ssize_t)SC_FRAME_LEN)
				n->h2g_sent++;
		}
		guest_tx_flush(n->g);
	}
	while (!done && bench_now_ns() - t0 < SC_TIMEOUT_NS) {
		done = true;
		for (unsigned i = 0; i < nn; i++) {
			struct sc_nic *n = &nics[i];
			const uint8_t *f;
			size_t len;
			ssize_t r;
			int rc;

			while ((r = recv(n->host_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
				if (frames_check(buf, (size_t)r, i, FRAMES_G2H, SC_FRAME_LEN, SC_FRAME_LEN,
						 n->host_mac, true, &seq, err, sizeof(err)) < 0) {
					fprintf(stderr, "vnic-bench: %s g2h: %s\n", n->id, err);
					return -EIO;
				}
				n->g2h_recv++;
			}
			guest_read_call(n->g, GUEST_RX);
			guest_read_call(n->g, GUEST_TX);
			while ((rc = guest_rx_next(n->g, &f, &len, err, sizeof(err))) == 1) {
				if (frames_check(f, len, i, FRAMES_H2G, SC_FRAME_LEN, SC_FRAME_LEN,
						 n->host_mac, true, &seq, err, sizeof(err)) < 0) {
					fprintf(stderr, "vnic-bench: %s h2g: %s\n", n->id, err);
					return -EIO;
				}
				n->h2g_recv++;
			}
			if (rc < 0) {
				fprintf(stderr, "vnic-bench: %s: %s\n", n->id, err);
				return -EIO;
			}
			guest_rx_arm(n->g);
			if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0) {
				fprintf(stderr, "vnic-bench: %s: %s\n", n->id, err);
				return -EIO;
			}
			if (n->g2h_recv < n->g2h_sent || n->h2g_recv < n->h2g_sent ||
			    n->h2g_sent < frames)
				done = false;
		}
		if (!done)
			nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	}
	for (unsigned i = 0; i < nn; i++)
		if (nics[i].g2h_recv < frames || nics[i].h2g_recv < frames) {
			fprintf(stderr, "vnic-bench: %s: g2h %u/%u, h2g %u/%u frames after %.0f s\n",
				nics[i].id, nics[i].g2h_recv, frames, nics[i].h2g_recv, frames,
				(double)SC_TIMEOUT_NS / 1e9);
			return -ETIMEDOUT;
		}
	return 0;
}

static void sc_pss(struct sc_nic *nics, unsigned nn, bool busy, double *mn, double *med,
		   double *mx)
{
	double *v = calloc(nn, sizeof(*v));

	if (!v) {
		*mn = *med = *mx = -1;
		return;
	}
	for (unsigned i = 0; i < nn; i++) {
		double kb = smaps_kb(nics[i].pid, "Pss");

		v[i] = kb;
		if (busy)
			nics[i].pss_busy_kb = kb;
		else
			nics[i].pss_idle_kb = kb;
	}
	bench_stats(v, nn, mn, med, mx);
	free(v);
}

int bench_scale_main(int argc, char **argv)
{
	unsigned long nn = 0, np = 1, frames = 4, reps = 10, nl;
	struct vnic_conn *conn = NULL, **conns = NULL;
	unsigned nconns = 0;
	struct sc_nic *nics = NULL;
	struct vnic_status *st = NULL;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	double add_ms, frames_ms, remove_ms, smin, smed, smax, pimin, pimed, pimax, pbmin, pbmed,
		pbmax, rss0, pss0, rss1, pss1, *sv = NULL;
	unsigned added = 0;
	int fds0, fds1 = -1, wfds = -1;
	uint64_t t0;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--nics") && v && bench_parse_ulong(v, 1, SC_MAX_NICS, &nn) == 0)
			i++;
		else if (!strcmp(a, "--queue-pairs") && v &&
			 bench_parse_ulong(v, 1, SC_MAX_PAIRS, &np) == 0)
			i++;
		else if (!strcmp(a, "--frames") && v && bench_parse_ulong(v, 1, 128, &frames) == 0)
			i++;
		else if (!strcmp(a, "--status-reps") && v &&
			 bench_parse_ulong(v, 1, 1000, &reps) == 0)
			i++;
		else {
			bench_scale_usage(stderr);
			return 2;
		}
	}
	if (!nn) {
		bench_scale_usage(stderr);
		return 2;
	}
	raise_nofile();
	nl = nn * np; /* lanes: a queue pair each, its own guest and worker */
	nics = calloc(nl, sizeof(*nics));
	sv = calloc(reps, sizeof(*sv));
	if (!nics || !sv) {
		fprintf(stderr, "vnic-bench: out of memory\n");
		goto out;
	}
	for (unsigned i = 0; i < nl; i++)
		nics[i].host_fd = -1;
	nconns = (unsigned)((nn + SC_PER_CONN - 1) / SC_PER_CONN);
	conns = calloc(nconns, sizeof(*conns));
	if (!conns)
		goto out;
	for (unsigned i = 0; i < nconns; i++) {
		rc = vnic_connect(bench_socket_path, &conns[i]);
		if (rc) {
			fprintf(stderr, "vnic-bench: connect: %s\n", strerror(-rc));
			rc = 1;
			goto out;
		}
		rc = 1;
		vnic_set_timeout(conns[i], 30000);
		if (vnic_hello(conns[i], "vnic-bench scale", NULL)) {
			fprintf(stderr, "vnic-bench: hello: %s\n", vnic_last_error(conns[i]));
			goto out;
		}
	}
	conn = conns[0];
	for (unsigned i = 0; i < nl; i++)
		nics[i].conn = conns[(i / np) / SC_PER_CONN];
	if (getsockopt(vnic_fd(conn), SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
		fprintf(stderr, "vnic-bench: SO_PEERCRED: %s\n", strerror(errno));
		goto out;
	}
	fds0 = fd_count(cred.pid);
	rss0 = smaps_kb(cred.pid, "Rss");
	pss0 = smaps_kb(cred.pid, "Pss");

	t0 = bench_now_ns();
	for (; added < nn; added++)
		if (sc_add(nics[added * np].conn, &nics[added * np], added, (unsigned)np) < 0)
			goto out_remove;
	add_ms = ms_since(t0);
	if (vnic_status(conn, &st)) {
		fprintf(stderr, "vnic-bench: status: %s\n", vnic_last_error(conn));
		goto out_remove;
	}
	for (unsigned i = 0; i < nl; i++)
		for (unsigned j = 0; j < st->nnics; j++) {
			if (strcmp(st->nics[j].id, nics[i].id))
				continue;
			nics[i].pid = st->nics[j].pid;
			for (unsigned k = 0; st->pairs && k < st->pairs[j].npairs; k++)
				if (st->pairs[j].pairs[k].pair == nics[i].pair)
					nics[i].pid = st->pairs[j].pairs[k].pid;
		}
	st = vnic_status_free(st);
	sc_pss(nics, (unsigned)nl, false, &pimin, &pimed, &pimax);
	fds1 = fd_count(cred.pid);
	wfds = fd_count(nics[0].pid);

	t0 = bench_now_ns();
	if (sc_frames(nics, (unsigned)nl, frames) < 0)
		goto out_remove;
	frames_ms = ms_since(t0);
	sc_pss(nics, (unsigned)nl, true, &pbmin, &pbmed, &pbmax);

	for (unsigned r = 0; r < reps; r++) {
		unsigned running = 0;

		t0 = bench_now_ns();
		if (vnic_status(conn, &st)) {
			fprintf(stderr, "vnic-bench: status: %s\n", vnic_last_error(conn));
			goto out_remove;
		}
		sv[r] = ms_since(t0);
		for (unsigned j = 0; j < st->nnics; j++)
			running += st->nics[j].state == VNIC_NIC_RUNNING;
		if (st->nnics != nn || running != nn) {
			fprintf(stderr, "vnic-bench: status lists %u NICs, %u RUNNING; want %lu\n",
				st->nnics, running, nn);
			goto out_remove;
		}
		st = vnic_status_free(st);
	}
	bench_stats(sv, (unsigned)reps, &smin, &smed, &smax);
	rss1 = smaps_kb(cred.pid, "Rss");
	pss1 = smaps_kb(cred.pid, "Pss");

	t0 = bench_now_ns();
	for (unsigned i = 0; i < added; i++)
		if (vnic_remove_nic(nics[i * np].conn, nics[i * np].id, 0, NULL)) {
			fprintf(stderr, "vnic-bench: RemoveNic %s: %s\n", nics[i * np].id,
				vnic_last_error(nics[i * np].conn));
			goto out_remove;
		}
	remove_ms = ms_since(t0);
	added = 0;

	printf("vnic-bench scale: %lu NICs of %lu queue pairs (%lu workers) on %u connections, "
	       "%lu frames each way per pair, %lu status listings\n", nn, np, nl, nconns, frames,
	       reps);
	printf("  add all:     %9.1f ms (%.2f ms per NIC, AddNic -> worker READY)\n", add_ms,
	       add_ms / (double)nn);
	printf("  frames:      %9.1f ms (%lu checked frames)\n", frames_ms, 2 * frames * nl);
	printf("  status all:  %9.2f / %.2f / %.2f ms (min / median / max of %lu; %lu NICs, %lu pages)\n",
	       smin, smed, smax, reps, nn, (nn + 31) / 32);
	printf("  remove all:  %9.1f ms (%.2f ms per NIC)\n", remove_ms, remove_ms / (double)nn);
	printf("  vnicd pid %d: RSS %.0f -> %.0f KiB, PSS %.0f -> %.0f KiB (before -> with %lu NICs)\n",
	       (int)cred.pid, rss0, rss1, pss0, pss1, nn);
	printf("  vnicd fds: %d -> %d (%.1f per NIC); worker fds: %d\n", fds0, fds1,
	       (double)(fds1 - fds0) / (double)nn, wfds);
	printf("  worker PSS idle: %.0f / %.0f / %.0f KiB, after frames: %.0f / %.0f / %.0f KiB "
	       "(min / median / max)\n", pimin, pimed, pimax, pbmin, pbmed, pbmax);
	printf("RESULT scale nics=%lu pairs=%lu add_ms=%.1f frames_ms=%.1f status_ms_min=%.2f status_ms_med=%.2f "
	       "status_ms_max=%.2f remove_ms=%.1f vnicd_rss_kb=%.0f vnicd_pss_kb=%.0f "
	       "vnicd_rss0_kb=%.0f worker_pss_idle_kb_med=%.0f worker_pss_idle_kb_max=%.0f "
	       "worker_pss_busy_kb_med=%.0f worker_pss_busy_kb_max=%.0f vnicd_fds0=%d vnicd_fds=%d "
	       "worker_fds=%d\n",
	       nn, np, add_ms, frames_ms, smin, smed, smax, remove_ms, rss1, pss1, rss0, pimed, pimax,
	       pbmed, pbmax, fds0, fds1, wfds);
	rc = 0;
out_remove:
	for (unsigned i = 0; i < added; i++)
		vnic_remove_nic(nics[i * np].conn, nics[i * np].id, 0, NULL);
out:
	vnic_status_free(st);
	for (unsigned i = 0; conns && i < nconns; i++)
		vnic_close(conns[i]);
	free(conns);
	if (nics) {
		for (unsigned i = 0; i < nl; i++) {
			guest_free(nics[i].g);
			if (nics[i].host_fd >= 0)
				close(nics[i].host_fd);
		}
	}
	free(nics);
	free(sv);
	if (rc)
		fprintf(stderr, "vnic-bench scale: FAIL\n");
	return rc;
}
