#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tools/fuzz.sh TARGET SECONDS [JOBS]: a fuzzing campaign (issue 18).
#
# Builds build/fuzz (CC=clang-14 --enable-fuzz) when needed, then runs
# fuzz/fuzz_TARGET for SECONDS with a corpus that persists between
# campaigns in build/fuzz-campaign/TARGET (seeded from fuzz/corpus/TARGET
# and fuzz/regress/TARGET). JOBS > 1 runs that many fuzzing processes on
# the same corpus (libFuzzer -fork). Crashes, leaks and timeouts land in
# build/fuzz-campaign/TARGET-artifacts/. The last line sums it up:
#   fuzz TARGET: S s, N execs (E/s), cov C edges, corpus K files, X findings
# TARGET "all" runs every target, SECONDS each: in turn, or
# VNIC_FUZZ_PARALLEL=N at a time (each a process of its own; on a 2-core
# machine 5 at once give each about 40 % of a core: quote the execs/s).
# VNIC_FUZZ_TIMEOUT (1): seconds an input may take. libFuzzer measures
# wall-clock time, so on a loaded machine (or under chrt -i) a larger value
# keeps a starved, not a slow, input from ending the campaign; say so when
# you quote its figures.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
targets=(vhost_user vmm_proto worker_chan vring virtio_net_hdr)
[ $# -ge 2 ] || { echo "usage: $0 TARGET|all SECONDS [JOBS]  (targets: ${targets[*]})" >&2; exit 2; }
target=$1 secs=$2 jobs=${3:-1}
cc=${CC:-clang-14}
b=$top/build/fuzz

if [ ! -f "$b/Makefile" ]; then
	( cd "$top" && { [ -x configure ] || ./autogen.sh >/dev/null; } )
	mkdir -p "$b"
	( cd "$b" && "$top/configure" -q CC="$cc" --enable-fuzz --enable-werror )
fi
progs=()
for t in "${targets[@]}"; do progs+=("fuzz/fuzz_$t"); done
make -s -C "$b" -j"$(nproc)" "${progs[@]}"

run_one() {
	local t=$1 corpus=$top/build/fuzz-campaign/$1 art=$top/build/fuzz-campaign/$1-artifacts
	local log=$top/build/fuzz-campaign/$1.log dict=() seed extra=()
	mkdir -p "$corpus" "$art"
	[ -s "$top/fuzz/$t.dict" ] && dict=(-dict="$top/fuzz/$t.dict")
	[ "$jobs" -gt 1 ] && extra=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
	seed=${VNIC_FUZZ_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) % 2000000000 + 1 ))}
	local dirs=("$top/fuzz/corpus/$t")
	[ -d "$top/fuzz/regress/$t" ] && dirs+=("$top/fuzz/regress/$t")
	echo "fuzz $t: $secs s, seed $seed, timeout ${VNIC_FUZZ_TIMEOUT:-1} s, log $log"
	local rc=0
	"$b/fuzz/fuzz_$t" -seed="$seed" -max_total_time="$secs" -timeout="${VNIC_FUZZ_TIMEOUT:-1}" -rss_limit_mb=2048 \
		-detect_leaks=1 -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "${extra[@]}" \
		"$corpus" "${dirs[@]}" >"$log" 2>&1 || rc=$?
	local execs eps cov files finds
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
	# -fork prints "#N: cov: C ft: ..." lines; a single process "#N ... cov: C".
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n1 | cut -d' ' -f2)
	if [ -z "$execs" ]; then
		execs=$(grep -oE '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
		eps=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
	fi
	files=$(find "$corpus" -type f | wc -l)
	finds=$(find "$art" -type f | wc -l)
	echo "fuzz $t: $secs s, ${execs:-?} execs (${eps:-?}/s), cov ${cov:-?} edges, corpus $files files, $finds findings (exit $rc)"
	[ "$finds" -eq 0 ] && [ "$rc" -eq 0 ]
}

if [ "$target" = all ]; then
	rc=0 par=${VNIC_FUZZ_PARALLEL:-1} running=0
	for t in "${targets[@]}"; do
		if [ "$par" -le 1 ]; then
			run_one "$t" || rc=1
			continue
		fi
		if [ "$running" -ge "$par" ]; then
			wait -n || rc=1
			running=$((running - 1))
		fi
		# A subshell with errexit off, as in the sequential form: a
		# log without a "cov:" line must not end it before its summary.
		(set +e; run_one "$t") &
		running=$((running + 1))
	done
	while [ "$running" -gt 0 ]; do
		wait -n || rc=1
		running=$((running - 1))
	done
	exit $rc
fi
run_one "$target"
