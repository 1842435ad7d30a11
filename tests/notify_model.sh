#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The notification protocol (doc/model/notify.pml) checked with spin:
# guest driver and device, EVENT_IDX and the flags, enable-then-recheck,
# each TX policy's timer and poll transitions and SetPolicy switches.
#  1. safety: no assertion fails (no lost wake-up: when nothing can move,
#     every posted buffer was consumed) and no invalid end state;
#  2. progress: no cycle without consuming a buffer (pan -l);
#  3. the mutants must FAIL: dropping the re-check (for every policy),
#     the re-check before Barrier K, adaptive sleeping on a window without
#     its timer. A model that cannot fail proves nothing.
# And the interrupt side (doc/model/irq.pml, workers/irq.c): coalescing
# never loses an interrupt the guest asked for, with and without
# EVENT_IDX; its mutants (re-deciding a due interrupt at a later flush,
# holding one back without the timer) must fail.
# Needs spin and a C compiler (exit 77 without them).
set -eu
NAME=notify_model
log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
command -v spin >/dev/null 2>&1 || { log "SKIP: needs spin (Debian package spin)"; exit 77; }
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { log "SKIP: needs a C compiler"; exit 77; }
MODELS=$(cd "$(dirname "$0")/../doc/model" && pwd)
for m in notify.pml irq.pml; do
	[ -f "$MODELS/$m" ] || { log "FAIL: no $MODELS/$m"; exit 1; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vnic-pml.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
cp "$MODELS/notify.pml" "$MODELS/irq.pml" .
PML=notify.pml

# check WHAT PAN_CC_FLAGS PAN_RUN_FLAGS SPIN_FLAGS... - prints pan's output
# to out.txt; returns 0 when pan found no error.
check() {
	_what=$1 _ccf=$2 _runf=$3
	shift 3
	spin -a "$@" "$PML" >spin.txt 2>&1 || { cat spin.txt >&2; log "FAIL: spin -a $*"; exit 1; }
	# shellcheck disable=SC2086
	"$CC" -O2 -w $_ccf -o pan pan.c || { log "FAIL: cc pan.c ($_what)"; exit 1; }
	# shellcheck disable=SC2086
	timeout 300 ./pan -m400000 $_runf >out.txt 2>&1 || true
	grep -q "errors: 0" out.txt
}

for v in "" "-DNO_EVENT_IDX"; do
	d=${v:-EVENT_IDX}
	check "safety $d" -DSAFETY "" $v ||
		{ cat out.txt >&2; log "FAIL: $d: lost wake-up or invalid end state"; exit 1; }
	grep -q "assertion violated" out.txt && { log "FAIL: $d: assertion"; exit 1; }
	log "$d safety: $(grep -E 'states, stored' out.txt | tr -s ' '), errors: 0"
	check "progress $d" -DNP -l -DN=3 $v ||
		{ cat out.txt >&2; log "FAIL: $d: a non-progress cycle (stall)"; exit 1; }
	log "$d progress: $(grep -E 'states, stored' out.txt | tr -s ' '), errors: 0"
done

# The mutants: each must make pan report the lost wake-up.
mutant() {
	_m=$1
	shift
	if check "mutant $_m" -DSAFETY "" "-D$_m" "$@"; then
		log "FAIL: mutant $_m $* passed: the model cannot see a lost wake-up"
		exit 1
	fi
	grep -q "assertion violated" out.txt ||
		{ cat out.txt >&2; log "FAIL: mutant $_m $*: failed, but not by the assertion"; exit 1; }
	log "mutant $_m $*: fails as it must ($(grep -m1 'assertion violated' out.txt | tr -s ' '))"
}
for p in 1 2 3 4; do
	mutant MUT_NO_RECHECK -DPOLICY=$p
done
mutant MUT_NO_RECHECK
mutant MUT_NO_RECHECK -DNO_EVENT_IDX
mutant MUT_NO_BARRIER
mutant MUT_NO_WINDOW_TIMER -DPOLICY=3

# The interrupt side: safety and progress both ways, then its mutants
# (re-deciding needs EVENT_IDX's "entries since the last flush" to bite).
PML=irq.pml
for v in "" "-DNO_EVENT_IDX"; do
	d=${v:-EVENT_IDX}
	check "irq safety $d" -DSAFETY "" $v ||
		{ cat out.txt >&2; log "FAIL: irq $d: lost interrupt or invalid end state"; exit 1; }
	log "irq $d safety: $(grep -E 'states, stored' out.txt | tr -s ' '), errors: 0"
	check "irq progress $d" -DNP -l $v ||
		{ cat out.txt >&2; log "FAIL: irq $d: a non-progress cycle"; exit 1; }
	log "irq $d progress: $(grep -E 'states, stored' out.txt | tr -s ' '), errors: 0"
done
mutant MUT_REDECIDE
mutant MUT_NO_TIMER
mutant MUT_NO_TIMER -DNO_EVENT_IDX
log "PASS"
