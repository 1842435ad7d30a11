# SPDX-License-Identifier: BSD-3-Clause
# systemd/: vnicd.service (Type=notify), vnicd.socket (socket activation),
# the sysusers.d and tmpfiles.d entries. Installed into the directories
# configure found in systemd.pc (under ${prefix}); --with-systemdsystemunitdir=no
# installs none of them.
EXTRA_DIST += systemd/vnicd.service.in systemd/vnicd.socket systemd/vnicd.sysusers \
	systemd/vnicd.tmpfiles

systemd/vnicd.service: $(top_srcdir)/systemd/vnicd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@bindir[@]|$(bindir)|g' \
		-e 's|@pkglibexecdir[@]|$(pkglibexecdir)|g' \
		$(top_srcdir)/systemd/vnicd.service.in >$@.tmp && mv $@.tmp $@
CLEANFILES += systemd/vnicd.service
noinst_DATA = systemd/vnicd.service

if HAVE_SYSTEMD_UNITS
systemdsystemunit_DATA = systemd/vnicd.service systemd/vnicd.socket
install-data-hook: install-vnicd-sysusers
uninstall-hook: uninstall-vnicd-sysusers
endif
# The entries are named vnicd.conf where systemd looks for them.
install-vnicd-sysusers:
	$(MKDIR_P) '$(DESTDIR)$(sysusersdir)' '$(DESTDIR)$(tmpfilesdir)'
	$(INSTALL_DATA) $(top_srcdir)/systemd/vnicd.sysusers '$(DESTDIR)$(sysusersdir)/vnicd.conf'
	$(INSTALL_DATA) $(top_srcdir)/systemd/vnicd.tmpfiles '$(DESTDIR)$(tmpfilesdir)/vnicd.conf'
uninstall-vnicd-sysusers:
	rm -f '$(DESTDIR)$(sysusersdir)/vnicd.conf' '$(DESTDIR)$(tmpfilesdir)/vnicd.conf'
.PHONY: install-vnicd-sysusers uninstall-vnicd-sysusers
