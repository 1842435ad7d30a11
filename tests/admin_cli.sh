#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The operator's view (issue 10): --version on every program equals
# configure's version (and libvnic.h's macros); vnicctl list / status ID /
# status --json (schema, vnicd's version, owner pid and uid, backend, MAC,
# features) against a running vnicd with two NICs of real traffic;
# vnicctl add refuses a malformed --mac; log-level changes vnicd's level
# for root and is refused to a member of --group.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 to read vnicctl --json"

want=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$VNIC_TOP_BUILDDIR/config.h")
[ -n "$want" ] || e2e_die "no PACKAGE_VERSION in config.h"
for p in "$VNICD" "$VNICD_WORKER" "$VNICCTL" "$VNIC_BENCH"; do
	got=$("$p" --version) || e2e_die "$p --version failed"
	name=$(basename "$p")
	[ "$got" = "$name (vnicd) $want" ] || e2e_die "$name --version says '$got', want '$name (vnicd) $want'"
done
hdr=$(sed -n 's/^#define VNIC_VERSION_STRING "\(.*\)"$/\1/p' "$VNIC_TOP_SRCDIR/libvnic/libvnic.h")
[ "$hdr" = "$want" ] || e2e_die "libvnic.h VNIC_VERSION_STRING $hdr, configure says $want"
e2e_log "--version: $want everywhere"

# vnicctl add refuses a malformed --mac itself, before it connects.
for m in 02:00:00:00:00:011 002:00:00:00:00:01 02:00:00:00:00:01: 0x2:0:0:0:0:1 \
	02-00-00-00-00-01 "02:00:00:00:00:01 "; do
	rc=0
	"$VNICCTL" --socket "$E2E_SOCK" add badmac --vhost-user "$E2E_TMP/vu.sock" --server \
		--tap vnbad0 --mac "$m" 2>"$E2E_TMP/err" || rc=$?
	[ "$rc" = 2 ] && grep -q 'give six hex bytes' "$E2E_TMP/err" ||
		e2e_die "vnicctl add --mac '$m': rc $rc, $(cat "$E2E_TMP/err")"
done

# vnicctl's one command table: --help lists every command; a wrong operand
# count or a missing option is a usage error (2) before vnicd is asked; the
# TX mode names are libvnic's, "default" included, for set-policy and add
# alike (no vnicd on this socket: an accepted command fails to connect, 1).
help=$("$VNICCTL" --help) || e2e_die "vnicctl --help"
for c in list status set-policy log-level add remove; do
	echo "$help" | grep -q "^  $c\( \|\$\)" || e2e_die "vnicctl --help does not list $c"
done
none="$E2E_TMP/no-vnicd.sock"
ctl_rc() { # ctl_rc WANT ARGS...: vnicctl ARGS exits WANT
	w=$1; shift
	rc=0; "$VNICCTL" --socket "$none" "$@" >/dev/null 2>&1 || rc=$?
	[ "$rc" = "$w" ] || e2e_die "vnicctl $*: exit $rc, want $w"
}
ctl_rc 2 status a b
ctl_rc 2 list extra
ctl_rc 2 status --tap x
ctl_rc 2 add vu0 --vhost-user "$E2E_TMP/vu.sock" --tap t
ctl_rc 2 remove
for m in default bh timer adaptive poll; do
	ctl_rc 1 set-policy n0 --mode "$m"
	ctl_rc 1 add vu0 --vhost-user "$E2E_TMP/vu.sock" --server --tap t --policy "$m"
done
ctl_rc 2 set-policy n0 --mode fast
ctl_rc 2 add vu0 --vhost-user "$E2E_TMP/vu.sock" --server --tap t --policy fast
ctl_rc 1 --json status --watch --count 1
e2e_log "vnicctl: one command table, usage errors, mode names"

# Without root: workers without their sandbox (vnicd refuses otherwise).
sandbox=
[ "$(id -u)" = 0 ] || sandbox=--sandbox=off
"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" $sandbox >"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
"$VNICCTL" --socket "$E2E_SOCK" --json status >"$E2E_TMP/empty.json" || e2e_die "status --json"
python3 - "$E2E_TMP/empty.json" "$want" <<'PY' || e2e_die "empty status JSON"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["schema"] == 1, o
assert o["vnicd_version"] == sys.argv[2] and o["vnicctl_version"] == sys.argv[2], o
assert o["nics"] == [], o
PY
"$VNICCTL" --socket "$E2E_SOCK" status nonesuch 2>"$E2E_TMP/err" && e2e_die "status of a missing NIC succeeded"
grep -q 'no NIC "nonesuch"' "$E2E_TMP/err" || e2e_die "status of a missing NIC: $(cat "$E2E_TMP/err")"

# Two NICs with traffic; while they run: the owner's pid (vnic-bench, the
# parent of the hook's shell), list, status of one, the JSON.
hook="echo \$PPID > $E2E_TMP/owner.pid; $VNICCTL --socket $E2E_SOCK set-policy bench\$PPID-0 --mode bh --budget-packets 64 --budget-bytes 65536 > $E2E_TMP/setpol.txt && $VNICCTL --socket $E2E_SOCK --json status > $E2E_TMP/status.json && $VNICCTL --socket $E2E_SOCK list > $E2E_TMP/list.txt && $VNICCTL --socket $E2E_SOCK status bench\$PPID-1 > $E2E_TMP/one.txt"
e2e_bench traffic --nics 2 --backend socket --direction h2g --size 256 --seconds 5 --count 200 \
	--before-remove "$hook" >/dev/null || e2e_die "vnic-bench traffic failed"
python3 - "$E2E_TMP/status.json" "$(cat "$E2E_TMP/owner.pid")" "$(id -u)" <<'PY' || e2e_die "status JSON: wrong fields"
import json, re, sys
o = json.load(open(sys.argv[1]))
owner, uid = int(sys.argv[2]), int(sys.argv[3])
assert [n["id"] for n in o["nics"]] == ["bench%d-0" % owner, "bench%d-1" % owner], o
for n in o["nics"]:
    assert n["state"] == "RUNNING", n
    assert n["owner"] == {"pid": owner, "uid": uid, "path": ""}, (n["owner"], owner)
    assert n["backend"] == "socket" and n["tap_name"] == "", n
    assert re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", n["mac"]) and n["mac"] != "00:00:00:00:00:00", n
    assert n["features"] & (1 << 32) and "VERSION_1" in n["feature_names"], n
    assert n["mtu"] > 0 and n["policy"] == "bh", n
    assert n["inflight"] == "vnicd", n   # vnicd's own region (issue 16)
    assert sum(q["packets"] for q in n["queues"]) > 0, n
pp = [n["policy_params"] for n in o["nics"]]
assert pp[0]["budget_packets"] == 64 and pp[0]["budget_bytes"] == 65536, pp   # vnicctl set-policy
assert pp[1]["budget_packets"] != 64, pp
assert o["nics"][0]["mac"] != o["nics"][1]["mac"]
print("status JSON: owner pid %d uid %d, backend, mac, features: ok" % (owner, uid))
PY
b=bench$(cat "$E2E_TMP/owner.pid")
grep -q "^nic $b-0: policy bh$" "$E2E_TMP/setpol.txt" || e2e_die "set-policy said: $(cat "$E2E_TMP/setpol.txt")"
grep -q "^$b-0 .*RUNNING .*pid [0-9]* uid [0-9]* .*socket" "$E2E_TMP/list.txt" || e2e_die "list: $(cat "$E2E_TMP/list.txt")"
grep -q "^$b-1 " "$E2E_TMP/one.txt" && ! grep -q "^$b-0 " "$E2E_TMP/one.txt" || e2e_die "status $b-1: $(cat "$E2E_TMP/one.txt")"
grep -q 'features 0x.*VERSION_1' "$E2E_TMP/one.txt" || e2e_die "status $b-1 has no feature line"

# log-level: root (or vnicd's own uid) may; the level really changes (debug lines appear).
"$VNICCTL" --socket "$E2E_SOCK" log-level debug >"$E2E_TMP/ll.txt" || e2e_die "log-level debug"
grep -q 'log level info -> debug' "$E2E_TMP/ll.txt" || e2e_die "log-level said: $(cat "$E2E_TMP/ll.txt")"
"$VNICCTL" --socket "$E2E_SOCK" status >/dev/null
e2e_wait_for 5 "a debug line" grep -q ': debug: conn .*GetStatus' "$E2E_TMP/vnicd.log"
"$VNICCTL" --socket "$E2E_SOCK" log-level loud 2>"$E2E_TMP/err" && e2e_die "log-level loud accepted"
grep -q 'use error, warn, info or debug' "$E2E_TMP/err" || e2e_die "bad level: $(cat "$E2E_TMP/err")"
e2e_stop_vnicd

# A member of --group (a VMM) may connect but not change the log level.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && getent group nogroup >/dev/null; then
	chmod 755 "$E2E_TMP"
	"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" --group nogroup \
		>"$E2E_TMP/vnicd.log" 2>&1 &
	VNICD_PID=$!
	e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
	gid=$(getent group nogroup | cut -d: -f3)
	setpriv --reuid=65534 --regid="$gid" --clear-groups "$VNICCTL" --socket "$E2E_SOCK" status \
		>/dev/null || e2e_die "a member of --group cannot read status"
	if setpriv --reuid=65534 --regid="$gid" --clear-groups "$VNICCTL" --socket "$E2E_SOCK" \
		log-level debug 2>"$E2E_TMP/err"; then
		e2e_die "a member of --group changed the log level"
	fi
	grep -q 'may not change the log level' "$E2E_TMP/err" || e2e_die "refusal said: $(cat "$E2E_TMP/err")"
	# ... nor the policy of a NIC another connection (root's vnic-bench) owns.
	e2e_bench traffic --nics 1 --backend socket --direction h2g --size 64 --seconds 5 --count 10 \
		--before-remove "setpriv --reuid=65534 --regid=$gid --clear-groups $VNICCTL --socket $E2E_SOCK set-policy bench\$PPID-0 --budget-packets 9 2>$E2E_TMP/sp.err; echo \$? > $E2E_TMP/sp.rc" \
		>/dev/null || e2e_die "traffic with a --group member"
	[ "$(cat "$E2E_TMP/sp.rc")" = 1 ] && grep -q 'no NIC .* on this connection' "$E2E_TMP/sp.err" ||
		e2e_die "a member of --group set another's policy: rc $(cat "$E2E_TMP/sp.rc"), $(cat "$E2E_TMP/sp.err")"
	e2e_stop_vnicd
else
	e2e_log "not root or no setpriv/nogroup: the --group refusal is not tested"
fi
e2e_log "PASS"
