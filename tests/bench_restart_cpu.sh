#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vnic-bench traffic across a worker restart (issue 11, "Also"): the
# worker of the NIC under fault is SIGKILLed late in the run; vnicd
# restarts it, traffic resumes, and the CPU line counts both workers: never
# "worker CPU -1.00 s" (the dead worker's /proc entry is gone), and at
# least what the killed worker had used when it was killed.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
e2e_need_root # the workers' sandbox

E2E_BENCH_TIMEOUT=20
e2e_start_vnicd
(
	sleep 2.2
	pid=$(pgrep -x vnicd-worker -P "$VNICD_PID" | head -n 1)
	[ -n "$pid" ] || exit 0
	# utime + stime (fields 14, 15 after the "(comm)" field), in seconds
	sed 's/.*) //' "/proc/$pid/stat" |
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($12 + $13) / hz }' \
		>"$E2E_TMP/killed_cpu"
	kill -9 "$pid"
) &
killer=$!
e2e_bench traffic --nics 1 --backend socket --direction g2h --size 1000 --seconds 3 \
	--fault-nic 0 || e2e_die "vnic-bench traffic failed"
wait "$killer" || true
grep -q "worker restarted, now pid" "$E2E_TMP/bench.out" || e2e_die "no worker restart seen"
grep -q "worker CPU -1" "$E2E_TMP/bench.out" && e2e_die "worker CPU unknown after the restart"
cpu=$(sed -n 's/^RESULT .*worker_cpu_s=\([0-9.]*\).*/\1/p' "$E2E_TMP/bench.out" | head -n 1)
[ -n "$cpu" ] || e2e_die "no worker_cpu_s in the RESULT line"
killed=$(cat "$E2E_TMP/killed_cpu")
awk -v c="$cpu" -v k="$killed" 'BEGIN { exit !(c >= k) }' ||
	e2e_die "worker CPU $cpu s, but the killed worker alone had used $killed s"
e2e_stop_vnicd
e2e_log "PASS (worker CPU $cpu s over two workers; the first $killed s)"
