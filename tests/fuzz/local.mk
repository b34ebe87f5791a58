# Fuzzing (issue 7). tests/fuzz/fuzz_ops.c is a libFuzzer target that runs
# byte-coded programs of malloc-level operations against the core, checked
# against a shadow model and mb_buddy_check(); it is built by clang with
# -fsanitize=fuzzer,address,undefined straight from the core's sources.
#
#   make fuzz                          fuzz for FUZZ_SECONDS (default 60) seconds
#   make fuzz FUZZ_SECONDS=1800 FUZZ_FLAGS='-jobs=2 -workers=2'
#   make fuzz-build                    only build ./tests/fuzz/fuzz_ops
#   ./tests/fuzz/fuzz_ops FILE         replay one input (a crash, say)
#
# The corpus grows in tests/fuzz/corpus and crashing inputs land in
# tests/fuzz/artifacts/ (both in the build directory). FUZZ_OPS_LAX in the
# environment steps over known bugs (see fuzz_ops.c). `make check` runs a
# short fixed-seed smoke run, tests/fuzz/fuzz-smoke.test, skipped without
# clang.
FUZZ_SECONDS ?= 60
FUZZ_SEED ?= 1
FUZZ_MAX_LEN ?= 1024
FUZZ_FLAGS ?=

TESTS += tests/fuzz/fuzz-smoke.test
EXTRA_DIST += tests/fuzz/fuzz-smoke.test tests/fuzz/build-fuzzer.sh tests/fuzz/fuzz_ops.c

.PHONY: fuzz fuzz-build
fuzz-build:
	@CC='$(CC)' LIBUNWIND_LIBS='$(LIBUNWIND_LIBS)' \
	  $(SHELL) $(srcdir)/tests/fuzz/build-fuzzer.sh '$(abs_top_srcdir)' '$(abs_top_builddir)' tests/fuzz/fuzz_ops; \
	rc=$$?; \
	if test $$rc = 77; then echo "make fuzz needs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev)" >&2; exit 1; fi; \
	exit $$rc

fuzz: fuzz-build
	@$(MKDIR_P) tests/fuzz/corpus tests/fuzz/artifacts
	MBUDDY_HEAP_SIZE=64M MBUDDY_DECAY_MS=0 ./tests/fuzz/fuzz_ops -max_total_time=$(FUZZ_SECONDS) \
	  -seed=$(FUZZ_SEED) -max_len=$(FUZZ_MAX_LEN) -timeout=60 -print_final_stats=1 \
	  -artifact_prefix=tests/fuzz/artifacts/ $(FUZZ_FLAGS) tests/fuzz/corpus
