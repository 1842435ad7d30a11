#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench_dpdk_ring.sh VNIC_BENCH [ROUNDS] [SECONDS] [SIZES] [QUEUE] - vnicd's ring
# engine against DPDK's, in one run, alternating (issue 17's "keep the ring
# engine honest"):
#   vnicd's ring: `vnic-bench ring` (vring.c device, vring_drv guest, two
#     processes, the device copies each buffer out), in two modes: poll
#     (both sides spin, as DPDK does: the like-for-like case) and
#     suppressed (EVENT_IDX kicks and interrupts, nobody spins);
#   DPDK: dpdk-testpmd net_vhost (rxonly, the device; it copies each
#     buffer into an mbuf) fed by dpdk-testpmd net_virtio_user (txonly),
#     each pinned to one of the two cores, --no-huge; Rx-pps of the vhost
#     side, median of its 1 s samples after the first.
# At 64 and 1518 bytes; prints min / median / max Mpps of each and the
# ratios of the medians (vnicd / DPDK), with the load average. QUEUE (default
# 256, virtio-user's default) is the queue size of both rings: the
# suppressed mode's rate grows with it (doc/benchmarks.md). Needs dpdk-testpmd (Debian
# dpdk) and its PMDs. Every process is bounded by timeout(1).
set -eu
BENCH=$1 ROUNDS=${2:-3} SECS=${3:-6} SIZES=${4:-64 1518} QUEUE=${5:-256}
PMDS=$(dirname "$(find /usr/lib -name librte_net_vhost.so -path '*pmds*' | head -n 1)")
[ -d "$PMDS" ] || { echo "bench_dpdk_ring.sh: no DPDK PMDs (apt-get install dpdk)" >&2; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
dpdk_once() { # SIZE -> Mpps on stdout
	sock=$TMP/vu.$$.$1.sock
	timeout -k 2 $((SECS + 4)) dpdk-testpmd -l 0,1 --main-lcore 0 --no-pci --no-huge -m 512 \
		--file-prefix vnbh$$ -d "$PMDS/librte_mempool_ring.so" -d "$PMDS/librte_net_vhost.so" \
		--vdev "net_vhost0,iface=$sock,queues=1" -- --total-num-mbufs=4096 \
		--forward-mode=rxonly -a --stats-period 1 >"$TMP/vh.log" 2>&1 </dev/null &
	vh=$!
	i=0
	while [ ! -S "$sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	timeout -k 2 $((SECS + 1)) dpdk-testpmd -l 0,1 --main-lcore 1 --no-pci --no-huge -m 512 \
		--file-prefix vnbu$$ -d "$PMDS/librte_mempool_ring.so" -d "$PMDS/librte_net_virtio.so" \
		--vdev "net_virtio_user0,path=$sock,queues=1,queue_size=$QUEUE" -- \
		--total-num-mbufs=$((QUEUE * 2 > 4096 ? QUEUE * 2 : 4096)) --txd="$QUEUE" --rxd="$QUEUE" \
		--forward-mode=txonly --txpkts="$1" -a --stats-period 1 >"$TMP/vu.log" 2>&1 </dev/null || true
	wait $vh 2>/dev/null || true
	awk '/Rx-pps:/ { if ($2 > 0) v[n++] = $2 } END {
		if (n < 2) { print 0; exit }
		m = 0; for (i = 0; i < n - 1; i++) w[m++] = v[i]   # drop the last (partial) sample
		for (i = 0; i < m; i++) for (j = i + 1; j < m; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
		printf "%.3f\n", (m % 2 ? w[(m - 1) / 2] : (w[m / 2 - 1] + w[m / 2]) / 2) / 1e6 }' "$TMP/vh.log"
}
ring_once() { # SIZE -> "suppressed-Mpps poll-Mpps"
	timeout -k 2 $((SECS * 4 + 20)) "$BENCH" ring --runs 1 --seconds "$SECS" --sizes "$1" --queue "$QUEUE" |
		awk '$2 == "suppressed" { s = $3 } $2 == "poll" { p = $3 } END { print s + 0, p + 0 }'
}
echo "queue size $QUEUE; load average at start: $(cat /proc/loadavg)"
for size in $SIZES; do
	: >"$TMP/d.$size"
	: >"$TMP/r.$size"
	: >"$TMP/s.$size"
	: >"$TMP/p.$size"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		dpdk_once $size >>"$TMP/d.$size"
		ring_once $size >>"$TMP/r.$size"
		r=$((r + 1))
	done
	awk '{ print $1 }' "$TMP/r.$size" >"$TMP/s.$size"
	awk '{ print $2 }' "$TMP/r.$size" >"$TMP/p.$size"
done
echo "load average at end:   $(cat /proc/loadavg)"
stat() { sort -g "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f %.2f", v[1], m, v[NR] }'; }
ratio() { echo "$1 $2" | awk '{ if ($2 > 0) printf "%.2f", $5 / $2; else print "-" }'; }
printf '%-6s %-22s %-22s %-22s %s\n' bytes "DPDK vhost Mpps" "vnicd suppressed Mpps" "vnicd poll Mpps" \
	"vnicd/DPDK suppressed, poll (medians)"
for size in $SIZES; do
	d=$(stat "$TMP/d.$size") s=$(stat "$TMP/s.$size") p=$(stat "$TMP/p.$size")
	printf '%-6s %-22s %-22s %-22s %s, %s\n' $size "$d" "$s" "$p" "$(ratio "$d" "$s")" "$(ratio "$d" "$p")"
done
