/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz: helpers of the fuzz targets; see fuzz.h. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"

size_t fuzz_take(struct fuzz_in *in, void *dst, size_t len)
{
	size_t k = len < in->n ? len : in->n;

	if (k)
		memcpy(dst, in->p, k);
	if (k < len) {
		memset((uint8_t *)dst + k, 0, len - k);
		in->end = true;
	}
	in->p += k;
	in->n -= k;
	return k;
}

uint8_t fuzz_u8(struct fuzz_in *in)
{
	uint8_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

uint16_t fuzz_u16(struct fuzz_in *in)
{
	uint16_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint32_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

uint64_t fuzz_u64(struct fuzz_in *in)
{
	uint64_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

const uint8_t *fuzz_rest(struct fuzz_in *in, size_t *ret_len)
{
	const uint8_t *p = in->p;

	*ret_len = in->n;
	in->p += in->n;
	in->n = 0;
	return p;
}

static void drop_line(enum log_level level, const char *text, void *arg)
{
}

/* VNIC_FUZZ_LOG=1: the product's log lines on stderr, to see what an
 * input (a seed, a finding) makes the code under test say. */
static void print_line(enum log_level level, const char *text, void *arg)
{
	(void)level;
	(void)arg;
	fprintf(stderr, "log: %s\n", text);
}

void fuzz_setup(void)
{
	const char *v = getenv("VNIC_FUZZ_LOG");

	log_set_handler(v && *v == '1' ? print_line : drop_line, NULL);
	signal(SIGPIPE, SIG_IGN);
}

void fuzz_skip(const char *fmt, ...)
{
	va_list ap;

	fputs("fuzz: skip: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(77);
}

int fuzz_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		abort();
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

void fuzz_fd_check(int before, const char *what)
{
	int now = fuzz_fd_count();

	if (now != before) {
		fprintf(stderr, "fuzz: %s: %d fds before the input, %d after: an fd leaked\n",
			what, before, now);
		abort();
	}
}

int fuzz_memfd(const void *data, size_t len, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) < 0 || (len && pwrite(fd, data, len, 0) != (ssize_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}
