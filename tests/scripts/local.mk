# The benchmark scripts' own machinery: the workload generator and the
# sweep driver on tiny configurations.
TESTS += tests/scripts/sweep.test
EXTRA_DIST += tests/scripts/sweep.test

# No inline assembly; configure refuses hosts it cannot support.
TESTS += tests/scripts/portability.test
EXTRA_DIST += tests/scripts/portability.test

# scripts/bench_programs.py (make bench-programs) on tiny inputs: its
# report, its output check and its served check, each able to fail.
TESTS += tests/scripts/programs.test
EXTRA_DIST += tests/scripts/programs.test

# scripts/bench_short.py (make bench-short) in --tiny mode: its tables,
# its JSON, and a failing run reported as such.
TESTS += tests/scripts/short.test
EXTRA_DIST += tests/scripts/short.test
