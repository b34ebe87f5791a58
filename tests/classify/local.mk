# Classification tests: programs run under LD_PRELOAD by the generic driver
# (tests/preload/run-preloaded.sh), which also reads <name>.env files.
classify_tests = tests/classify/three_sites tests/classify/three_sites_wrapped \
	tests/classify/three_sites_cxx tests/classify/rules_override tests/classify/typed_api \
	tests/classify/wrapper_unwinds
check_PROGRAMS += $(classify_tests)
TESTS += $(classify_tests) tests/classify/profile.test tests/classify/profile-load.test \
	tests/classify/profile-save.test \
	tests/classify/dlopen_sites.test tests/classify/dlclose_range.test tests/classify/site-rows.test \
	tests/classify/set-apart-rows.test \
	tests/classify/unwinder_load.test tests/classify/unwinder_tls.test
EXTRA_DIST += tests/classify/classify_common.h tests/classify/two_threads.h tests/classify/three_sites_load.h tests/classify/site-rows.test tests/classify/rules_override.env \
	tests/classify/set-apart-rows.test \
	tests/classify/profile.test tests/classify/profile-load.test tests/classify/profile-save.test \
	tests/classify/dlopen_sites.test tests/classify/dlsite_lib.c tests/classify/dlclose_range.test \
	tests/classify/unwinder_load.test tests/classify/unwinder_tls.test

tests_classify_three_sites_SOURCES = tests/classify/three_sites.c
tests_classify_three_sites_LDADD = -ldl
tests_classify_three_sites_wrapped_SOURCES = tests/classify/three_sites.c
tests_classify_three_sites_wrapped_CPPFLAGS = $(AM_CPPFLAGS) -DWRAPPED
tests_classify_three_sites_wrapped_LDADD = -ldl
tests_classify_wrapper_unwinds_SOURCES = tests/classify/wrapper_unwinds.c
tests_classify_wrapper_unwinds_LDFLAGS = -Wl,--export-dynamic
tests_classify_wrapper_unwinds_LDADD = -ldl
tests_classify_three_sites_cxx_SOURCES = tests/classify/three_sites_cxx.cc
tests_classify_three_sites_cxx_LDADD = -ldl
tests_classify_rules_override_SOURCES = tests/classify/rules_override.c
tests_classify_rules_override_LDFLAGS = -Wl,--export-dynamic
tests_classify_rules_override_LDADD = -ldl
tests_classify_typed_api_SOURCES = tests/classify/typed_api.c
tests_classify_typed_api_LDADD = -ldl
# Not a test itself: set-apart-rows.test reads its report.
check_PROGRAMS += tests/classify/set_apart_rows
tests_classify_set_apart_rows_SOURCES = tests/classify/set_apart_rows.c
tests_classify_set_apart_rows_LDFLAGS = -Wl,--export-dynamic
tests_classify_set_apart_rows_LDADD = -ldl
# Not tests themselves: unwinder_load.test and unwinder_tls.test run them
# with one thread and two.
check_PROGRAMS += tests/classify/unwinder_load tests/classify/unwinder_tls
tests_classify_unwinder_tls_SOURCES = tests/classify/unwinder_tls.c
tests_classify_unwinder_tls_LDADD = -ldl -lpthread
tests_classify_unwinder_load_SOURCES = tests/classify/unwinder_load.c
tests_classify_unwinder_load_LDADD = -ldl -lpthread
# Not a test itself: profile-load.test counts its system calls.
check_PROGRAMS += tests/classify/many_sites
tests_classify_many_sites_SOURCES = tests/classify/many_sites.c
tests_classify_many_sites_CFLAGS = $(AM_CFLAGS) -fno-builtin

# A library whose code address is reused across dlopen/dlclose.
check_LTLIBRARIES += tests/classify/dlsite_short.la tests/classify/dlsite_pinned.la
tests_classify_dlsite_short_la_SOURCES = tests/classify/dlsite_lib.c
tests_classify_dlsite_short_la_CPPFLAGS = $(AM_CPPFLAGS) -DLIFETIME_SHORT
tests_classify_dlsite_short_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_classify_dlsite_pinned_la_SOURCES = tests/classify/dlsite_lib.c
tests_classify_dlsite_pinned_la_LDFLAGS = -module -avoid-version -rpath /nowhere
check_PROGRAMS += tests/classify/dlopen_sites
tests_classify_dlopen_sites_SOURCES = tests/classify/dlopen_sites.c
tests_classify_dlopen_sites_LDADD = -ldl -lpthread

# dlclose forgets only the unloaded code's sites: a second copy of the
# library of kept objects stays loaded while the first goes.
check_LTLIBRARIES += tests/classify/dlsite_pinned2.la
tests_classify_dlsite_pinned2_la_SOURCES = tests/classify/dlsite_lib.c
tests_classify_dlsite_pinned2_la_LDFLAGS = -module -avoid-version -rpath /nowhere
check_PROGRAMS += tests/classify/dlclose_range
tests_classify_dlclose_range_SOURCES = tests/classify/dlclose_range.c
tests_classify_dlclose_range_LDADD = -ldl
