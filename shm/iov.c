/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iov: bounded copies between iovec lists and flat buffers (see iov.h).
 */
#include "config.h"

#include <string.h>

#include "iov.h"

size_t iov_size(const struct iovec *iov, unsigned n)
{
	size_t total = 0;

	for (unsigned i = 0; i < n; i++)
		total += iov[i].iov_len;
	return total;
}

/* Walk to byte offset: returns the entry index and the offset inside it. */
static unsigned iov_seek(const struct iovec *iov, unsigned n, size_t *offset)
{
	unsigned i = 0;

	while (i < n && *offset >= iov[i].iov_len) {
		*offset -= iov[i].iov_len;
		i++;
	}
	return i;
}

size_t iov_to_buf(const struct iovec *iov, unsigned n, size_t offset,
		  void *buf, size_t len)
{
	uint8_t *out = buf;
	size_t done = 0;

	for (unsigned i = iov_seek(iov, n, &offset); i < n && done < len; i++) {
		size_t chunk = iov[i].iov_len - offset;

		if (chunk > len - done)
			chunk = len - done;
		memcpy(out + done, (const uint8_t *)iov[i].iov_base + offset, chunk);
		done += chunk;
		offset = 0;
	}
	return done;
}

size_t iov_from_buf(const struct iovec *iov, unsigned n, size_t offset,
		    const void *buf, size_t len)
{
	const uint8_t *in = buf;
	size_t done = 0;

	for (unsigned i = iov_seek(iov, n, &offset); i < n && done < len; i++) {
		size_t chunk = iov[i].iov_len - offset;

		if (chunk > len - done)
			chunk = len - done;
		memcpy((uint8_t *)iov[i].iov_base + offset, in + done, chunk);
		done += chunk;
		offset = 0;
	}
	return done;
}

unsigned iov_slice(const struct iovec *src, unsigned n, size_t offset, size_t len,
		   struct iovec *dst, unsigned max, size_t *ret_len)
{
	unsigned k = 0;
	size_t done = 0;

	for (unsigned i = iov_seek(src, n, &offset); i < n && k < max && done < len; i++) {
		size_t chunk = src[i].iov_len - offset;

		if (chunk > len - done)
			chunk = len - done;
		if (chunk == 0)
			continue;
		dst[k].iov_base = (uint8_t *)src[i].iov_base + offset;
		dst[k].iov_len = chunk;
		k++;
		done += chunk;
		offset = 0;
	}
	if (ret_len)
		*ret_len = done;
	return k;
}
