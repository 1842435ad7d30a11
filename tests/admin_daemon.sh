#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Daemon hygiene (issue 10): every error before vnicd detaches is a line
# on stderr and a non-zero exit (missing socket directory, socket in use,
# missing worker, missing privileges); SIGHUP re-reads the configuration
# file's log level and never kills vnicd; inherited fds are closed.
set -eu
. "$(dirname "$0")/e2e_lib.sh"

# expect_fail WHAT PATTERN ARGS...: vnicd ARGS (daemon mode: no
# --foreground) exits non-zero within 10 s and says PATTERN on stderr.
expect_fail() {
	_what=$1 _pat=$2
	shift 2
	_rc=0
	timeout 10 "$VNICD" "$@" >"$E2E_TMP/out" 2>"$E2E_TMP/err" || _rc=$?
	[ $_rc -ne 0 ] || e2e_die "$_what: vnicd exited 0"
	[ $_rc -ne 124 ] || e2e_die "$_what: vnicd did not exit"
	# An exit, not a signal (ASan's abort on a leak is 134).
	[ $_rc -lt 124 ] || e2e_die "$_what: vnicd exited $_rc: $(tail -n 20 "$E2E_TMP/err")"
	grep -q "$_pat" "$E2E_TMP/err" || e2e_die "$_what: stderr lacks '$_pat': $(cat "$E2E_TMP/err")"
	# One line says it (warnings, e.g. --sandbox=off's, may come first).
	[ "$(grep -c ': error: \|^vnicd: ' "$E2E_TMP/err")" -eq 1 ] ||
		e2e_die "$_what: not exactly one error line: $(cat "$E2E_TMP/err")"
	e2e_log "$_what: exit $_rc, '$(grep ': error: \|^vnicd: ' "$E2E_TMP/err" | sed 's/^[^ ]* //')'"
}

sandbox=
[ "$(id -u)" = 0 ] || sandbox=--sandbox=off

expect_fail "missing socket directory" "mkdir $E2E_TMP/no/such" \
	--socket "$E2E_TMP/no/such/control.sock" --worker "$VNICD_WORKER" $sandbox
expect_fail "missing worker" "worker binary $E2E_TMP/nope: No such file" \
	--socket "$E2E_SOCK" --worker "$E2E_TMP/nope" $sandbox
: >"$E2E_TMP/notexec"
expect_fail "worker not executable" "is not an executable file" \
	--socket "$E2E_SOCK" --worker "$E2E_TMP/notexec" $sandbox
expect_fail "bad configuration" "unknown key \"colour\"" \
	--socket "$E2E_SOCK" --worker "$VNICD_WORKER" $sandbox --config "$(printf 'colour = red\n' >"$E2E_TMP/bad.conf"; echo "$E2E_TMP/bad.conf")"
# Numeric options: out of range, negative, too large for any integer, empty.
expect_fail "--restart-max -1" "use 0..64" --restart-max -1 --socket "$E2E_SOCK" $sandbox
expect_fail "--restart-max 2^70" "use 0..64" --restart-max 1180591620717411303424 \
	--socket "$E2E_SOCK" $sandbox
expect_fail "--max-queue-pairs 0" "use 1..8" --max-queue-pairs 0 --socket "$E2E_SOCK" $sandbox
expect_fail "--upgrade-nice ''" "use 0..19" --upgrade-nice '' --socket "$E2E_SOCK" $sandbox
expect_fail "missing configuration" "$E2E_TMP/none.conf: No such file" \
	--socket "$E2E_SOCK" --worker "$VNICD_WORKER" $sandbox --config "$E2E_TMP/none.conf"

# Privileges: an unprivileged vnicd refuses sandboxed workers, naming the
# capabilities, and starts with --sandbox=off.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 777 "$E2E_TMP"
	_rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$VNICD" --socket "$E2E_TMP/u.sock" \
		--worker "$VNICD_WORKER" --foreground 2>"$E2E_TMP/err" || _rc=$?
	[ $_rc -ne 0 ] && grep -q "missing CAP_SYS_ADMIN .*CAP_SETUID .*CAP_SETGID" "$E2E_TMP/err" ||
		e2e_die "unprivileged vnicd: exit $_rc: $(cat "$E2E_TMP/err")"
	e2e_log "unprivileged, sandbox on: refused ($(sed 's/.*not starting: //' "$E2E_TMP/err" | cut -c1-60)...)"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$VNICD" --socket "$E2E_TMP/u.sock" \
		--worker "$VNICD_WORKER" --foreground --sandbox=off >"$E2E_TMP/u.log" 2>&1 &
	upid=$!
	e2e_wait_for 10 "unprivileged vnicd --sandbox=off" test -S "$E2E_TMP/u.sock"
	kill -TERM $upid
	wait $upid || e2e_die "unprivileged vnicd --sandbox=off did not exit 0"
else
	e2e_log "not root or no setpriv: the privilege refusal is not tested"
fi

# Socket in use: a second vnicd on a live socket says so and exits 1,
# the first keeps running. It starts with an extra fd open (7), which it
# must close.
printf 'log-level = info\n' >"$E2E_TMP/vnicd.conf"
exec 7>"$E2E_TMP/inherited"
"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" $sandbox \
	--config "$E2E_TMP/vnicd.conf" >"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
exec 7>&-
e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
for fd in /proc/$VNICD_PID/fd/*; do
	[ "$(readlink "$fd")" != "$E2E_TMP/inherited" ] || e2e_die "vnicd kept inherited fd ${fd##*/}"
done
expect_fail "socket in use" "another vnicd is listening there" \
	--socket "$E2E_SOCK" --worker "$VNICD_WORKER" $sandbox
kill -0 "$VNICD_PID" || e2e_die "the first vnicd died"

# SIGHUP: the file's level applies; a broken file changes nothing;
# vnicd survives every one and still answers.
printf '# comment\nlog-level = debug\n' >"$E2E_TMP/vnicd.conf"
kill -HUP "$VNICD_PID"
e2e_wait_for 5 "SIGHUP to debug" grep -q "re-read: log level info -> debug" "$E2E_TMP/vnicd.log"
"$VNICCTL" --socket "$E2E_SOCK" status >/dev/null || e2e_die "no status after SIGHUP"
e2e_wait_for 5 "a debug line" grep -q ": debug: " "$E2E_TMP/vnicd.log"
printf 'log-level = chatty\n' >"$E2E_TMP/vnicd.conf"
kill -HUP "$VNICD_PID"
e2e_wait_for 5 "the refusal" grep -q "log-level chatty: use .*; nothing changed" "$E2E_TMP/vnicd.log"
# vnicctl log-level lasts until the next SIGHUP.
"$VNICCTL" --socket "$E2E_SOCK" log-level warn >/dev/null || e2e_die "log-level warn"
printf 'log-level = error\n' >"$E2E_TMP/vnicd.conf"
kill -HUP "$VNICD_PID"
e2e_wait_for 5 "SIGHUP to error" grep -q "re-read: log level warn -> error" "$E2E_TMP/vnicd.log"
for i in 1 2 3; do kill -HUP "$VNICD_PID"; done
sleep 0.3
kill -0 "$VNICD_PID" || e2e_die "SIGHUP killed vnicd"
"$VNICCTL" --socket "$E2E_SOCK" status >/dev/null || e2e_die "no status after four SIGHUPs"
e2e_stop_vnicd
[ ! -e "$E2E_SOCK" ] || e2e_die "the socket file is left after SIGTERM"
e2e_log "PASS"
