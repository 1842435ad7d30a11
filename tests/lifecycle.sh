#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lifecycle.sh: the fault-injection suite of issue 5 (TESTPLAN L1-L4, L7,
# L11; "Fault-injection practice").
#
# Each round: a fresh vnicd with one fault armed (VNIC_FAULT, on NIC lc0
# only: VNIC_FAULT_NIC), a warm-up run on other NICs, then vnic-bench
# traffic on two NICs (lc0 under fault, lc1 the bystander, socket
# backend, both directions; some rounds with two queue pairs per NIC)
# while lc0 is unplugged, disconnected, crashes or fails to start. Invariants checked per round:
#   bench    vnic-bench passes: every TX descriptor back exactly once,
#            every frame at most once and intact, the bystander loses
#            nothing and its counters show no drop or error, no stall
#   fired    the armed point really fired (vnicd's log says so)
#   op       the operation happened as expected, within its bound
#            (unplug reply with the worker gone, the deadline path's
#            DEADLINE_EXCEEDED, teardown after disconnect, a crash followed
#            by a restart and frames through the new worker ...)
#   canary   after unplug/disconnect nothing wrote lc0's guest memory
#   clean    vnicd alive with no NIC left and no worker child
#   fds/maps vnicd's open fds and mappings back to the warm baseline
#   rss      vnicd's VmRSS within RSS_TOL_KB of the baseline
#   exit     SIGTERM: vnicd exits 0 (and clean under LSan in ASan builds)
# or, for a vnicd point that kills vnicd: every worker exits on its own.
#
# make check runs the fixed list below (about a minute). A soak picks
# random rounds from the whole matrix:
#   VNIC_SOAK_SECONDS=600 VNIC_SEED=42 make check TESTS=tests/lifecycle.sh
# VNIC_LC_ONLY=REGEX runs only the fixed rounds whose "spec/op" matches.
# Needs a build configured with --enable-fault-injection (else exit 77)
# and root (the workers sandbox themselves).
# VNIC_LC_BACKEND=afpacket (tests/lifecycle_afpacket.sh, issue 17): lc0
# and lc1 on AF_PACKET, a veth pair each in a private network namespace
# (the rounds of one queue pair only: AF_PACKET serves one).
set -u
LC_BACKEND=${VNIC_LC_BACKEND:-socket}
. "$(dirname "$0")/e2e_lib.sh"

grep -q '^#define VNIC_FAULT_INJECTION 1' "$VNIC_TOP_BUILDDIR/config.h" ||
	e2e_skip "this build has no fault injection (configure --enable-fault-injection)"
e2e_need_root
LC_BACKEND_ARGS=(--backend "$LC_BACKEND")
if [ "$LC_BACKEND" != socket ]; then
	e2e_need_netns
	e2e_netns_add
	LC_BACKEND_ARGS+=(--netns "$E2E_NETNS")
fi

SAN=no
grep -q '^#define VNIC_SANITIZERS 1' "$VNIC_TOP_BUILDDIR/config.h" && SAN=yes
# RSS: after the warm-up the allocator is at its steady state; one round
# must not grow vnicd by more than this. Small heap leaks are LSan's job
# (ASan build, at exit); ASan's quarantine keeps freed memory resident,
# hence the larger bound there.
# Mappings: file and memfd mappings must come back exactly; so must the
# total in a plain build, while ASan's allocator maps fresh anonymous
# regions as size classes fill (hence a tolerance there).
if [ $SAN = yes ]; then RSS_TOL_KB=16384 MAP_TOL=16; else RSS_TOL_KB=1024 MAP_TOL=0; fi
SECONDS_PER_ROUND=${VNIC_LC_SECONDS:-1.6}

declare -A TRIED FAILED SKIPS
ROUNDS=0 ROUND_FAILS=0 INV_CHECKED=0 INV_FAILED=0 SKIPPED=0 RETRIED=0

inv() { # inv NAME OK(0/1) MESSAGE
	INV_CHECKED=$((INV_CHECKED + 1))
	if [ "$2" != 0 ]; then
		INV_FAILED=$((INV_FAILED + 1))
		R_FAIL=1
		e2e_log "  FAIL [$1] $3"
	fi
}

fd_count() { ls "/proc/$VNICD_PID/fd" 2>/dev/null | wc -l; }
map_count() { wc -l <"/proc/$VNICD_PID/maps" 2>/dev/null || echo 0; }
# Mappings of a file or memfd (a leaked stats page shows here).
named_map_count() { awk 'NF >= 6' "/proc/$VNICD_PID/maps" 2>/dev/null | wc -l; }
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$VNICD_PID/status" 2>/dev/null; }

# steady: wait (at most 3 s) until vnicd's fd count is the same three
# times 100 ms apart.
steady() {
	local a b c
	for _ in $(seq 30); do
		a=$(fd_count); sleep 0.1; b=$(fd_count); sleep 0.1; c=$(fd_count)
		[ "$a" = "$b" ] && [ "$b" = "$c" ] && return 0
	done
	return 0
}

no_nics() {
	"$VNICCTL" --socket "$E2E_SOCK" status --json 2>/dev/null | grep -q '"nics":\[\]'
}

# round SPEC OP [EXTRA BENCH ARGS...]
#   SPEC  VNIC_FAULT for lc0 ("" for none); OP: unplug, disconnect, crash,
#   run (fault tolerated, NIC removed at the end), addfail (AddNic of lc0
#   must fail), supdeath (the fault kills vnicd).
round_once() {
	local spec=$1 op=$2
	shift 2
	# Several entries: the last one is the fault under study (the table's
	# row); every one must fire.
	local last=${spec##*,}
	local point=${last%%=*} action=${last#*=} e
	action=${action%%[:@*]*}
	[ -n "$spec" ] || { point=none; action=none; }
	local key="$point|$action" out=$E2E_TMP/round.out
	local half fd0 map0 nmap0 rss0 fd1 map1 nmap1 rss1 rc st pids p
	# VNIC_LC_ONLY=REGEX: only the rounds whose spec matches (debugging).
	if [ -n "${VNIC_LC_ONLY:-}" ] && ! [[ "$spec/$op" =~ $VNIC_LC_ONLY ]]; then
		return 0
	fi
	R_FAIL=0
	ROUNDS=$((ROUNDS + 1))
	TRIED[$key]=$((${TRIED[$key]:-0} + 1))
	e2e_log "round $ROUNDS: ${spec:-no fault} / $op ${*:-}"

	VNIC_FAULT=$spec VNIC_FAULT_NIC=lc0 e2e_start_vnicd
	timeout -k 3 30 "$VNIC_BENCH" --socket "$E2E_SOCK" traffic --nics 2 --seconds 0.3 \
		--id-prefix warm >"$out" 2>&1 || { cat "$out" >&2; inv warmup 1 "warm-up run failed"; }
	# The baseline once the warm-up is over in vnicd too: no NIC left and
	# the fd count steady (its connection closes asynchronously).
	e2e_wait_for 10 "the warm-up NICs to go" no_nics
	steady
	fd0=$(fd_count) map0=$(map_count) nmap0=$(named_map_count) rss0=$(rss_kb)

	half=$(awk -v s="$R_SECONDS" 'BEGIN { printf "%.2f", s / 2 }')
	local args=(traffic --nics 2 "${LC_BACKEND_ARGS[@]}" --direction both --seconds "$R_SECONDS"
		--id-prefix lc --fault-nic 0)
	case $op in
	unplug) args+=(--unplug-after "$half") ;;
	disconnect) args+=(--disconnect-after "$half") ;;
	esac
	rc=0
	timeout -k 3 60 "$VNIC_BENCH" --socket "$E2E_SOCK" "${args[@]}" "$@" >"$out" 2>&1 || rc=$?

	# The fault missed the traffic: nothing was tested (see round below).
	if [ "${OPTIONAL:-}" != yes ] && [ "$R_LAST_TRY" != yes ]; then
		R_MISSED=$(missed_window "$spec" "$op" "$out")
		st=$?
		if [ $st != 0 ]; then
			ROUNDS=$((ROUNDS - 1))
			TRIED[$key]=$((${TRIED[$key]} - 1))
			e2e_stop_vnicd
			return $((st + 2))
		fi
	fi

	# The run was on the backend under test.
	grep -q "^vnic-bench traffic: .*, $LC_BACKEND backend," "$out"
	inv backend $? "vnic-bench did not run on the $LC_BACKEND backend"

	case $op in
	addfail)
		grep -q "AddNic lc0" "$out"
		inv op $? "AddNic of lc0 did not fail as the fault asks"
		[ $rc = 1 ]
		inv bench $? "vnic-bench exit $rc, want 1 (setup failure)"
		;;
	supdeath)
		# vnicd dies at the point; its workers must exit on their own
		# (EOF on their control channel), none left holding memory.
		e2e_wait_for 10 "vnicd to die" eval '! kill -0 $VNICD_PID 2>/dev/null'
		pids=$(sed -n 's/.*worker pid \([0-9]*\) spawned.*/\1/p' "$E2E_TMP/vnicd.log")
		st=0
		for p in $pids; do
			for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$p" 2>/dev/null && { st=1; kill -KILL "$p"; }
		done
		inv orphans $st "a worker outlived vnicd by 3 s"
		wait "$VNICD_PID" 2>/dev/null
		VNICD_PID=
		;;
	*)
		[ $rc = 0 ]
		inv bench $? "vnic-bench exit $rc"
		;;
	esac
	if [ $rc -ne 0 ] && [ "$op" != addfail ] && [ "$op" != supdeath ]; then
		grep -v '^RESULT' "$out" | head -n 30 >&2
	fi

	if [ -n "$spec" ]; then
		st=0
		for e in ${spec//,/ }; do
			grep -q "fault injection: point ${e%%=*} fired" "$E2E_TMP/vnicd.log" || st=1
		done
		if [ $st != 0 ] && [ "${OPTIONAL:-}" = yes ]; then
			e2e_log "  point $point not reached in this build: round skipped"
			SKIPPED=$((SKIPPED + 1))
			TRIED[$key]=$((${TRIED[$key]} - 1))
			SKIPS[$key]=1
			e2e_stop_vnicd
			return 0
		fi
		inv fired $st "a point of $spec never fired"
	fi

	case $op in
	unplug)
		grep -q '^UNPLUG nic=lc0 .*gone=yes' "$out"
		inv op $? "no unplug with the worker gone at the reply"
		if [ -n "${WANT_STATUS:-}" ]; then
			grep -q "^UNPLUG nic=lc0 status=$WANT_STATUS " "$out"
			inv op $? "unplug status is not $WANT_STATUS"
		fi
		if [ -n "${MIN_MS:-}" ]; then
			awk -v m="$MIN_MS" '/^UNPLUG nic=lc0/ { for (i = 1; i <= NF; i++)
				if ($i ~ /^latency_ms=/) { split($i, a, "="); exit !(a[2] >= m) } }' "$out"
			inv op $? "unplug took less than $MIN_MS ms: the fault's window was missed"
		fi
		if [ -n "${MAX_MS:-}" ]; then
			awk -v m="$MAX_MS" '/^UNPLUG nic=lc0/ { for (i = 1; i <= NF; i++)
				if ($i ~ /^latency_ms=/) { split($i, a, "="); exit !(a[2] <= m) } }
				END { }' "$out"
			inv op $? "unplug took longer than $MAX_MS ms"
		fi
		grep -q '^CANARY nic=lc0' "$out"
		inv canary $? "no intact canary over lc0's memory"
		;;
	disconnect)
		grep -q '^DISCONNECT nic=lc0 teardown_ms=.* gone=yes' "$out"
		inv op $? "worker not seen gone after the disconnect"
		grep -q '^CANARY nic=lc0' "$out"
		inv canary $? "no intact canary over lc0's memory"
		;;
	violation)
		# Issue 4, a worker under attack: the forbidden call killed it
		# (SIGSYS), vnicd named the syscall, restarted it, and the other
		# NIC's traffic (checked by vnic-bench) never stopped.
		grep -q 'sandbox violation: syscall socket (41)' "$E2E_TMP/vnicd.log"
		inv op $? "vnicd did not report the sandbox violation with its syscall"
		grep -qE '^LOST-TO-FAULTS nic=lc0 .*deaths=[1-9].* restarts=[1-9].* failed=no .*g2h_after_restart=[1-9]' "$out"
		inv op $? "lc0 did not die, restart and carry frames again: $(grep '^LOST-TO-FAULTS' "$out")"
		;;
	crash)
		# L3/L4/L6: the worker died, was restarted on the same rings,
		# and the guest kept transmitting through the new one.
		grep -qE '^LOST-TO-FAULTS nic=lc0 .*deaths=[1-9].* restarts=[1-9].* failed=no .*g2h_after_restart=[1-9]' "$out"
		inv op $? "lc0 did not die, restart and carry frames again: $(grep '^LOST-TO-FAULTS' "$out")"
		# The first restart works: a replacement sets the backend up
		# afresh (AF_PACKET: new rings on the same socket, which the
		# kernel refuses while the dead worker's holder still maps the
		# old ones), and none of this list's faults fires before READY.
		! grep -q 'failed: restarted worker .* before it was ready' "$out"
		inv op $? "a restarted worker failed before it was ready: $(grep -m1 'failed: restarted worker' "$out")"
		;;
	esac

	if [ -n "$VNICD_PID" ]; then
		kill -0 "$VNICD_PID" 2>/dev/null
		inv clean $? "vnicd died"
		e2e_wait_for 10 "no NIC left" no_nics
		# A holder is reaped 1 s after its worker (supervisor/holders.h).
		for _ in $(seq 50); do
			pgrep -P "$VNICD_PID" >/dev/null 2>&1 || break
			sleep 0.1
		done
		[ -z "$(pgrep -P "$VNICD_PID" 2>/dev/null)" ]
		inv clean $? "a worker or holder child is left"
		# Closing is asynchronous (the bench's connection): up to 3 s.
		for _ in $(seq 30); do
			fd1=$(fd_count) map1=$(map_count) nmap1=$(named_map_count)
			[ "$fd1" = "$fd0" ] && [ "$nmap1" = "$nmap0" ] &&
				[ $((map1 - map0)) -le $MAP_TOL ] && break
			sleep 0.1
		done
		rss1=$(rss_kb)
		[ "$fd1" = "$fd0" ]
		inv fds $? "vnicd fds $fd0 -> $fd1"
		[ "$nmap1" = "$nmap0" ] && [ $((map1 - map0)) -le $MAP_TOL ]
		inv maps $? "vnicd mappings $map0 -> $map1, of files/memfds $nmap0 -> $nmap1 (tolerance $MAP_TOL)"
		[ $((rss1 - rss0)) -le $RSS_TOL_KB ]
		inv rss $? "vnicd VmRSS $rss0 -> $rss1 kB (tolerance $RSS_TOL_KB)"
		kill -TERM "$VNICD_PID"
		st=0
		wait "$VNICD_PID" || st=$?
		VNICD_PID=
		inv exit $st "vnicd exit status $st after SIGTERM"
	fi
	if [ $R_FAIL != 0 ]; then
		ROUND_FAILS=$((ROUND_FAILS + 1))
		FAILED[$key]=$((${FAILED[$key]:-0} + 1))
		e2e_log "  vnic-bench said:"
		grep -v '^RESULT' "$out" | head -n 30 >&2
		e2e_log "  vnicd log (last 15 lines):"
		tail -n 15 "$E2E_TMP/vnicd.log" >&2
	fi
	return 0
}

# missed_window SPEC OP OUT: did the fault meet the traffic? Prints why
# not and returns 1 when a point of SPEC never fired (the run was too short
# for the frame it is armed at), 2 when (MIN_MS) the unplug came after the
# fault's delay was over; 0 when it met.
missed_window() {
	local e
	for e in ${1//,/ }; do
		grep -q "fault injection: point ${e%%=*} fired" "$E2E_TMP/vnicd.log" ||
			{ echo "point ${e%%=*} never fired"; return 1; }
	done
	[ "$2" = unplug ] && [ -n "${MIN_MS:-}" ] || return 0
	awk -v m="$MIN_MS" '/^UNPLUG nic=lc0/ { for (i = 1; i <= NF; i++)
		if ($i ~ /^latency_ms=/) { split($i, a, "="); exit !(a[2] >= m) } }' "$3" && return 0
	echo "the unplug came after the fault's delay"
	return 2
}

# round SPEC OP [EXTRA BENCH ARGS...]: round_once until the fault meets
# the traffic. The table arms points at the Nth frame (@200, @2000) and
# unplugs at half the run. On a loaded 2-core machine, or under ASan, the
# worker may move fewer frames than that in the run, and such a round has
# tested nothing: it runs again with twice the time. An unplug that came
# after a delayed point's window runs again with the first length. At most
# LC_TRIES runs; the last one is judged whatever happened.
LC_TRIES=${VNIC_LC_TRIES:-4}
round() {
	local try secs=$SECONDS_PER_ROUND
	for try in $(seq "$LC_TRIES"); do
		R_SECONDS=$secs R_LAST_TRY=$([ "$try" = "$LC_TRIES" ] && echo yes || echo no) \
			round_once "$@"
		case $? in
		3) secs=$(awk -v s="$secs" 'BEGIN { printf "%.2f", s * 2 }') ;;
		4) secs=$SECONDS_PER_ROUND ;;
		*) return 0 ;;
		esac
		RETRIED=$((RETRIED + 1))
		e2e_log "  $R_MISSED: round again in $secs s"
	done
}

# The fixed list: every point at least once, every action, every
# operation (TESTPLAN ids in the comments).
fixed_rounds() {
	# L1: unplug with a chain in hand / inside the backend write / with
	# the backend full and the worker waiting on it.
	# The delay spans the unplug (at half the run): Stop waits for the
	# chain in hand, so the reply comes late (MIN_MS proves the window
	# was hit) but within its bound.
	MIN_MS=100 round "worker.tx.after_pop=delay:1500@200" unplug
	MIN_MS=100 round "worker.tx.send=delay:1500@200" unplug
	round "" unplug --stall-backend-after 0.3
	# Deadline path: the worker sleeps through Stop, killed via pidfd.
	WANT_STATUS=DEADLINE_EXCEEDED MAX_MS=1500 round "worker.stop=delay:4000" unplug \
		--remove-deadline 500
	round "worker.stop=crash" unplug
	# L3: the worker dies mid-TX; the bystander never notices (L11).
	round "worker.tx.after_pop=crash@2000" crash
	# Issue 4 / S1 end to end: the sandbox kills a worker that makes a
	# forbidden call mid-traffic (needs root: the sandbox does).
	[ "$(id -u)" = 0 ] && round "worker.tx.after_pop=violate@2000" violation
	round "worker.tx.send=sigkill@2000" crash
	round "worker.flush.before_idx=sigkill@300" crash
	# fail: the frame is dropped, its descriptor still comes back.
	round "worker.tx.send=fail@500*20" run
	# L7: the VMM goes away mid-frame while the worker is held.
	round "worker.flush.before_idx=delay:1500@300" disconnect
	# Start-up: READY never comes, Config cannot be sent.
	round "worker.ready.send=crash" addfail
	round "sup.config.send=fail" addfail
	# The reply is late; vnicd dying before it leaves no worker behind.
	MAX_MS=2000 round "sup.remove.reply=delay:300" unplug
	round "sup.remove.reply=sigkill" supdeath --unplug-after 0.5
	# L6: the replacement comes late; what the guest posted meanwhile is
	# served without a new kick. vnicd dying mid-restart leaves no worker.
	round "worker.tx.send=sigkill@2000,sup.restart=delay:500" crash
	round "worker.tx.send=sigkill@2000,sup.restart=sigkill" supdeath
	# Issue 15: NICs of two queue pairs, a worker each (the fault is
	# armed in both of lc0's). Unplug with chains in hand, a crash, a
	# disconnect: every pair byte-exact, every worker gone at the reply.
	if [ "$LC_BACKEND" = socket ]; then
		MIN_MS=100 round "worker.tx.after_pop=delay:1500@200" unplug --queue-pairs 2
		round "worker.tx.after_pop=crash@2000" crash --queue-pairs 2
		round "worker.flush.before_idx=delay:1500@300" disconnect --queue-pairs 2
	fi
	# L4: the inflight steps, where vnicd hands workers an inflight region.
	OPTIONAL=yes round "worker.inflight.used_elem=sigkill@1000" crash
	OPTIONAL=yes round "worker.inflight.popped=crash@1000" crash
	OPTIONAL=yes round "worker.inflight.used_idx=sigkill@1000" crash
}

WPOINTS=(worker.tx.after_pop worker.tx.send worker.flush.before_idx worker.stop
	worker.inflight.popped worker.inflight.used_elem worker.inflight.used_idx)

# One random round of the whole matrix (soak).
random_round() {
	local p=${WPOINTS[RANDOM % ${#WPOINTS[@]}]} a op nth=$((1 + RANDOM % 3000)) cnt=
	local acts=(delay crash sigkill)
	[ "$p" = worker.tx.send ] && acts+=(fail)
	a=${acts[RANDOM % ${#acts[@]}]}
	case $a in
	delay) a="delay:$((50 + RANDOM % 400))" ;;
	fail) cnt="*$((1 + RANDOM % 50))" ;;
	esac
	[ "$p" = worker.stop ] && nth=1
	local ops=(unplug disconnect run)
	op=${ops[RANDOM % 3]}
	case $a in crash | sigkill) [ "$op" = run ] && op=crash ;; esac
	[ "$p" = worker.stop ] && [ "$op" != disconnect ] && op=unplug
	case $p in worker.inflight.*) OPTIONAL=yes ;; *) OPTIONAL= ;; esac
	# A crash before an unplug or disconnect: the NIC restarts first, then
	# goes; the same checks hold.
	OPTIONAL=$OPTIONAL round "$p=$a@$nth$cnt" "$op"
}

T0=$(date +%s)
if [ -n "${VNIC_SOAK_SECONDS:-}" ]; then
	RANDOM=${VNIC_SEED:-1}
	e2e_log "soak: ${VNIC_SOAK_SECONDS} s, seed ${VNIC_SEED:-1}"
	while [ $(($(date +%s) - T0)) -lt "$VNIC_SOAK_SECONDS" ]; do
		random_round
	done
else
	fixed_rounds
fi

# Summary: points x actions, rounds tried (failed).
{
	echo "lifecycle suite: $ROUNDS rounds in $(($(date +%s) - T0)) s, $ROUND_FAILS failed, $SKIPPED skipped (point not reached), $RETRIED run again (window missed)"
	printf '  %-28s %10s %10s %10s %10s %10s %10s\n' point delay crash sigkill fail violate none
	for p in $(printf '%s\n' "${!TRIED[@]}" | cut -d'|' -f1 | sort -u); do
		printf '  %-28s' "$p"
		for a in delay crash sigkill fail violate none; do
			t=${TRIED[$p|$a]:-0} f=${FAILED[$p|$a]:-0}
			if [ "$t" != 0 ]; then printf ' %10s' "$t($f)"
			elif [ -n "${SKIPS[$p|$a]:-}" ]; then printf ' %10s' n/r
			else printf ' %10s' -; fi
		done
		echo
	done
	echo "  cells: rounds tried (failed); n/r: point not reached in this build;"
	echo "  invariants checked $INV_CHECKED, failed $INV_FAILED"
} | tee "$E2E_TMP/summary" >&2
[ $ROUND_FAILS = 0 ] && [ $INV_FAILED = 0 ] && [ $ROUNDS -gt $SKIPPED ] || exit 1
e2e_log PASS
