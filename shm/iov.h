/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iov: bounded copies between iovec arrays and flat buffers.
 *
 * Byte cursors are uint8_t *. Every function is bounded by the iovec
 * lengths and by the caller's len; none of them can overflow a size.
 * Library code: no logging.
 */
#ifndef VNIC_IOV_H
#define VNIC_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* iov_size - total bytes in iov[0..n). */
size_t iov_size(const struct iovec *iov, unsigned n);

/* iov_to_buf - copy up to len bytes starting at byte offset of the iovec
 * list into buf. Returns: bytes copied (less than len at the list's end). */
size_t iov_to_buf(const struct iovec *iov, unsigned n, size_t offset,
		  void *buf, size_t len);

/* iov_from_buf - copy up to len bytes from buf into the iovec list at byte
 * offset. Returns: bytes copied. */
size_t iov_from_buf(const struct iovec *iov, unsigned n, size_t offset,
		    const void *buf, size_t len);

/*
 * iov_slice - describe bytes [offset, offset+len) of src as a new iovec
 * list in dst (no data is copied). Stops at the end of src.
 * Returns: entries written to dst (at most max); *ret_len (if not NULL)
 * gets the bytes described.
 */
unsigned iov_slice(const struct iovec *src, unsigned n, size_t offset, size_t len,
		   struct iovec *dst, unsigned max, size_t *ret_len);

#endif
