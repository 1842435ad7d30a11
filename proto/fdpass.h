/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdpass: one message with file descriptors over an AF_UNIX socket.
 *
 * Built for SOCK_SEQPACKET (and SOCK_DGRAM): one call sends or receives
 * exactly one message, and the fds in its SCM_RIGHTS ancillary data belong
 * to that message only. There is no partial message and no reassembly.
 *
 * Ownership rule on receive (TESTPLAN C2, STYLE habit 3): every fd the
 * kernel installed for a message is either handed to the caller (on
 * success) or closed before fdpass_recv() returns (on any error). Received
 * fds carry FD_CLOEXEC (MSG_CMSG_CLOEXEC), so none leaks into a child that
 * execs before the caller adopts it.
 *
 * Library code: no logging. Functions return 0 or a negative errno.
 */
#ifndef VNIC_FDPASS_H
#define VNIC_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>

/* Most fds in one message: the kernel's SCM_MAX_FD (include/net/scm.h);
 * sendmsg() fails with EINVAL above it. */
#define FDPASS_MAX_FDS 253u

/* Control buffer large enough for FDPASS_MAX_FDS fds, aligned for
 * struct cmsghdr. */
union fdpass_cbuf {
	struct cmsghdr align;
	char buf[CMSG_SPACE(FDPASS_MAX_FDS * sizeof(int))];
};

/*
 * fdpass_cmsg_build - attach fds as one SCM_RIGHTS control message.
 * @mh: the message; its msg_control/msg_controllen are set (both cleared
 *      when nfds is 0).
 * @cbuf: storage for the control data; must outlive the sendmsg() call.
 * @fds: nfds open descriptors (not consumed: the kernel duplicates them).
 * Returns: 0, -EINVAL if nfds > FDPASS_MAX_FDS, -EBADF if an fd is < 0.
 */
int fdpass_cmsg_build(struct msghdr *mh, union fdpass_cbuf *cbuf,
		      const int *fds, unsigned nfds);

/*
 * fdpass_cmsg_parse - collect the fds of a received message.
 * Walks every control message of @mh. Descriptors from SCM_RIGHTS go to
 * @fds (capacity @max). Any other control message, or more than @max fds,
 * is an error; then every collected fd is closed.
 * Returns: 0 and *ret_nfds, or -EBADMSG (unexpected control message) or
 * -ENOBUFS (more than max fds); on error no fd stays open, fds[] holds only
 * -1 where it was written, and *ret_nfds is untouched.
 */
int fdpass_cmsg_parse(struct msghdr *mh, int *fds, unsigned max,
		      unsigned *ret_nfds);

/*
 * fdpass_send - send one message of len bytes with nfds fds.
 * Uses MSG_NOSIGNAL (a closed peer gives -EPIPE, not SIGPIPE) and retries
 * EINTR. On a non-blocking socket a full queue gives -EAGAIN and nothing is
 * sent (seqpacket messages are atomic).
 * Returns: 0, or a negative errno (-EINVAL/-EBADF from the fd checks above,
 * -EIO on a short write, which only a stream socket could produce).
 */
int fdpass_send(int sock, const void *buf, size_t len, const int *fds,
		unsigned nfds);

/*
 * fdpass_recv - receive one message into buf with at most max_fds fds.
 * @max_fds: fds the caller accepts (0..FDPASS_MAX_FDS); the control buffer
 *      is sized for it, so a sender passing more makes the kernel truncate
 *      the control data (MSG_CTRUNC).
 * A message longer than buflen is truncated by the kernel (MSG_TRUNC): size
 * buflen one byte above the largest message you accept to detect it.
 * Returns: 0 with *ret_len bytes in buf and *ret_nfds fds in fds; or
 *   -EAGAIN   nothing to read on a non-blocking socket;
 *   -EPIPE    end of file (the peer closed; a zero-byte message reads the
 *             same and is treated the same);
 *   -EMSGSIZE the message was longer than buflen (MSG_TRUNC);
 *   -ENOBUFS  more fds than max_fds (MSG_CTRUNC, or counted);
 *   -EBADMSG  a control message other than SCM_RIGHTS;
 *   another negative errno from recvmsg().
 * On every error, all fds received with the message are closed, fds[] holds
 * only -1 where it was written, and *ret_len, *ret_nfds are untouched;
 * except -ENOBUFS from MSG_CTRUNC: then buf holds the whole message,
 * *ret_len its length and *ret_nfds how many fds did arrive (all closed),
 * so that the caller can still answer it.
 */
int fdpass_recv(int sock, void *buf, size_t buflen, int *fds,
		unsigned max_fds, size_t *ret_len, unsigned *ret_nfds);

/*
 * fdpass_drain - read and discard up to max queued messages without
 * blocking, closing every fd they carry. Before closing a socket that
 * was sent to: an AF_UNIX socket closed with unread data resets its
 * peer, which then loses the reply queued for it.
 */
void fdpass_drain(int sock, unsigned max);

/* fdpass_close_all - close every fd >= 0 in fds[0..n-1] and set it to -1.
 * Preserves errno. */
void fdpass_close_all(int *fds, unsigned n);

#endif
