# Statistics: exact values for a known sequence, text/JSON agreement, %p
# across fork and exec, unwritable paths.
check_PROGRAMS += tests/unit/test_stats_known
tests_unit_test_stats_known_SOURCES = tests/stats/stats_known.c
tests_unit_test_stats_known_LDADD = libmbcore.la $(LIBUNWIND_LIBS) -lpthread -ldl -lm
TESTS += tests/stats/stats-known.test tests/stats/stats-env.test tests/stats/stats-signal.test \
	tests/stats/account.test
EXTRA_DIST += tests/stats/stats-known.test tests/stats/stats-env.test tests/stats/stats-signal.test \
	tests/stats/account.test

# A program that rewrites its environment before exit (option strings are copies).
check_PROGRAMS += tests/stats/rewrite_env
tests_stats_rewrite_env_SOURCES = tests/stats/rewrite_env.c
tests_stats_rewrite_env_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/stats/env-rewrite.test tests/stats/stats-files.test
EXTRA_DIST += tests/stats/env-rewrite.test tests/stats/stats-files.test

# A program that closes its descriptors and reuses the number of the copy
# of stderr.
check_PROGRAMS += tests/stats/reuse_fds
tests_stats_reuse_fds_SOURCES = tests/stats/reuse_fds.c
TESTS += tests/stats/stderr-reuse.test
EXTRA_DIST += tests/stats/stderr-reuse.test

# Option values (strict parsing, signals refused, MBUDDY_STATS's words) and
# a signal's report written at exit when no slow path came.
check_PROGRAMS += tests/stats/signal_exit
tests_stats_signal_exit_SOURCES = tests/stats/signal_exit.c
tests_stats_signal_exit_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/stats/env-values.test tests/stats/signal-exit.test tests/stats/stats-words.test
EXTRA_DIST += tests/stats/env-values.test tests/stats/signal-exit.test tests/stats/stats-words.test

# The heap's size limits and the fragmentation rows, as the man page says.
TESTS += tests/stats/heap-doc.test
EXTRA_DIST += tests/stats/heap-doc.test

# struct mbuddy_stats across versions: a caller with the first release's
# structure through the exported mbuddy_stats_get, and this header's
# callers (mbuddy_stats_read with their size). Linked with -lmbuddy.
check_PROGRAMS += tests/stats/stats_abi
tests_stats_stats_abi_SOURCES = tests/stats/stats_abi.c
tests_stats_stats_abi_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_stats_stats_abi_LDADD = libmbuddy.la -ldl
TESTS += tests/stats/stats_abi

# mbuddy_stats_get() against the JSON report of the same moment.
check_PROGRAMS += tests/stats/stats_api_values
tests_stats_stats_api_values_SOURCES = tests/stats/stats_api_values.c
tests_stats_stats_api_values_LDADD = -ldl
TESTS += tests/stats/stats-api.test
EXTRA_DIST += tests/stats/stats-api.test

# Counters since the fork, the peaks, the header, MBUDDY_STATS_PID; a
# program whose own malloc wins over libmbuddy's.
check_PROGRAMS += tests/stats/fork_counters tests/stats/own_malloc
tests_stats_fork_counters_SOURCES = tests/stats/fork_counters.c
tests_stats_fork_counters_LDADD = -ldl
tests_stats_fork_counters_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_stats_own_malloc_SOURCES = tests/stats/own_malloc.c
tests_stats_own_malloc_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/stats/fork-counters.test tests/stats/not-served.test
EXTRA_DIST += tests/stats/fork-counters.test tests/stats/not-served.test

# Executables that are not position-independent: one that takes the
# addresses of malloc and free (canonical PLT entries, which dlsym finds
# before libmbuddy's definitions) and is served, and own_malloc linked the
# same way, whose definitions still win. gcc's cc1 is the real case.
check_PROGRAMS += tests/stats/nopie_free tests/stats/own_malloc_nopie
tests_stats_nopie_free_SOURCES = tests/stats/nopie_free.c
tests_stats_nopie_free_CFLAGS = $(AM_CFLAGS) -fno-pie -fno-builtin
tests_stats_nopie_free_LDFLAGS = -Wc,-no-pie
tests_stats_own_malloc_nopie_SOURCES = tests/stats/own_malloc.c
tests_stats_own_malloc_nopie_CFLAGS = $(AM_CFLAGS) -fno-pie -fno-builtin
tests_stats_own_malloc_nopie_LDFLAGS = -Wc,-no-pie
TESTS += tests/stats/nopie-served.test tests/stats/gcc-served.test
EXTRA_DIST += tests/stats/nopie-served.test tests/stats/gcc-served.test

# The account's second column is headed "at the peak" only when it is:
# a program whose peak came and went before any account.
check_PROGRAMS += tests/stats/peak_between
tests_stats_peak_between_SOURCES = tests/stats/peak_between.c
tests_stats_peak_between_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/stats/peak-label.test
EXTRA_DIST += tests/stats/peak-label.test
