#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vnicd under systemd (issue 10), on a host without systemd as PID 1:
#  - the units pass `systemd-analyze verify`; the sysusers.d and tmpfiles.d
#    entries create the vnicd user/group and directories in a scratch root;
#  - NOTIFY_SOCKET: READY=1 arrives when the socket already accepts,
#    STATUS= says the NICs, STOPPING=1 at SIGTERM;
#  - LISTEN_FDS: vnicd serves a listening socket it was handed
#    (systemd-socket-activate, or tests/sd_helper.py where it is missing),
#    and leaves its file alone;
#  - the journal: with JOURNAL_STREAM naming its stderr, each line reaches
#    the journal's native socket (a private one, in a mount namespace) with
#    PRIORITY, SYSLOG_IDENTIFIER, NIC_ID for a NIC's lines, no timestamp of
#    ours; without a journal socket, "<N>" prefixes on stderr;
#  - the unit's hardening, emulated: vnicd with exactly the unit's
#    capability bounding set, no_new_privs, a read-only root, runs a
#    sandboxed NIC with traffic.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 (the test's systemd stand-in)"
HELPER=$VNIC_TOP_SRCDIR/tests/sd_helper.py
UNIT=$VNIC_TOP_BUILDDIR/systemd/vnicd.service
SOCKUNIT=$VNIC_TOP_SRCDIR/systemd/vnicd.socket
[ -f "$UNIT" ] || e2e_die "$UNIT not built"
sandbox=
[ "$(id -u)" = 0 ] || sandbox=--sandbox=off

# --- units, sysusers, tmpfiles
if command -v systemd-analyze >/dev/null 2>&1; then
	mkdir "$E2E_TMP/units"
	# The build tree's binaries in place of the installed ones (verify
	# checks that ExecStart= is executable).
	sed -e "s|^ExecStart=[^ ]*/vnicd |ExecStart=$VNICD |" -e "s|--worker [^ ]*|--worker $VNICD_WORKER|" \
		-e "s|^ExecReload=[^ ]*/vnicctl |ExecReload=$VNICCTL |" \
		"$UNIT" >"$E2E_TMP/units/vnicd.service"
	cp "$SOCKUNIT" "$E2E_TMP/units/"
	systemd-analyze verify --man=no "$E2E_TMP/units/vnicd.service" "$E2E_TMP/units/vnicd.socket" \
		>"$E2E_TMP/verify" 2>&1 || e2e_die "systemd-analyze verify: $(cat "$E2E_TMP/verify")"
	[ ! -s "$E2E_TMP/verify" ] || e2e_die "systemd-analyze verify warns: $(cat "$E2E_TMP/verify")"
	grep -q '^Type=notify$' "$UNIT" && grep -q '^ListenSequentialPacket=/run/vnicd/control.sock$' "$SOCKUNIT" ||
		e2e_die "units: not Type=notify / ListenSequentialPacket"
	e2e_log "units verify clean; $(systemd-analyze security --offline=yes "$E2E_TMP/units/vnicd.service" 2>/dev/null | tail -n 1)"
else
	e2e_log "no systemd-analyze: units not verified"
fi
if command -v systemd-sysusers >/dev/null 2>&1 && command -v systemd-tmpfiles >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	root=$E2E_TMP/root
	mkdir -p "$root/etc"
	systemd-sysusers --root="$root" "$VNIC_TOP_SRCDIR/systemd/vnicd.sysusers" >/dev/null 2>&1 ||
		e2e_die "systemd-sysusers failed"
	grep -q '^vnicd:x:[0-9]*:[0-9]*:.*:/nonexistent:/usr/sbin/nologin$' "$root/etc/passwd" &&
		grep -q '^vnicd:x:' "$root/etc/group" || e2e_die "sysusers: no vnicd user/group in the scratch root"
	systemd-tmpfiles --root="$root" --create "$VNIC_TOP_SRCDIR/systemd/vnicd.tmpfiles" >/dev/null 2>&1 ||
		e2e_die "systemd-tmpfiles failed"
	[ -d "$root/run/vnicd" ] && [ -d "$root/etc/vnicd" ] || e2e_die "tmpfiles: directories missing"
	e2e_log "sysusers.d and tmpfiles.d entries: user, group and directories made in a scratch root"
fi

# --- NOTIFY_SOCKET
timeout 40 python3 "$HELPER" notify "$E2E_TMP/notify" "$E2E_TMP/notify.out" "$E2E_SOCK" 30 &
hpid=$!
e2e_wait_for 10 "the notify socket" test -S "$E2E_TMP/notify"
NOTIFY_SOCKET=$E2E_TMP/notify "$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" $sandbox \
	>"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "READY=1" grep -q 'READY=1' "$E2E_TMP/notify.out"
# An upgrade in place (what ExecReload= runs) while the NIC runs:
# RELOADING=1 from the old binary, READY=1 from the new one.
e2e_bench traffic --nics 1 --backend socket --direction h2g --size 128 --seconds 5 --count 50 \
	--before-remove "sleep 2.5" >/dev/null &
bpid=$!
sleep 1
"$VNICCTL" --socket "$E2E_SOCK" upgrade >/dev/null || e2e_die "vnicctl upgrade under NOTIFY_SOCKET"
wait $bpid || e2e_die "traffic under NOTIFY_SOCKET"
kill -TERM "$VNICD_PID"
wait "$VNICD_PID" || e2e_die "vnicd exited non-zero after SIGTERM"
VNICD_PID=
wait $hpid || true
python3 - "$E2E_TMP/notify.out" <<'PY' || e2e_die "sd_notify messages: $(cat "$E2E_TMP/notify.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
msgs = [r["msg"] for r in recs]
ready = [r for r in recs if "READY=1" in r["msg"].split("\n")]
reloading = [i for i, m in enumerate(msgs) if "RELOADING=1" in m.split("\n")]
assert len(ready) == 2 and all(r["control_accepts"] for r in ready), recs
assert "STATUS=0 NIC(s)" in ready[0]["msg"], ready
assert "STATUS=1 NIC(s)" in ready[1]["msg"], ready           # the upgrade's new binary
assert any("STATUS=1 NIC(s)" in m for m in msgs), msgs       # while the NIC ran
assert "STOPPING=1" in msgs[-1].split("\n"), msgs
assert msgs.index(ready[0]["msg"]) == 0
assert len(reloading) == 1 and 0 < reloading[0] < recs.index(ready[1]), msgs
print("sd_notify: " + " | ".join(m.replace("\n", ", ") for m in msgs))
PY

# --- LISTEN_FDS
if command -v systemd-socket-activate >/dev/null 2>&1; then
	act="systemd-socket-activate --seqpacket -l $E2E_SOCK"
else
	act="python3 $HELPER activate $E2E_SOCK --"
fi
rm -f "$E2E_SOCK"
# shellcheck disable=SC2086
$act "$VNICD" --socket "$E2E_TMP/unused.sock" --foreground --worker "$VNICD_WORKER" $sandbox \
	>"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "the activated socket" test -S "$E2E_SOCK"
# systemd-socket-activate starts vnicd at the first connection.
"$VNICCTL" --socket "$E2E_SOCK" list >/dev/null || e2e_die "vnicctl through the activated socket"
e2e_wait_for 10 "vnicd listening" grep -q "listening on $E2E_SOCK" "$E2E_TMP/vnicd.log"
e2e_bench traffic --nics 1 --backend socket --direction h2g --size 256 --seconds 5 --count 100 --before-remove "sleep 0.3" >"$E2E_TMP/act.out" || { cat "$E2E_TMP/act.out" >&2;
	e2e_die "traffic through the activated socket"; }
[ "$(readlink /proc/$VNICD_PID/fd/3 | cut -c1-7)" = "socket:" ] || e2e_die "fd 3 of vnicd is not the socket"
[ ! -e "$E2E_TMP/unused.sock" ] || e2e_die "vnicd bound --socket although it was handed one"
kill -TERM "$VNICD_PID"
wait "$VNICD_PID" || e2e_die "activated vnicd exited non-zero"
VNICD_PID=
[ -S "$E2E_SOCK" ] || e2e_die "vnicd removed the socket systemd owns"
rm -f "$E2E_SOCK"
e2e_log "LISTEN_FDS ($act): served, fd 3 kept, socket file left to its owner"

# --- journal: "<N>" on stderr when there is no journal socket
if [ ! -e /run/systemd/journal/socket ]; then
	: >"$E2E_TMP/stderr"
	js=$(stat -c '%d:%i' "$E2E_TMP/stderr")
	JOURNAL_STREAM=$js "$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" $sandbox \
		2>>"$E2E_TMP/stderr" &
	VNICD_PID=$!
	e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
	e2e_stop_vnicd
	grep -q '^<6>listening on ' "$E2E_TMP/stderr" || e2e_die "no <6> line: $(head -3 "$E2E_TMP/stderr")"
	! grep -qv '^<[0-7]>' "$E2E_TMP/stderr" || e2e_die "a line without priority: $(grep -v '^<[0-7]>' "$E2E_TMP/stderr" | head -1)"
	! grep -q '^<[0-7]>20[0-9][0-9]-' "$E2E_TMP/stderr" || e2e_die "a second timestamp in a journal line"
	e2e_log "journal stream without journald: <N> prefixes, no timestamp"
fi

# --- journal: the native protocol, in a private mount namespace
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
	cat >"$E2E_TMP/journal.sh" <<EOS
set -eu
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/journal
timeout 40 python3 "$HELPER" journal /run/systemd/journal/socket "$E2E_TMP/journal.out" 30 &
h=\$!
i=0; until [ -S /run/systemd/journal/socket ] || [ \$i -ge 100 ]; do sleep 0.1; i=\$((i+1)); done
: >"$E2E_TMP/stderr2"
JOURNAL_STREAM=\$(stat -c '%d:%i' "$E2E_TMP/stderr2") "$VNICD" --socket "$E2E_SOCK" --foreground \
	--worker "$VNICD_WORKER" 2>>"$E2E_TMP/stderr2" &
v=\$!
i=0; until [ -S "$E2E_SOCK" ] || [ \$i -ge 100 ]; do sleep 0.1; i=\$((i+1)); done
timeout 30 "$VNIC_BENCH" --socket "$E2E_SOCK" traffic --nics 1 --backend socket --direction h2g \
	--size 128 --seconds 5 --count 50 >/dev/null
kill -TERM \$v; wait \$v
sleep 0.3
kill \$h 2>/dev/null || true
EOS
	unshare -m sh "$E2E_TMP/journal.sh" || e2e_die "the journal round failed"
	python3 - "$E2E_TMP/journal.out" "$E2E_TMP/stderr2" <<'PY' || e2e_die "journal records"
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs, "no journal record"
assert all(r.get("SYSLOG_IDENTIFIER") == "vnicd" for r in recs), recs[:3]
assert all(re.fullmatch(r"[0-7]", r.get("PRIORITY", "")) for r in recs), recs[:3]
assert not any(re.match(r"\d{4}-\d\d-\d\dT", r["MESSAGE"]) for r in recs), "a timestamp of ours"
nic = [r for r in recs if "NIC_ID" in r]
assert nic and all(r["MESSAGE"].startswith("nic " + r["NIC_ID"]) for r in nic), nic[:3]
assert any(r["PRIORITY"] == "6" and r["MESSAGE"].startswith("listening on") for r in recs)
worker = [r for r in nic if " worker: " in r["MESSAGE"]]
assert worker, "no worker line with NIC_ID"
assert open(sys.argv[2]).read() == "", "lines went to stderr as well"
print("journal: %d records, %d with NIC_ID=%s" % (len(recs), len(nic), nic[0]["NIC_ID"]))
PY
fi

# --- the unit's hardening, emulated
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1; then
	caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr 'A-Z' 'a-z' | sed 's/cap_/+/g; s/ /,/g')

	cat >"$E2E_TMP/harden.sh" <<EOS
set -eu
mount --make-rprivate /
mount --bind "$E2E_TMP" "$E2E_TMP"
mount -o remount,bind,ro /
for m in /tmp /home /usr /etc; do mountpoint -q \$m && mount -o remount,bind,ro \$m; done
mount -o remount,bind,rw "$E2E_TMP"
exec setpriv --no-new-privs --bounding-set=-all,$caps --inh-caps=-all "$VNICD" --socket "$E2E_SOCK" \
	--foreground --worker "$VNICD_WORKER"
EOS
	unshare -m sh "$E2E_TMP/harden.sh" >"$E2E_TMP/vnicd.log" 2>&1 &
	VNICD_PID=$!
	e2e_wait_for 10 "hardened vnicd" e2e_vnicd_up
	# An upgrade in place (ExecReload=) under traffic: at nice 10, then
	# back (the bounding set must keep CAP_SYS_NICE for that).
	nice0=$(ps -o ni= -p "$VNICD_PID" | tr -d ' ')
	e2e_bench traffic --nics 1 --backend socket --direction h2g --size 256 --seconds 5 --count 100 \
		--before-remove "$VNICCTL --socket $E2E_SOCK upgrade >/dev/null &&
			$VNICCTL --socket $E2E_SOCK --json status > $E2E_TMP/h.json; sleep 0.3" >"$E2E_TMP/h.out" || { cat "$E2E_TMP/h.out" >&2;
		e2e_die "traffic or the upgrade under the unit's hardening"; }
	grep -q "upgrade: handing over.*at nice 10" "$E2E_TMP/vnicd.log" ||
		e2e_die "the upgrade did not lower vnicd's priority: $(grep upgrade "$E2E_TMP/vnicd.log")"
	! grep -q "cannot return to nice" "$E2E_TMP/vnicd.log" || e2e_die "$(grep nice "$E2E_TMP/vnicd.log")"
	[ "$(ps -o ni= -p "$VNICD_PID" | tr -d ' ')" = "$nice0" ] ||
		e2e_die "vnicd's nice after the upgrade: $(ps -o ni= -p "$VNICD_PID"), before $nice0"
	grep -q '"sandboxed":true' "$E2E_TMP/h.json" || e2e_die "worker not sandboxed under the hardening"
	grep -q "^NoNewPrivs:[[:space:]]*1" /proc/$VNICD_PID/status || e2e_die "vnicd runs without no_new_privs"
	[ "$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/$VNICD_PID/status)" != "$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)" ] ||
		e2e_die "vnicd runs with the full bounding set"
	e2e_stop_vnicd
	e2e_log "hardening (bounding set $caps, no_new_privs, read-only /): a sandboxed NIC runs, an upgrade in place at nice 10 returns to $nice0"
fi
e2e_log "PASS"
