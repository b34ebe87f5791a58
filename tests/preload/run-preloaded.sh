#!/bin/sh
# run-preloaded.sh — the Automake LOG_COMPILER for test programs (tests with
# no extension): runs PROGRAM under LD_PRELOAD=$MBUDDY_LIB and passes its
# exit status through (0 pass, 1 fail, 77 skip, 99 hard error).
#
#   run-preloaded.sh PROGRAM [ARGS...]
#
# - Programs whose path contains /unit/ (tests/unit/*: the buddy core linked
#   directly) run as they are, WITHOUT the preload.
# - MBUDDY_LIB (required otherwise) names the libmbuddy.so to preload;
#   `make check` sets it through AM_TESTS_ENVIRONMENT.
# - An optional file <name>.env beside the program's source (looked up as
#   $MBUDDY_TOP_SRCDIR/<program path>.env, $srcdir/<program path>.env,
#   <program path>.env, then next to this script) holds VAR=value lines
#   exported for that test only; blank lines and lines starting with # are
#   ignored. Values are taken literally (no quotes, no expansion).
# - MBUDDY_TEST_TIMEOUT (seconds, default 300): a program still running
#   then is killed and the test fails (a deadlock must not hang the suite).

set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 PROGRAM [ARGS...]" >&2
    exit 99
fi
prog=$1
shift

case $prog in
*/unit/* | unit/*)
    exec "$prog" "$@"
    ;;
esac

if [ -z "${MBUDDY_LIB:-}" ]; then
    echo "run-preloaded.sh: MBUDDY_LIB is not set (the path of libmbuddy.so to preload)" >&2
    exit 99
fi
if [ ! -f "$MBUDDY_LIB" ]; then
    echo "run-preloaded.sh: MBUDDY_LIB=$MBUDDY_LIB does not exist" >&2
    exit 99
fi
if [ ! -x "$prog" ]; then
    echo "run-preloaded.sh: $prog is not an executable program" >&2
    exit 99
fi

# The per-test environment file.
here=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$prog")
envfile=
rel=${prog#./}
case $prog in
/*) candidates="$prog.env $here/$name.env" ;;
*) candidates="${MBUDDY_TOP_SRCDIR:+$MBUDDY_TOP_SRCDIR/$rel.env} ${srcdir:-.}/$rel.env $prog.env $here/$name.env" ;;
esac
for f in $candidates; do
    if [ -f "$f" ]; then
        envfile=$f
        break
    fi
done
if [ -n "$envfile" ]; then
    lineno=0
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        case $line in
        '' | '#'*) continue ;;
        esac
        var=${line%%=*}
        val=${line#*=}
        case $var in
        '' | [0-9]* | *[!A-Za-z0-9_]*)
            echo "run-preloaded.sh: $envfile:$lineno: not a VAR=value line: $line" >&2
            exit 99
            ;;
        esac
        if [ "$var" = "$line" ]; then
            echo "run-preloaded.sh: $envfile:$lineno: no '=' in: $line" >&2
            exit 99
        fi
        export "$var=$val"
        echo "run-preloaded.sh: $var=$val (from $envfile)"
    done <"$envfile"
fi

limit=${MBUDDY_TEST_TIMEOUT:-300}
if command -v timeout >/dev/null 2>&1; then
    timeout --kill-after=10 "$limit" env LD_PRELOAD="$MBUDDY_LIB" "$prog" "$@"
else
    env LD_PRELOAD="$MBUDDY_LIB" "$prog" "$@"
fi
status=$?
case $status in
0 | 1 | 77 | 99) ;;
124 | 137) echo "run-preloaded.sh: $prog did not finish within $limit s (exit $status): deadlock?" >&2 ;;
*)
    if [ "$status" -gt 128 ]; then
        echo "run-preloaded.sh: $prog was killed by signal $((status - 128))" >&2
    else
        echo "run-preloaded.sh: $prog exited with status $status" >&2
    fi
    ;;
esac
exit "$status"
