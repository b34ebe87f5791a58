#!/bin/sh
# Build libmbuddy and run a real program under it through the mbuddy
# launcher, with the statistics shown and the heap drawn:
# python3 (with PYTHONMALLOC=malloc, so every object goes through malloc)
# builds and drops a large dictionary of mixed-lifetime objects.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
build="$top/_build"
if [ ! -x "$build/config.status" ]; then
	(cd "$top" && autoreconf -fi >/dev/null)
	mkdir -p "$build"
	(cd "$build" && "$top/configure" -q CFLAGS="-O2 -g")
fi
make -s -C "$build" -j"$(nproc)" >/dev/null
# The launcher that make install puts in the PATH, run from the build tree:
# it preloads the library built there, and only the program started (not
# the commands of a wrapper script such as pyenv's) writes the report.
echo "== python3 through $build/mbuddy: statistics on stderr, heap map in $build/demo-heap.png =="
"$build/mbuddy" --map "$build/demo-heap.png" env PYTHONMALLOC=malloc python3 -c '
import json
pinned = [str(i) * 3 for i in range(20000)]           # lives to the end
cache = {}
for i in range(200000):
    cache[i % 50000] = {"k": i, "v": "x" * (i % 200)}  # replaced over time
    tmp = json.dumps(cache[i % 50000])                  # short-lived
cache.clear()
print("pinned", len(pinned), "objects; cache dropped")
'
