#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A uid per NIC (issue 10): each worker runs as its own uid and gid from
# --uid-range; two running workers have different ids (/proc/PID/status)
# and a process with one worker's uid cannot signal the other; a restarted
# worker keeps its NIC's uid; the range's end is RESOURCE_EXHAUSTED, a
# freed id is used again; ranges that overlap passwd/group entries or hold
# uid 0 are refused at start.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
e2e_need_root
command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3"

refuse() {
	_pat=$1
	shift
	_rc=0
	"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" "$@" 2>"$E2E_TMP/err" || _rc=$?
	[ $_rc -ne 0 ] && grep -q "$_pat" "$E2E_TMP/err" || e2e_die "$* : exit $_rc, $(cat "$E2E_TMP/err")"
}
refuse "none of them 0" --uid-range 0-10
refuse "overlaps \(user\|group\) .*65534" --uid-range 65534:1
refuse "give FIRST-LAST or FIRST:COUNT" --uid-range 100
refuse "LAST is below FIRST" --uid-range 200-100
refuse "neither --user nor --sandbox=off" --uid-range 1879048192:2 --user nobody
e2e_log "bad ranges refused"

FIRST=1879048192
"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" --uid-range $FIRST:2 \
	>"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up

cat >"$E2E_TMP/hook.py" <<'PY'
import json, os, signal, subprocess, sys, time
ctl, sock, bench, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def status():
    return json.loads(subprocess.check_output([ctl, "--socket", sock, "--json", "status"]))["nics"]

def ids(pid):
    f = {}
    for line in open("/proc/%d/status" % pid):
        k, v = line.split(":", 1)
        f[k] = v.split()
    return [int(x) for x in f["Uid"]], [int(x) for x in f["Gid"]]

nics = status()
assert len(nics) == 2, nics
a, b = nics
for n in nics:
    uids, gids = ids(n["pid"])
    assert uids == [n["worker_uid"]] * 4 and gids == [n["worker_gid"]] * 4, (n["id"], uids, gids)
    assert first <= n["worker_uid"] < first + 2 and n["worker_gid"] == n["worker_uid"], n
assert a["worker_uid"] != b["worker_uid"], (a["worker_uid"], b["worker_uid"])
print("workers %d and %d run as uids %d and %d" % (a["pid"], b["pid"], a["worker_uid"], b["worker_uid"]))

# A process with A's uid: may signal A (same uid), may not signal B.
child = os.fork()
if child == 0:
    u = a["worker_uid"]
    os.setgroups([])
    os.setresgid(u, u, u)
    os.setresuid(u, u, u)
    os.kill(a["pid"], 0)
    try:
        os.kill(b["pid"], signal.SIGKILL)
    except PermissionError:
        os._exit(0)
    os._exit(1)
_, st = os.waitpid(child, 0)
assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "uid %d could signal worker %d" % (a["worker_uid"], b["pid"])
assert os.path.exists("/proc/%d" % b["pid"])
print("uid %d: kill(worker A, 0) allowed, kill(worker B) EPERM" % a["worker_uid"])

# The range is full: a third NIC is refused.
r = subprocess.run([bench, "--socket", sock, "traffic", "--nics", "1", "--backend", "socket",
                    "--direction", "h2g", "--size", "64", "--count", "1", "--seconds", "2"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
assert r.returncode != 0, "a third NIC started with a range of 2"

# A crashed worker comes back with its NIC's uid.
os.kill(a["pid"], signal.SIGKILL)
for _ in range(100):
    time.sleep(0.05)
    n = [x for x in status() if x["id"] == a["id"]][0]
    if n["state"] == "RUNNING" and n["pid"] not in (0, a["pid"]):
        break
else:
    raise SystemExit("worker of %s not restarted" % a["id"])
assert n["restarts"] == 1 and n["worker_uid"] == a["worker_uid"], n
assert ids(n["pid"])[0] == [a["worker_uid"]] * 4
print("restarted worker %d keeps uid %d" % (n["pid"], a["worker_uid"]))
PY
e2e_bench traffic --nics 2 --backend socket --direction h2g --size 256 --seconds 10 --count 100 \
	--before-remove "python3 $E2E_TMP/hook.py $VNICCTL $E2E_SOCK $VNIC_BENCH $FIRST" >"$E2E_TMP/b.out" ||
	{ cat "$E2E_TMP/b.out" >&2; e2e_die "two NICs with their own uids"; }
grep '^workers\|^uid\|^restarted' "$E2E_TMP/b.out" >&2
grep -q "no free uid in --uid-range $FIRST-$((FIRST + 1)) (2 NICs use them)" "$E2E_TMP/vnicd.log" ||
	e2e_die "no RESOURCE_EXHAUSTED line for the third NIC"
# Both ids are free again: two new NICs start.
e2e_bench traffic --nics 2 --backend socket --direction h2g --size 64 --seconds 5 --count 10 >/dev/null ||
	e2e_die "the freed uids are not given out again"
e2e_stop_vnicd
e2e_log "PASS"
