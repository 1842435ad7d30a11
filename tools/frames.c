/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frames: build and check vnic-bench's Ethernet/IPv4/UDP test frames.
 * See frames.h for the format.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frames.h"

/* Pattern words: seed + i * golden ratio, so every byte depends on its
 * position and on (nic, dir, seq); a shifted, repeated or foreign byte
 * shows. */
#define FRAMES_GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t frames_mix(uint64_t x)
{
	/* splitmix64 finaliser: a good hash of a counter. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t frames_seed(unsigned nic, unsigned dir, uint64_t seq)
{
	return frames_mix(seq ^ ((uint64_t)nic << 48) ^ ((uint64_t)dir << 56) ^ 0x5eedull);
}

void frames_guest_mac(unsigned nic, uint8_t mac[6])
{
	static const uint8_t base[6] = { 0x52, 0x54, 0x00, 0xbb, 0x00, 0x00 };

	memcpy(mac, base, 6);
	mac[4] = (uint8_t)(nic >> 8);
	mac[5] = (uint8_t)nic;
}

uint32_t frames_guest_ip(unsigned nic)
{
	return (198u << 24) | (18u << 16) | ((nic & 0xffu) << 8) | 2u;
}

uint32_t frames_host_ip(unsigned nic)
{
	return (198u << 24) | (18u << 16) | ((nic & 0xffu) << 8) | 1u;
}

uint32_t frames_size(unsigned nic, unsigned dir, uint64_t seq, uint32_t fixed, uint32_t max)
{
	/* 4084 + 12-byte header fills one 4 KiB RX buffer exactly. */
	const uint32_t edges[] = { FRAMES_MIN, FRAMES_MIN + 1, 1514, 4083, 4084, 4085,
				   4096, 8180, max - 1, max };
	uint64_t r;

	if (fixed)
		return fixed;
	r = frames_mix(frames_seed(nic, dir, seq) + 1);
	if ((r & 7) == 0)
		return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
	return FRAMES_MIN + (uint32_t)((r >> 16) % (max - FRAMES_MIN + 1));
}

static void frames_pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t w = seed;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t le = htole64(w);

		memcpy(p + i, &le, 8);
		w += FRAMES_GOLDEN;
	}
	if (i < n) {
		uint64_t le = htole64(w);

		memcpy(p + i, &le, n - i);
	}
}

/* Returns the offset of the first differing byte, or n. */
static size_t frames_pattern_cmp(const uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t w = seed;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t le = htole64(w), got;

		memcpy(&got, p + i, 8);
		if (got != le)
			break;
		w += FRAMES_GOLDEN;
	}
	/* The first differing word, or the tail: byte by byte. */
	for (; i < n; i++) {
		uint64_t le = htole64(seed + (uint64_t)(i / 8) * FRAMES_GOLDEN);

		if (p[i] != ((const uint8_t *)&le)[i % 8])
			return i;
	}
	return n;
}

static uint16_t frames_ip_csum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (unsigned i = 0; i < FRAMES_IP_HLEN; i += 2)
		sum += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The UDP checksum over the pseudo-header and the datagram (RFC 768):
 * 0 when the one in it is right. */
static uint16_t frames_udp_csum(const uint8_t *ip, const uint8_t *udp, size_t ulen)
{
	uint64_t sum = 17u + ulen;

	for (unsigned i = 12; i < 20; i += 2)
		sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	for (size_t i = 0; i + 1 < ulen; i += 2)
		sum += (uint32_t)(udp[i] << 8 | udp[i + 1]);
	if (ulen & 1)
		sum += (uint32_t)udp[ulen - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

void frames_build_payload(uint8_t *buf, uint32_t len, unsigned nic, unsigned dir, uint64_t seq)
{
	struct frames_tag t = {
		.magic = htole16(FRAMES_MAGIC),
		.nic = (uint8_t)nic,
		.dir = (uint8_t)dir,
		.seq = htole64(seq),
		.len = htole32(len),
	};

	memcpy(buf, &t, sizeof(t));
	frames_pattern(buf + FRAMES_TAG_LEN, len - FRAMES_HDRS - FRAMES_TAG_LEN,
		       frames_seed(nic, dir, seq));
}

/* The 42 header bytes of frame (nic, dir, seq) of len bytes. */
static void frames_build_hdrs(uint8_t *buf, uint32_t len, unsigned nic, unsigned dir,
			      uint64_t seq, const uint8_t host_mac[6])
{
	uint8_t gmac[6];
	uint8_t *ip = buf + FRAMES_ETH_HLEN, *udp = ip + FRAMES_IP_HLEN;
	uint32_t src = dir == FRAMES_G2H ? frames_guest_ip(nic) : frames_host_ip(nic);
	uint32_t dst = dir == FRAMES_G2H ? frames_host_ip(nic) : frames_guest_ip(nic);

	frames_guest_mac(nic, gmac);
	memcpy(buf, dir == FRAMES_G2H ? host_mac : gmac, 6);
	memcpy(buf + 6, dir == FRAMES_G2H ? gmac : host_mac, 6);
	put16(buf + 12, 0x0800);

	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(len - FRAMES_ETH_HLEN));
	put16(ip + 4, (uint16_t)seq);
	put16(ip + 6, 0x4000); /* DF, no fragment */
	ip[8] = 64;
	ip[9] = 17;
	put16(ip + 10, 0);
	put32(ip + 12, src);
	put32(ip + 16, dst);
	put16(ip + 10, frames_ip_csum(ip));

	put16(udp, (uint16_t)(FRAMES_UDP_PORT + nic));
	put16(udp + 2, (uint16_t)(FRAMES_UDP_PORT + nic));
	put16(udp + 4, (uint16_t)(len - FRAMES_ETH_HLEN - FRAMES_IP_HLEN));
	put16(udp + 6, 0); /* no checksum (RFC 768) */
}

void frames_build(uint8_t *buf, uint32_t len, unsigned nic, unsigned dir, uint64_t seq,
		  const uint8_t host_mac[6])
{
	frames_build_hdrs(buf, len, nic, dir, seq, host_mac);
	frames_build_payload(buf + FRAMES_HDRS, len, nic, dir, seq);
}

static int frames_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int frames_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

int frames_check_payload(const uint8_t *p, size_t plen, unsigned nic, unsigned dir,
			 uint32_t fixed, uint32_t max, uint64_t *ret_seq, char *err, size_t errlen)
{
	struct frames_tag t;
	uint32_t want;
	size_t off;
	uint64_t seq;

	if (plen < FRAMES_TAG_LEN)
		return frames_fail(err, errlen, "payload of %zu bytes is shorter than the tag", plen);
	memcpy(&t, p, sizeof(t));
	if (le16toh(t.magic) != FRAMES_MAGIC || t.nic != (uint8_t)nic || t.dir != dir)
		return frames_fail(err, errlen, "tag magic/nic/dir %04x/%u/%u, want %04x/%u/%u",
				   le16toh(t.magic), t.nic, t.dir, FRAMES_MAGIC, nic & 0xffu, dir);
	seq = le64toh(t.seq);
	want = frames_size(nic, dir, seq, fixed, max);
	if (le32toh(t.len) != want || plen != want - FRAMES_HDRS)
		return frames_fail(err, errlen, "seq %llu: frame of %zu bytes (tag says %u), want %u",
				   (unsigned long long)seq, plen + FRAMES_HDRS, le32toh(t.len), want);
	off = frames_pattern_cmp(p + FRAMES_TAG_LEN, plen - FRAMES_TAG_LEN,
				 frames_seed(nic, dir, seq));
	if (off != plen - FRAMES_TAG_LEN)
		return frames_fail(err, errlen, "seq %llu: payload byte %zu of %zu is corrupt",
				   (unsigned long long)seq, off + FRAMES_TAG_LEN, plen);
	*ret_seq = seq;
	return 0;
}

int frames_check(const uint8_t *f, size_t len, unsigned nic, unsigned dir, uint32_t fixed,
		 uint32_t max, const uint8_t host_mac[6], bool exact, uint64_t *ret_seq, char *err,
		 size_t errlen)
{
	uint8_t want[FRAMES_HDRS];
	uint64_t seq;
	int rc;

	const uint8_t *ip = f + FRAMES_ETH_HLEN, *udp = ip + FRAMES_IP_HLEN;
	uint8_t gmac[6];
	uint32_t src = dir == FRAMES_G2H ? frames_guest_ip(nic) : frames_host_ip(nic);
	uint32_t dst = dir == FRAMES_G2H ? frames_host_ip(nic) : frames_guest_ip(nic);

	if (len < FRAMES_HDRS || get16(f + 12) != 0x0800 || (ip[0] >> 4) != 4 || ip[9] != 17 ||
	    (ip[0] & 15) != 5 || get16(udp + 2) != FRAMES_UDP_PORT + nic)
		return -ENOMSG;
	frames_guest_mac(nic, gmac);
	if (memcmp(f, dir == FRAMES_G2H ? host_mac : gmac, 6) ||
	    (exact && memcmp(f + 6, dir == FRAMES_G2H ? gmac : host_mac, 6)))
		return frames_fail(err, errlen, "wrong Ethernet addresses");
	if (frames_ip_csum(ip) != 0)
		return frames_fail(err, errlen, "IPv4 header checksum is wrong");
	if (get16(ip + 2) != len - FRAMES_ETH_HLEN)
		return frames_fail(err, errlen, "IPv4 total length %u in a frame of %zu bytes",
				   get16(ip + 2), len);
	if (get16(ip + 6) & 0x3fff)
		return frames_fail(err, errlen, "IPv4 fragment (flags/offset 0x%04x)", get16(ip + 6));
	if (get32(ip + 12) != src || get32(ip + 16) != dst)
		return frames_fail(err, errlen, "IPv4 addresses %08x -> %08x, want %08x -> %08x",
				   get32(ip + 12), get32(ip + 16), src, dst);
	if (get16(udp) != FRAMES_UDP_PORT + nic ||
	    get16(udp + 4) != len - FRAMES_ETH_HLEN - FRAMES_IP_HLEN)
		return frames_fail(err, errlen, "UDP source port %u or length %u wrong", get16(udp),
				   get16(udp + 4));
	/* A host kernel's datagram: its checksum, when it has one, must be
	 * right (an AF_PACKET worker finishes partial ones itself). */
	if (!exact && get16(udp + 6) != 0 &&
	    frames_udp_csum(ip, udp, len - FRAMES_ETH_HLEN - FRAMES_IP_HLEN) != 0)
		return frames_fail(err, errlen, "UDP checksum is wrong");
	rc = frames_check_payload(udp + FRAMES_UDP_HLEN, len - FRAMES_HDRS, nic, dir, fixed, max,
				  &seq, err, errlen);
	if (rc < 0)
		return rc;
	/* Built by vnic-bench on both ends: every header byte is known (the
	 * IP id, the flags, the zero UDP checksum ...). */
	if (exact) {
		frames_build_hdrs(want, (uint32_t)len, nic, dir, seq, host_mac);
		for (unsigned i = 0; i < FRAMES_HDRS; i++)
			if (f[i] != want[i])
				return frames_fail(err, errlen, "seq %llu: header byte %u is 0x%02x, want 0x%02x",
						   (unsigned long long)seq, i, f[i], want[i]);
	}
	*ret_seq = seq;
	return 0;
}
