/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mac: the text form of a MAC address, one parser and one formatter for
 * every program (vnicd's messages and state files, vnicctl).
 */
#ifndef VNIC_MAC_H
#define VNIC_MAC_H

#include <stddef.h>
#include <stdint.h>

/* "02:00:00:00:00:01" and its NUL. */
#define MAC_STR_LEN 18u

/*
 * mac_parse - six bytes of one or two hex digits each (either case),
 * separated by ':', with nothing before or after, e.g. "02:00:00:00:00:01"
 * or "2:0:0:0:0:1". Returns 0 and mac[], or -EINVAL with mac[] untouched.
 */
int mac_parse(const char *s, uint8_t mac[6]);

/*
 * mac_format - "02:00:00:00:00:01": lower case, two digits a byte (unlike
 * ether_ntoa). @len: at least MAC_STR_LEN, else the text is cut.
 * Returns buf, for use as a printf argument.
 */
const char *mac_format(const uint8_t mac[6], char *buf, size_t len);

#endif
