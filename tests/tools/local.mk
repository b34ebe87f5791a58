# What make install gives a user: the launcher, the map command, the man
# pages, checked from a staged installation.
TESTS += tests/tools/launcher.test tests/tools/launcher-map.test tests/docs/man-groff.test
EXTRA_DIST += tests/tools/launcher.test tests/tools/launcher-map.test tests/tools/install.sh \
	tests/docs/man-groff.test
