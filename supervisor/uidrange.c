/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uidrange: a uid and gid per NIC. See uidrange.h.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uidrange.h"

static int parse_u32(const char *s, char **end, uint32_t *ret)
{
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, end, 10);
	if (errno || v > UINT32_MAX)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

int uidrange_parse(const char *s, uint32_t *first, uint32_t *count, char *err, size_t errlen)
{
	uint32_t a, b;
	char *end;
	uint64_t last;

	if (parse_u32(s, &end, &a) < 0 || (*end != '-' && *end != ':') ||
	    parse_u32(end + 1, &end, &b) < 0 || *end) {
		snprintf(err, errlen, "--uid-range %.40s: give FIRST-LAST or FIRST:COUNT", s);
		return -EINVAL;
	}
	if (strchr(s, '-')) {
		if (b < a) {
			snprintf(err, errlen, "--uid-range %.40s: LAST is below FIRST", s);
			return -EINVAL;
		}
		b = b - a + 1;
	}
	last = (uint64_t)a + b - 1;
	if (a == 0 || b == 0 || b > UIDRANGE_MAX_COUNT || last >= UINT32_MAX) {
		snprintf(err, errlen,
			 "--uid-range %.40s: want 1..%u ids, none of them 0 or %u", s,
			 UIDRANGE_MAX_COUNT, UINT32_MAX);
		return -EINVAL;
	}
	*first = a;
	*count = b;
	return 0;
}

int uidrange_init(struct uidrange *r, uint32_t first, uint32_t count, char *err, size_t errlen)
{
	struct passwd *pw;
	struct group *gr;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	setpwent();
	while ((pw = getpwent())) {
		if ((pw->pw_uid >= first && pw->pw_uid - first < count) ||
		    (pw->pw_gid >= first && pw->pw_gid - first < count)) {
			snprintf(err, errlen, "--uid-range %u-%u overlaps user %.32s (uid %u gid %u)",
				 first, first + count - 1, pw->pw_name, (unsigned)pw->pw_uid,
				 (unsigned)pw->pw_gid);
			rc = -EEXIST;
			break;
		}
	}
	endpwent();
	if (rc)
		return rc;
	setgrent();
	while ((gr = getgrent())) {
		if (gr->gr_gid >= first && gr->gr_gid - first < count) {
			snprintf(err, errlen, "--uid-range %u-%u overlaps group %.32s (gid %u)", first,
				 first + count - 1, gr->gr_name, (unsigned)gr->gr_gid);
			rc = -EEXIST;
			break;
		}
	}
	endgrent();
	if (rc)
		return rc;
	r->bits = calloc((count + 7) / 8, 1);
	if (!r->bits) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->first = first;
	r->count = count;
	return 0;
}

int uidrange_alloc(struct uidrange *r, uint32_t *ret)
{
	if (!r->bits || r->used >= r->count)
		return -ENOSPC;
	for (uint32_t i = 0; i < r->count; i++) {
		uint32_t off = (r->next + i) % r->count;

		if (!(r->bits[off / 8] & (1u << (off % 8)))) {
			r->bits[off / 8] |= (uint8_t)(1u << (off % 8));
			r->used++;
			r->next = (off + 1) % r->count;
			*ret = r->first + off;
			return 0;
		}
	}
	return -ENOSPC;
}

void uidrange_free(struct uidrange *r, uint32_t id)
{
	uint32_t off;

	if (!r->bits || id < r->first || id - r->first >= r->count)
		return;
	off = id - r->first;
	if (r->bits[off / 8] & (1u << (off % 8))) {
		r->bits[off / 8] &= (uint8_t)~(1u << (off % 8));
		r->used--;
	}
}

int uidrange_take(struct uidrange *r, uint32_t id)
{
	uint32_t off;

	if (!r->bits || id < r->first || id - r->first >= r->count)
		return -ERANGE;
	off = id - r->first;
	if (r->bits[off / 8] & (1u << (off % 8)))
		return -EEXIST;
	r->bits[off / 8] |= (uint8_t)(1u << (off % 8));
	r->used++;
	return 0;
}

void uidrange_fini(struct uidrange *r)
{
	free(r->bits);
	memset(r, 0, sizeof(*r));
}
