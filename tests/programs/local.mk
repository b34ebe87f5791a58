# Real, unchanged programs under LD_PRELOAD, compared with a run without it.
program_tests = \
	tests/programs/bash.test tests/programs/coreutils.test \
	tests/programs/cpython.test tests/programs/git.test \
	tests/programs/gxx.test tests/programs/perl.test \
	tests/programs/python-multiprocessing.test \
	tests/programs/python-objects.test tests/programs/python-threads.test \
	tests/programs/sqlite3.test tests/programs/closed-stdio.test \
	tests/programs/php.test
TESTS += $(program_tests)
EXTRA_DIST += $(program_tests) tests/programs/lib.sh \
	tests/programs/cpython-modules.txt tests/programs/cpython-quick.txt \
	tests/programs/data/py_objects.py tests/programs/data/py_threads.py \
	tests/programs/data/py_mp.py tests/programs/data/perl_workload.pl \
	tests/programs/data/sqlite_workload.sql tests/programs/data/stl_heavy.cpp \
	tests/programs/data/php_workload.php
