# Sourced by the launcher tests: installs the package from the build
# directory (the current one) into a staging root with make install
# DESTDIR=..., and finds the installed launcher. Sets $dest and $mbuddy.
# Needs $tmp.
dest=$tmp/dest
${MAKE:-make} install DESTDIR="$dest" >"$tmp/install.log" 2>&1 ||
	{ echo "ERROR: make install DESTDIR=$dest failed:"; tail -n 20 "$tmp/install.log"; exit 99; }
mbuddy=$(find "$dest" -path '*/bin/mbuddy' -type f | head -n 1)
[ -n "$mbuddy" ] || { echo "FAIL: make install put no bin/mbuddy under $dest"; find "$dest" -type f; exit 1; }
[ -x "$mbuddy" ] || { echo "FAIL: $mbuddy is not executable"; exit 1; }
