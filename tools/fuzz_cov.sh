#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tools/fuzz_cov.sh TARGET|all: line coverage of each parser under its
# fuzz corpus (issue 18), with clang's source-based coverage.
#
# Builds build/fuzz-cov (CC=clang-14, -fprofile-instr-generate
# -fcoverage-mapping; no libFuzzer: fuzz/replay.c is main), replays the
# corpus of the last campaign (build/fuzz-campaign/TARGET, tools/fuzz.sh)
# together with fuzz/corpus/TARGET and fuzz/regress/TARGET, and prints
# llvm-cov's report for the files that parse the target's hostile input.
# Needs llvm-14 (llvm-cov-14, llvm-profdata-14).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
targets=(vhost_user vmm_proto worker_chan vring virtio_net_hdr)
[ $# -eq 1 ] || { echo "usage: $0 TARGET|all  (targets: ${targets[*]})" >&2; exit 2; }
b=$top/build/fuzz-cov
cov=llvm-cov-14 profdata=llvm-profdata-14
command -v $cov >/dev/null || { echo "$cov not found: apt-get install llvm-14" >&2; exit 1; }

# The files whose lines handle the target's hostile input.
files_of() {
	case $1 in
	vhost_user) echo supervisor/vhost_user.c supervisor/vhost_user_msg.c \
		supervisor/vhost_user_handlers.c supervisor/vhost_user_mem.c ;;
	vmm_proto) echo proto/wire.c proto/fdpass.c supervisor/vmm_conn.c supervisor/vmm_handlers.c \
		supervisor/validate.c supervisor/pbconv.c ;;
	worker_chan) echo supervisor/monitor.c proto/wire.c ;;
	vring) echo shm/vring.c shm/memtable.c shm/iov.c shm/inflight.c ;;
	virtio_net_hdr) echo workers/net_tx.c workers/net_rx.c workers/net.c ;;
	*) echo "unknown target $1" >&2; exit 2 ;;
	esac
}

if [ ! -f "$b/Makefile" ]; then
	( cd "$top" && { [ -x configure ] || ./autogen.sh >/dev/null; } )
	mkdir -p "$b"
	( cd "$b" && "$top/configure" -q CC=clang-14 \
		CFLAGS="-O1 -g -fprofile-instr-generate -fcoverage-mapping" \
		LDFLAGS="-fprofile-instr-generate" )
fi

one() {
	local t=$1 prog=fuzz/fuzz_$1 dirs=() f
	make -s -C "$b" -j"$(nproc)" "$prog"
	rm -rf "$b/prof-$t" && mkdir -p "$b/prof-$t"
	for d in "$top/build/fuzz-campaign/$t" "$top/fuzz/corpus/$t" "$top/fuzz/regress/$t"; do
		[ -d "$d" ] && dirs+=("$d")
	done
	# The replay main takes files; xargs splits long corpora (%p: one
	# profile per process).
	find "${dirs[@]}" -type f ! -name '*.md' -print0 |
		VNIC_TOP_SRCDIR=$top LLVM_PROFILE_FILE="$b/prof-$t/%p.profraw" \
		xargs -0 -n 500 "$b/$prog" >/dev/null
	$profdata merge -sparse -o "$b/prof-$t.profdata" "$b/prof-$t"/*.profraw
	echo "== $t: $(find "${dirs[@]}" -type f ! -name '*.md' | wc -l) inputs"
	local srcs=()
	for f in $(files_of "$t"); do srcs+=("$top/$f"); done
	$cov report "$b/$prog" -instr-profile="$b/prof-$t.profdata" "${srcs[@]}" |
		awk 'NR == 1 || /^-/ || /\.c / || /^TOTAL/ { print }' |
		sed "s|$top/||"
}

if [ "$1" = all ]; then
	for t in "${targets[@]}"; do one "$t"; done
else
	one "$1"
fi
