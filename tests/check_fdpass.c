/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_fdpass: one message with fds over real AF_UNIX SOCK_SEQPACKET
 * socketpairs (TESTPLAN C2: exact counts, CLOEXEC on receipt, MSG_CTRUNC
 * and MSG_TRUNC rejected with every received fd closed).
 *
 * Leaks are measured as the number of entries in /proc/self/fd; identity
 * of a passed fd as (st_dev, st_ino) of a memfd, which is unique per memfd.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass.h"
#include "testutil.h"


static int mkmemfd(void)
{
	int fd = memfd_create("check-fdpass", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return fd;
}

static void mkmemfds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		fds[i] = mkmemfd();
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	ck_assert_int_eq(fstat(a, &sa), 0);
	ck_assert_int_eq(fstat(b, &sb), 0);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool is_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	ck_assert_int_ge(fl, 0);
	return fl & FD_CLOEXEC;
}

START_TEST(c2_fdpass_roundtrip)
{
	int sv[2], sent[3], got[FDPASS_MAX_FDS];
	char buf[64];
	size_t len = 0;
	unsigned n = 0;

	tu_seqpair(sv);
	mkmemfds(sent, 3);
	ck_assert_int_eq(fdpass_send(sv[0], "hello", 5, sent, 3), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(buf, "hello", 5);
	ck_assert_uint_eq(n, 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_ne(got[i], sent[i]);
		ck_assert(same_file(got[i], sent[i])); /* same object, same order */
		ck_assert(is_cloexec(got[i]));
	}
	fdpass_close_all(got, n);
	fdpass_close_all(sent, 3);
}
END_TEST

/* No fds: no control data at all, and an fd-less receiver gets the data. */
START_TEST(c2_fdpass_no_fds)
{
	int sv[2], got[1] = { -1 };
	char buf[8];
	size_t len = 0;
	unsigned n = 99;

	tu_seqpair(sv);
	ck_assert_int_eq(fdpass_send(sv[0], "x", 1, NULL, 0), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, 0, &len, &n), 0);
	ck_assert_uint_eq(len, 1);
	ck_assert_uint_eq(n, 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* SCM_MAX_FD fds pass; one more is refused by fdpass_send before sendmsg. */
START_TEST(c2_fdpass_scm_max_fd)
{
	int sv[2], *sent, *got;
	char buf[8];
	size_t len = 0;
	unsigned n = 0;

	sent = calloc(FDPASS_MAX_FDS + 1, sizeof(int));
	got = calloc(FDPASS_MAX_FDS, sizeof(int));
	ck_assert(sent && got);
	tu_seqpair(sv);
	mkmemfds(sent, FDPASS_MAX_FDS + 1);
	ck_assert_int_eq(fdpass_send(sv[0], "m", 1, sent, FDPASS_MAX_FDS), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), 0);
	ck_assert_uint_eq(n, FDPASS_MAX_FDS);
	ck_assert(same_file(got[0], sent[0]));
	ck_assert(same_file(got[FDPASS_MAX_FDS - 1], sent[FDPASS_MAX_FDS - 1]));
	fdpass_close_all(got, n);

	ck_assert_int_eq(fdpass_send(sv[0], "m", 1, sent, FDPASS_MAX_FDS + 1), -EINVAL);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EAGAIN);
	fdpass_close_all(sent, FDPASS_MAX_FDS + 1);
	free(sent);
	free(got);
}
END_TEST

/* More fds than the receiver's control buffer: MSG_CTRUNC; the fds that
 * did arrive are closed, the rest the kernel dropped; the socket goes on. */
START_TEST(c2_fdpass_ctrunc)
{
	int sv[2], sent[8], got[FDPASS_MAX_FDS];
	char buf[8];
	size_t len = 0;
	unsigned n = 0;
	int before;

	tu_seqpair(sv);
	mkmemfds(sent, 8);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "a", 1, sent, 8), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, 4, &len, &n), -ENOBUFS);
	ck_assert_int_eq(tu_fd_count(), before);

	ck_assert_int_eq(fdpass_send(sv[0], "b", 1, sent, 4), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, 4, &len, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(buf[0], 'b');
	fdpass_close_all(got, n);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(sent, 8);
}
END_TEST

/* A receiver that accepts no fds has no control buffer: any fd is CTRUNC. */
START_TEST(c2_fdpass_ctrunc_zero)
{
	int sv[2], sent[1], got[1];
	char buf[8];
	size_t len = 0;
	unsigned n = 0;
	int before;

	tu_seqpair(sv);
	mkmemfds(sent, 1);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "a", 1, sent, 1), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, 0, &len, &n), -ENOBUFS);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(sent, 1);
}
END_TEST

/* CMSG_SPACE(3 ints) rounds up to room for 4, so the kernel installs 4
 * without MSG_CTRUNC: the count check must still refuse the 4th. */
START_TEST(c2_fdpass_count_above_max)
{
	int sv[2], sent[4], got[FDPASS_MAX_FDS];
	char buf[8];
	size_t len = 0;
	unsigned n = 0;
	int before;

	tu_seqpair(sv);
	mkmemfds(sent, 4);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "a", 1, sent, 4), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, 3, &len, &n), -ENOBUFS);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(sent, 4);
}
END_TEST

/* MSG_TRUNC: the message is longer than the buffer; its fds are closed. */
START_TEST(c2_fdpass_msg_trunc)
{
	int sv[2], sent[2], got[FDPASS_MAX_FDS];
	char big[100], buf[10];
	size_t len = 0;
	unsigned n = 0;
	int before;

	memset(big, 'z', sizeof(big));
	tu_seqpair(sv);
	mkmemfds(sent, 2);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], big, sizeof(big), sent, 2), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EMSGSIZE);
	ck_assert_int_eq(tu_fd_count(), before);
	ck_assert_uint_eq(len, 0); /* out-params untouched */
	ck_assert_uint_eq(n, 0);
	fdpass_close_all(sent, 2);
}
END_TEST

/* A control message that is not SCM_RIGHTS (credentials, with SO_PASSCRED
 * on the receiver) rejects the message and closes its fds. */
START_TEST(c2_fdpass_foreign_cmsg)
{
	int sv[2], sent[2], got[FDPASS_MAX_FDS], one = 1;
	char buf[8];
	size_t len = 0;
	unsigned n = 0;
	int before;

	tu_seqpair(sv);
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
	mkmemfds(sent, 2);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "c", 1, sent, 2), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EBADMSG);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(sent, 2);
}
END_TEST

/* Two SCM_RIGHTS control messages in one sendmsg: all fds, in order. */
START_TEST(c2_fdpass_two_rights_cmsgs)
{
	int sv[2], sent[3], got[FDPASS_MAX_FDS];
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(2 * sizeof(int))];
	} cb;
	char data = 'r', buf[8];
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cb.buf, .msg_controllen = sizeof(cb.buf) };
	struct cmsghdr *c;
	size_t len = 0;
	unsigned n = 0;

	tu_seqpair(sv);
	mkmemfds(sent, 3);
	memset(&cb, 0, sizeof(cb));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &sent[0], sizeof(int));
	c = CMSG_NXTHDR(&mh, c);
	ck_assert_ptr_nonnull(c);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(c), &sent[1], 2 * sizeof(int));
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), 1);

	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), 0);
	ck_assert_uint_eq(n, 3);
	for (unsigned i = 0; i < 3; i++)
		ck_assert(same_file(got[i], sent[i]));
	fdpass_close_all(got, n);
	fdpass_close_all(sent, 3);
}
END_TEST

/* End of file, and a zero-byte message (which reads the same), are -EPIPE;
 * fds on the zero-byte message are closed. */
START_TEST(c2_fdpass_eof_and_empty)
{
	int sv[2], sent[1], got[FDPASS_MAX_FDS];
	char buf[8];
	size_t len = 0;
	unsigned n = 0;
	int before;

	tu_seqpair(sv);
	mkmemfds(sent, 1);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "", 0, sent, 1), 0);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EPIPE);
	ck_assert_int_eq(tu_fd_count(), before);

	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EAGAIN);
	close(sv[0]);
	ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS,
				     &len, &n), -EPIPE);
	ck_assert_int_eq(fdpass_send(sv[1], "x", 1, NULL, 0), -EPIPE); /* no SIGPIPE */
	close(sv[1]);
	fdpass_close_all(sent, 1);
}
END_TEST

/* fdpass_drain closes the fds of every message it reads, a zero-byte
 * one's too (fuzz_vmm_proto found a zero-byte message's 29 fds left open:
 * a VMM could leak up to 253 of vnicd's fds per connection). An empty
 * message without fds ends the drain like EOF; what is queued after it
 * goes with the socket. */
START_TEST(c2_fdpass_drain_zero_byte_with_fds)
{
	int sv[2], sent[3];
	int before;

	tu_seqpair(sv);
	mkmemfds(sent, 3);
	before = tu_fd_count();
	ck_assert_int_eq(fdpass_send(sv[0], "", 0, sent, 2), 0);
	ck_assert_int_eq(fdpass_send(sv[0], "ab", 2, sent + 2, 1), 0);
	ck_assert_int_eq(fdpass_send(sv[0], "", 0, NULL, 0), 0);
	ck_assert_int_eq(fdpass_send(sv[0], "", 0, sent, 1), 0);
	fdpass_drain(sv[1], 8);
	ck_assert_int_eq(tu_fd_count(), before);
	/* The message after the empty one is still queued, fds and all. */
	{
		char buf[4];
		int got[FDPASS_MAX_FDS];
		size_t len = 0;
		unsigned n = 0;

		ck_assert_int_eq(fdpass_recv(sv[1], buf, sizeof(buf), got, FDPASS_MAX_FDS, &len,
					     &n), -EPIPE); /* zero bytes: its fd closed */
		ck_assert_int_eq(tu_fd_count(), before);
	}
	close(sv[0]);
	close(sv[1]);
	fdpass_close_all(sent, 3);
}
END_TEST

START_TEST(c2_fdpass_bad_args)
{
	int sv[2], bad[2] = { 0, -1 };

	tu_seqpair(sv);
	ck_assert_int_eq(fdpass_send(sv[0], "x", 1, bad, 2), -EBADF);
	ck_assert_int_eq(fdpass_send(-1, "x", 1, NULL, 0), -EBADF);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(c2_fdpass_close_all)
{
	int fds[3];

	mkmemfds(fds, 2);
	fds[2] = -1;
	fdpass_close_all(fds, 3);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(fds[i], -1);
}
END_TEST

static Suite *fdpass_suite(void)
{
	Suite *s = suite_create("fdpass");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, c2_fdpass_roundtrip);
	tcase_add_test(tc, c2_fdpass_no_fds);
	tcase_add_test(tc, c2_fdpass_scm_max_fd);
	tcase_add_test(tc, c2_fdpass_ctrunc);
	tcase_add_test(tc, c2_fdpass_ctrunc_zero);
	tcase_add_test(tc, c2_fdpass_count_above_max);
	tcase_add_test(tc, c2_fdpass_msg_trunc);
	tcase_add_test(tc, c2_fdpass_foreign_cmsg);
	tcase_add_test(tc, c2_fdpass_two_rights_cmsgs);
	tcase_add_test(tc, c2_fdpass_eof_and_empty);
	tcase_add_test(tc, c2_fdpass_drain_zero_byte_with_fds);
	tcase_add_test(tc, c2_fdpass_bad_args);
	tcase_add_test(tc, c2_fdpass_close_all);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fdpass_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
