# SPDX-License-Identifier: BSD-3-Clause
# bench_lib.sh: what the bench scripts share (bash; sourced, not run).
# A script calls bench_need for its programs, then bench_setup NAME once:
# from then on $tmp is a fresh directory, and on exit (or HUP, INT, TERM)
# every process started with bench_bg is stopped, the network namespace
# in $bench_netns (if set) is deleted and $tmp removed.

bench_pids=()
bench_netns=

# bench_need FILE...: each FILE is an executable, or exit 1 saying so.
bench_need() {
	local f
	for f in "$@"; do
		[ -x "$f" ] || { echo "$0: $f missing: build first" >&2; exit 1; }
	done
}

# bench_setup NAME: $tmp and the cleanup on exit.
bench_setup() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/vnic-$1.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 1' HUP INT TERM
}

bench_cleanup() {
	bench_stop "${bench_pids[@]}"
	if [ -n "$bench_netns" ]; then ip netns del "$bench_netns" 2>/dev/null || true; fi
	rm -rf "$tmp"
}

# bench_bg COMMAND...: COMMAND in the background, stopped on exit; its
# pid in $bench_pid.
bench_bg() {
	"$@" &
	bench_pid=$!
	bench_pids+=("$bench_pid")
}

# bench_stop PID...: SIGTERM each PID and wait for it (gone: no error);
# off the list, so that the cleanup never signals a reused pid.
bench_stop() {
	local p q keep
	for p in "$@"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
		keep=()
		for q in "${bench_pids[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
		bench_pids=("${keep[@]}")
	done
}

# bench_vnicd SOCKET LOG ARGS...: vnicd ($vnicd, --worker $worker) on
# SOCKET in the background, logging to LOG; returns once SOCKET is there
# (10 s at most, else exit 1 with the log). Its pid in $bench_pid.
bench_vnicd() {
	local sock=$1 log=$2
	shift 2
	bench_bg "$vnicd" --socket "$sock" --foreground --worker "$worker" "$@" >"$log" 2>&1
	for _ in $(seq 200); do [ -S "$sock" ] && return 0; sleep 0.05; done
	echo "$0: vnicd did not start:" >&2
	cat "$log" >&2
	exit 1
}
