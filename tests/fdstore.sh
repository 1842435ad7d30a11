#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# fdstore.sh: vnicd dies and nothing stops (issue 16; doc/design.md
# "Surviving vnicd's death"). A real systemd runs as pid 1 of a private pid
# and mount namespace (this machine's own pid 1 is not systemd) with vnicd
# as a Type=notify service: --fd-store, FileDescriptorStoreMax=,
# Restart=on-failure, KillMode=process.
#
#   under traffic  vnic-bench traffic (2 NICs x 2 queue pairs, socket
#                  backend, both directions, the native front door) while
#                  vnicd is SIGKILLed 3 times, with a systemctl reload
#                  (upgrade in place) before the third: systemd starts it
#                  again after each kill and it takes over from the store. Every frame
#                  arrives once and intact and every TX descriptor comes
#                  back once (vnic-bench's own checks); vnicd's pid changed
#                  each time, every worker kept its pid with no restart,
#                  vnic-bench's connection was never closed
#   socket         socket-activated (a .socket unit's listener comes
#                  first in LISTEN_FDS, the store after it): a SIGKILL
#                  under traffic, taken over, the same workers
#   stall          a vhost-user front end sends half a message and stops:
#                  an endpoint added meanwhile is still stored (taken over
#                  after a kill), and the stalled connection is shut down
#                  at the take-over (its half message is not in the state)
#   after          the restored vnicd serves: vnicctl status lists the
#                  NICs; SIGTERM (systemctl stop) stops every worker
#   journal        (fault builds) vnicd dies after it read RemoveNic and
#                  before it answered (sup.remove.reply=delay holds the
#                  window open): the restored vnicd shuts that connection
#                  down rather than resume from a state without the
#                  request; the VMM sees its connection end at once
#                  instead of waiting for an answer
#   off            the same vnicd without --fd-store: after a SIGKILL the
#                  workers see their channels close and stop (today's
#                  behaviour), and the store is left empty
# Needs root, unshare(1) and systemd (/lib/systemd/systemd).
set -u
. "$(dirname "$0")/e2e_lib.sh"

e2e_need_root
SYSTEMD=/lib/systemd/systemd
[ -x "$SYSTEMD" ] || e2e_skip "no $SYSTEMD"
command -v unshare >/dev/null && command -v nsenter >/dev/null || e2e_skip "no unshare/nsenter"

SD_PID=
sd_cleanup() {
	_rc=$?
	if [ $_rc -ne 0 ] && [ $_rc -ne 77 ]; then
		for f in "$E2E_TMP"/vnicd-*.log "$E2E_TMP"/systemd.log; do
			[ -f "$f" ] && { e2e_log "$f (last 40 lines):"; tail -n 40 "$f" >&2; }
		done
	fi
	if [ -n "$SD_PID" ]; then
		# pid 1 of the namespace (unshare --kill-child): its death
		# kills everything in it.
		[ -n "${SD_INIT:-}" ] && kill -KILL "$SD_INIT" 2>/dev/null
		kill -KILL "$SD_PID" 2>/dev/null || true
		wait "$SD_PID" 2>/dev/null || true
	fi
	(exit $_rc)
	e2e_cleanup
}
trap sd_cleanup EXIT

# A boot with nothing but our units (DefaultDependencies=no: no
# sysinit.target, so no udevd, journald or tmpfiles), and private /run and
# /tmp with only the test's directory and the build tree shared (a
# systemd-tmpfiles of a misconfigured boot would otherwise empty the
# machine's /tmp), in a network namespace of its own (the socket backend
# needs no network).
KEEP="$E2E_TMP $(cd "$VNIC_TOP_BUILDDIR" && pwd -P)"
cat >"$E2E_TMP/boot.sh" <<EOF
#!/bin/bash
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system
i=0
for d in $KEEP; do
	case \$d in /tmp/*) mkdir -p /run/keep/\$i; mount --bind "\$d" /run/keep/\$i; i=\$((i + 1));; esac
done
mount -t tmpfs tmpfs /tmp
i=0
for d in $KEEP; do
	case \$d in /tmp/*) mkdir -p "\$d"; mount --bind /run/keep/\$i "\$d"; i=\$((i + 1));; esac
done
cp "$E2E_TMP"/*.service "$E2E_TMP"/*.socket "$E2E_TMP"/*.target /run/systemd/system/
exec "$SYSTEMD" --system --unit=vnictest.target --log-level=warning
EOF
chmod +x "$E2E_TMP/boot.sh"
cat >"$E2E_TMP/vnictest.target" <<EOF
[Unit]
Description=vnicd fd store test
DefaultDependencies=no
EOF

# unit NAME EXTRA-ARGS [VNIC_FAULT]: vnicd as systemd would run it from
# the shipped unit.
unit() {
	cat >"$E2E_TMP/$1.service" <<EOF
[Unit]
DefaultDependencies=no
[Service]
Type=notify
ExecStart=$VNICD --foreground --socket $E2E_TMP/$1.sock --worker $VNICD_WORKER $2
ExecReload=$VNICCTL --socket $E2E_TMP/$1.sock upgrade --wait 30
Restart=on-failure
RestartSec=100ms
KillMode=process
FileDescriptorStoreMax=16384
LimitNOFILE=65536
Environment=VNIC_FAULT=${3:-} VNIC_FAULT_NIC=jr0
StandardOutput=append:$E2E_TMP/$1.log
StandardError=append:$E2E_TMP/$1.log
EOF
}
unit vnicd-store --fd-store
unit vnicd-plain ""
# Socket-activated, as the shipped vnicd.socket does: systemd passes the
# listener first and the store after it, in one LISTEN_FDS.
unit vnicd-sock --fd-store
cat >"$E2E_TMP/vnicd-sock.socket" <<EOF
[Unit]
DefaultDependencies=no
[Socket]
ListenSequentialPacket=$E2E_TMP/vnicd-sock.sock
SocketMode=0600
EOF
FAULTS=false
if grep -q '^#define VNIC_FAULT_INJECTION 1' "$VNIC_TOP_BUILDDIR/config.h"; then
	FAULTS=true
	unit vnicd-journal --fd-store sup.remove.reply=delay:3000
fi

unshare --kill-child --pid --fork --mount --mount-proc --cgroup --uts --ipc --net "$E2E_TMP/boot.sh" \
	>"$E2E_TMP/systemd.log" 2>&1 &
SD_PID=$!
sd() { nsenter -t "$SD_INIT" -a "$@"; }
sd_ready() {
	kill -0 "$SD_PID" 2>/dev/null || { cat "$E2E_TMP/systemd.log"; e2e_skip "systemd does not run here"; }
	SD_INIT=$(pgrep -P "$SD_PID" | head -n 1)
	[ -n "$SD_INIT" ] || return 1
	case $(sd systemctl is-system-running 2>/dev/null) in running|degraded) return 0;; esac
	return 1
}
e2e_wait_for 20 "systemd in its namespace" sd_ready
e2e_log "systemd runs as pid 1 of a namespace (pid $SD_INIT here)"

main_pid() { sd systemctl show -p MainPID --value "$1"; }
ctl() { "$VNICCTL" --socket "$E2E_SOCK" "$@"; }
workers() { e2e_workers; }
up() { [ -S "$E2E_SOCK" ] && ctl status >/dev/null 2>&1; }
# start_unit NAME: systemctl start NAME; vnicctl then talks to it.
start_unit() {
	E2E_SOCK=$E2E_TMP/$1.sock
	sd systemctl start "$1" || { cat "$E2E_TMP/$1.log"; e2e_die "$1 did not start"; }
	e2e_wait_for 10 "$1's socket" up
}

# kill_main UNIT WHAT: SIGKILL UNIT's vnicd (its pid before: P0) and wait
# until systemd has started another that answers.
kill_main() {
	KM_UNIT=$1
	P0=$(main_pid "$1")
	sd systemctl kill -s KILL --kill-who=main "$1"
	e2e_wait_for 10 "vnicd restarted by systemd ($2)" km_restarted
}
km_restarted() { p=$(main_pid "$KM_UNIT"); [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$P0" ] && up; }

# --- under traffic --------------------------------------------------------
start_unit vnicd-store
# vnic-bench runs in the namespace too: the worker pids it checks are
# that namespace's.
bench() { sd timeout -k 3 60 "$VNIC_BENCH" --socket "$E2E_SOCK" "$@"; }
bench traffic --nics 2 --queue-pairs 2 --seconds 20 --direction both \
	--id-prefix fs >"$E2E_TMP/bench.log" 2>&1 &
BENCH=$!
four_running() { [ "$(workers | grep -c ' RUNNING$')" -ge 4 ]; }
e2e_wait_for 20 "4 queue pairs running" four_running
sleep 0.5
W0=$(workers)
e2e_log "workers before: $(echo "$W0" | tr '\n' ';')"
# kill, kill, reload (an upgrade in place: the new binary goes on with
# the store the old one kept), kill.
for i in 1 2 reload 3; do
	P0=$(main_pid vnicd-store)
	if [ "$i" = reload ]; then
		sd systemctl reload vnicd-store || e2e_die "systemctl reload failed"
		[ "$(main_pid vnicd-store)" = "$P0" ] || e2e_die "reload: another pid"
		grep -q "upgrade: .* in place" "$E2E_TMP/vnicd-store.log" || e2e_die "reload: no upgrade"
		e2e_log "reload: upgraded in place (pid $P0)"
		sleep 0.5
		continue
	fi
	kill_main vnicd-store "kill $i"
	e2e_log "kill $i: vnicd pid $P0 -> $(main_pid vnicd-store)"
	[ "$(grep -c "restarted from the fd store" "$E2E_TMP/vnicd-store.log")" = "$i" ] ||
		e2e_die "kill $i: the new vnicd did not take over from the store"
	sleep 0.5
done
kill -0 $BENCH 2>/dev/null || e2e_die "the traffic ended before the kills did: too slow a machine?"
W1=$(workers)
[ "$W0" = "$W1" ] || e2e_die "workers changed across vnicd's deaths: before [$W0] after [$W1]"
wait $BENCH || { cat "$E2E_TMP/bench.log"; e2e_die "vnic-bench traffic failed across vnicd's deaths"; }
grep -q "vnic-bench traffic: PASS" "$E2E_TMP/bench.log" || e2e_die "no PASS from vnic-bench"
N=$(grep -c "restarted from the fd store" "$E2E_TMP/vnicd-store.log")
[ "$N" = 3 ] || e2e_die "$N takeovers from the store, not 3"
e2e_log "ok under traffic: 3 SIGKILLs, 3 takeovers, workers unchanged, every frame once"

# --- a stalled front end holds up no one ------------------------------------
# A vhost-user front end that sends half a message and stops leaves vnicd
# in the middle of that message for as long as it likes. That must not
# stop the stored state from following vnicd: an endpoint added meanwhile
# is taken over after a kill, and the stalled connection is shut down at
# the take-over (what it was saying is not in the state).
if [ -c /dev/net/tun ]; then
	ctl add vs0 --vhost-user "$E2E_TMP/vs0.sock" --server --tap vfs0 >/dev/null || e2e_die "add vs0"
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"\x01\x00\x00\x00\x01\x00")  # 6 of a header'"'"'s 12 bytes
s.settimeout(30)
try:
    print("EOF" if s.recv(64) == b"" else "data")
except socket.timeout:
    print("timeout")' "$E2E_TMP/vs0.sock" >"$E2E_TMP/stall.out" 2>&1 &
	STALL=$!
	sleep 1
	ctl add vs1 --vhost-user "$E2E_TMP/vs1.sock" --server --tap vfs1 >/dev/null || e2e_die "add vs1"
	sleep 0.5
	[ ! -s "$E2E_TMP/stall.out" ] || e2e_die "the stalled front end was answered or closed: $(cat "$E2E_TMP/stall.out")"
	N0=$(grep -c "restarted from the fd store" "$E2E_TMP/vnicd-store.log")
	kill_main vnicd-store stall
	[ "$(grep -c "restarted from the fd store" "$E2E_TMP/vnicd-store.log")" = $((N0 + 1)) ] ||
		e2e_die "stall: the new vnicd did not take over from the store"
	tail -n 30 "$E2E_TMP/vnicd-store.log" | grep -q "took over .* 2 endpoint(s)" ||
		e2e_die "stall: vs1, added while vs0's front end stalled, was not taken over"
	wait $STALL
	[ "$(cat "$E2E_TMP/stall.out")" = EOF ] || e2e_die "stall: the stalled front end saw $(cat "$E2E_TMP/stall.out"), not its connection end"
	ctl remove vs0 >/dev/null && ctl remove vs1 >/dev/null || e2e_die "removing vs0, vs1"
	e2e_log "ok stall: an endpoint added while a front end stalled mid-message was taken over; the stalled connection was shut down"
else
	e2e_log "stall: skipped (no /dev/net/tun)"
fi

# --- socket activation: the socket unit's listener beside the store ---------
sd systemctl start vnicd-sock.socket || e2e_die "vnicd-sock.socket did not start"
E2E_SOCK=$E2E_TMP/vnicd-sock.sock
e2e_wait_for 10 "the socket-activated vnicd" up
bench traffic --nics 1 --queue-pairs 2 --seconds 10 --direction both --id-prefix sa \
	>"$E2E_TMP/bench4.log" 2>&1 &
BENCH=$!
two_running() { [ "$(workers | grep -c ' RUNNING$')" -ge 2 ]; }
e2e_wait_for 20 "2 queue pairs running (socket-activated)" two_running
W0=$(workers)
kill_main vnicd-sock "socket activation"
grep -q "restarted from the fd store" "$E2E_TMP/vnicd-sock.log" ||
	e2e_die "socket activation: the new vnicd did not take over from the store"
[ "$(workers)" = "$W0" ] || e2e_die "socket activation: workers changed: [$W0] -> [$(workers)]"
wait $BENCH || { cat "$E2E_TMP/bench4.log"; e2e_die "socket activation: vnic-bench traffic failed"; }
up || e2e_die "socket activation: the socket does not answer after the take-over"
sd systemctl stop vnicd-sock.service vnicd-sock.socket
e2e_log "ok socket activation: the store and the socket unit's listener side by side"

# --- after: it serves, and stops cleanly ------------------------------------
sd systemctl stop vnicd-store || e2e_log "systemctl stop vnicd-store: exit status $?"
# One line of what systemd saw: the state, and how the main process ended.
stopped_as() {
	sd systemctl show -p ActiveState -p SubState -p Result -p ExecMainCode -p ExecMainStatus \
		vnicd-store | tr '\n' ' '
}
# Inactive, not failed: vnicd exits 0 on SIGTERM. A state still on its
# way there (a stop job that returned early) is waited for, and said.
ST=$(stopped_as)
case $ST in
*ActiveState=inactive*) ;;
*ActiveState=failed*) sd systemctl status --no-pager vnicd-store >&2
	e2e_die "vnicd-store failed at its stop: $ST";;
*) e2e_log "right after systemctl stop: $ST"
	i=0
	until case $(stopped_as) in *ActiveState=inactive*) true;; *) false;; esac; do
		i=$((i + 1))
		[ $i -lt 100 ] || { sd systemctl status --no-pager vnicd-store >&2
			e2e_die "vnicd-store not stopped 10 s after systemctl stop: $(stopped_as)"; }
		sleep 0.1
	done
	e2e_log "inactive after $i polls";;
esac
left=$(sd pgrep -x vnicd-worker | wc -l)
[ "$left" = 0 ] || e2e_die "$left worker(s) left after systemctl stop"
grep -q "fd store: emptied" "$E2E_TMP/vnicd-store.log" || e2e_die "the store was not emptied at stop"
e2e_log "ok stop: every worker gone, the store emptied"

# --- journal: vnicd dies with a request read and not yet answered -----------
# RemoveNic jr0 is read, its worker stopped and reaped; vnicd then holds
# the reply for 3 s (the fault) and is killed meanwhile. The stored state
# is from before the request (a NIC stopping is not stored): resumed as it
# is, the VMM would wait for its answer forever. The journal names its
# connection, so the restored vnicd shuts it down: the VMM sees its
# connection end at once, and its NIC goes as at any VMM disconnect.
if $FAULTS; then
	start_unit vnicd-journal
	bench traffic --nics 1 --seconds 2 --direction both --id-prefix jr \
		>"$E2E_TMP/bench3.log" 2>&1 &
	BENCH=$!
	fired() { grep -q "point sup.remove.reply fired" "$E2E_TMP/vnicd-journal.log"; }
	e2e_wait_for 20 "RemoveNic jr0 held by the fault" fired
	sd systemctl kill -s KILL --kill-who=main vnicd-journal
	T0=$(date +%s%N)
	wait $BENCH && e2e_die "vnic-bench passed although its RemoveNic was never answered"
	MS=$((($(date +%s%N) - T0) / 1000000))
	grep -q "restarted from the fd store" "$E2E_TMP/vnicd-journal.log" ||
		e2e_die "journal: the new vnicd did not take over from the store"
	grep -q "[0-9] connection(s) or worker channel(s) were in the middle" "$E2E_TMP/vnicd-journal.log" ||
		e2e_die "journal: the restored vnicd did not shut the connection down"
	grep -q "RemoveNic jr0: .*\(closed\|reset\|disconnect\)" "$E2E_TMP/bench3.log" ||
		{ cat "$E2E_TMP/bench3.log"; e2e_die "journal: vnic-bench did not see its connection end"; }
	[ "$MS" -lt 4000 ] || e2e_die "journal: vnic-bench waited $MS ms for its answer"
	no_nic() { [ -z "$(workers)" ]; }
	e2e_wait_for 10 "jr0 removed after its VMM's connection ended" no_nic
	e2e_log "ok journal: the connection whose request died with vnicd was shut down ($MS ms)"
	sd systemctl stop vnicd-journal
else
	e2e_log "journal: skipped (needs a fault-injection build)"
fi

# --- off: without --fd-store a death stops the workers ------------------------
start_unit vnicd-plain
bench traffic --nics 1 --seconds 6 --direction both --id-prefix pl \
	>"$E2E_TMP/bench2.log" 2>&1 &
BENCH=$!
one_running() { [ "$(workers | grep -c ' RUNNING$')" -ge 1 ]; }
e2e_wait_for 20 "a queue pair running" one_running
WPID=$(workers | awk '{print $3; exit}')
sd systemctl kill -s KILL --kill-who=main vnicd-plain
worker_gone() { ! sd pgrep -x vnicd-worker >/dev/null; }
e2e_wait_for 10 "the plain vnicd's worker (pid $WPID in the namespace) to stop" worker_gone
wait $BENCH && e2e_die "vnic-bench passed although vnicd died without the store"
grep -q "restarted from the fd store" "$E2E_TMP/vnicd-plain.log" &&
	e2e_die "vnicd without --fd-store took over from the store"
e2e_log "ok off: without --fd-store the workers stop when vnicd dies"
exit 0
