/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static void tu_die(const char *what)
{
	fprintf(stderr, "testutil: %s: %s\n", what, strerror(errno));
	abort();
}

int tu_memfd(size_t size, bool seal)
{
	int fd = memfd_create("vnic-test-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		tu_die("memfd_create");
	if (ftruncate(fd, (off_t)size) < 0)
		tu_die("ftruncate");
	if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		tu_die("F_ADD_SEALS");
	return fd;
}

int tu_memfd_map(size_t size, uint8_t **ret_p)
{
	int fd = tu_memfd(size, true);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		tu_die("mmap memfd");
	*ret_p = p;
	return fd;
}

void tu_guest_new(struct tu_guest *g, uint64_t gpa_base, size_t size)
{
	size_t ends[1] = { size };

	memset(g, 0, sizeof(*g));
	g->fd = tu_memfd(size, true);
	g->gpa_base = gpa_base;
	g->size = size;
	g->drv = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
	if (g->drv == MAP_FAILED)
		tu_die("mmap driver view");
	tu_guest_split(g, ends, 1);
}

void tu_guest_split(struct tu_guest *g, const size_t *ends, unsigned n)
{
	struct memtable_region_desc *d = calloc(n, sizeof(*d));
	char err[256];
	size_t start = 0;

	if (!d)
		tu_die("calloc");
	for (unsigned i = 0; i < n; i++) {
		d[i].gpa = g->gpa_base + start;
		d[i].size = ends[i] - start;
		d[i].offset = start;
		d[i].fd = g->fd;
		start = ends[i];
	}
	g->mt = memtable_free(g->mt);
	if (memtable_map(d, n, &g->mt, err, sizeof(err)) < 0) {
		fprintf(stderr, "testutil: memtable_map: %s\n", err);
		abort();
	}
	free(d);
}

void tu_guest_free(struct tu_guest *g)
{
	g->mt = memtable_free(g->mt);
	if (g->drv)
		munmap(g->drv, g->size);
	if (g->fd >= 0)
		close(g->fd);
	memset(g, 0, sizeof(*g));
	g->fd = -1;
}

void *tu_drv_ptr(const struct tu_guest *g, uint64_t gpa)
{
	if (gpa < g->gpa_base || gpa - g->gpa_base >= g->size)
		return NULL;
	return g->drv + (gpa - g->gpa_base);
}

int tu_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		tu_die("opendir /proc/self/fd");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* not the directory stream's own fd */
}

void tu_seqpair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
		tu_die("socketpair");
}

unsigned long tu_seed(const char *test_name, unsigned long fixed_default)
{
	const char *s = getenv("VNIC_SEED");
	unsigned long seed = s ? strtoul(s, NULL, 0) : fixed_default;

	fprintf(stderr, "%s: seed %lu (replay with VNIC_SEED=%lu)\n", test_name, seed, seed);
	return seed;
}

unsigned long tu_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long ut = 0, st = 0;
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f))
		abort();
	fclose(f);
	/* After "(comm) ": state, then utime and stime are fields 14, 15. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		abort();
	return ut + st;
}

static char tu_ns_prefix[32] = "vnictu";

void tu_netns_init(const char *stem)
{
	snprintf(tu_ns_prefix, sizeof(tu_ns_prefix), "%s%d-", stem, (int)getpid());
}

/* ip netns VERB NAME; its exit status (-1 for a name too long). */
static int tu_ip_netns(const char *verb, const char *name)
{
	char cmd[512];

	if ((size_t)snprintf(cmd, sizeof(cmd), "ip netns %s %s 2>/dev/null", verb, name) >=
	    sizeof(cmd))
		return -1;
	return system(cmd);
}

void tu_netns_add(char *name, size_t len)
{
	if ((size_t)snprintf(name, len, "%s%d", tu_ns_prefix, (int)getpid()) >= len) {
		errno = ENAMETOOLONG;
		tu_die("netns name");
	}
	if (tu_ip_netns("add", name) != 0) {
		errno = EIO;
		tu_die("ip netns add");
	}
}

int tu_netns_del(const char *name)
{
	if (tu_ip_netns("del", name) != 0) {
		fprintf(stderr, "testutil: could not remove netns %s\n", name);
		return -1;
	}
	return 0;
}

int tu_netns_sweep(void)
{
	DIR *d = opendir("/run/netns");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, tu_ns_prefix, strlen(tu_ns_prefix)) != 0)
			continue;
		fprintf(stderr, "testutil: removing netns %s, left by a failed test\n", e->d_name);
		if (tu_netns_del(e->d_name) == 0)
			n++;
	}
	closedir(d);
	return n;
}

uint64_t tu_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool tu_soak_more(unsigned i, unsigned min, unsigned max, uint64_t t0_ms, uint64_t budget_ms)
{
	if (i >= max)
		return false;
	return i < min || tu_mono_ms() - t0_ms < budget_ms;
}

void tu_soak_report(const char *what, unsigned ran, unsigned max, uint64_t t0_ms)
{
	fprintf(stderr, "%s: %u of %u iterations in %llu ms\n", what, ran, max,
		(unsigned long long)(tu_mono_ms() - t0_ms));
}

int tu_netns_enter(const char *name)
{
	char path[128];
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), target;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	target = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) < 0) {
		if (self >= 0)
			close(self);
		self = -1;
	}
	if (target >= 0)
		close(target);
	return self;
}

int tu_netns_leave(int self)
{
	int rc = setns(self, CLONE_NEWNET);

	close(self);
	return rc;
}
