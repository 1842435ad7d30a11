#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tools/fuzz_cov.sh TARGET|all: line coverage of each parser under its
# fuzz corpus (issue 18), with clang's source-based coverage.
#
# Builds build/fuzz-cov (CC=clang-14, -fprofile-instr-generate
# -fcoverage-mapping; no libFuzzer: fuzz/replay.c is main), replays the
# corpus of the last campaign (build/fuzz-campaign/TARGET, tools/fuzz.sh)
# together with fuzz/corpus/TARGET and fuzz/regress/TARGET, and prints
# per function, the lines of the functions that parse the target's
# hostile input that the corpus ran (columns: file, function, lines,
# missed), and their total.
# Needs llvm-14 (llvm-cov-14, llvm-profdata-14).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
targets=(vhost_user vmm_proto worker_chan vring virtio_net_hdr)
[ $# -eq 1 ] || { echo "usage: $0 TARGET|all  (targets: ${targets[*]})" >&2; exit 2; }
b=$top/build/fuzz-cov
cov=llvm-cov-14 profdata=llvm-profdata-14
command -v $cov >/dev/null || { echo "$cov not found: apt-get install llvm-14" >&2; exit 1; }

# The functions that handle the target's hostile input, file by file
# ("FILE: FUNCTION ..."; "*": every function of the file). The measure of
# issue 18 is the lines of these; a whole file would also count its set-up
# and send paths, which no peer's bytes reach.
funcs_of() {
	case $1 in
	vhost_user) cat <<-'E'
		supervisor/vhost_user.c: *
		supervisor/vhost_user_msg.c: *
		supervisor/vhost_user_handlers.c: *
		supervisor/vhost_user_mem.c: *
		E
		;;
	vmm_proto) cat <<-'E'
		proto/wire.c: wire_utf8_valid wire_check_strings wire_msg_sanitize wire_walk_strings wire_get_varint wire_msg_sanitize_depth wire_recv_frame wire_recv_frame_trunc wire_vmm_unpack_x wire_vmm_check_arm wire_vmm_expected_fds wire_add_nic_layout wire_vmm_recv wire_unpack wire_budget_alloc wire_truncated_reason wire_err_request wire_recv_done
		proto/fdpass.c: fdpass_recv fdpass_cmsg_parse cmsg_close_rights
		supervisor/vmm_conn.c: conn_read_cb conn_bad_frame conn_dispatch
		supervisor/vmm_handlers.c: vmm_handle_hello vmm_handle_add_nic vmm_handle_remove_nic vmm_handle_get_status vmm_handle_set_policy vmm_handle_set_dirty_log vmm_handle_add_vhost_user vmm_handle_remove_endpoint add_nic_pairs set_dirty_log_pairs set_policy_pairs_ready
		supervisor/validate.c: validate_nic_offered nic_queue_slot validate_nic_id validate_mac validate_mtu validate_features validate_ifname validate_netns_name validate_policy validate_ring_addrs validate_eventfd validate_tap_fd validate_backend_socket validate_nic_spec validate_nic_pairs validate_dirty_log validate_log_covers name_chars_ok eventfd_is_semaphore
		supervisor/pbconv.c: pbconv_add_nic pbconv_add_vhost_user copy_str
		E
		;;
	worker_chan) cat <<-'E'
		supervisor/monitor.c: *
		supervisor/nic.c: nic_worker_ready nic_worker_died nic_exit_cb read_violation
		sandbox/sandbox_seccomp.c: sandbox_parse_report
		proto/wire.c: wire_worker_recv wire_worker_unpack wire_worker_arm_sender wire_recv_frame wire_recv_frame_trunc wire_unpack wire_walk_strings wire_utf8_valid wire_msg_sanitize_depth wire_get_varint wire_check_strings
		proto/fdpass.c: fdpass_recv fdpass_cmsg_parse
		E
		;;
	vring) cat <<-'E'
		shm/vring.c: vring_pop vring_unpop vring_push vring_flush vring_should_notify vring_notify_enable vring_notify_enable_window vring_avail_pending vring_recover_inflight vring_attach_inflight vring_walk vring_desc_fetch vring_enter_indirect vring_add_buf vring_load16 vring_used_event
		shm/memtable.c: memtable_translate memtable_translate_all memtable_to_iov find
		shm/inflight.c: inflight_region_check
		E
		;;
	virtio_net_hdr) cat <<-'E'
		workers/net_tx.c: *
		workers/net_rx.c: *
		workers/net.c: net_drop net_report_broken net_flush net_guest_log
		E
		;;
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
	# llvm-cov's per-function rows (static ones are "file.c:name"):
	# the listed functions' lines, and their sum.
	funcs_of "$t" | while IFS= read -r line; do
		local f=${line%%:*} want=${line#*: }
		$cov report "$b/$prog" -instr-profile="$b/prof-$t.profdata" -show-functions \
			"$top/$f" | awk -v file="$f" -v want=" $want " '
			/^[A-Za-z_]/ && $1 != "Name" && $1 != "File" && $1 != "TOTAL" {
				name = $1; sub(/^.*:/, "", name)
				if (want != " * " && index(want, " " name " ") == 0) next
				printf "%-34s %-28s %5d %5d\n", file, name, $5, $6
			}'
	done | awk '
		{ print; lines += $3; miss += $4 }
		END { printf "%-63s %5d %5d  %.1f%% of the lines that handle hostile input\n",
			"TOTAL", lines, miss, lines ? 100 * (lines - miss) / lines : 0 }'
}

if [ "$1" = all ]; then
	for t in "${targets[@]}"; do one "$t"; done
else
	one "$1"
fi
