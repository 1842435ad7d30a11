/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * guest: a simulated VMM + virtio-net guest driver for vnic-bench.
 * See guest.h.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest.h"
#include "libvnic.h"
#include "sealed_memfd.h"

/* Offsets inside guest memory. Rings first, each in its own 16 KiB, then
 * the receive buffers, then the TX slots. */
#define GUEST_RING_SPAN 16384u
#define GUEST_RXBUF_OFF (2u * GUEST_RING_SPAN)

static int guest_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int guest_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

uint8_t *guest_gpa(struct guest *g, uint64_t gpa)
{
	return g->mem + (gpa - g->gpa_base);
}

int guest_new(unsigned nic, struct guest **ret_g, char *err, size_t errlen)
{
	return guest_new_pair(nic, 0, ret_g, err, errlen);
}

int guest_new_pair(unsigned nic, unsigned pair, struct guest **ret_g, char *err, size_t errlen)
{
	struct guest *g;
	size_t size;
	char name[32];
	void *mem;
	int rc;

	g = calloc(1, sizeof(*g));
	if (!g)
		return guest_fail(err, errlen, -ENOMEM, "out of memory");
	g->nic = nic;
	g->memfd = g->kick[0] = g->kick[1] = g->call[0] = g->call[1] = -1;
	g->mem = MAP_FAILED;
	g->ntxslots = GUEST_QUEUE_SIZE;
	size = GUEST_RXBUF_OFF + (size_t)GUEST_QUEUE_SIZE * GUEST_RXBUF_SIZE +
	       (size_t)g->ntxslots * GUEST_TX_SLOT_SIZE;
	size = (size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	g->memsize = size;
	g->pair = pair;
	g->gpa_base = GUEST_GPA_BASE + (uint64_t)pair * size;
	g->rxbuf_gpa = g->gpa_base + GUEST_RXBUF_OFF;
	g->txslot_gpa = g->rxbuf_gpa + (uint64_t)GUEST_QUEUE_SIZE * GUEST_RXBUF_SIZE;

	g->txfree = calloc(g->ntxslots, sizeof(*g->txfree));
	g->rxframe = malloc(GUEST_NET_HDR_LEN + GUEST_MAX_FRAME);
	if (!g->txfree || !g->rxframe) {
		rc = guest_fail(err, errlen, -ENOMEM, "out of memory");
		goto free_g;
	}
	for (unsigned i = 0; i < g->ntxslots; i++)
		g->txfree[i] = g->ntxslots - 1 - i;
	g->ntxfree = g->ntxslots;

	/* Guest RAM as a VMM makes it: a memfd whose size the worker can
	 * trust because it can neither shrink nor grow. */
	snprintf(name, sizeof(name), "vnic-bench-guest%u.%u", nic, pair);
	rc = sealed_memfd_map(name, size, &mem, "guest memory", err, errlen);
	if (rc < 0)
		goto free_g;
	g->memfd = rc;
	g->mem = mem;

	for (unsigned q = 0; q < 2; q++) {
		struct vring_layout *l = &g->lay[q];

		vring_layout(GUEST_QUEUE_SIZE, g->gpa_base + q * GUEST_RING_SPAN, l);
		rc = vring_drv_init(&g->q[q], GUEST_QUEUE_SIZE, guest_gpa(g, l->desc),
				    guest_gpa(g, l->avail), guest_gpa(g, l->used), true);
		if (rc < 0) {
			guest_fail(err, errlen, rc, "vring_drv_init: %s", strerror(-rc));
			goto free_g;
		}
		g->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		g->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (g->kick[q] < 0 || g->call[q] < 0) {
			rc = guest_fail(err, errlen, -errno, "eventfd: %s", strerror(errno));
			goto free_g;
		}
	}
	/* TX interrupts off until the ring fills (Linux virtio-net frees
	 * TX buffers on the next transmit instead). */
	vring_drv_cb_disable(&g->q[GUEST_TX]);
	*ret_g = g;
	return 0;

free_g:
	guest_free(g);
	return rc;
}

struct guest *guest_free(struct guest *g)
{
	if (!g)
		return NULL;
	for (unsigned q = 0; q < 2; q++) {
		if (g->q[q].next_free)
			vring_drv_fini(&g->q[q]);
		if (g->kick[q] >= 0)
			close(g->kick[q]);
		if (g->call[q] >= 0)
			close(g->call[q]);
	}
	if (g->mem != MAP_FAILED)
		munmap(g->mem, g->memsize);
	if (g->memfd >= 0)
		close(g->memfd);
	free(g->txfree);
	free(g->rxframe);
	free(g);
	return NULL;
}

static void guest_kick(struct guest *g, unsigned q)
{
	uint64_t one = 1;

	if (!vring_drv_kick_needed(&g->q[q]))
		return;
	/* An eventfd write of 8 bytes cannot be short; EAGAIN only when the
	 * counter would overflow, which a reader prevents. */
	if (write(g->kick[q], &one, sizeof(one)) == sizeof(one))
		g->kicks_sent[q]++;
}

static int guest_rx_post(struct guest *g, unsigned i)
{
	struct vring_drv_buf b = {
		.gpa = g->rxbuf_gpa + (uint64_t)i * GUEST_RXBUF_SIZE,
		.len = GUEST_RXBUF_SIZE,
		.writable = true,
	};

	return vring_drv_add(&g->q[GUEST_RX], &b, 1, (void *)(uintptr_t)(i + 1));
}

unsigned guest_rx_fill(struct guest *g)
{
	unsigned n = 0;

	/* At start every buffer is free: post them all. */
	for (unsigned i = 0; i < GUEST_QUEUE_SIZE; i++)
		if (guest_rx_post(g, i) >= 0)
			n++;
	vring_drv_publish(&g->q[GUEST_RX]);
	guest_kick(g, GUEST_RX);
	return n;
}

int guest_rx_next(struct guest *g, const uint8_t **ret_frame, size_t *ret_len, char *err,
		  size_t errlen)
{
	struct vring_drv *d = &g->q[GUEST_RX];
	unsigned reposted = 0;
	int rc = 0;

	for (;;) {
		void *cookie;
		uint32_t len;
		unsigned i;
		int r = vring_drv_get_used(d, &cookie, &len);

		if (r < 0) {
			rc = guest_fail(err, errlen, -EIO, "rx0: device returned a bogus used id");
			break;
		}
		if (r == 0)
			break;
		i = (unsigned)((uintptr_t)cookie - 1);
		if (len > GUEST_RXBUF_SIZE) {
			rc = guest_fail(err, errlen, -EIO, "rx0: used length %u > buffer %u", len,
					GUEST_RXBUF_SIZE);
			break;
		}
		if (len == 0) {
			/* Returned empty: what a restarted worker does with the
			 * receive buffers its predecessor had popped
			 * (vring_recover_inflight). A frame being assembled is
			 * torn: dropped, as a Linux guest would. The caller
			 * decides whether an empty buffer is acceptable. */
			g->rx_empty++;
			g->rx_need = 0;
			if (guest_rx_post(g, i) >= 0)
				reposted++;
			continue;
		}
		if (g->rx_need == 0) {
			uint16_t nb;
			const uint8_t *b = guest_gpa(g, g->rxbuf_gpa + (uint64_t)i * GUEST_RXBUF_SIZE);

			if (len < GUEST_NET_HDR_LEN) {
				rc = guest_fail(err, errlen, -EIO,
						"rx0: first buffer of a frame has %u bytes", len);
				break;
			}
			memcpy(&nb, b + 10, 2);
			nb = le16toh(nb);
			if (nb == 0 || nb > GUEST_QUEUE_SIZE) {
				rc = guest_fail(err, errlen, -EIO, "rx0: num_buffers %u", nb);
				break;
			}
			g->rx_need = nb;
			g->rx_have = 0;
			g->rx_len = 0;
		}
		if (g->rx_len + len > GUEST_NET_HDR_LEN + GUEST_MAX_FRAME) {
			rc = guest_fail(err, errlen, -EIO, "rx0: frame longer than %u bytes",
					GUEST_MAX_FRAME);
			break;
		}
		memcpy(g->rxframe + g->rx_len,
		       guest_gpa(g, g->rxbuf_gpa + (uint64_t)i * GUEST_RXBUF_SIZE), len);
		g->rx_len += len;
		g->rx_have++;
		/* Copied out: the buffer goes straight back to the device. */
		if (guest_rx_post(g, i) >= 0)
			reposted++;
		if (g->rx_have == g->rx_need) {
			g->rx_need = 0;
			*ret_frame = g->rxframe + GUEST_NET_HDR_LEN;
			*ret_len = g->rx_len - GUEST_NET_HDR_LEN;
			rc = 1;
			break;
		}
	}
	if (reposted) {
		vring_drv_publish(d);
		guest_kick(g, GUEST_RX);
	}
	return rc;
}

bool guest_rx_arm(struct guest *g)
{
	return vring_drv_cb_enable(&g->q[GUEST_RX]);
}

int guest_tx_reclaim(struct guest *g, char *err, size_t errlen)
{
	int n = 0;

	for (;;) {
		void *cookie;
		uint32_t len;
		int r = vring_drv_get_used(&g->q[GUEST_TX], &cookie, &len);

		if (r < 0)
			return guest_fail(err, errlen, -EIO, "tx0: device returned a bogus used id");
		if (r == 0)
			break;
		g->txfree[g->ntxfree++] = (unsigned)((uintptr_t)cookie - 1);
		n++;
	}
	if (n && g->tx_cb_on) {
		vring_drv_cb_disable(&g->q[GUEST_TX]);
		g->tx_cb_on = false;
	}
	return n;
}

uint8_t *guest_tx_slot(struct guest *g, unsigned *ret_slot)
{
	unsigned s;
	uint8_t *p;

	if (g->ntxfree == 0)
		return NULL;
	s = g->txfree[g->ntxfree - 1];
	p = guest_gpa(g, g->txslot_gpa + (uint64_t)s * GUEST_TX_SLOT_SIZE);
	memset(p, 0, GUEST_NET_HDR_LEN); /* no offloads: flags 0, GSO_NONE */
	*ret_slot = s;
	return p + GUEST_NET_HDR_LEN;
}

int guest_tx_add(struct guest *g, unsigned slot, uint32_t len)
{
	struct vring_drv_buf b = {
		.gpa = g->txslot_gpa + (uint64_t)slot * GUEST_TX_SLOT_SIZE,
		.len = GUEST_NET_HDR_LEN + len,
		.writable = false,
	};
	int rc = vring_drv_add(&g->q[GUEST_TX], &b, 1, (void *)(uintptr_t)(slot + 1));

	if (rc < 0)
		return rc;
	g->ntxfree--;
	return 0;
}

void guest_tx_flush(struct guest *g)
{
	vring_drv_publish(&g->q[GUEST_TX]);
	guest_kick(g, GUEST_TX);
}

bool guest_tx_wait(struct guest *g)
{
	g->tx_cb_on = true;
	return vring_drv_cb_enable(&g->q[GUEST_TX]);
}

void guest_read_call(struct guest *g, unsigned q)
{
	uint64_t v;

	if (read(g->call[q], &v, sizeof(v)) == sizeof(v))
		g->irqs_seen[q] += v;
}

void guest_vnic_memory(const struct guest *g, struct vnic_region *reg, struct vnic_queue *q)
{
	*reg = (struct vnic_region){ .gpa = g->gpa_base, .size = g->memsize, .offset = 0,
				     .fd = g->memfd };
	for (unsigned i = 0; i < 2; i++)
		q[i] = (struct vnic_queue){
			.index = 2 * g->pair + i, .size = GUEST_QUEUE_SIZE,
			.desc_gpa = g->lay[i].desc, .avail_gpa = g->lay[i].avail,
			.used_gpa = g->lay[i].used, .avail_idx = 0,
			.kick_fd = g->kick[i], .call_fd = g->call[i],
		};
}
