# The benchmark's programs and arithmetic (scripts/bench.py and its
# workloads), checked without running the benchmark itself.
bench_tests = tests/bench/workloads.test tests/bench/model.test
TESTS += $(bench_tests)
EXTRA_DIST += $(bench_tests) tests/bench/model.py
