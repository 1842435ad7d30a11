# workers/: vnicd-worker, one process per NIC.
# libvnicnet: the virtio-net data path (TX, RX, stats page), no libevent,
# so tests link it alone.
noinst_LTLIBRARIES += libvnicnet.la
libvnicnet_la_SOURCES = \
	workers/net.c workers/net.h workers/net_priv.h \
	workers/net_tx.c workers/net_rx.c \
	workers/stats.h
libvnicnet_la_LIBADD = libvnicshm.la
