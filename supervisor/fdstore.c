/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdstore: vnicd's state in systemd's fd store. See fdstore.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "fdstore.h"
#include "handover_priv.h"
#include "log.h"
#include "supervisor.h"

#define JOURNAL_MAGIC 0x4c4e524a53444656ull /* "VFDSJRNL" little-endian */

/* The journal memfd: one page. */
struct journal {
	uint64_t magic;
	uint32_t n;          /* entries; FDSTORE_JOURNAL_MAX + 1: overflowed */
	uint32_t reserved;
	int32_t fd[FDSTORE_JOURNAL_MAX];
};
_Static_assert(sizeof(struct journal) <= 4096, "the journal is one page");

/* An fd in the store: its number here and a private duplicate, to tell
 * (kcmp) whether the number still means the same open file. */
struct stored {
	int fd;
	int dup;
};

static struct {
	bool on;
	int journal_fd;
	struct journal *j;
	/* The store's fds, twice: by number (v), and by open file in
	 * kcmp's order (f). systemd keeps one copy of an open file, so a
	 * dup of a stored fd is not stored again: it is an alias. */
	struct stored *v, *f;
	size_t n, cap;
	int *nums;            /* fdstore_stored's answer */
	int (*alias)[2];      /* {fd, the stored fd with its open file} */
	size_t nalias, alias_cap;
	uint8_t *last;        /* the state stored last, packed */
	size_t last_len;
	uint64_t gen;
	/* Turns since the last sync are coalesced (fdstore_turn). */
	uint64_t last_sync_ms;
	struct event *ev_later;
	/* From fdstore_take to fdstore_setup and fdstore_adopted: the fd-N
	 * names the store passed, and the fds the journal named. */
	int *passed;
	size_t npassed;
	int *shut;
	size_t nshut;
} st = { .journal_fd = -1 };

static struct log_ratelimit store_rl = LOG_RATELIMIT_INIT(10000, 3);

/* ------------------------------------------------------ talking to systemd */

static int store_fd(int fd, const char *name)
{
	char msg[96];
	int rc;

	/* FDPOLL=0: systemd keeps it even when the peer hangs up; vnicd
	 * decides (a restored vnicd sees the hang-up itself). */
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
	rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	return rc > 0 ? 0 : rc < 0 ? rc : -ENOTCONN;
}

static void remove_name(const char *name)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	sd_notify(0, msg);
}

static void remove_fd_name(int fd)
{
	char name[32];

	snprintf(name, sizeof(name), "fd-%d", fd);
	remove_name(name);
}

/* ------------------------------------------------------------- at start */

enum kind { K_SOCKET_UNIT, K_FD, K_STATE };

static enum kind name_kind(const char *name, int *num)
{
	char *end;
	long v;

	if (!strcmp(name, "state-a") || !strcmp(name, "state-b"))
		return K_STATE;
	if (strncmp(name, "fd-", 3))
		return K_SOCKET_UNIT;
	errno = 0;
	v = strtol(name + 3, &end, 10);
	if (errno || *end || end == name + 3 || v < 3 || v > INT_MAX / 2)
		return K_SOCKET_UNIT;
	*num = (int)v;
	return K_FD;
}

/* A stored state, decoded (NULL: not one). */
static Vnic__Handover__Handover *state_load(int fd)
{
	Vnic__Handover__Handover *m;
	struct stat sb;
	uint8_t *buf;

	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
	    sb.st_size > HANDOVER_MAX_BYTES)
		return NULL;
	buf = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED)
		return NULL;
	m = vnic__handover__handover__unpack(NULL, (size_t)sb.st_size, buf);
	munmap(buf, (size_t)sb.st_size);
	return m;
}

/* Every fd[i] in [lo, hi) moved to hi and above. */
static void move_up(int *fd, int n, int lo, int hi)
{
	for (int i = 0; i < n; i++) {
		if (fd[i] >= lo && fd[i] < hi) {
			int nf = fcntl(fd[i], F_DUPFD_CLOEXEC, hi);

			close(fd[i]);
			fd[i] = nf;
		}
	}
}

/* The journal of a stored state, and the state's own list (extra): into
 * st.shut. Returns 0, or -1 when it cannot be trusted (then nothing is
 * taken over). */
static int journal_load(int fd, const int32_t *extra, size_t extra_n, char *err, size_t errlen)
{
	struct journal *j;
	struct stat sb;
	int rc = -1;

	if (fstat(fd, &sb) < 0 || sb.st_size != 4096) {
		snprintf(err, errlen, "the journal (fd %d) is not one", fd);
		return -1;
	}
	j = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (j == MAP_FAILED) {
		snprintf(err, errlen, "the journal: mmap: %s", strerror(errno));
		return -1;
	}
	if (j->magic != JOURNAL_MAGIC) {
		snprintf(err, errlen, "the journal is not one");
	} else if (j->n > FDSTORE_JOURNAL_MAX) {
		snprintf(err, errlen, "the journal overflowed (more than %u connections read since "
			 "the state was stored)", FDSTORE_JOURNAL_MAX);
	} else {
		st.shut = calloc(j->n + extra_n + 1, sizeof(int));
		if (st.shut) {
			for (uint32_t i = 0; i < j->n; i++)
				st.shut[st.nshut++] = j->fd[i];
			for (size_t i = 0; i < extra_n; i++)
				st.shut[st.nshut++] = extra[i];
			rc = 0;
		} else {
			snprintf(err, errlen, "out of memory");
		}
	}
	munmap(j, 4096);
	return rc;
}

/* Put every fd-N at N and every alias at its number: 0, or -1 (err). */
static int place(int *fd, const int *num, const enum kind *kind, int n, int hi,
		 const Vnic__Handover__Handover *bm, char *err, size_t errlen)
{
	st.passed = calloc((size_t)n + 1, sizeof(int));
	if (!st.passed) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (kind[i] != K_FD || fd[i] < 0)
			continue;
		if (fcntl(num[i], F_GETFD) >= 0) {
			snprintf(err, errlen, "fd-%d twice", num[i]);
			return -1;
		}
		if (dup2(fd[i], num[i]) < 0) {
			snprintf(err, errlen, "dup2 to %d: %s", num[i], strerror(errno));
			return -1;
		}
		close(fd[i]);
		fd[i] = num[i];
		st.passed[st.npassed++] = num[i];
	}
	/* A dup of a stored fd: the same open file at its own number. */
	for (size_t k = 0; k < bm->n_fd_aliases; k++) {
		int a = bm->fd_aliases[k]->fd, to = bm->fd_aliases[k]->same_as;

		if (a < 3 || a >= hi || to < 3 || to >= hi || fcntl(to, F_GETFD) < 0 ||
		    fcntl(a, F_GETFD) >= 0 || dup2(to, a) < 0) {
			snprintf(err, errlen, "fd %d, a dup of fd %d, cannot be put back", a, to);
			return -1;
		}
	}
	return 0;
}

struct handover *fdstore_take(int *nlisten, bool enabled)
{
	const char *names = getenv("LISTEN_FDNAMES");
	int n = *nlisten, hi = 3 + n, best = -1, bi = -1, nsock = 0, nours = 0;
	Vnic__Handover__Handover *bm = NULL;
	uint64_t best_gen = 0;
	struct handover *h = NULL;
	char err[512] = "";
	char *copy, *save = NULL, *tok;
	int *fd, *num;
	enum kind *kind;
	const char **name;

	if (n <= 0 || !names)
		return NULL;
	copy = strdup(names);
	fd = calloc((size_t)n, sizeof(*fd));
	num = calloc((size_t)n, sizeof(*num));
	kind = calloc((size_t)n, sizeof(*kind));
	name = calloc((size_t)n, sizeof(*name));
	if (!copy || !fd || !num || !kind || !name) {
		log_error("fd store: out of memory: its fds stay unused");
		goto out;
	}
	tok = strtok_r(copy, ":", &save);
	for (int i = 0; i < n; i++) {
		name[i] = tok ? tok : "";
		kind[i] = name_kind(name[i], &num[i]);
		nours += kind[i] != K_SOCKET_UNIT;
		if (kind[i] == K_FD && num[i] + 1 > hi)
			hi = num[i] + 1;
		tok = tok ? strtok_r(NULL, ":", &save) : NULL;
	}
	if (!nours)
		goto out;
	/* Everything above every number it must go back to, then each fd-N
	 * to N: no move overwrites another. */
	for (int i = 0; i < n; i++)
		fd[i] = 3 + i;
	move_up(fd, n, 3, hi);
	for (int i = 0; i < n; i++) {
		Vnic__Handover__Handover *m = kind[i] == K_STATE ? state_load(fd[i]) : NULL;

		if (m && m->store_generation > best_gen) {
			best_gen = m->store_generation;
			bi = i;
			vnic__handover__handover__free_unpacked(bm, NULL);
			bm = m;
		} else {
			vnic__handover__handover__free_unpacked(m, NULL);
		}
	}
	/* The aliases' numbers must be free too. */
	for (size_t k = 0; bm && k < bm->n_fd_aliases; k++) {
		int a = bm->fd_aliases[k]->fd;

		if (a >= 3 && a < INT_MAX / 2 && a + 1 > hi) {
			move_up(fd, n, hi, a + 1);
			hi = a + 1;
		}
	}
	/* The newest state's fd, where the moves left it (decoded once). */
	if (bm)
		best = fd[bi];
	if (!enabled)
		snprintf(err, sizeof(err), "vnicd runs without --fd-store");
	else if (best < 0)
		snprintf(err, sizeof(err), "no state in it");
	else if (place(fd, num, kind, n, hi, bm, err, sizeof(err)) == 0)
		h = handover_load(best, false, err, sizeof(err));
	if (h && h->m->journal_fd <= 0) {
		snprintf(err, sizeof(err), "the state names no journal");
		handover_free(h);
		h = NULL;
	} else if (h && journal_load(h->m->journal_fd, h->m->shut_on_restore,
				     h->m->n_shut_on_restore, err, sizeof(err)) < 0) {
		handover_free(h);
		h = NULL;
	}
	if (h) {
		h->from_store = true;
		handover_close_others(h);
		log_info("fd store: state %llu with %zu fds (%d stored): taking over",
			 (unsigned long long)best_gen, h->nfds, nours);
		goto out;
	}
	log_warn("fd store: %d stored fd(s) released, starting afresh: %s", nours, err);
	/* Ours go (what was put back in [3, hi) too: nothing else is
	 * there), then the socket unit's move down to 3... */
	if (st.passed)
		syscall(SYS_close_range, 3u, (unsigned)hi - 1, 0u);
	for (int i = 0; i < n; i++) {
		if (kind[i] == K_SOCKET_UNIT)
			continue;
		remove_name(name[i]);
		if (fd[i] >= hi)
			close(fd[i]);
		fd[i] = -1;
	}
	for (int i = 0; i < n; i++) {
		if (kind[i] != K_SOCKET_UNIT || fd[i] < 0)
			continue;
		if (dup2(fd[i], 3 + nsock) >= 0)
			nsock++;
		close(fd[i]);
	}
	*nlisten = nsock;
	free(st.passed);
	st.passed = NULL;
	st.npassed = 0;
	free(st.shut);
	st.shut = NULL;
	st.nshut = 0;
out:
	vnic__handover__handover__free_unpacked(bm, NULL);
	free(copy);
	free(fd);
	free(num);
	free(kind);
	free((void *)name);
	return h;
}

/* ------------------------------------------------------------- running */

/* kcmp's order of two open files: <0, 0 (the same), >0. */
static int file_cmp(int a, int b)
{
	long r = syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, a, b);

	return r == 0 ? 0 : r == 1 ? -1 : r == 2 ? 1 : a < b ? -1 : 1;
}

/* The stored entry with fd's open file, or NULL with *at where it goes. */
static struct stored *by_file(int fd, size_t *at)
{
	size_t lo = 0, hi = st.n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = file_cmp(fd, st.f[mid].dup);

		if (c == 0)
			return &st.f[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*at = lo;
	return NULL;
}

static bool is_stored(int fd)
{
	size_t lo = 0, hi = st.n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (st.v[mid].fd == fd)
			return true;
		if (st.v[mid].fd < fd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Track fd as stored under "fd-N"; with @send, store it first. */
static int stored_add(int fd, bool send)
{
	struct stored e = { .fd = fd };
	size_t i, at = 0;

	if (st.n == st.cap) {
		size_t cap = st.cap ? st.cap * 2 : 256;
		struct stored *v = realloc(st.v, cap * sizeof(*v));
		struct stored *f = v ? realloc(st.f, cap * sizeof(*f)) : NULL;

		if (v)
			st.v = v;
		if (!f)
			return -ENOMEM;
		st.f = f;
		st.cap = cap;
	}
	if (by_file(fd, &at))
		return -EEXIST;
	e.dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (e.dup < 0)
		return -errno;
	if (send) {
		char name[32];
		int rc;

		snprintf(name, sizeof(name), "fd-%d", fd);
		rc = store_fd(fd, name);
		if (rc < 0) {
			close(e.dup);
			return rc;
		}
	}
	for (i = st.n; i > 0 && st.v[i - 1].fd > fd; i--)
		st.v[i] = st.v[i - 1];
	st.v[i] = e;
	memmove(&st.f[at + 1], &st.f[at], (st.n - at) * sizeof(*st.f));
	st.f[at] = e;
	st.n++;
	return 0;
}

/* Still the open file it was when stored? */
static bool stored_same(const struct stored *e)
{
	return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, e->fd, e->dup) == 0;
}

static bool in_sorted(const int *v, size_t n, int fd)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid] == fd)
			return true;
		if (v[mid] < fd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* e (by file) is among the first k entries by number. */
static bool kept(const struct stored *e, size_t k)
{
	size_t lo = 0, hi = k;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (st.v[mid].fd == e->fd)
			return st.v[mid].dup == e->dup;
		if (st.v[mid].fd < e->fd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Drop every stored fd that is closed, replaced or (check_named) not
 * named any more. Returns: how many. */
static unsigned drop_gone(const int *fds, size_t nfds, bool check_named)
{
	size_t k = 0, kf = 0;
	unsigned dropped = 0;

	for (size_t i = 0; i < st.n; i++) {
		struct stored *e = &st.v[i];

		if (stored_same(e) && (!check_named || in_sorted(fds, nfds, e->fd))) {
			st.v[k++] = *e;
			continue;
		}
		remove_fd_name(e->fd);
		close(e->dup);
		dropped++;
	}
	if (!dropped)
		return 0;
	/* The same entries by file, in the same order. */
	for (size_t i = 0; i < st.n; i++)
		if (kept(&st.f[i], k))
			st.f[kf++] = st.f[i];
	st.n = k;
	return dropped;
}

static int alias_add(int fd, int same_as)
{
	if (st.nalias == st.alias_cap) {
		size_t cap = st.alias_cap ? st.alias_cap * 2 : 64;
		int (*a)[2] = realloc(st.alias, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		st.alias = a;
		st.alias_cap = cap;
	}
	st.alias[st.nalias][0] = fd;
	st.alias[st.nalias][1] = same_as;
	st.nalias++;
	return 0;
}

static int write_state(const uint8_t *buf, size_t len, uint64_t gen)
{
	const char *name = gen & 1 ? "state-b" : "state-a";
	int fd = memfd_create("vnicd-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		rc = errno ? -errno : -EIO;
	if (rc == 0) {
		/* The other name keeps the state before this one until this
		 * one is stored. */
		remove_name(name);
		rc = store_fd(fd, name);
	}
	close(fd);
	return rc;
}

/* Store what is named and not stored; the aliases anew. Returns 0 or a
 * negative errno; *added counts what was stored. */
static int add_named(const int *fds, size_t nfds, unsigned *added)
{
	int rc = 0;

	st.nalias = 0;
	for (size_t i = 0; rc == 0 && i < nfds; i++) {
		struct stored *e;
		size_t at;

		if (is_stored(fds[i]))
			continue;
		e = by_file(fds[i], &at);
		if (e) {
			rc = alias_add(fds[i], e->fd);
		} else {
			rc = stored_add(fds[i], true);
			*added += rc == 0;
		}
	}
	return rc;
}

void fdstore_sync(struct sup *s)
{
	struct handover_snap *hs;
	char why[256];
	const int *fds;
	size_t nfds, len = 0;
	unsigned added = 0, dropped;
	uint8_t *buf = NULL;
	int rc;

	if (!st.on)
		return;
	hs = handover_snap_new(s, why, sizeof(why));
	if (!hs) {
		/* Busy (or out of memory): the stored state stays as it was,
		 * but a closed fd leaves the store now, so that its peer sees
		 * the close. */
		drop_gone(NULL, 0, false);
		return;
	}
	fds = handover_snap_fds(hs, &nfds);
	dropped = drop_gone(fds, nfds, true);
	rc = add_named(fds, nfds, &added);
	if (rc == 0)
		rc = handover_snap_aliases(hs, (const int (*)[2])st.alias, st.nalias);
	if (rc == 0) {
		buf = handover_snap_pack(hs, st.gen, &len);
		rc = buf ? 0 : -ENOMEM;
	}
	if (rc == 0 && (added || dropped || !st.last || len != st.last_len ||
			memcmp(buf, st.last, len))) {
		free(buf);
		buf = handover_snap_pack(hs, st.gen + 1, &len);
		rc = buf ? write_state(buf, len, st.gen + 1) : -ENOMEM;
		if (rc == 0) {
			st.gen++;
			free(st.last);
			st.last = buf;
			st.last_len = len;
			buf = NULL;
			log_debug("fd store: state %llu (%zu bytes, %zu fds stored, %zu dups: +%u -%u)",
				  (unsigned long long)st.gen, len, st.n, st.nalias, added, dropped);
		}
	}
	free(buf);
	handover_snap_free(hs);
	if (rc) {
		log_ratelimited(&store_rl, LOG_LEVEL_WARN,
				"fd store: cannot store the state: %s (a restart now would start "
				"afresh)", strerror(-rc));
		return;
	}
	st.j->n = 0; /* the stored state has everything read so far */
}

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Only wakes the loop: the turn it makes ends in fdstore_turn. */
static void later_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

void fdstore_turn(struct sup *s)
{
	uint64_t now, since;

	if (!st.on)
		return;
	now = mono_ms();
	since = now - st.last_sync_ms;
	if (since >= FDSTORE_SYNC_MS) {
		st.last_sync_ms = now;
		fdstore_sync(s);
		return;
	}
	if (st.ev_later && !evtimer_pending(st.ev_later, NULL)) {
		struct timeval tv = { 0, (suseconds_t)((FDSTORE_SYNC_MS - since) * 1000u) };

		evtimer_add(st.ev_later, &tv);
	}
}

void fdstore_note(struct sup *s, int fd)
{
	struct journal *j = st.j;

	(void)s;
	if (!j || j->n > FDSTORE_JOURNAL_MAX)
		return;
	for (uint32_t i = 0; i < j->n; i++)
		if (j->fd[i] == fd)
			return;
	if (j->n == FDSTORE_JOURNAL_MAX)
		j->n = FDSTORE_JOURNAL_MAX + 1;
	else
		j->fd[j->n++] = fd;
}

int fdstore_setup(struct sup *s, const struct handover *h)
{
	int fd = h && h->m->journal_fd > 0 ? h->m->journal_fd : -1;
	const int *have = NULL;
	size_t nhave = 0;
	void *p;

	if (!getenv("NOTIFY_SOCKET")) {
		log_warn("--fd-store: not under systemd (no NOTIFY_SOCKET): nothing will outlive "
			 "vnicd");
		return -1;
	}
	if (fd < 0) {
		fd = memfd_create("vnicd-journal", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, 4096) < 0) {
			log_error("fd store: the journal: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		log_error("fd store: the journal: mmap: %s", strerror(errno));
		close(fd);
		return -1;
	}
	st.j = p;
	st.j->magic = JOURNAL_MAGIC;
	st.journal_fd = fd;
	st.gen = h ? h->m->store_generation : 0;
	/* What the store has already: the fd-N names it passed (a restart),
	 * or what the old process had stored (an upgrade syncs before its
	 * exec). The first sync stores the rest. */
	if (h && handover_from_store(h)) {
		have = st.passed;
		nhave = st.npassed;
	} else if (h) {
		have = h->m->stored_fds;
		nhave = h->m->n_stored_fds;
	}
	for (size_t i = 0; i < nhave; i++)
		if (have[i] >= 3 && fcntl(have[i], F_GETFD) >= 0 && stored_add(have[i], false) < 0)
			remove_fd_name(have[i]); /* a dup of another: one copy is enough */
	free(st.passed);
	st.passed = NULL;
	st.npassed = 0;
	st.ev_later = evtimer_new(s->base, later_cb, NULL);
	if (!st.ev_later) {
		log_error("fd store: out of memory");
		return -1;
	}
	st.on = true;
	s->on_io = fdstore_note;
	log_info("fd store: on (state %llu, %zu fds stored)", (unsigned long long)st.gen, st.n);
	return 0;
}

void fdstore_adopted(struct sup *s)
{
	unsigned shut = 0;

	(void)s;
	for (size_t i = 0; i < st.nshut; i++) {
		struct stat sb;

		if (fstat(st.shut[i], &sb) == 0 && S_ISSOCK(sb.st_mode) &&
		    shutdown(st.shut[i], SHUT_RDWR) == 0)
			shut++;
	}
	if (shut)
		log_warn("fd store: %u connection(s) or worker channel(s) were in the middle of an "
			 "exchange when the previous vnicd died: shut down, so that nothing half-done "
			 "resumes (a front end reconnects, a worker is restarted)", shut);
	free(st.shut);
	st.shut = NULL;
	st.nshut = 0;
}

void fdstore_abandon(const struct handover *h)
{
	for (size_t i = 0; i < h->nfds; i++)
		remove_fd_name(h->fds[i]);
	remove_name("state-a");
	remove_name("state-b");
}

void fdstore_release(struct sup *s)
{
	(void)s;
	if (!st.on)
		return;
	for (size_t i = 0; i < st.n; i++) {
		remove_fd_name(st.v[i].fd);
		close(st.v[i].dup);
	}
	st.n = 0;
	remove_name("state-a");
	remove_name("state-b");
	st.on = false;
	if (st.ev_later)
		event_free(st.ev_later);
	st.ev_later = NULL;
	log_info("fd store: emptied");
}

int fdstore_journal_fd(const struct sup *s)
{
	(void)s;
	return st.journal_fd >= 0 ? st.journal_fd : 0;
}

uint64_t fdstore_generation(const struct sup *s)
{
	(void)s;
	return st.gen;
}

int *fdstore_stored(const struct sup *s, size_t *n)
{
	int *v = realloc(st.nums, (st.n + 1) * sizeof(*v));

	(void)s;
	*n = 0;
	if (!v)
		return NULL;
	st.nums = v;
	for (size_t i = 0; i < st.n; i++)
		v[i] = st.v[i].fd;
	*n = st.n;
	return v;
}
