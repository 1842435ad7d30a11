/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sealed_memfd: create, size, seal and map a memfd (see sealed_memfd.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sealed_memfd.h"

int sealed_memfd_map(const char *name, size_t len, void **ret_p, const char *what,
		     char *err, size_t errlen)
{
	void *p;
	int fd, rc;

	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: memfd_create: %s", what, strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: size/seal: %s", what, strerror(errno));
		goto out_close_fd;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "%s: mmap: %s", what, strerror(errno));
		goto out_close_fd;
	}
	*ret_p = p;
	return fd;

out_close_fd:
	close(fd);
	return rc;
}
