/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench ring: the cost of moving a buffer through a split virtqueue.
 *
 * The guest (this process, vring_drv) and the device (a forked process,
 * vring, mapping the sealed memfd of guest memory again through
 * memtable_map at its own address) talk as a VMM and a worker do: eventfd
 * kicks guest->device, eventfd calls device->guest. The guest keeps the
 * ring full of device-readable buffers of one size (a TX queue) and refills
 * each as it comes back, publishing avail->idx every RING_FLUSH_EVERY
 * buffers (a Linux driver publishes each buffer, DPDK's virtio-user each
 * burst of 32); the device copies every buffer out of guest memory into a
 * local buffer (what a TX path does before the tap write) and returns it
 * with len 0, publishing used->idx every RING_FLUSH_EVERY.
 *
 * Modes, per size:
 *  - suppressed: VIRTIO_F_EVENT_IDX; the guest keeps interrupts off while
 *    it has work and enables them then rechecks before sleeping; the
 *    device drains with kicks off, then enables and rechecks before
 *    sleeping; each side notifies only when the other asked.
 *  - notify-all: no EVENT_IDX, nothing suppressed: every buffer is kicked
 *    and every used buffer interrupted.
 *  - poll: both sides busy-poll (vnicd's "poll" policy against a guest
 *    polling its used ring, as DPDK's vhost and virtio-user do): the
 *    device keeps kicks off and never interrupts, the guest never kicks
 *    and never sleeps; each side spins on the other's index (bounded by
 *    the run's time and the stall check), with a pause per empty look and
 *    a sched_yield() every RING_YIELD_EVERY. The fair case for DPDK.
 *  - memcpy: no ring: this process copies the same buffers out of the same
 *    guest memory into a local buffer, to compare the ring's cost with the
 *    copy it wraps.
 * Every case runs --runs times (interleaved, so drift hits all modes
 * alike) for --seconds each; the table gives min, median and max.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "iov.h"
#include "memtable.h"
#include "vring.h"
#include "vring_drv.h"

#define RING_MAX_SIZES   16u
#define RING_MAX_BUF     (1u << 20)
#define RING_GPA_BASE    0x100000ull
#define RING_STALL_NS    (2ull * 1000000000u)  /* no progress this long: fail */
#define RING_DRAIN_NS    (5ull * 1000000000u)  /* bound on draining after the run */
#define RING_DEV_BUDGET  256u                  /* chains per device pass (vhost weight) */
#define RING_FLUSH_EVERY 32u
#define RING_YIELD_EVERY 64u  /* poll: empty looks between two sched_yield()s */

enum ring_mode { RING_SUPPRESSED, RING_NOTIFY_ALL, RING_POLL, RING_MEMCPY, RING_NMODES };

static const char *const ring_mode_name[RING_NMODES] = {
	[RING_SUPPRESSED] = "suppressed",
	[RING_NOTIFY_ALL] = "notify-all",
	[RING_POLL] = "poll",
	[RING_MEMCPY] = "memcpy",
};

struct ring_opts {
	unsigned runs;
	double seconds;
	unsigned queue;
	unsigned nsizes;
	uint32_t sizes[RING_MAX_SIZES];
};

/* Device -> guest, in a MAP_SHARED page; read after the device exited. */
struct ring_shared {
	int failed;
	char msg[200];
	uint64_t popped, calls, wakeups;
};

struct ring_sample {
	double mpps, ns_per_pkt, kicks_per_pkt, irqs_per_pkt;
};

/* One run's guest memory and channels. */
struct ring_env {
	const struct ring_opts *o;
	uint32_t size;
	enum ring_mode mode;
	int memfd;
	uint8_t *mem;            /* the guest's view */
	size_t len, data_off;
	struct vring_layout l;
	int kick_fd, call_fd, stop_fd, ready[2];
	struct ring_shared *sh;
	char err[256];
};

void bench_ring_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench ring [--runs N] [--seconds S] [--sizes B,B,...] [--queue Q]\n"
		"  Driver (guest) and device in two processes over a sealed memfd, with\n"
		"  eventfd kicks and calls. For each buffer size: packets/s and ns per\n"
		"  packet with notification suppression (EVENT_IDX, enable then recheck),\n"
		"  without it (every buffer kicked, every used buffer interrupted), and a\n"
		"  plain memcpy of the same buffers; kicks and interrupts per packet.\n"
		"  --runs N      runs per case, 1..1000 (default 5): min, median, max\n"
		"  --seconds S   seconds per run, 0.01..60 (default 0.3)\n"
		"  --sizes LIST  buffer sizes in bytes, 1..%u (default 64,1500,65536)\n"
		"  --queue Q     queue size, a power of 2 in 1..32768 (default 256)\n",
		RING_MAX_BUF);
}

static void ring_err(struct ring_env *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void ring_err(struct ring_env *e, const char *fmt, ...)
{
	va_list ap;

	if (e->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err), fmt, ap);
	va_end(ap);
}

/* Keep the compiler from dropping a copy nobody reads. */
static inline void ring_consume(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

static uint8_t *ring_gptr(const struct ring_env *e, uint64_t gpa)
{
	return e->mem + (gpa - RING_GPA_BASE);
}

/* ------------------------------------------------------------------ */
/* Device process                                                      */
/* ------------------------------------------------------------------ */

static int ring_dev_fail(struct ring_shared *sh, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ring_dev_fail(struct ring_shared *sh, const char *fmt, ...)
{
	va_list ap;

	if (!sh->failed) {
		sh->failed = 1;
		va_start(ap, fmt);
		vsnprintf(sh->msg, sizeof(sh->msg), fmt, ap);
		va_end(ap);
	}
	return 1;
}

static int ring_dev_call(struct ring_env *e)
{
	if (eventfd_write(e->call_fd, 1) < 0)
		return ring_dev_fail(e->sh, "call: %s", strerror(errno));
	e->sh->calls++;
	return 0;
}

/*
 * A poll-mode side found nothing: a pause, and every RING_YIELD_EVERY
 * empty looks in a row, sched_yield(), which gives the CPU up when it is
 * shared (2 cores, other load) without paying a system call (about 1 us
 * on a paravirtualized host) on every look, which DPDK's pollers never do.
 */
static void ring_relax(unsigned *idle)
{
	if (++*idle % RING_YIELD_EVERY == 0)
		sched_yield();
	else
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ __volatile__("yield" ::: "memory");
#else
		__asm__ __volatile__("" ::: "memory");
#endif
}

static int ring_device(struct ring_env *e)
{
	struct memtable_region_desc d = {
		.gpa = RING_GPA_BASE, .size = e->len, .offset = 0, .fd = e->memfd,
	};
	const bool all = e->mode == RING_NOTIFY_ALL, spin = e->mode == RING_POLL;
	struct ring_shared *sh = e->sh;
	struct memtable *mt = NULL;
	struct vring_chain *c;
	struct vring vq;
	uint64_t features = 1ull << VIRTIO_F_VERSION_1, deadline;
	uint8_t *local;
	unsigned idle = 0;
	char err[256];
	int rc = 1;

	if (!all)
		features |= 1ull << VIRTIO_F_EVENT_IDX;
	c = malloc(sizeof(*c));
	local = malloc(e->size);
	if (!c || !local) {
		ring_dev_fail(sh, "out of memory");
		goto out;
	}
	if (memtable_map(&d, 1, &mt, err, sizeof(err)) < 0) {
		ring_dev_fail(sh, "memtable_map: %s", err);
		goto out;
	}
	if (vring_init(&vq, mt, e->o->queue, e->l.desc, e->l.avail, e->l.used, features,
		       err, sizeof(err)) < 0) {
		ring_dev_fail(sh, "vring_init: %s", err);
		goto out_unmap;
	}
	if (write(e->ready[1], "R", 1) != 1) {
		ring_dev_fail(sh, "ready: %s", strerror(errno));
		goto out_unmap;
	}

	deadline = bench_now_ns() + (uint64_t)(e->o->seconds * 1e9) + 30ull * 1000000000u;
	for (uint64_t iter = 0; iter < (1ull << 40); iter++) {
		struct pollfd pfd[2] = {
			{ .fd = e->kick_fd, .events = POLLIN },
			{ .fd = e->stop_fd, .events = POLLIN },
		};
		unsigned done = 0, since_flush = 0;
		eventfd_t val;
		int prc;

		if (bench_now_ns() > deadline) {
			ring_dev_fail(sh, "device deadline passed");
			goto out_unmap;
		}
		/* Drain with kicks off (suppressed mode), bounded per pass. */
		if (!all)
			vring_notify_disable(&vq);
		for (; done < RING_DEV_BUDGET; done++) {
			int r = vring_pop(&vq, c);

			if (r < 0) {
				ring_dev_fail(sh, "queue broken: %s", vq.broken_reason);
				goto out_unmap;
			}
			if (r == 0)
				break;
			sh->popped++;
			ring_consume(local);
			iov_to_buf(c->iov, c->nout, 0, local, e->size);
			ring_consume(local);
			vring_push(&vq, c->head, 0);
			if (all) {
				vring_flush(&vq);
				if (ring_dev_call(e))
					goto out_unmap;
			} else if (++since_flush == RING_FLUSH_EVERY) {
				since_flush = 0;
				vring_flush(&vq);
				if (!spin && vring_should_notify(&vq) && ring_dev_call(e))
					goto out_unmap;
			}
		}
		if (!all) {
			vring_flush(&vq);
			if (!spin && vring_should_notify(&vq) && ring_dev_call(e))
				goto out_unmap;
		}
		if (done)
			idle = 0;
		if (done == RING_DEV_BUDGET)
			continue;
		if (spin) {
			/* Poll: kicks stay off; look at the stop fd now and then. */
			if ((iter & 1023u) == 0 && poll(&pfd[1], 1, 0) > 0) {
				rc = 0;
				goto out_unmap;
			}
			ring_relax(&idle);
			continue;
		}
		/* Empty: enable kicks, full barrier, recheck, then sleep until
		 * a kick or stop; a timeout only bounds the wait (going back to
		 * the ring on a timeout would hide a lost kick). */
		if (vring_notify_enable(&vq))
			continue;
		for (;;) {
			prc = poll(pfd, 2, 100);
			if (prc < 0 && errno != EINTR) {
				ring_dev_fail(sh, "poll: %s", strerror(errno));
				goto out_unmap;
			}
			if (prc > 0 && (pfd[1].revents & POLLIN)) {
				rc = 0;
				goto out_unmap;
			}
			if (prc > 0 && (pfd[0].revents & POLLIN)) {
				if (eventfd_read(e->kick_fd, &val) == 0)
					sh->wakeups++;
				break;
			}
			if (bench_now_ns() > deadline) {
				ring_dev_fail(sh, "device deadline passed while asleep");
				goto out_unmap;
			}
		}
	}
	ring_dev_fail(sh, "device iteration bound reached");
out_unmap:
	memtable_free(mt);
out:
	free(local);
	free(c);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Guest                                                               */
/* ------------------------------------------------------------------ */

/* Add buffer i (readable, e->size bytes); the cookie is i + 1. */
static int ring_add(struct ring_env *e, struct vring_drv *d, unsigned i)
{
	struct vring_drv_buf b = {
		.gpa = RING_GPA_BASE + e->data_off + (uint64_t)i * e->size,
		.len = e->size, .writable = false,
	};
	int rc = vring_drv_add(d, &b, 1, (void *)(uintptr_t)(i + 1));

	if (rc < 0)
		ring_err(e, "vring_drv_add: %s", strerror(-rc));
	return rc < 0 ? -1 : 0;
}

static int ring_kick(struct ring_env *e, uint64_t *kicks)
{
	if (eventfd_write(e->kick_fd, 1) < 0) {
		ring_err(e, "kick: %s", strerror(errno));
		return -1;
	}
	(*kicks)++;
	return 0;
}

/* Run the guest for o->seconds, then take every buffer back. */
static int ring_guest(struct ring_env *e, struct ring_sample *out)
{
	const bool all = e->mode == RING_NOTIFY_ALL, spin = e->mode == RING_POLL;
	const unsigned num = e->o->queue;
	uint64_t t0, t_end, now, last_progress, done = 0, kicks = 0;
	unsigned inflight = 0, idle = 0;
	bool stopping = false;
	struct vring_drv d;
	int rc = -1;

	if (vring_drv_init(&d, num, ring_gptr(e, e->l.desc), ring_gptr(e, e->l.avail),
			   ring_gptr(e, e->l.used), !all) < 0) {
		ring_err(e, "vring_drv_init failed");
		return -1;
	}
	/* Wait (bounded) for the device to be ready, then start the clock. */
	{
		struct pollfd p = { .fd = e->ready[0], .events = POLLIN };
		char ch;

		if (poll(&p, 1, 5000) != 1 || read(e->ready[0], &ch, 1) != 1) {
			ring_err(e, "device not ready within 5 s");
			goto out;
		}
	}
	t0 = last_progress = bench_now_ns();
	t_end = t0 + (uint64_t)(e->o->seconds * 1e9);
	if (!all)
		vring_drv_cb_disable(&d);

	for (uint64_t iter = 0; iter < (1ull << 40); iter++) {
		void *cookie;
		uint32_t len;
		unsigned added = 0;
		struct pollfd p = { .fd = e->call_fd, .events = POLLIN };
		eventfd_t val;
		int got = 0, prc;

		now = bench_now_ns();
		if (!stopping && now >= t_end)
			stopping = true;
		if (stopping && inflight == 0)
			break;
		if (now - last_progress > RING_STALL_NS || now > t_end + RING_DRAIN_NS) {
			ring_err(e, "stall: %u buffers out, no progress for %.1f s", inflight,
				 (double)(now - last_progress) / 1e9);
			goto out;
		}
		/* Take back what the device is done with. */
		for (unsigned k = 0; k < num; k++) {
			int r = vring_drv_get_used(&d, &cookie, &len);

			if (r < 0) {
				ring_err(e, "vring_drv_get_used: %d", r);
				goto out;
			}
			if (r == 0)
				break;
			got++;
			inflight--;
			done++;
		}
		/* Refill every free slot (buffer index = slot, any free one),
		 * publishing every RING_FLUSH_EVERY buffers, as a Linux
		 * driver makes each buffer visible as it adds it: a device
		 * still draining sees the refill and keeps going without a
		 * kick, instead of running dry while the guest writes a whole
		 * ring's worth. Notify-all publishes and kicks every buffer;
		 * the last of a refill (the ring full) is always published. */
		while (!stopping && d.num_free > 0) {
			if (ring_add(e, &d, (unsigned)((done + inflight) % num)) < 0)
				goto out;
			inflight++;
			added++;
			if (all || added % RING_FLUSH_EVERY == 0 || d.num_free == 0) {
				vring_drv_publish(&d);
				if (!spin && (all || vring_drv_kick_needed(&d)) &&
				    ring_kick(e, &kicks) < 0)
					goto out;
			}
		}
		if (got || added) {
			last_progress = now;
			idle = 0;
			continue;
		}
		if (spin) {
			ring_relax(&idle); /* as the device does */
			continue; /* poll the used ring again: no interrupt, no sleep */
		}
		/* Nothing to do: enable interrupts, full barrier, recheck;
		 * sleep on the call eventfd only if still nothing. */
		if (vring_drv_cb_enable(&d))
			continue;
		prc = poll(&p, 1, (int)(RING_STALL_NS / 1000000));
		if (prc < 0 && errno != EINTR) {
			ring_err(e, "poll: %s", strerror(errno));
			goto out;
		}
		if (prc == 0) {
			ring_err(e, "%s: no call for %.1f s with %u buffers out",
				 vring_drv_used_pending(&d) ? "lost wakeup" : "device stalled",
				 (double)RING_STALL_NS / 1e9, inflight);
			goto out;
		}
		if (prc > 0)
			(void)eventfd_read(e->call_fd, &val);
		if (!all)
			vring_drv_cb_disable(&d);
	}
	if (!stopping || inflight) {
		ring_err(e, "guest iteration bound reached");
		goto out;
	}
	now = bench_now_ns();
	out->mpps = (double)done / ((double)(now - t0) / 1e9) / 1e6;
	out->ns_per_pkt = (double)(now - t0) / (double)done;
	out->kicks_per_pkt = (double)kicks / (double)done;
	rc = 0;
out:
	vring_drv_fini(&d);
	return rc;
}

/* The memcpy baseline: the same buffers, copied out by this process. */
static void ring_memcpy(struct ring_env *e, struct ring_sample *out)
{
	uint8_t *local = malloc(e->size);
	uint64_t t0 = bench_now_ns(), t_end = t0 + (uint64_t)(e->o->seconds * 1e9), n = 0, now;

	if (!local) {
		ring_err(e, "out of memory");
		return;
	}
	do {
		for (unsigned k = 0; k < 64; k++, n++) {
			memcpy(local, e->mem + e->data_off + (n % e->o->queue) * e->size, e->size);
			ring_consume(local);
		}
		now = bench_now_ns();
	} while (now < t_end && n < (1ull << 40));
	out->mpps = (double)n / ((double)(now - t0) / 1e9) / 1e6;
	out->ns_per_pkt = (double)(now - t0) / (double)n;
	out->kicks_per_pkt = out->irqs_per_pkt = 0;
	free(local);
}

/* One run of one case. Returns 0 with *out, or -1 with a message. */
static int ring_run_one(const struct ring_opts *o, uint32_t size, enum ring_mode mode,
			struct ring_sample *out, char *err, size_t errlen)
{
	struct ring_env e = { .o = o, .size = size, .mode = mode, .memfd = -1,
			      .kick_fd = -1, .call_fd = -1, .stop_fd = -1, .ready = { -1, -1 } };
	pid_t pid = -1;
	int rc = -1, status = 0;

	vring_layout(o->queue, RING_GPA_BASE, &e.l);
	e.data_off = (e.l.total + 4095) & ~(size_t)4095;
	e.len = e.data_off + (size_t)o->queue * size;
	e.len = (e.len + 4095) & ~(size_t)4095;

	e.memfd = memfd_create("vnic-bench-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (e.memfd < 0 || ftruncate(e.memfd, (off_t)e.len) < 0 ||
	    fcntl(e.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		ring_err(&e, "guest memfd: %s", strerror(errno));
		goto out;
	}
	e.mem = mmap(NULL, e.len, PROT_READ | PROT_WRITE, MAP_SHARED, e.memfd, 0);
	e.sh = mmap(NULL, sizeof(*e.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (e.mem == MAP_FAILED || e.sh == MAP_FAILED) {
		ring_err(&e, "mmap: %s", strerror(errno));
		goto out;
	}
	memset(e.mem + e.data_off, 0x5a, e.len - e.data_off); /* touch: no page faults timed */

	if (mode == RING_MEMCPY) {
		ring_memcpy(&e, out);
		rc = e.err[0] ? -1 : 0;
		goto out;
	}

	e.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	e.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	e.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e.kick_fd < 0 || e.call_fd < 0 || e.stop_fd < 0 || pipe2(e.ready, O_CLOEXEC) < 0) {
		ring_err(&e, "eventfd/pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		ring_err(&e, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* The device: only its own mapping of guest memory. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		munmap(e.mem, e.len);
		e.mem = NULL;
		_exit(ring_device(&e));
	}
	close(e.ready[1]);
	e.ready[1] = -1;

	rc = ring_guest(&e, out);

	(void)eventfd_write(e.stop_fd, 1);
	for (int i = 0; i < 50; i++) { /* 5 s, then kill */
		if (waitpid(pid, &status, WNOHANG) == pid) {
			pid = -1;
			break;
		}
		usleep(100 * 1000);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		ring_err(&e, "device did not stop");
		rc = -1;
	} else if (e.sh->failed) {
		ring_err(&e, "device: %s", e.sh->msg);
		rc = -1;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		ring_err(&e, "device exit status %#x", status);
		rc = -1;
	}
	if (rc == 0)
		out->irqs_per_pkt = (double)e.sh->calls / (double)e.sh->popped;
out:
	if (rc < 0)
		snprintf(err, errlen, "%s", e.err[0] ? e.err : "failed");
	if (e.sh && e.sh != MAP_FAILED)
		munmap(e.sh, sizeof(*e.sh));
	if (e.mem && e.mem != MAP_FAILED)
		munmap(e.mem, e.len);
	for (int i = 0; i < 2; i++)
		if (e.ready[i] >= 0)
			close(e.ready[i]);
	if (e.kick_fd >= 0)
		close(e.kick_fd);
	if (e.call_fd >= 0)
		close(e.call_fd);
	if (e.stop_fd >= 0)
		close(e.stop_fd);
	if (e.memfd >= 0)
		close(e.memfd);
	return rc;
}

static void ring_print_row(uint32_t size, enum ring_mode mode, struct ring_sample *s,
			   unsigned runs)
{
	double v[1000], mn[4], md[4], mx[4];

	for (unsigned k = 0; k < 4; k++) {
		for (unsigned r = 0; r < runs; r++)
			v[r] = k == 0 ? s[r].mpps : k == 1 ? s[r].ns_per_pkt :
			       k == 2 ? s[r].kicks_per_pkt : s[r].irqs_per_pkt;
		bench_stats(v, runs, &mn[k], &md[k], &mx[k]);
	}
	printf("%6" PRIu32 "  %-10s  %7.3f %7.3f %7.3f  %8.1f %8.1f %8.1f  %9.4f  %9.4f\n",
	       size, ring_mode_name[mode], mn[0], md[0], mx[0], mn[1], md[1], mx[1], md[2],
	       md[3]);
}

int bench_ring_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "queue", required_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ring_opts o = { .runs = 5, .seconds = 0.3, .queue = 256, .nsizes = 3,
			       .sizes = { 64, 1500, 65536 } };
	struct ring_sample *samples;
	unsigned long ul;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (bench_parse_ulong(optarg, 1, 1000, &ul) < 0)
				goto bad;
			o.runs = (unsigned)ul;
			break;
		case 's':
			if (bench_parse_double(optarg, 0.01, 60, &o.seconds) < 0)
				goto bad;
			break;
		case 'z':
			if (bench_parse_list(optarg, 1, RING_MAX_BUF, o.sizes, RING_MAX_SIZES,
					     &o.nsizes) < 0)
				goto bad;
			break;
		case 'q':
			if (bench_parse_ulong(optarg, 1, VRING_MAX_SIZE, &ul) < 0 || (ul & (ul - 1)))
				goto bad;
			o.queue = (unsigned)ul;
			break;
		case 'h':
			bench_ring_usage(stdout);
			return 0;
		default: /* getopt said what was wrong */
			fprintf(stderr, "try vnic-bench ring --help\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "vnic-bench ring: unexpected argument '%s' (try vnic-bench ring --help)\n",
			argv[optind]);
		return 2;
	}

	samples = calloc((size_t)RING_NMODES * o.runs, sizeof(*samples));
	if (!samples) {
		fprintf(stderr, "vnic-bench ring: out of memory\n");
		return 1;
	}
	printf("vnic-bench ring: queue %u, %u runs x %.2f s per case; guest and device in two "
	       "processes,\n  eventfd kicks and calls; the device copies each buffer out of "
	       "guest memory\n\n", o.queue, o.runs, o.seconds);
	printf("%6s  %-10s  %23s  %26s  %9s  %9s\n", "bytes", "mode", "Mpkt/s min/med/max",
	       "ns/pkt min/med/max", "kicks/pkt", "irqs/pkt");
	for (unsigned z = 0; z < o.nsizes; z++) {
		for (unsigned r = 0; r < o.runs; r++) {
			for (unsigned m = 0; m < RING_NMODES; m++) {
				char err[256];

				if (ring_run_one(&o, o.sizes[z], (enum ring_mode)m,
						 &samples[m * o.runs + r], err, sizeof(err)) < 0) {
					fprintf(stderr, "vnic-bench ring: %u bytes, %s, run %u: %s\n",
						o.sizes[z], ring_mode_name[m], r + 1, err);
					free(samples);
					return 1;
				}
			}
		}
		for (unsigned m = 0; m < RING_NMODES; m++)
			ring_print_row(o.sizes[z], (enum ring_mode)m, &samples[m * o.runs], o.runs);
		fflush(stdout);
	}
	free(samples);
	return 0;

bad:
	fprintf(stderr, "vnic-bench ring: bad value for --%s: '%s' (try vnic-bench ring --help)\n",
		opt == 'r' ? "runs" : opt == 's' ? "seconds" : opt == 'z' ? "sizes" : "queue",
		optarg);
	return 2;
}
