#!/bin/sh
# Build libmbuddy from scratch and run the whole test suite:
#  1. make check: unit tests of the buddy core (no preload), the preloaded
#     C tests, and real unchanged programs under LD_PRELOAD;
#  2. the unit tests again under AddressSanitizer + UBSan (clang), every
#     program of unit_tests in tests/unit/local.mk;
#  3. make distcheck (unit tests only inside it, the rest ran in 1).
# Ends with one line "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh" || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }
jobs=$(nproc)
work=$(mktemp -d "${TMPDIR:-/tmp}/mbuddy-test.XXXXXX")
failed_steps=""

step() { echo "== $*"; }

cd "$top" && autoreconf -fi >"$work/autoreconf.log" 2>&1 || { cat "$work/autoreconf.log"; failed_steps="$failed_steps autoreconf"; }

step "build (gcc -O2)"
mkdir -p "$work/build" && cd "$work/build"
if "$top/configure" -q CFLAGS="-O2 -g" && make -j"$jobs" >make.log 2>&1; then
	step "make check"
	make -j"$jobs" check >check.log 2>&1 || failed_steps="$failed_steps check"
	grep -E '^(PASS|FAIL|XPASS|ERROR|SKIP)' check.log
	for f in $(find . -name '*.log' -path '*tests*'); do
		grep -q '^FAIL\|^ERROR' "$f" 2>/dev/null && case "$f" in *test-suite.log) ;; *) echo "---- $f"; tail -n 30 "$f";; esac
	done
else
	cat make.log; failed_steps="$failed_steps build"
fi

step "unit tests under ASan+UBSan (clang)"
mkdir -p "$work/asan" && cd "$work/asan"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Every unit test, from the one list in tests/unit/local.mk.
if "$top/configure" -q CC=clang CXX=clang++ CFLAGS="-O1 -g $san" LDFLAGS="$san" >/dev/null &&
   units=$(make -s --no-print-directory print-unit-tests | tail -n 1) && [ -n "$units" ] &&
   make -j"$jobs" $units >make.log 2>&1; then
	for t in $units; do
		if MB_RANDOM_OPS=1000000 ./$t >"$work/asan.$(basename $t).log" 2>&1; then
			echo "PASS: asan $t"; echo "PASS: asan $t" >>"$work/asan-results"
		else
			echo "FAIL: asan $t"; echo "FAIL: asan $t" >>"$work/asan-results"; tail -n 20 "$work/asan.$(basename $t).log"
		fi
	done
else
	cat make.log; failed_steps="$failed_steps asan-build"
fi

step "make distcheck"
cd "$work/build"
units=$(make -s --no-print-directory print-unit-tests | tail -n 1)
if make -j"$jobs" distcheck TESTS="$units" MB_RANDOM_OPS=200000 >distcheck.log 2>&1; then
	echo "PASS: distcheck"; echo "PASS: distcheck" >>"$work/asan-results"
else
	tail -n 40 distcheck.log; echo "FAIL: distcheck" >>"$work/asan-results"
fi

# Count results: Automake's summary plus the extra steps.
pass=0; fail=0
if [ -f "$work/build/test-suite.log" ]; then
	pass=$(grep -E '^# PASS:' "$work/build/test-suite.log" | awk '{print $3}')
	f1=$(grep -E '^# FAIL:' "$work/build/test-suite.log" | awk '{print $3}')
	f2=$(grep -E '^# ERROR:' "$work/build/test-suite.log" | awk '{print $3}')
	f3=$(grep -E '^# XPASS:' "$work/build/test-suite.log" | awk '{print $3}')
	fail=$(( ${f1:-0} + ${f2:-0} + ${f3:-0} ))
fi
if [ -f "$work/asan-results" ]; then
	pass=$(( ${pass:-0} + $(grep -c '^PASS' "$work/asan-results") ))
	fail=$(( fail + $(grep -c '^FAIL' "$work/asan-results") ))
fi
for s in $failed_steps; do echo "step failed: $s"; fail=$((fail + 1)); done
echo "${pass:-0} passed, $fail failed"
[ "$fail" -eq 0 ]
