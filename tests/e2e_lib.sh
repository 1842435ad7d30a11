# SPDX-License-Identifier: BSD-3-Clause
# e2e_lib.sh: helpers for the end-to-end tests (sourced, never run).
#
# Real processes: vnicd on a private socket in a temp dir, its workers,
# and vnic-bench as the VMM and guests. Binaries come from the build tree
# that `make check` exports as $VNIC_TOP_BUILDDIR. Every wait has a
# deadline; cleanup (vnicd stopped, netns removed, temp dir deleted) runs
# from an EXIT trap on every path. Exit 77 = skipped (automake).

E2E_NAME=${E2E_NAME:-$(basename "$0" .sh)}

# Each line carries the UTC time to the millisecond, as vnicd's log does,
# so a failure's lines line up with the daemon's.
e2e_log() { printf '%s %s: %s\n' "$(date -u +%T.%3N)" "$E2E_NAME" "$*" >&2; }
e2e_skip() { e2e_log "SKIP: $*"; exit 77; }
e2e_die() { e2e_log "FAIL: $*"; exit 1; }

# e2e_need_root [WHY] - skip (77) unless root; WHY names what needs it.
e2e_need_root() {
	[ "$(id -u)" = 0 ] || e2e_skip "needs root (${1:-network namespaces, taps})"
}

e2e_need_tun() {
	e2e_need_root
	[ -c /dev/net/tun ] || e2e_skip "needs /dev/net/tun"
	command -v ip >/dev/null 2>&1 || e2e_skip "needs ip (iproute2)"
	command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 to read vnicctl --json"
}

# e2e_need_netns - skip (77) unless root with ip (network namespaces and
# veth pairs) and python3.
e2e_need_netns() {
	e2e_need_root "network namespaces, veth pairs, AF_PACKET"
	command -v ip >/dev/null 2>&1 || e2e_skip "needs ip (iproute2)"
	command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 to read vnicctl --json"
}

# e2e_packet_sockets PID NETNS - the inodes of the AF_PACKET sockets of
# network namespace NETNS that PID holds.
e2e_packet_sockets() {
	ip netns exec "$2" cat /proc/net/packet >"$E2E_TMP/packet" || return 0
	for _fd in /proc/"$1"/fd/*; do
		readlink "$_fd" 2>/dev/null
	done | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | while read -r _ino; do
		awk -v i="$_ino" 'NR > 1 && $9 == i { print i }' "$E2E_TMP/packet"
	done
}

# e2e_find VAR REL... - the first executable $VNIC_TOP_BUILDDIR/REL.
e2e_find() {
	_var=$1
	shift
	for _rel in "$@"; do
		if [ -x "$VNIC_TOP_BUILDDIR/$_rel" ]; then
			eval "$_var=\$VNIC_TOP_BUILDDIR/\$_rel"
			return 0
		fi
	done
	e2e_die "none of $* in $VNIC_TOP_BUILDDIR: build first"
}

: "${VNIC_TOP_BUILDDIR:?VNIC_TOP_BUILDDIR is not set: run through make check}"
e2e_find VNICD supervisor/vnicd vnicd
e2e_find VNICD_WORKER workers/vnicd-worker vnicd-worker
e2e_find VNIC_BENCH tools/vnic-bench vnic-bench
e2e_find VNICCTL tools/vnicctl vnicctl

E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/vnic-e2e.XXXXXX") || e2e_die "mktemp"
E2E_SOCK=$E2E_TMP/control.sock
VNICD_PID=
E2E_NETNS=

e2e_stop_vnicd() {
	[ -n "$VNICD_PID" ] || return 0
	kill -TERM "$VNICD_PID" 2>/dev/null || true
	# SIGTERM stops and reaps every worker; give it 10 s, then SIGKILL.
	_i=0
	while kill -0 "$VNICD_PID" 2>/dev/null && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	if kill -0 "$VNICD_PID" 2>/dev/null; then
		e2e_log "vnicd pid $VNICD_PID ignored SIGTERM for 10 s: SIGKILL"
		kill -KILL "$VNICD_PID" 2>/dev/null || true
	fi
	wait "$VNICD_PID" 2>/dev/null || true
	VNICD_PID=
}

e2e_cleanup() {
	_rc=$?
	e2e_stop_vnicd
	if [ -n "$E2E_NETNS" ]; then
		ip netns del "$E2E_NETNS" 2>/dev/null || true
	fi
	if [ $_rc -ne 0 ] && [ $_rc -ne 77 ] && [ -f "$E2E_TMP/vnicd.log" ]; then
		e2e_log "vnicd log (last 40 lines):"
		tail -n 40 "$E2E_TMP/vnicd.log" >&2
	fi
	rm -rf "$E2E_TMP"
	exit $_rc
}
trap e2e_cleanup EXIT
trap 'exit 1' HUP INT TERM

# e2e_wait_for SECONDS DESCRIPTION CMD... - run CMD every 0.1 s until it
# succeeds; fail after SECONDS.
e2e_wait_for() {
	_limit=$(($1 * 10))
	_desc=$2
	shift 2
	_i=0
	until "$@"; do
		_i=$((_i + 1))
		[ $_i -lt $_limit ] || e2e_die "timed out waiting for $_desc"
		sleep 0.1
	done
}

e2e_vnicd_up() {
	kill -0 "$VNICD_PID" 2>/dev/null || e2e_die "vnicd exited during startup"
	[ -S "$E2E_SOCK" ]
}

# e2e_start_vnicd - vnicd in the foreground on the private socket.
e2e_start_vnicd() {
	# A vnicd killed by the previous round leaves its socket file: without
	# this, the wait below could see it before the new vnicd listens.
	rm -f "$E2E_SOCK"
	"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" \
		>"$E2E_TMP/vnicd.log" 2>&1 &
	VNICD_PID=$!
	e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
}

# e2e_workers - "id pair pid restarts state" per queue pair of every NIC
# of our vnicd, sorted.
e2e_workers() {
	"$VNICCTL" --socket "$E2E_SOCK" --json status | python3 -c '
import json, sys
for n in json.load(sys.stdin)["nics"]:
    for p in n["pairs"]:
        print(n["id"], p["pair"], p["pid"], p["restarts"], p["state"])' | sort
}

# e2e_netns_add - a private network namespace, removed by the EXIT trap.
e2e_netns_add() {
	E2E_NETNS=vnice2e$$
	ip netns add "$E2E_NETNS" || e2e_die "ip netns add $E2E_NETNS"
}

# e2e_bench ARGS... - vnic-bench against our vnicd, bounded to
# $E2E_BENCH_TIMEOUT seconds (default 40), output kept in
# $E2E_TMP/bench.out (and shown).
e2e_bench() {
	_rc=0
	timeout -k 3 "${E2E_BENCH_TIMEOUT:-40}" "$VNIC_BENCH" --socket "$E2E_SOCK" "$@" >"$E2E_TMP/bench.out" 2>&1 || _rc=$?
	cat "$E2E_TMP/bench.out"
	return $_rc
}

# e2e_result_field DIR KEY - a field of vnic-bench's "RESULT ... dir=DIR" line.
e2e_result_field() {
	sed -n "s/^RESULT .* dir=$1 .*\\b$2=\\([^ ]*\\).*/\\1/p" "$E2E_TMP/bench.out" | head -n 1
}

# e2e_check_counters EXPECT STATUS - vnicctl status --json (STATUS) shows
# every NIC of EXPECT (written by vnic-bench --expect-json) RUNNING, with
# the schema's fields, every queue's (tx0/rx0, tx1/rx1 ...) packets and
# bytes equal to what the guests sent and received, and a RUNNING worker of
# its own per queue pair.
e2e_check_counters() {
	python3 - "$1" "$2" <<'PY'
import json, sys
exp = json.load(open(sys.argv[1]))
st = json.load(open(sys.argv[2]))
nic_keys = {"id", "state", "pid", "policy", "restarts", "uptime_s", "last_error", "queues"}
q_keys = {"name", "packets", "bytes", "kicks", "interrupts", "suppressed", "drops",
          "errors", "broken"}
by_id = {n["id"]: n for n in st["nics"]}
bad = []
for e in exp["nics"]:
    n = by_id.get(e["id"])
    if n is None:
        bad.append("%s: not in vnicctl status" % e["id"])
        continue
    if not nic_keys <= n.keys():
        bad.append("%s: missing %s" % (e["id"], sorted(nic_keys - n.keys())))
    if n["state"] != "RUNNING":
        bad.append("%s: state %s" % (e["id"], n["state"]))
    qs = {q["name"]: q for q in n["queues"]}
    for name, want in e["queues"].items():
        q = qs.get(name)
        if q is None:
            bad.append("%s: no queue %s" % (e["id"], name))
            continue
        if not q_keys <= q.keys():
            bad.append("%s %s: missing %s" % (e["id"], name, sorted(q_keys - q.keys())))
        for k in ("packets", "bytes"):
            if q[k] != want[k]:
                bad.append("%s %s %s: vnicctl says %d, the guest/host saw %d"
                           % (e["id"], name, k, q[k], want[k]))
        if q["broken"]:
            bad.append("%s %s: broken" % (e["id"], name))
    # A worker per queue pair (issue 15), each running, none shared.
    npairs = len([q for q in e["queues"] if q.startswith("tx")])
    rows = n.get("pairs", [])
    pids = [p["pid"] for p in rows]
    if len(rows) != npairs:
        bad.append("%s: %d pair rows, want %d" % (e["id"], len(rows), npairs))
    elif any(p["state"] != "RUNNING" for p in rows) or 0 in pids or len(set(pids)) != npairs:
        bad.append("%s: pairs not each RUNNING with its own worker: %s" % (e["id"], rows))
print("checked %d NIC(s) against vnicctl status --json" % len(exp["nics"]))
for b in bad:
    print("counter mismatch: " + b, file=sys.stderr)
sys.exit(1 if bad or not exp["nics"] else 0)
PY
}
