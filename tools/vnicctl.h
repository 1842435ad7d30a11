/* SPDX-License-Identifier: BSD-3-Clause */
/* vnicctl: the pieces its subcommands share. */
#ifndef VNIC_VNICCTL_H
#define VNIC_VNICCTL_H

#include <stdio.h>

void vnicctl_usage(FILE *f);
/* add / remove (vnicctl_endpoint.c): argv[0] is the subcommand. */
int vnicctl_endpoint_main(const char *sock, int argc, char **argv);

#endif
