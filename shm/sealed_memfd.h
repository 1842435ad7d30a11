/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sealed_memfd: shared memory that no process can resize under another's
 * mapping. The supervisor's stats page and inflight region and
 * vnic-bench's guest RAM are made this one way.
 */
#ifndef VNIC_SEALED_MEMFD_H
#define VNIC_SEALED_MEMFD_H

#include <stddef.h>

/*
 * sealed_memfd_map - a memfd of @len bytes (close-on-exec), sealed with
 * F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL, mapped shared read-write.
 * @name: the memfd's name (/proc/<pid>/fd). @what: what it is for, the
 * start of the message in @err ("stats page: mmap: ...").
 * Returns: the fd and *ret_p (munmap it with @len), or a negative errno
 * with @err filled; on failure nothing stays open.
 */
int sealed_memfd_map(const char *name, size_t len, void **ret_p, const char *what,
		     char *err, size_t errlen);

#endif
