#!/bin/sh
# Automake LOG_COMPILER for test programs: runs $1 under LD_PRELOAD=$MBUDDY_LIB
# (the unit tests under tests/unit/ run as they are), after exporting the
# VAR=value lines of an optional <test>.env file beside the test's source.
# The exit status is the program's: 0 pass, 77 skip, anything else fail.
prog=$1
shift
case "$prog" in
*/unit/*) exec "$prog" "$@" ;;
esac
[ -n "${MBUDDY_LIB:-}" ] || { echo "MBUDDY_LIB is not set"; exit 99; }
[ -f "$MBUDDY_LIB" ] || { echo "MBUDDY_LIB=$MBUDDY_LIB does not exist"; exit 99; }
src=${MBUDDY_TOP_SRCDIR:-${srcdir:-.}}
envfile="$src/${prog#./}.env"
if [ -f "$envfile" ]; then
	while IFS= read -r line; do
		case "$line" in ''|'#'*) continue ;; esac
		export "$line"
	done < "$envfile"
fi
LD_PRELOAD="$MBUDDY_LIB" exec "$prog" "$@"
