#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# upgrade.sh: upgrade in place (issue 16, doc/design.md "Upgrade in
# place") with real processes: vnicd runs from a copy of the build's
# binary in the test's directory; each upgrade installs the binary again
# (a new file renamed over the old, as a package manager does) and runs
# `vnicctl upgrade`.
#
#   under traffic  vnic-bench traffic (2 NICs x 2 queue pairs, socket
#                  backend, both directions) while vnicd upgrades 3 times:
#                  every frame arrives once and intact, every TX
#                  descriptor comes back once (vnic-bench's own checks);
#                  the same vnicd pid, every worker the same pid with no
#                  restart, each worker's holder the same pid (the
#                  lifeline went over), the VMM's connection kept; vnicd runs the new
#                  file (/proc/PID/exe not "(deleted)"); its fd count is
#                  the same before and after; its nice value (2, set by
#                  the test) is 2 again after each upgrade
#   endpoints      a vhost-user endpoint in server mode and one in client
#                  mode, no front end yet, are taken over: the server's
#                  socket still accepts, both are listed
#   bad binary     a new "vnicd" that exits 3, and one that cannot be
#                  executed: the upgrade is refused with the reason, the
#                  old vnicd serves on (traffic passes); the check ran at
#                  nice 10 (the script says its nice) and vnicd is back
#                  at 2
#   failed NIC     a NIC whose worker died with --restart-max 0 (FAILED, no
#                  worker) is taken over as it is, beside a running one;
#                  that vnicd has --upgrade-nice 0 and does not renice
#                  (--upgrade-nice 20 is refused)
#   exit           SIGTERM: vnicd exits 0 (under LSan in ASan builds)
#   rollback       (fault builds) the new binary passes its check but fails
#                  to take over (sup.handover.restore=fail): the old binary
#                  is executed again with the same state; the upgrade is
#                  answered with the failure, the same workers run on and
#                  the traffic passes
# Needs root (the workers sandbox themselves); the endpoints need
# /dev/net/tun and network namespaces.
set -u
. "$(dirname "$0")/e2e_lib.sh"

e2e_need_root

# vnicd from a file of our own (install: as a package manager does).
BUILD_VNICD=$VNICD
VNICD=$E2E_TMP/vnicd
install_vnicd() {
	cp "$BUILD_VNICD" "$VNICD.new" && mv -f "$VNICD.new" "$VNICD"
}
install_vnicd
e2e_start_vnicd

ctl() { "$VNICCTL" --socket "$E2E_SOCK" "$@"; }
exe() { readlink "/proc/$VNICD_PID/exe"; }
exe_inode() { stat -L -c %i "/proc/$VNICD_PID/exe"; }
fds() { ls "/proc/$VNICD_PID/fd" | wc -l; }
# fd_list FILE: vnicd's fds and what each is, for the message of a failure.
fd_list() { for f in /proc/"$VNICD_PID"/fd/*; do echo "${f##*/} $(readlink "$f")"; done | sort -n >"$1"; }
workers() { e2e_workers; }
# holders: each worker's holder (workers/holder.h), one line "worker holder".
holders() {
	local w
	for w in $(pgrep -x -P "$VNICD_PID" vnicd-worker); do
		echo "$w $(cat "/proc/$w/task/$w/children" 2>/dev/null)"
	done | sort
}
nice_of() { ps -o ni= -p "$VNICD_PID" | tr -d ' '; }
json_field() { python3 -c 'import json, sys; j = json.load(sys.stdin); print(*(j[k] for k in sys.argv[1:]))' "$@"; }

# hold_until FILE: a --before-remove hook that keeps vnic-bench's NICs
# until FILE exists (60 s at most), so the checks after an upgrade see them.
hold_until() {
	echo "i=0; while [ ! -e $1 ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done"
}

# --- under traffic --------------------------------------------------------
E2E_BENCH_TIMEOUT=60
# The traffic outlasts the upgrades by far (they take 3-12 s: each runs
# at nice 10 while the traffic keeps both cores busy), and the test
# checks that it still runs when they are done. The NICs stay until the
# checks after the upgrades are done (the file "checked").
T0=${EPOCHREALTIME/./}
e2e_bench traffic --nics 2 --queue-pairs 2 --seconds 30 --direction both \
	--before-remove "$(hold_until "$E2E_TMP/checked")" \
	--id-prefix up >"$E2E_TMP/bench.log" 2>&1 &
BENCH=$!
four_running() { [ "$(workers | grep -c ' RUNNING$')" -ge 4 ]; }
e2e_wait_for 20 "4 queue pairs running" four_running
sleep 0.5
# An upgrade runs at nice 10 (--upgrade-nice) and returns to what vnicd had.
renice -n 2 -p "$VNICD_PID" >/dev/null || e2e_die "renice vnicd"
W0=$(workers)
H0=$(holders)
[ "$(echo "$H0" | awk 'NF == 2' | wc -l)" -ge 4 ] || e2e_die "not every worker has a holder: [$H0]"
NFD0=$(fds)
fd_list "$E2E_TMP/fds0"
e2e_log "workers before: $(echo "$W0" | tr '\n' ';')"
for i in 1 2 3; do
	install_vnicd
	case $(exe) in *"(deleted)") ;; *) e2e_die "round $i: the old binary is not replaced: $(exe)";; esac
	OUT=$(ctl --json upgrade --wait 10) || e2e_die "upgrade $i failed: $OUT"
	e2e_log "upgrade $i: $OUT"
	[ "$(echo "$OUT" | json_field pid nics upgrades)" = "$VNICD_PID 4 $i" ] ||
		e2e_die "upgrade $i: not the same pid, 4 NICs taken over and upgrade $i"
	kill -0 "$VNICD_PID" || e2e_die "vnicd is gone after upgrade $i"
	case $(exe) in *"(deleted)") e2e_die "upgrade $i: vnicd still runs the old file";; esac
	[ "$(nice_of)" = 2 ] || e2e_die "upgrade $i: vnicd's nice is $(nice_of), not 2 as before"
	sleep 0.5
done
[ $(( (${EPOCHREALTIME/./} - T0) / 1000000 )) -lt 30 ] ||
	e2e_die "the traffic ended before the upgrades did: too slow a machine?"
W1=$(workers)
H1=$(holders)
NFD1=$(fds)
fd_list "$E2E_TMP/fds1"
touch "$E2E_TMP/checked"
[ "$W0" = "$W1" ] || e2e_die "workers changed across the upgrades: before [$W0] after [$W1]"
# The lifeline goes over with the rest: the holders sleep on (holders.h).
[ "$H0" = "$H1" ] || e2e_die "holders changed across the upgrades: before [$H0] after [$H1]"
[ "$NFD0" = "$NFD1" ] || e2e_die "vnicd's fd count changed across the upgrades: $NFD0 -> $NFD1:
$(diff "$E2E_TMP/fds0" "$E2E_TMP/fds1")"
wait $BENCH || { cat "$E2E_TMP/bench.log"; e2e_die "vnic-bench traffic failed across the upgrades"; }
grep -q "vnic-bench traffic: PASS" "$E2E_TMP/bench.log" || e2e_die "no PASS from vnic-bench"
e2e_log "ok under traffic: 3 upgrades, workers and fds unchanged, every frame once"

# --- endpoints without a front end --------------------------------------
if [ -c /dev/net/tun ] && ip netns list >/dev/null 2>&1; then
	e2e_netns_add
	ctl add vs0 --vhost-user "$E2E_TMP/vs0.sock" --server --tap vup0 --netns "$E2E_NETNS" >/dev/null ||
		e2e_die "add vs0"
	ctl add vc0 --vhost-user "$E2E_TMP/vc0.sock" --client --tap vup1 --netns "$E2E_NETNS" >/dev/null ||
		e2e_die "add vc0"
	install_vnicd
	OUT=$(ctl --json upgrade) || e2e_die "upgrade with endpoints failed: $OUT"
	[ "$(echo "$OUT" | json_field endpoints)" = 2 ] || e2e_die "not 2 endpoints taken over: $OUT"
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])' "$E2E_TMP/vs0.sock" || e2e_die "vs0's socket refuses after the upgrade"
	ctl list | grep -q vc0 || e2e_die "vc0 is gone after the upgrade"
	ctl remove vs0 && ctl remove vc0 || e2e_die "removing the endpoints"
	e2e_log "ok endpoints: server and client endpoint taken over"
else
	e2e_log "endpoints: skipped (no /dev/net/tun or network namespaces)"
fi

# --- a new binary that fails its check, or cannot run ---------------------
E0=$(exe_inode)
printf '#!/bin/sh\necho "this is not vnicd (nice $(nice))" >&2\nexit 3\n' >"$VNICD.new" && chmod 755 "$VNICD.new" && mv -f "$VNICD.new" "$VNICD"
e2e_bench traffic --nics 1 --seconds 8 --direction both --id-prefix bad >"$E2E_TMP/bench.log" 2>&1 &
BENCH=$!
sleep 1
if OUT=$(ctl upgrade --wait 5 2>&1); then e2e_die "a binary that exits 3 was accepted: $OUT"; fi
echo "$OUT" | grep -q "exited with status 3: this is not vnicd" ||
	e2e_die "the refusal does not say why: $OUT"
echo "$OUT" | grep -q "(nice 10)" || e2e_die "the check did not run at nice 10: $OUT"
[ "$(nice_of)" = 2 ] || e2e_die "after a refused upgrade vnicd's nice is $(nice_of), not 2"
e2e_log "refused as it should be: $OUT"
rm -f "$VNICD"
if OUT=$(ctl upgrade --wait 5 2>&1); then e2e_die "a missing binary was accepted: $OUT"; fi
echo "$OUT" | grep -q "cannot be executed" || e2e_die "the refusal does not say why: $OUT"
e2e_log "refused as it should be: $OUT"
[ "$(exe_inode)" = "$E0" ] || e2e_die "vnicd changed its binary after refusals: inode $E0 -> $(exe_inode)"
kill -0 $BENCH 2>/dev/null || e2e_die "the traffic ended before the refusals did: too slow a machine?"
wait $BENCH || { cat "$E2E_TMP/bench.log"; e2e_die "traffic failed after a refused upgrade"; }
install_vnicd

# --- exit -------------------------------------------------------------------
stop_clean() {
	kill -TERM "$VNICD_PID"
	RC=0
	wait "$VNICD_PID" || RC=$?
	VNICD_PID=
	[ $RC = 0 ] || e2e_die "vnicd exited $RC $1"
}
stop_clean "after the upgrades"

# --- a FAILED NIC beside a running one (and --upgrade-nice 0) ----------------
if OUT=$("$VNICD" --upgrade-nice 20 2>&1); then e2e_die "--upgrade-nice 20 was accepted"; fi
echo "$OUT" | grep -q "use 0..19" || e2e_die "--upgrade-nice 20: $OUT"
rm -f "$E2E_SOCK"
LOG_AT=$(wc -l <"$E2E_TMP/vnicd.log")
"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" --restart-max 0 \
	--upgrade-nice 0 >>"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
# The NICs stay until the checks are done (the file "checked-fl").
e2e_bench traffic --nics 2 --seconds 8 --direction both --id-prefix fl --fault-nic 0 \
	--before-remove "$(hold_until "$E2E_TMP/checked-fl")" \
	>"$E2E_TMP/bench.log" 2>&1 &
BENCH=$!
two_running() { [ "$(workers | grep -c ' RUNNING$')" -ge 2 ]; }
e2e_wait_for 20 "2 NICs running" two_running
kill -KILL "$(workers | awk '$1 == "fl0" { print $3 }')"
fl0_failed() { workers | grep -q '^fl0 0 .* FAILED$'; }
e2e_wait_for 10 "fl0 FAILED" fl0_failed
W0=$(workers)
install_vnicd
OUT=$(ctl --json upgrade) || e2e_die "upgrade with a FAILED NIC: $OUT"
[ "$(echo "$OUT" | json_field nics)" = 2 ] || e2e_die "not 2 NICs taken over: $OUT"
[ "$(workers)" = "$W0" ] || e2e_die "NICs changed across the upgrade: [$W0] -> [$(workers)]"
touch "$E2E_TMP/checked-fl"
wait $BENCH || { cat "$E2E_TMP/bench.log"; e2e_die "traffic with a FAILED NIC across the upgrade"; }
tail -n +"$((LOG_AT + 1))" "$E2E_TMP/vnicd.log" | grep -q "handing over" ||
	e2e_die "no upgrade in the log of the --upgrade-nice 0 vnicd"
! tail -n +"$((LOG_AT + 1))" "$E2E_TMP/vnicd.log" | grep "handing over" | grep -q "at nice" ||
	e2e_die "--upgrade-nice 0: the upgrade changed vnicd's priority"
e2e_log "ok failed NIC: [$(echo "$W0" | tr '\n' ';')] taken over as it was (--upgrade-nice 0: no renice)"
stop_clean "after the upgrade with a FAILED NIC"
if grep -E "ERROR|LeakSanitizer|runtime error" "$E2E_TMP/vnicd.log"; then
	e2e_die "vnicd's log has errors"
fi

# --- rollback (fault builds) -------------------------------------------------
if grep -q '^#define VNIC_FAULT_INJECTION 1' "$VNIC_TOP_BUILDDIR/config.h"; then
	VNIC_FAULT=sup.handover.restore=fail e2e_start_vnicd
	e2e_bench traffic --nics 1 --queue-pairs 2 --seconds 8 --direction both --id-prefix rb \
		--before-remove "$(hold_until "$E2E_TMP/checked-rb")" \
		>"$E2E_TMP/bench.log" 2>&1 &
	BENCH=$!
	e2e_wait_for 20 "2 queue pairs running" two_running
	W0=$(workers)
	install_vnicd
	if OUT=$(ctl upgrade 2>&1); then e2e_die "a take-over that failed was answered OK: $OUT"; fi
	echo "$OUT" | grep -q "could not take over" || e2e_die "the answer does not say why: $OUT"
	kill -0 "$VNICD_PID" || e2e_die "vnicd is gone after the rollback"
	grep -q "going back to the old one" "$E2E_TMP/vnicd.log" ||
		e2e_die "vnicd's log does not show the rollback"
	[ "$(workers)" = "$W0" ] || e2e_die "workers changed across the rollback: [$W0] -> [$(workers)]"
	touch "$E2E_TMP/checked-rb"
	wait $BENCH || { cat "$E2E_TMP/bench.log"; e2e_die "traffic failed across the rollback"; }
	stop_clean "after the rollback"
	e2e_log "ok rollback: $OUT"
fi
e2e_log "PASS"
