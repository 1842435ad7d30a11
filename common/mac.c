/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mac: MAC addresses as text (see mac.h), over glibc's ether_aton_r.
 */
#include "config.h"

#include <errno.h>
#include <netinet/ether.h>
#include <stdio.h>
#include <string.h>

#include "mac.h"

int mac_parse(const char *s, uint8_t mac[6])
{
	struct ether_addr a;
	const char *last = strrchr(s, ':');
	size_t colons = 0;

	/* ether_aton_r reads the sixth byte and ignores what follows it (a
	 * third digit, more groups, white space): only hex digits and
	 * exactly five ':' get that far, and the last group is 1-2 digits. */
	if (strspn(s, "0123456789abcdefABCDEF:") != strlen(s))
		return -EINVAL;
	for (const char *p = s; *p; p++)
		colons += *p == ':';
	if (colons != 5 || strlen(last + 1) < 1 || strlen(last + 1) > 2 || !ether_aton_r(s, &a))
		return -EINVAL;
	memcpy(mac, a.ether_addr_octet, 6);
	return 0;
}

const char *mac_format(const uint8_t mac[6], char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
	return buf;
}
