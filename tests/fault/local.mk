# Fault injection (issue 7): failing mmap and madvise, and the heap cap
# reached in every size path. fault_inject links the core directly, so it
# must not run under the preload driver: fault.test runs it.
check_PROGRAMS += tests/fault/fault_inject
TESTS += tests/fault/fault.test
EXTRA_DIST += tests/fault/fault.test

tests_fault_fault_inject_SOURCES = tests/fault/fault_inject.c
tests_fault_fault_inject_LDADD = libmbcore.la $(LIBUNWIND_LIBS) -lpthread -ldl
