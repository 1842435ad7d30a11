/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdpass.h"

void fdpass_close_all(int *fds, unsigned n)
{
	int saved = errno;

	for (unsigned i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	errno = saved;
}

int fdpass_cmsg_build(struct msghdr *mh, union fdpass_cbuf *cbuf,
		      const int *fds, unsigned nfds)
{
	struct cmsghdr *c;

	if (nfds > FDPASS_MAX_FDS)
		return -EINVAL;
	for (unsigned i = 0; i < nfds; i++)
		if (fds[i] < 0)
			return -EBADF;
	if (nfds == 0) {
		mh->msg_control = NULL;
		mh->msg_controllen = 0;
		return 0;
	}
	memset(cbuf, 0, sizeof(*cbuf));
	mh->msg_control = cbuf->buf;
	mh->msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	return 0;
}

/* Close the fds of an SCM_RIGHTS control message we are not keeping. */
static void cmsg_close_rights(const struct cmsghdr *c)
{
	size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	const unsigned char *p = CMSG_DATA(c);

	for (size_t i = 0; i < n; i++) {
		int fd;

		memcpy(&fd, p + i * sizeof(int), sizeof(int));
		if (fd >= 0)
			close(fd);
	}
}

int fdpass_cmsg_parse(struct msghdr *mh, int *fds, unsigned max,
		      unsigned *ret_nfds)
{
	unsigned n = 0;
	int r = 0;

	/*
	 * Walk everything even after an error: every SCM_RIGHTS fd the kernel
	 * installed must be closed or kept, whatever else the message holds.
	 */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t cnt;
		const unsigned char *p;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			/* SCM_CREDENTIALS & co.: hold no fds, but nothing we
			 * asked for either. */
			if (!r)
				r = -EBADMSG;
			continue;
		}
		if (c->cmsg_len < CMSG_LEN(0))
			continue;
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		p = CMSG_DATA(c);
		for (size_t i = 0; i < cnt; i++) {
			int fd;

			memcpy(&fd, p + i * sizeof(int), sizeof(int));
			if (fd < 0)
				continue;
			if (n < max) {
				fds[n++] = fd;
			} else {
				close(fd);
				if (!r || r == -EBADMSG)
					r = -ENOBUFS;
			}
		}
	}
	if (r < 0) {
		fdpass_close_all(fds, n);
		return r;
	}
	*ret_nfds = n;
	return 0;
}

int fdpass_send(int sock, const void *buf, size_t len, const int *fds,
		unsigned nfds)
{
	union fdpass_cbuf cbuf;
	/* sendmsg() does not write through msg_iov; the cast only satisfies
	 * struct iovec's non-const member. */
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;
	int r;

	r = fdpass_cmsg_build(&mh, &cbuf, fds, nfds);
	if (r < 0)
		return r;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

void fdpass_drain(int sock, unsigned max)
{
	uint8_t buf[64];

	for (unsigned i = 0; i < max; i++) {
		union fdpass_cbuf cbuf;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
		ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		/* A zero-byte message may carry fds too (fuzz_vmm_proto found
		 * them left open): close them before n == 0 ends the drain. */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len >= CMSG_LEN(0))
				cmsg_close_rights(c);
		if (n == 0 && mh.msg_controllen == 0)
			return; /* EOF (or an empty message without fds) */
	}
}

int fdpass_recv(int sock, void *buf, size_t buflen, int *fds,
		unsigned max_fds, size_t *ret_len, unsigned *ret_nfds)
{
	union fdpass_cbuf cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = buflen };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	unsigned nfds = 0;
	ssize_t n;
	int r;

	if (max_fds > FDPASS_MAX_FDS)
		max_fds = FDPASS_MAX_FDS;
	if (max_fds > 0) {
		mh.msg_control = cbuf.buf;
		/* Room for max_fds; CMSG_SPACE may round up to one more, which
		 * fdpass_cmsg_parse() counts and refuses. */
		mh.msg_controllen = CMSG_SPACE(max_fds * sizeof(int));
	}
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		/* Close what did arrive; the kernel already dropped the fds
		 * that did not fit (scm_detach_fds), or could not install
		 * them (our fd table is full). */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len >= CMSG_LEN(0)) {
				nfds += (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				cmsg_close_rights(c);
			}
		if (mh.msg_flags & MSG_TRUNC)
			return -EMSGSIZE;
		/* The bytes are whole: the caller may still read the message
		 * (to answer it) although its fds are gone. */
		*ret_len = (size_t)n;
		*ret_nfds = nfds;
		return -ENOBUFS;
	}
	r = fdpass_cmsg_parse(&mh, fds, max_fds, &nfds);
	if (r < 0)
		return r;
	if (n == 0) {
		/* EOF, or a zero-byte message: indistinguishable on
		 * SOCK_SEQPACKET, so both end the channel. */
		fdpass_close_all(fds, nfds);
		return -EPIPE;
	}
	*ret_len = (size_t)n;
	*ret_nfds = nfds;
	return 0;
}
