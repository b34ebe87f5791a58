# Statistics: exact values for a known sequence, text/JSON agreement, %p
# across fork and exec, unwritable paths.
check_PROGRAMS += tests/unit/test_stats_known
tests_unit_test_stats_known_SOURCES = tests/stats/stats_known.c
tests_unit_test_stats_known_LDADD = libmbcore.la $(LIBUNWIND_LIBS) -lpthread -ldl -lm
TESTS += tests/stats/stats-known.test tests/stats/stats-env.test
EXTRA_DIST += tests/stats/stats-known.test tests/stats/stats-env.test
