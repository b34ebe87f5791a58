# lib.sh — shared helpers for the real-program tests in tests/programs/.
#
# Sourced (not executed) by every tests/programs/*.test script:
#
#     . "$(dirname "$0")/lib.sh"
#     mb_init bash                     # temp dir, environment, sanity checks
#     mb_require bash                  # exit 77 (skip) if a program is missing
#     mb_compare --label loops --min-mallocs 10000 -- bash -c '...'
#     mb_finish                        # exit 0 if every comparison passed, else 1
#
# mb_compare runs a command twice: once plainly, once with
# LD_PRELOAD=$MBUDDY_LIB.  It requires identical stdout, identical exit status
# and (unless --no-stderr) identical stderr, and prints a diff on mismatch.
# The preloaded run also gets MBUDDY_STATS=<fresh dir>/mbuddy.%p.json and
# MBUDDY_STATS_FORMAT=json, and afterwards at least one of the stats files
# written there must report more than --min-mallocs allocations: that is the
# proof that libmbuddy, not glibc, served the program.
#
# Environment:
#   MBUDDY_LIB            absolute path of the library to preload (required;
#                         `make check` sets it to .libs/libmbuddy.so)
#   MBUDDY_SKIP_PROOF=1   do not look for stats files (for running the suite
#                         against another allocator, e.g. jemalloc)
#   MBUDDY_PROOF_KEY      dotted path of the counter in the stats JSON
#                         (default: counters.mallocs)
#   MBUDDY_TEST_TIMEOUT   seconds allowed for one run of one command (default
#                         300); a run that hangs is killed and counts as failed
#   MBUDDY_KEEP_TMP=1     keep the temp dir (its path is printed)
#   MBUDDY_PYTHON         python3 used by the tests and for parsing the stats
#                         (default /usr/bin/python3, else python3 from PATH)
#   MBUDDY_DIFF_LINES     lines of diff shown on mismatch (default 80)
#
# Exit statuses follow the Automake test protocol: 0 pass, 1 fail, 77 skip,
# 99 hard error (the test itself could not be set up).

MB_NAME=${MB_NAME:-$(basename "$0" .test)}
MB_SRCDIR=$(cd "$(dirname "$0")" && pwd)
MB_DATA=$MB_SRCDIR/data
MB_FAILED=0
MB_COMPARED=0
MB_TMP=

mb_log() { printf '%s\n' "$*"; }

mb_hard_error() {
    mb_log "ERROR: $MB_NAME: $*"
    exit 99
}

mb_skip() {
    mb_log "SKIP: $MB_NAME: $*"
    exit 77
}

# mb_require PROGRAM... — skip the test unless every PROGRAM is installed.
mb_require() {
    for _p in "$@"; do
        command -v "$_p" >/dev/null 2>&1 || mb_skip "$_p is not installed"
    done
}

mb_cleanup() {
    if [ -n "$MB_TMP" ] && [ -d "$MB_TMP" ]; then
        if [ "${MBUDDY_KEEP_TMP:-0}" = 1 ]; then
            mb_log "kept temp dir $MB_TMP"
        else
            chmod -R u+rwx "$MB_TMP" 2>/dev/null
            rm -rf "$MB_TMP"
        fi
    fi
}

# mb_init — check MBUDDY_LIB, make the temp dir, fix the environment so that
# both runs of every command see the same deterministic setting.
mb_init() {
    [ -n "${MBUDDY_LIB:-}" ] || mb_hard_error "MBUDDY_LIB is not set (path of the library to preload)"
    [ -f "$MBUDDY_LIB" ] || mb_hard_error "MBUDDY_LIB=$MBUDDY_LIB does not exist"
    case $MBUDDY_LIB in
        /*) ;;
        *) mb_hard_error "MBUDDY_LIB must be an absolute path (got $MBUDDY_LIB)" ;;
    esac
    for _p in mktemp diff timeout env md5sum awk; do
        command -v "$_p" >/dev/null 2>&1 || mb_hard_error "$_p is needed by the test harness"
    done

    if [ -n "${MBUDDY_PYTHON:-}" ]; then
        MB_PY=$MBUDDY_PYTHON
    elif [ -x /usr/bin/python3 ]; then
        MB_PY=/usr/bin/python3
    else
        MB_PY=$(command -v python3 2>/dev/null)
    fi
    if [ -z "$MB_PY" ] && [ "${MBUDDY_SKIP_PROOF:-0}" != 1 ]; then
        mb_hard_error "python3 is needed to read the MBUDDY_STATS files"
    fi

    MB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mbuddy-$MB_NAME.XXXXXX") || mb_hard_error "mktemp -d failed"
    trap 'mb_cleanup' EXIT
    trap 'exit 1' HUP INT PIPE TERM

    # Same, predictable environment for both runs.
    LC_ALL=C; LANG=C; TZ=UTC
    HOME=$MB_TMP/home
    TMPDIR=$MB_TMP/tmp
    mkdir -p "$HOME" "$TMPDIR"
    export LC_ALL LANG TZ HOME TMPDIR
    unset LD_PRELOAD MBUDDY_STATS MBUDDY_STATS_FORMAT LANGUAGE

    mb_log "== $MB_NAME: MBUDDY_LIB=$MBUDDY_LIB"
    [ "${MBUDDY_SKIP_PROOF:-0}" = 1 ] && mb_log "   (MBUDDY_SKIP_PROOF=1: allocations are not proven to come from libmbuddy)"
    return 0
}

# mb_stats_scan DIR — the one place that parses MBUDDY_STATS JSON files.
# Prints one line "FILES VALID MAX TOTAL" (files found, files that parsed and
# had the counter, largest counter, sum of counters), then one line per file
# that could not be used.  The counter is found by the dotted path in
# MBUDDY_PROOF_KEY (default counters.mallocs).
mb_stats_scan() {
    env -u LD_PRELOAD -u MBUDDY_STATS -u PYTHONMALLOC "$MB_PY" - "$1" "${MBUDDY_PROOF_KEY:-counters.mallocs}" <<'EOF'
import json, os, sys, time
d, key = sys.argv[1], sys.argv[2].split(".")
files = valid = mx = total = 0
bad = []

def load(path):
    # A process whose output the command no longer waits for may still be
    # writing its exit report, created in place: the coreutils close their
    # stdout from atexit, before libmbuddy's destructor writes the report,
    # so bash reading `< <(seq ...)` goes on and ends meanwhile. An empty
    # or partial report is read again for up to 3 s before it counts.
    for _ in range(30):
        try:
            with open(path) as f:
                return json.load(f)
        except ValueError:
            time.sleep(0.1)
    with open(path) as f:
        return json.load(f)

for name in sorted(os.listdir(d)):
    path = os.path.join(d, name)
    if not os.path.isfile(path):
        continue
    files += 1
    try:
        v = load(path)
        for k in key:
            v = v[k]
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("counter is %r, not an integer" % (v,))
    except Exception as e:
        bad.append("%s: %s: %s" % (name, type(e).__name__, e))
        continue
    valid += 1
    mx = max(mx, v)
    total += v
print(files, valid, mx, total)
for b in bad:
    print(b)
EOF
}

# mb_elapsed START END — seconds between two `date +%s.%N` stamps.
mb_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

mb_describe() { # FILE — "N bytes, md5 X"
    printf '%s bytes, md5 %s' "$(wc -c < "$1" | tr -d ' ')" "$(md5sum < "$1" | cut -c1-12)"
}

# _mb_run MODE DIR CMD... — run CMD once in a fresh $MB_WORK, results in DIR.
_mb_run() {
    _mode=$1; _dir=$2; shift 2
    mkdir -p "$_dir"
    rm -rf "$MB_WORK"; mkdir -p "$MB_WORK"
    _t0=$(date +%s.%N)
    if [ "$_mode" = plain ]; then
        (cd "$MB_WORK" && exec timeout -k 10 "$_mb_timeout" \
            env -u LD_PRELOAD -u MBUDDY_STATS -u MBUDDY_STATS_FORMAT "$@") \
            < "$_mb_stdin" > "$_dir/stdout" 2> "$_dir/stderr"
    else
        (cd "$MB_WORK" && exec timeout -k 10 "$_mb_timeout" \
            env LD_PRELOAD="$MBUDDY_LIB" MBUDDY_STATS="$_mb_stats/mbuddy.%p.json" \
                MBUDDY_STATS_FORMAT=json "$@") \
            < "$_mb_stdin" > "$_dir/stdout" 2> "$_dir/stderr"
    fi
    echo $? > "$_dir/status"
    _t1=$(date +%s.%N)
    mb_elapsed "$_t0" "$_t1" > "$_dir/time"
    rm -rf "$_dir/work"
    mv "$MB_WORK" "$_dir/work"
}

# mb_compare [options] -- COMMAND [ARG...]
#   --label L          name printed for this comparison (default: command)
#   --min-mallocs N    the proof needs a stats file with mallocs > N (default 1000)
#   --no-stderr        stderr is not deterministic: do not compare it
#   --stdin FILE       feed FILE on stdin (default /dev/null)
#   --timeout S        per-run timeout in seconds (default MBUDDY_TEST_TIMEOUT or 300)
#   --status N|any     exit status the plain run must have (default 0): a
#                      plain run that fails unexpectedly means the test is
#                      broken on this machine and is reported as a failure
# COMMAND runs with its working directory set to a fresh, empty $MB_WORK (the
# same path in both runs, so outputs may mention it).  After the comparison
# the two working directories are kept as $MB_LAST/plain/work and
# $MB_LAST/preload/work for further checks by the caller.
# Returns 0 on match, 1 on mismatch (and counts the failure for mb_finish).
mb_compare() {
    [ -n "$MB_TMP" ] || mb_hard_error "mb_compare called before mb_init"
    _mb_label=; _mb_min=1000; _mb_errcmp=1; _mb_stdin=/dev/null
    _mb_timeout=${MBUDDY_TEST_TIMEOUT:-300}; _mb_want=0
    while [ $# -gt 0 ]; do
        case $1 in
            --label) _mb_label=$2; shift 2 ;;
            --min-mallocs) _mb_min=$2; shift 2 ;;
            --no-stderr) _mb_errcmp=0; shift ;;
            --stdin) _mb_stdin=$2; shift 2 ;;
            --timeout) _mb_timeout=$2; shift 2 ;;
            --status) _mb_want=$2; shift 2 ;;
            --) shift; break ;;
            *) mb_hard_error "mb_compare: unknown option $1" ;;
        esac
    done
    [ $# -gt 0 ] || mb_hard_error "mb_compare: no command"
    [ -n "$_mb_label" ] || _mb_label=$*

    MB_COMPARED=$((MB_COMPARED + 1))
    MB_LAST=$MB_TMP/cmp.$MB_COMPARED
    MB_WORK=$MB_TMP/work
    _mb_stats=$MB_LAST/stats
    mkdir -p "$MB_LAST" "$_mb_stats"

    mb_log ""
    mb_log "-- [$MB_COMPARED] $_mb_label"
    _mb_cmdline=$(printf '%s ' "$@" | tr '\n' ' ' | cut -c1-300)
    mb_log "   command: $_mb_cmdline"

    _mb_run plain "$MB_LAST/plain" "$@"
    _mb_run preload "$MB_LAST/preload" "$@"

    _ok=1
    for _m in plain preload; do
        _d=$MB_LAST/$_m
        mb_log "   $(printf '%-8s' "$_m:") status $(cat "$_d/status"), stdout $(mb_describe "$_d/stdout"), stderr $(wc -c < "$_d/stderr" | tr -d ' ') bytes, $(cat "$_d/time") s"
    done

    _sp=$(cat "$MB_LAST/plain/status"); _sl=$(cat "$MB_LAST/preload/status")
    case $_sp in 124|137) mb_log "   NOTE: the plain run timed out after ${_mb_timeout}s" ;; esac
    case $_sl in 124|137) mb_log "   NOTE: the preloaded run timed out after ${_mb_timeout}s (hang?)" ;; esac
    if [ "$_mb_want" != any ] && [ "$_sp" != "$_mb_want" ]; then
        mb_log "   BROKEN TEST: the run without the library exited with $_sp, expected $_mb_want"
        _ok=0
    fi
    if [ "$_sp" != "$_sl" ]; then
        mb_log "   MISMATCH: exit status $_sp without the library, $_sl with it"
        _ok=0
    fi
    if ! cmp -s "$MB_LAST/plain/stdout" "$MB_LAST/preload/stdout"; then
        mb_log "   MISMATCH: stdout differs (diff -u plain preload):"
        diff -u "$MB_LAST/plain/stdout" "$MB_LAST/preload/stdout" \
            | head -n "${MBUDDY_DIFF_LINES:-80}" | sed 's/^/   | /'
        _ok=0
    fi
    if [ "$_mb_errcmp" = 1 ] && ! cmp -s "$MB_LAST/plain/stderr" "$MB_LAST/preload/stderr"; then
        mb_log "   MISMATCH: stderr differs (diff -u plain preload):"
        diff -u "$MB_LAST/plain/stderr" "$MB_LAST/preload/stderr" \
            | head -n "${MBUDDY_DIFF_LINES:-80}" | sed 's/^/   | /'
        _ok=0
    fi
    if [ "$_ok" = 0 ]; then
        for _m in plain preload; do
            if [ -s "$MB_LAST/$_m/stderr" ]; then
                mb_log "   stderr of the $_m run (last 15 lines):"
                tail -n 15 "$MB_LAST/$_m/stderr" | sed 's/^/   | /'
            fi
        done
    fi

    if [ "${MBUDDY_SKIP_PROOF:-0}" = 1 ]; then
        mb_log "   proof:   skipped (MBUDDY_SKIP_PROOF=1)"
    else
        _scan=$(mb_stats_scan "$_mb_stats")
        set -- $(printf '%s\n' "$_scan" | head -n 1)
        if [ $# -ne 4 ]; then
            mb_log "   PROOF FAILED: could not parse the stats files in $_mb_stats"
            printf '%s\n' "$_scan" | sed 's/^/   | /'
            _ok=0
        else
            mb_log "   proof:   $1 stats file(s), $2 readable, max ${MBUDDY_PROOF_KEY:-counters.mallocs} $3, total $4 (need > $_mb_min)"
            printf '%s\n' "$_scan" | sed -n '2,6s/^/   unreadable stats file: /p'
            if [ "$1" -eq 0 ]; then
                mb_log "   PROOF FAILED: no MBUDDY_STATS file was written: is $MBUDDY_LIB libmbuddy? (set MBUDDY_SKIP_PROOF=1 for other allocators)"
                _ok=0
            elif [ "$3" -le "$_mb_min" ]; then
                mb_log "   PROOF FAILED: no process reported more than $_mb_min allocations served by libmbuddy"
                _ok=0
            fi
        fi
    fi

    if [ "$_ok" = 1 ]; then
        mb_log "   ok"
        return 0
    fi
    mb_log "   FAILED: $_mb_label"
    MB_FAILED=$((MB_FAILED + 1))
    return 1
}

# mb_check LABEL COMMAND... — an extra assertion made by the test itself
# (e.g. about files left in $MB_LAST/*/work); counts as a failure if false.
mb_check() {
    _mb_label=$1; shift
    if "$@"; then
        mb_log "   check ok: $_mb_label"
    else
        mb_log "   CHECK FAILED: $_mb_label"
        MB_FAILED=$((MB_FAILED + 1))
    fi
}

# mb_finish — exit 0 if every comparison passed, 1 otherwise.
mb_finish() {
    mb_log ""
    if [ "$MB_COMPARED" -eq 0 ]; then
        mb_log "ERROR: $MB_NAME: nothing was compared"
        exit 99
    fi
    if [ "$MB_FAILED" -gt 0 ]; then
        mb_log "FAIL: $MB_NAME: $MB_FAILED of $MB_COMPARED comparison(s)/check(s) failed"
        exit 1
    fi
    mb_log "PASS: $MB_NAME: $MB_COMPARED comparison(s) identical with and without $(basename "$MBUDDY_LIB")"
    exit 0
}
