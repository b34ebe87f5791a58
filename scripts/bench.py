#!/usr/bin/env python3
"""Side-by-side allocator benchmark for libmbuddy (issues 6, 12 and 15).

Runs one suite of workloads under several allocators loaded with
LD_PRELOAD, interleaved round-robin, and reports medians and ratios as a
markdown table and a PNG chart.

Allocators
  glibc                 the system malloc (no preload)
  jemalloc              libjemalloc.so.2, default settings
  jemalloc-eager        jemalloc with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0
                        (phase, largebuf and idle only: what eager purging buys and costs)
  mimalloc              libmimalloc.so.2
  tcmalloc              libtcmalloc_minimal.so.4
  libmbuddy             --lib (default .libs/libmbuddy.so); skipped if absent
  libmbuddy-noclassify  the same with MBUDDY_CLASSIFY=off (every site one type)
  libmbuddy-decay0      the same with MBUDDY_DECAY_MS=0 (pages purged at once)
  libmbuddy-lockstats   a copy built with --enable-lock-stats (--lockstats-lib, or
                        built by this script under bench-results/lockstats-build);
                        lock-counted workloads only, for the contention figures
  jemalloc-lockprof     jemalloc with lockprof.so (scripts/lockprof.c) preloaded in
                        front of it, counting its pthread mutexes by the same rules;
                        lock-counted workloads only
The last two are not in the time or RSS tables, nor judged by targets.

Workloads (sources in scripts/workloads/, built with cc -O2 into --build-dir)
  The original suite (issue 6):
  phase     three lifetimes from three call sites grow to a few hundred MiB,
            then cache and temporaries are dropped; reports RSS after the drop
  xthread   producer/consumer on two threads: every free is cross-thread
  sizesweep sizes from 8 B to 1 MiB in batches
  realloc   many buffers grown by small appends and by doubling
  largebuf  5-25 MiB zeroed buffers allocated and freed in a loop
  threads   thousands of short-lived threads
  fastpath  small-object malloc+free in ns/op: pair (free what was just taken),
            batch (64 of a class, freed oldest first), pair loop in 1 and 2
            threads; reports the best of 3 in-process timings of each part
  python    /usr/bin/python3 -m test (a slice of CPython's suite), PYTHONMALLOC=malloc
  sqlite    sqlite3 CLI on a generated 200k-row database (workloads/sqlite.sql)
  gxx       g++ -O1 -c workloads/stl_heavy.cpp
  Threads (issue 15), each at 1 and 2 threads (NAME-1t, NAME-2t; --only NAME
  takes both), written for this project after the published descriptions of
  the mimalloc-bench programs; fixed-time ones run 0.5 s and report Mops/s
  (millions of mallocs, each with its free, per second), fixed-work ones
  report seconds:
  larson        server simulation: threads replace random objects (8-1000 B)
                in their slot arrays and hand the arrays to successor threads
  larson-sized  the same over 8 B - 32 KiB, log-uniform
  xmalloc       producers allocate, consumers free (1 thread: frees its own)
  rptest        random sizes 8-16000 B, one object in eight freed by the next
                thread in a ring
  glibc-thread  private working sets, random sizes 8 B - 32 KiB (Mops/s per thread)
  mstress       rounds of fresh threads; temporaries, a working set, and objects
                swapped through a shared array; seconds and peak RSS
  alloc-test    per-thread bursts of allocation and freeing; seconds
  cache-scratch passive false sharing: threads free the main thread's neighbouring
                objects, then allocate and write small objects; seconds
  cache-thrash  active false sharing: threads allocate and write small objects; seconds
  churn         producer/consumer churn of 16-128 B objects, Mops/s
  Memory return and stalls (issue 12):
  latency   a load spike leaves the heap full of holes, 1.2 s idle, then
            400,000 single malloc/free calls timed one by one: p50, p99.9, max
  largealloc malloc+free of 8 GiB and 32 GiB untouched: time, and the RSS the
            allocator adds before the program touches the memory
  startup   /bin/true under libmbuddy with MBUDDY_MAX_ORDER=6 and MBUDDY_HEAP_SIZE
            at 256K (the minimum), 64G (the default) and 8T (the maximum):
            median time and peak RSS of 10 runs each (libmbuddy only)
  idle      a load spike, then a drop to about 15% live and no allocator call
            at all: RSS read at 0, 0.5, 1, 1.5 and 2 s after the drop
  --only also takes the group names issue12, issue15 and legacy.

Measured per run, by a small static launcher (measure.c) so that the
runner's own memory is not charged to the workload: wall time, user+sys CPU
time and peak RSS (wait4 rusage, which covers the workload's own children,
e.g. cc1plus under g++). The workloads print RESULT lines with their own
figures (Mops/s, seconds of their timed part, RSS samples, latencies).
A run that times out counts as failed and is not repeated: the limit is
--timeout, or 10x the fastest run of the workload so far, or for
libmbuddy-decay0 4x libmbuddy's (never less than 10 s).

Targets for libmbuddy, marked MISS in the report when not met (ratios are
of the medians over the runs):
  General (issue 6, the original workloads):
  * wall time <= 1.2x jemalloc and <= 1.5x the fastest peer (glibc, jemalloc,
    mimalloc, tcmalloc), per workload (fastpath excepted: see below);
  * phase: RSS after the drop <= 1.3x the live bytes, and <= 0.7x the RSS of
    jemalloc-eager after the drop (raw RSS: the program's own text and libc
    count against the allocator, which is conservative);
  * geometric mean of peak RSS over the original workloads (fastpath
    excepted) <= jemalloc's;
  * fastpath: pair and batch ns/op <= 1.2x jemalloc's, and two-thread
    scaling (pair2t ns/op over pair1t ns/op, 1.0 = perfect) <= 1.2x
    jemalloc's scaling. Relative, not absolute: on a shared or 2-CPU machine
    every allocator's scaling degrades alike, so an absolute limit would
    measure the machine.
  Threads (issue 15):
  * every multi-threaded workload at 2 threads (the -2t ones, xthread,
    threads, fastpath's 2-thread part) costs <= 1.2x the best peer's (cost:
    seconds, ns/op or 1 / Mops/s);
  * mstress peak RSS <= 1.5x glibc's, at 1 and 2 threads;
  * predicted Mops/s at 64 threads (Amdahl on the serial fraction measured
    by the lock-counting runs; bench_contention.py explains the model) at
    least jemalloc's, per family.
  Memory return and stalls (issue 12):
  * latency: the slowest single call <= 3x jemalloc's;
  * largealloc: 8 GiB malloc+free <= 5x jemalloc's time, and <= 1 MiB of
    resident metadata;
  * startup: /bin/true at 64G and 8T <= 1.25x the time and <= 1.10x the
    peak RSS it has at the minimum heap;
  * idle: RSS 1.5 s after the drop <= 1.3x the live bytes and <= 0.7x
    jemalloc-eager's at the same moment;
  * libmbuddy-decay0 (MBUDDY_DECAY_MS=0) <= 1.5x the default's cost on
    every workload.

Also reported: per lock-counted workload, lock acquisitions per 1,000
operations, mean hold time and contended share per lock, the serial
fraction, and the predicted throughput at 16, 64 and 128 threads next to
the measured 1- and 2-thread figures, for libmbuddy and jemalloc.

Examples
  python3 scripts/bench.py --quick                       # smoke test, ~5 min
  python3 scripts/bench.py --lib build/.libs/libmbuddy.so  # full run, ~25 min on 2 cores
  python3 scripts/bench.py --only phase,largebuf --reps 5
  python3 scripts/bench.py --only issue15 --reps 3
  python3 scripts/bench.py --from-json bench-results/bench.json   # redo the report

The raw runs go to --out-json so a report can be regenerated without running
again. The chart needs matplotlib; if the running interpreter lacks it, the
chart is drawn by /usr/bin/python3 (Debian's python3-matplotlib).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The bench_*.py modules sit next to this file; no bytecode caches in the
# source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_contention import parse_lock_lines  # noqa: E402
from bench_report import write_doc, write_markdown  # noqa: E402
from bench_suite import (  # noqa: E402,F401  (LIBDIR: for sweep.py)
    GROUP_ALIASES, HERE, JE_LOCKPROF, LIBDIR, LOCKSTATS, MBUDDY, SCRUB_PREFIXES, SYSTEM_PYTHON,
    WARMUP, WORKLOAD_SRC, WORKLOADS, allocators)

SRCDIR = HERE.parent
# A run slower than this many times the fastest run of its workload so far
# is stopped (not below ADAPTIVE_FLOOR seconds).
ADAPTIVE_FACTOR = 10
ADAPTIVE_FLOOR = 10


# ---------------------------------------------------------------- building

def build(build_dir, cc="cc", verbose=True, only=None):
    """Compile every workloads/*.c (or those named in `only`), the measure
    launcher and lockprof.so into build_dir (only when out of date)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    headers = sorted(WORKLOAD_SRC.glob("*.h"))
    # -rdynamic: the call-site functions get names dladdr() can see, so
    # MBUDDY_RULES can refer to them.
    jobs = [(src, src.stem, headers, ["-rdynamic"]) for src in sorted(WORKLOAD_SRC.glob("*.c"))
            if only is None or src.stem in only]
    jobs.append((HERE / "measure.c", "measure", [], ["-static"]))
    jobs.append((HERE / "lockprof.c", "lockprof.so", [], ["-shared", "-fPIC"]))
    for src, name, deps, extra in jobs:
        out = build_dir / name
        newest = max(f.stat().st_mtime for f in [src, *deps])
        if out.exists() and out.stat().st_mtime >= newest:
            continue
        cmd = [cc, "-O2", "-Wall", "-Wextra", "-pthread", *extra, "-o", str(out), str(src), "-lm"]
        if verbose:
            print("  " + " ".join(cmd), file=sys.stderr)
        if subprocess.run(cmd).returncode == 0:
            continue
        if "-static" not in cmd:
            sys.exit(f"build failed: {src}")
        # No static libc: a dynamic launcher adds ~1 MiB to every peak RSS
        # and loads the preloaded allocator itself.
        print("  static link failed; linking the launcher dynamically", file=sys.stderr)
        cmd.remove("-static")
        subprocess.run(cmd, check=True)


def build_lockstats_lib(build_dir):
    """Configure and build a copy of libmbuddy with --enable-lock-stats in
    build_dir (make keeps it up to date). Returns its path, or a reason
    why there is none."""
    configure = SRCDIR / "configure"
    if not configure.exists():
        return None, f"no {configure} (run autoreconf -fi)"
    if (SRCDIR / "config.status").exists():
        return None, (f"{SRCDIR} is configured in place, so no second build can share it "
                      "(pass --lockstats-lib)")
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "build.log"
    with open(log, "w") as out:
        if not (build_dir / "Makefile").exists():
            print(f"configuring a lock-stats build in {build_dir}", file=sys.stderr)
            rc = subprocess.run([str(configure), "-q", "--enable-lock-stats", "CFLAGS=-O2 -g"],
                                cwd=build_dir, stdout=out, stderr=subprocess.STDOUT).returncode
            if rc:
                return None, f"configure --enable-lock-stats failed (see {log})"
        print(f"building the lock-stats library in {build_dir}", file=sys.stderr)
        rc = subprocess.run(["make", "-j2", "libmbuddy.la"], cwd=build_dir, stdout=out,
                            stderr=subprocess.STDOUT).returncode
    if rc:
        return None, f"building the lock-stats library failed (see {log})"
    return build_dir / ".libs" / "libmbuddy.so", None


# ----------------------------------------------------------------- running

def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB_PREFIXES)}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def parse_result(stdout):
    """Key=value pairs of the last line that starts with RESULT."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            fields = {}
            for tok in line.split()[1:]:
                key, _, val = tok.partition("=")
                try:
                    fields[key] = int(val)
                except ValueError:
                    try:
                        fields[key] = float(val)
                    except ValueError:
                        fields[key] = val
            return fields
    return None


def launch(measure, report, argv, env, cwd, timeout):
    """Run argv through the measure launcher (see measure.c for why), which
    writes its figures to `report`; return them with the output. The
    launcher gets its own session so a timeout kills the whole process
    group."""
    report.unlink(missing_ok=True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(measure), str(report), *argv], env=env,
                                cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.seek(0)
        err.seek(0)
        r = {"timed_out": timed_out, "rc": proc.returncode,
             "stdout": out.read().decode(errors="replace"),
             "stderr": err.read().decode(errors="replace")}
    fields = {}
    if report.exists():
        fields = dict(tok.split("=", 1) for tok in report.read_text().split())
    if fields:
        r["wall"] = int(fields["wall_ns"]) / 1e9
        r["cpu"] = (int(fields["utime_us"]) + int(fields["stime_us"])) / 1e6
        r["maxrss_kib"] = int(fields["maxrss_kib"])
        r["rc"] = os.waitstatus_to_exitcode(int(fields["status"]))
    else:
        r.update(wall=None, cpu=None, maxrss_kib=None)
    return r


def run_once(argv, env, ctx, timeout):
    return launch(ctx["bin"] / "measure", ctx["scratch"] / "measure.txt", argv, env,
                  ctx["scratch"], timeout)


def lock_env(alloc, ctx):
    """Where a lock-counting run writes its figures."""
    for f in ctx["scratch"].glob("locks-*.txt"):
        f.unlink()
    if alloc.locks == "stats":
        return {"MBUDDY_STATS": str(ctx["scratch"] / "locks-%p.txt")}
    if alloc.locks == "lockprof":
        return {"LOCKPROF_OUT": str(ctx["scratch"] / "locks-0.txt")}
    return {}


def read_locks(ctx):
    rows = []
    for f in sorted(ctx["scratch"].glob("locks-*.txt")):
        rows += parse_lock_lines(f.read_text(errors="replace"))
        f.unlink()
    return rows


def measure(wl, alloc, ctx, timeout):
    env = clean_env({**wl.env, **alloc.env, **lock_env(alloc, ctx)})
    if alloc.preload and not wl.preload_in_argv:
        env["LD_PRELOAD"] = " ".join(str(p) for p in alloc.preload_paths())
    r = run_once(wl.argv(ctx), env, ctx, timeout)
    run = {"workload": wl.name, "allocator": alloc.name, "wall": r["wall"],
           "cpu": r["cpu"], "maxrss_kib": r["maxrss_kib"], "rc": r["rc"],
           "result": parse_result(r["stdout"]), "error": None}
    if alloc.locks:
        run["locks"] = read_locks(ctx)
        run["lock_source"] = alloc.locks
    if r["timed_out"]:
        run["error"] = f"timed out after {timeout:.0f} s"
    elif r["rc"] != 0 or r["wall"] is None:
        tail = (r["stderr"].strip() or r["stdout"].strip()).splitlines()[-3:]
        run["error"] = f"exit status {r['rc']}: " + " | ".join(tail)
    elif wl.result and run["result"] is None:
        run["error"] = "no RESULT line on stdout"
    elif alloc.locks and not run["locks"]:
        run["error"] = "no lock figures were written"
    return run


def machine_info():
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        uname = subprocess.run(["uname", "-a"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        uname = " ".join(platform.uname())
    return {
        "uname": uname,
        "cpu": cpu,
        "nproc": len(os.sched_getaffinity(0)),
        "memory": mem,
        "loadavg_start": os.getloadavg()[0],
    }


def runs_under(wl, alloc):
    return alloc.runs(wl.name) and (wl.only is None or alloc.name in wl.only)


def run_timeout(args, wl, alloc, fastest):
    """--timeout, less when the workload's fastest run so far (or that of
    the allocator this one is judged against) says a run this long can only
    be a failure."""
    limits = [args.timeout]
    if (wl.name, None) in fastest:
        limits.append(max(ADAPTIVE_FLOOR, ADAPTIVE_FACTOR * fastest[(wl.name, None)]))
    if alloc.stop_vs and (wl.name, alloc.stop_vs[0]) in fastest:
        limits.append(max(ADAPTIVE_FLOOR, alloc.stop_vs[1] * fastest[(wl.name, alloc.stop_vs[0])]))
    return min(limits)


def run_suite(args, allocs, workloads):
    ctx = {"bin": Path(args.build_dir).resolve(), "quick": args.quick, "lib": args.lib_path}
    runs = []
    todo = [(rep, wl, a) for rep in range(args.reps) for wl in workloads
            for a in rotate([a for a in allocs if runs_under(wl, a)], rep)]
    fastest = {}     # (workload, allocator or None for any) -> shortest wall time so far
    timed_out = {}   # (workload, allocator) -> the error of its timed-out run
    with tempfile.TemporaryDirectory(prefix="mbuddy-bench-") as scratch:
        ctx["scratch"] = Path(scratch)
        if not args.quick:
            for wl in workloads:
                if wl.name in WARMUP:
                    print(f"warm-up: {wl.name}", file=sys.stderr)
                    measure(wl, allocs[0], ctx, args.timeout)
        for i, (rep, wl, alloc) in enumerate(todo, 1):
            key = (wl.name, alloc.name)
            if key in timed_out:
                run = {"workload": wl.name, "allocator": alloc.name, "wall": None, "cpu": None,
                       "maxrss_kib": None, "rc": None, "result": None,
                       "error": f"not run: {timed_out[key]} in an earlier repetition"}
            else:
                run = measure(wl, alloc, ctx, run_timeout(args, wl, alloc, fastest))
                if run["error"] and run["error"].startswith("timed out"):
                    timed_out[key] = run["error"]
                elif not run["error"]:
                    for k in ((wl.name, None), key):
                        fastest[k] = min(fastest.get(k, run["wall"]), run["wall"])
            run["rep"] = rep
            runs.append(run)
            status = run["error"] or f"{run['wall']:.2f} s, {run['maxrss_kib'] / 1024:.1f} MiB"
            print(f"[{i}/{len(todo)}] {wl.name:16} {alloc.name:21} {status}", file=sys.stderr)
    return runs


def rotate(seq, k):
    """Round-robin order that changes per repetition, so no allocator always
    runs first (cold caches) or right after the same neighbour."""
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


# ------------------------------------------------------------------ output

def write_chart(png, json_path, data):
    """Draw the PNG here, or in /usr/bin/python3 if only that has matplotlib.
    Returns True when drawn in this process."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        here = Path(sys.executable).resolve()
        if SYSTEM_PYTHON.exists() and SYSTEM_PYTHON.resolve() != here:
            print(f"matplotlib is missing in {sys.executable}; drawing the chart with "
                  f"{SYSTEM_PYTHON}", file=sys.stderr)
            with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
                if not json_path:
                    json.dump(data, tmp)
                    tmp.flush()
                    json_path = tmp.name
                subprocess.run([str(SYSTEM_PYTHON), __file__, "--from-json", str(json_path),
                                "--out-md", "", "--out-png", str(png)], check=False)
        else:
            print("matplotlib is missing: no chart (apt-get install python3-matplotlib)",
                  file=sys.stderr)
        return False
    from bench_chart import draw
    draw(png, data)
    return True


def report(args, data):
    if args.out_json and not args.from_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(data, indent=1))
        print(f"wrote {args.out_json}", file=sys.stderr)
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        write_markdown(args.out_md, data)
        print(f"wrote {args.out_md}", file=sys.stderr)
    if args.out_doc:
        write_doc(args.out_doc, data)
        print(f"wrote the generated part of {args.out_doc}", file=sys.stderr)
    if args.out_png:
        Path(args.out_png).parent.mkdir(parents=True, exist_ok=True)
        if write_chart(args.out_png, args.from_json or args.out_json, data):
            print(f"wrote {args.out_png}", file=sys.stderr)


# -------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=".libs/libmbuddy.so",
                   help="libmbuddy shared object (default: %(default)s)")
    p.add_argument("--lockstats-lib",
                   help="libmbuddy built with --enable-lock-stats (default: build one under "
                        "bench-results/lockstats-build; 'none': no lock figures)")
    p.add_argument("--build-dir", default="bench-results/bin",
                   help="where the workloads are compiled (default: %(default)s)")
    p.add_argument("--reps", type=int, help="repetitions per cell (default: 3, 1 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1 repetition, smaller sizes, no warm-up")
    p.add_argument("--only", help="comma-separated workloads or groups (a family such as "
                                  "larson, or issue12, issue15, legacy) to run (default: all)")
    p.add_argument("--allocators", help="comma-separated allocators to run (default: all)")
    p.add_argument("--timeout", type=float, default=180, help="seconds per run (default: 180)")
    p.add_argument("--out-md", default="bench-results/bench.md",
                   help="markdown report (default: %(default)s; empty: none)")
    p.add_argument("--out-doc", metavar="FILE",
                   help="also replace the generated block of FILE (make bench: doc/benchmarks.md)")
    p.add_argument("--out-png", default="bench-results/bench.png",
                   help="chart (default: %(default)s; empty: none)")
    p.add_argument("--out-json", default="bench-results/bench.json",
                   help="raw runs (default: %(default)s)")
    p.add_argument("--from-json", metavar="FILE",
                   help="do not run: rebuild the report and chart from FILE")
    p.add_argument("--list", action="store_true", help="list workloads and allocators")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.reps < 1:
        p.error("--reps must be at least 1")
    return args


def pick(items, spec, what, groups=None):
    """The items named in spec (names, families or group aliases)."""
    if not spec:
        return items
    want = set()
    names = {i.name for i in items}
    families = {}
    for i in items:
        families.setdefault(getattr(i, "group", i.name), []).append(i.name)
    for s in (s.strip() for s in spec.split(",") if s.strip()):
        if s in names:
            want.add(s)
        elif s in families:
            want.update(families[s])
        elif groups and s in groups:
            want.update(groups[s])
        else:
            sys.exit(f"unknown {what}: {s} (known: {', '.join(sorted(names | set(families)))})")
    return [i for i in items if i.name in want]


def drop_missing(allocs, lib, notes):
    def note(msg):
        print(msg, file=sys.stderr)
        notes.append(msg)
    if any(a.name.startswith(MBUDDY) for a in allocs) and not lib.is_file():
        note(f"libmbuddy not found at {lib}: skipping every libmbuddy column (build it, or "
             "pass --lib)")
        allocs = [a for a in allocs if not a.name.startswith(MBUDDY)]
    for a in list(allocs):
        missing = [p for p in a.preload_paths() if p is None or not Path(p).is_file()]
        if missing:
            note(f"{a.name}: {missing[0] or 'its library'} not found, skipped")
            allocs.remove(a)
    return allocs


def lockstats_library(args, allocs, workloads, notes):
    if args.lockstats_lib == "none" or not any(a.name == LOCKSTATS for a in allocs) or \
            not any(w.lockstats for w in workloads):
        return None
    if args.lockstats_lib:
        return Path(args.lockstats_lib).resolve()
    path, why = build_lockstats_lib(Path(args.build_dir).resolve().parent / "lockstats-build")
    if why:
        msg = f"{LOCKSTATS}: {why}; no libmbuddy lock figures"
        print(msg, file=sys.stderr)
        notes.append(msg)
    return path


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        report(args, json.loads(Path(args.from_json).read_text()))
        return 0

    lib = Path(args.lib).resolve()
    args.lib_path = lib
    workloads = pick(WORKLOADS, args.only, "workloads", GROUP_ALIASES)
    bin_dir = Path(args.build_dir).resolve()
    if args.list:
        for w in WORKLOADS:
            print(f"workload  {w.name:18} {w.title}")
        for a in allocators(lib, "(--lockstats-lib)", bin_dir / "lockprof.so"):
            print(f"allocator {a.name:21} {' '.join(map(str, a.preload_paths())) or '(none)'} "
                  f"{a.env or ''}")
        return 0

    notes = []
    allocs = pick(allocators(lib, "", bin_dir / "lockprof.so"), args.allocators, "allocators")
    for w in list(workloads):
        missing = [n for n in w.needs if not shutil.which(n)]
        if missing:
            msg = f"workload {w.name} skipped: {', '.join(missing)} not installed"
            print(msg, file=sys.stderr)
            notes.append(msg)
            workloads.remove(w)
    print("building workloads", file=sys.stderr)
    build(bin_dir)
    lockstats = lockstats_library(args, allocs, workloads, notes)
    for a in allocs:
        if a.name == LOCKSTATS:
            a.preload = lockstats
    allocs = [a for a in allocs if a.name != LOCKSTATS or lockstats]
    allocs = drop_missing(allocs, lib, notes)
    if "jemalloc" not in [a.name for a in allocs]:
        print("note: without jemalloc there are no ratios", file=sys.stderr)
    if JE_LOCKPROF in [a.name for a in allocs]:
        notes.append("jemalloc-lockprof: lockprof.so (scripts/lockprof.c) counts jemalloc's "
                     "pthread mutexes")

    meta = machine_info()
    meta.update(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                reps=args.reps, quick=args.quick, lib=str(lib),
                lockstats_lib=str(lockstats) if lockstats else None, notes=notes)
    t0 = time.monotonic()
    runs = run_suite(args, allocs, workloads)
    meta["total_sec"] = time.monotonic() - t0
    meta["loadavg_end"] = os.getloadavg()[0]
    data = {
        "meta": meta,
        "allocators": [{"name": a.name,
                        "preload": (" ".join(str(p) for p in a.preload_paths())
                                    if a.preload else None),
                        "env": a.env, "only": list(a.only) if a.only else None,
                        "note": a.note, "aux": a.aux} for a in allocs],
        "workloads": [w.name for w in workloads],
        "runs": runs,
    }
    report(args, data)
    failed = sum(1 for r in runs if r["error"])
    print(f"done in {meta['total_sec'] / 60:.1f} min, {len(runs)} runs, {failed} failed",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
