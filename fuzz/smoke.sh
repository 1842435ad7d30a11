#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# smoke.sh NAME: run the fuzz target fuzz/fuzz_NAME of a --enable-fuzz
# tree for a short, bounded time (make fuzz-smoke; issue 18), starting
# from the tree's seeds and every regression input. Fails on a crash, a
# sanitizer report, a leak of memory or of an fd, and an input that runs
# over 1 s. The seed is printed; VNIC_FUZZ_SEED=N replays the same run,
# VNIC_FUZZ_SECONDS=N sets the time (default 20).
set -eu
name=$1
src=${VNIC_TOP_SRCDIR:?}
bin=${VNIC_TOP_BUILDDIR:?}/fuzz/fuzz_$name
secs=${VNIC_FUZZ_SECONDS:-20}
seed=${VNIC_FUZZ_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) % 2000000000 + 1 ))}
[ -x "$bin" ] || { echo "smoke: $bin not built (configure --enable-fuzz)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/vnicd-fuzz-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
dirs="$src/fuzz/corpus/$name"
[ -d "$src/fuzz/regress/$name" ] && dirs="$dirs $src/fuzz/regress/$name"
dict=
[ -s "$src/fuzz/$name.dict" ] && dict="-dict=$src/fuzz/$name.dict"
echo "smoke: $name for $secs s, seed $seed (VNIC_FUZZ_SEED=$seed replays)"
# -error_exitcode/-timeout_exitcode: libFuzzer's 77 would read as SKIP;
# 77 comes only from fuzz_skip() (the target cannot run here).
rc=0
# shellcheck disable=SC2086
"$bin" -seed="$seed" -max_total_time="$secs" -timeout=1 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 -detect_leaks=1 -print_final_stats=1 \
	-artifact_prefix="$work/" $dict "$work/corpus" $dirs >"$work/log" 2>&1 || rc=$?
grep -E '^(INFO: seed|#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==|SUMMARY|fuzz:|Test unit written|.*ERROR)' \
	"$work/log" || true
[ "$rc" -eq 77 ] && exit 77
grep -q '^Done [0-9]* runs in' "$work/log" || rc=1
[ "$rc" -eq 0 ] || { echo "smoke: $name failed (exit $rc); the end of its output:"; tail -n 80 "$work/log"; }
if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* >/dev/null 2>&1; then
	rc=1
	for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
		[ -f "$f" ] || continue
		echo "smoke: $name: $(basename "$f"), input in base64 (add it to fuzz/regress/$name/):"
		base64 -w0 "$f"; echo
	done
fi
[ "$rc" -eq 0 ] && echo "smoke: $name: no crash, leak or timeout in $secs s"
exit $rc
