# SPDX-License-Identifier: BSD-3-Clause
# libvnic/: the client library a VMM links, its public header and its
# pkg-config file.
# Only vnic_* symbols are exported: the protobuf-c and wire code inside
# is private (the regex skips the generated vnic__* names).
# -version-info current:revision:age: 6:0:3 since vnic_announce (issue 14),
# an addition: the soname stays .so.3. 5:0:2 came when struct vnic_status grew
# its inflight array (issue 16; allocated by the library, read through the
# pointer): an addition, the soname stays .so.3. 4:0:1 came with
# vnic_upgrade (issue 16), an addition too. 3:0:0 came when struct vnic_policy grew
# its interrupt coalescing (issue 17): callers allocate it inside struct
# vnic_nic_config, so a binary built against the old header would pass a
# shorter struct: a new soname, .so.3 (Debian package libvnic3).
# 2:0:2 came when struct vnic_status grew
# its pairs (issue 15; the library allocates it and callers only read it
# through the pointer, so an addition: the soname stays .so.0); 1:0:1 came
# with vnic_set_dirty_log and vnic_dirty_log_size.
lib_LTLIBRARIES += libvnic.la
include_HEADERS += libvnic/libvnic.h
pkgconfig_DATA += libvnic/libvnic.pc
libvnic_la_SOURCES = libvnic/libvnic.c libvnic/libvnic.h
libvnic_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
libvnic_la_LIBADD = libvnicproto.la $(PROTOBUF_C_LIBS)
libvnic_la_LDFLAGS = $(AM_LDFLAGS) -version-info 6:0:3 -export-symbols-regex '^vnic_[a-z]'

# Generated headers first under make -j (wire.h includes them).
$(libvnic_la_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
