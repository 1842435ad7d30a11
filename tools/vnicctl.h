/* SPDX-License-Identifier: BSD-3-Clause */
/* vnicctl: the pieces its subcommands share. */
#ifndef VNIC_VNICCTL_H
#define VNIC_VNICCTL_H

#include <stdio.h>

#include "libvnic.h"

void vnicctl_usage(FILE *f);
/* --OPT V: a TX mode name (libvnic's); -1 with a message on stderr. */
int vnicctl_parse_mode(const char *opt, const char *v, enum vnic_mitigation *ret);
/* add / remove (vnicctl_endpoint.c): argv[0] is the subcommand. */
int vnicctl_endpoint_main(const char *sock, int argc, char **argv);

#endif
