/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * version: the one --version line every program prints.
 *
 *     vnicctl (vnicd) 0.1.0
 *
 * PACKAGE_VERSION is configure's AC_INIT version (config.h); libvnic.h's
 * VNIC_VERSION_* are checked against it when libvnic builds.
 */
#ifndef VNIC_VERSION_H
#define VNIC_VERSION_H

#include <stdio.h>

/* vnic_print_version - the line on stdout; returns 0 (the exit status). */
static inline int vnic_print_version(const char *prog)
{
	printf("%s (%s) %s\n", prog, PACKAGE_NAME, PACKAGE_VERSION);
	return fflush(stdout) == 0 ? 0 : 1;
}

#endif
