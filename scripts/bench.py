#!/usr/bin/env python3
"""Side-by-side allocator benchmark for libmbuddy (issue 6).

Runs one suite of workloads under several allocators loaded with
LD_PRELOAD, interleaved round-robin, and reports medians and ratios to
jemalloc as a markdown table and a PNG chart.

Allocators
  glibc                 the system malloc (no preload)
  jemalloc              libjemalloc.so.2, default settings
  jemalloc-eager        jemalloc with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0
                        (phase and largebuf only: what eager purging buys and costs)
  mimalloc              libmimalloc.so.2
  tcmalloc              libtcmalloc_minimal.so.4
  libmbuddy             --lib (default .libs/libmbuddy.so); skipped if absent
  libmbuddy-noclassify  the same with MBUDDY_CLASSIFY=off (every site one type)

Workloads (sources in scripts/workloads/, built with cc -O2 into --build-dir)
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

Measured per run, by a small static launcher (measure.c) so that the
runner's own memory is not charged to the workload: wall time, user+sys CPU
time and peak RSS (wait4 rusage, which covers the workload's own children,
e.g. cc1plus under g++). phase also reports its RSS and live bytes after the
drop; fastpath reports its own ns/op figures, shown in a table of their own.

Targets for libmbuddy, marked MISS in the report when not met:
  * wall time <= 1.2x jemalloc and <= 1.5x the fastest peer (glibc, jemalloc,
    mimalloc, tcmalloc), per workload (fastpath excepted: see below);
  * phase: RSS after the drop <= 1.3x the live bytes, and <= 0.7x the RSS of
    jemalloc-eager after the drop (raw RSS: the program's own text and libc
    count against the allocator, which is conservative);
  * geometric mean of peak RSS over the workloads (fastpath excepted) <=
    jemalloc's;
  * fastpath: pair and batch ns/op <= 1.2x jemalloc's, and two-thread
    scaling (pair2t ns/op over pair1t ns/op, 1.0 = perfect) <= 1.2x
    jemalloc's scaling. Relative, not absolute: on a shared or 2-CPU machine
    every allocator's scaling degrades alike, so an absolute limit would
    measure the machine. Ratios are of the medians over the runs.

Examples
  python3 scripts/bench.py --quick                       # smoke test, ~1 min
  python3 scripts/bench.py --lib build/.libs/libmbuddy.so  # full run, ~6 min on 2 cores
  python3 scripts/bench.py --only phase,largebuf --reps 5
  python3 scripts/bench.py --from-json bench-results/bench.json   # redo the report

The raw runs go to --out-json so a report can be regenerated without running
again. The chart needs matplotlib; if the running interpreter lacks it, the
chart is drawn by /usr/bin/python3 (Debian's python3-matplotlib).
"""

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD_SRC = HERE / "workloads"
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
SYSTEM_PYTHON = Path("/usr/bin/python3")

PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
MBUDDY = "libmbuddy"
EAGER_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"

# Targets (see the docstring).
TIME_VS_JEMALLOC = 1.2
TIME_VS_FASTEST = 1.5
DROP_VS_LIVE = 1.3
DROP_VS_EAGER = 0.7
FAST_VS_JEMALLOC = 1.2
SCALE_VS_JEMALLOC = 1.2
# Microbenchmarks: their wall time (thread start-up, repetitions) and tiny
# RSS say nothing; they count only through their own figures.
MICRO = ("fastpath",)

RATIO_TICKS = [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]

# Variables that would change an allocator's behaviour behind our back.
SCRUB_PREFIXES = ("LD_PRELOAD", "MALLOC_", "MIMALLOC_", "TCMALLOC_", "JEMALLOC_",
                  "MBUDDY_", "PYTHON", "GLIBC_TUNABLES")

PY_TESTS = ["test_json", "test_re", "test_collections", "test_dict",
            "test_ordered_dict", "test_xml_etree"]
PY_TESTS_QUICK = ["test_json", "test_collections"]


class Allocator:
    def __init__(self, name, preload=None, env=None, only=None, note=""):
        self.name = name
        self.preload = preload    # path of the library, None for glibc
        self.env = env or {}
        self.only = only          # workload names it runs, None for all
        self.note = note

    def runs(self, workload):
        return self.only is None or workload in self.only


class Workload:
    """One program of the suite. `argv(ctx)` builds its command line from
    the run context (build dir, scratch dir, quick flag)."""

    def __init__(self, name, title, argv, env=None, result=True, needs=()):
        self.name = name
        self.title = title
        self.argv = argv
        self.env = env or {}
        self.result = result      # prints a RESULT line we must see
        self.needs = needs        # executables that must exist


def _bin(ctx, name):
    return str(ctx["bin"] / name)


def _q(ctx, quick, full):
    return quick if ctx["quick"] else full


WORKLOADS = [
    Workload("phase", "three-lifetime phase change, RSS after drop",
             lambda c: [_bin(c, "phase"), *_q(c, ["48M", "4M", "500"], ["256M", "24M", "1500"])]),
    Workload("xthread", "cross-thread producer/consumer, 2 threads",
             lambda c: [_bin(c, "xthread"), _q(c, "500K", "4M")]),
    Workload("sizesweep", "size sweep 8 B - 1 MiB",
             lambda c: [_bin(c, "sizesweep"), _q(c, "2", "15")]),
    Workload("realloc", "realloc growth, small steps and doubling",
             lambda c: [_bin(c, "realloc"), *_q(c, ["500", "1M", "256K"], ["1000", "8M", "512K"])]),
    Workload("largebuf", "5-25 MiB zeroed buffers in a loop",
             lambda c: [_bin(c, "largebuf"), _q(c, "30", "250")]),
    Workload("threads", "short-lived threads, waves of 8",
             lambda c: [_bin(c, "threads"), _q(c, "1000", "8000")]),
    Workload("fastpath", "small malloc+free fast path, ns/op, 1 and 2 threads",
             lambda c: [_bin(c, "fastpath"), _q(c, "2M", "10M")]),
    Workload("python", "CPython test slice, PYTHONMALLOC=malloc",
             lambda c: [str(SYSTEM_PYTHON), "-m", "test", "-q",
                        *_q(c, PY_TESTS_QUICK, PY_TESTS)],
             env={"PYTHONMALLOC": "malloc", "PYTHONDONTWRITEBYTECODE": "1"},
             result=False, needs=(str(SYSTEM_PYTHON),)),
    Workload("sqlite", "sqlite3 :memory:, 200k rows, index, sort",
             lambda c: ["sqlite3", "-batch", ":memory:",
                        f".read '{WORKLOAD_SRC / 'sqlite.sql'}'"],
             needs=("sqlite3",)),
    Workload("gxx", "g++ -O1 -c stl_heavy.cpp",
             lambda c: ["g++", "-O1", "-c", str(WORKLOAD_SRC / "stl_heavy.cpp"),
                        "-o", str(c["scratch"] / "stl_heavy.o")],
             result=False, needs=("g++",)),
]

# fastpath's figures from its RESULT line (see fastpath.c), as (field,
# column heading, target name or None, limit as a ratio to jemalloc).
FASTPATH_FIELDS = (
    ("pair_ns", "pair ns", "fastpath: pair ns/op vs jemalloc", FAST_VS_JEMALLOC),
    ("batch_ns", "batch ns", "fastpath: batch ns/op vs jemalloc", FAST_VS_JEMALLOC),
    ("pair1t_ns", "pair ns, 1 thread", None, None),
    ("pair2t_ns", "pair ns, 2 threads", None, None),
    ("scale2t", "2-thread scaling", "fastpath: 2-thread scaling vs jemalloc",
     SCALE_VS_JEMALLOC),
)

# External programs read many files on their first run: warm the page cache
# once so that the first allocator in the rotation is not penalised.
WARMUP = ("python", "sqlite", "gxx")


def allocators(lib):
    return [
        Allocator("glibc"),
        Allocator("jemalloc", LIBDIR / "libjemalloc.so.2"),
        Allocator("jemalloc-eager", LIBDIR / "libjemalloc.so.2", {"MALLOC_CONF": EAGER_CONF},
                  only=("phase", "largebuf"), note="purges freed pages at once"),
        Allocator("mimalloc", LIBDIR / "libmimalloc.so.2"),
        Allocator("tcmalloc", LIBDIR / "libtcmalloc_minimal.so.4"),
        Allocator(MBUDDY, lib),
        Allocator(MBUDDY + "-noclassify", lib, {"MBUDDY_CLASSIFY": "off"},
                  note="control: call sites not classified"),
    ]


# ---------------------------------------------------------------- building

def build(build_dir, cc="cc", verbose=True, only=None):
    """Compile every workloads/*.c (or those named in `only`), and the
    measure launcher, into build_dir (only when out of date)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    headers = sorted(WORKLOAD_SRC.glob("*.h"))
    # -rdynamic: the call-site functions get names dladdr() can see, so
    # MBUDDY_RULES can refer to them.
    jobs = [(src, headers, ["-rdynamic"]) for src in sorted(WORKLOAD_SRC.glob("*.c"))
            if only is None or src.stem in only]
    jobs.append((HERE / "measure.c", [], ["-static"]))
    for src, deps, extra in jobs:
        out = build_dir / src.stem
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


def measure(wl, alloc, ctx, timeout):
    env = clean_env({**wl.env, **alloc.env})
    if alloc.preload:
        env["LD_PRELOAD"] = str(alloc.preload)
    r = run_once(wl.argv(ctx), env, ctx, timeout)
    run = {"workload": wl.name, "allocator": alloc.name, "wall": r["wall"],
           "cpu": r["cpu"], "maxrss_kib": r["maxrss_kib"], "rc": r["rc"],
           "result": parse_result(r["stdout"]), "error": None}
    if r["timed_out"]:
        run["error"] = f"timed out after {timeout} s"
    elif r["rc"] != 0 or r["wall"] is None:
        tail = (r["stderr"].strip() or r["stdout"].strip()).splitlines()[-3:]
        run["error"] = f"exit status {r['rc']}: " + " | ".join(tail)
    elif wl.result and run["result"] is None:
        run["error"] = "no RESULT line on stdout"
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


def run_suite(args, allocs, workloads):
    ctx = {"bin": Path(args.build_dir).resolve(), "quick": args.quick}
    runs = []
    todo = [(rep, wl, a) for rep in range(args.reps) for wl in workloads
            for a in rotate([a for a in allocs if a.runs(wl.name)], rep)]
    with tempfile.TemporaryDirectory(prefix="mbuddy-bench-") as scratch:
        ctx["scratch"] = Path(scratch)
        if not args.quick:
            for wl in workloads:
                if wl.name in WARMUP:
                    print(f"warm-up: {wl.name}", file=sys.stderr)
                    measure(wl, allocs[0], ctx, args.timeout)
        for i, (rep, wl, alloc) in enumerate(todo, 1):
            run = measure(wl, alloc, ctx, args.timeout)
            run["rep"] = rep
            runs.append(run)
            status = run["error"] or f"{run['wall']:.2f} s, {run['maxrss_kib'] / 1024:.1f} MiB"
            print(f"[{i}/{len(todo)}] {wl.name:9} {alloc.name:21} {status}", file=sys.stderr)
    return runs


def rotate(seq, k):
    """Round-robin order that changes per repetition, so no allocator always
    runs first (cold caches) or right after the same neighbour."""
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


# ----------------------------------------------------------------- summary

def summarise(runs):
    """Medians per (workload, allocator) over the successful runs."""
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["allocator"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r for r in rs if not r["error"]]
        s = {"n": len(rs), "ok": len(ok), "errors": [r["error"] for r in rs if r["error"]]}
        if ok:
            walls = [r["wall"] for r in ok]
            s["wall"] = statistics.median(walls)
            s["spread"] = (max(walls) - min(walls)) / s["wall"] if s["wall"] else 0.0
            s["cpu"] = statistics.median(r["cpu"] for r in ok)
            s["maxrss"] = statistics.median(r["maxrss_kib"] for r in ok) * 1024
            for f in ("live_bytes", "rss_after_drop", "rss_before_drop", "rss_start",
                      *(name for name, *_ in FASTPATH_FIELDS)):
                vals = [r["result"][f] for r in ok if r["result"] and f in r["result"]]
                if vals:
                    s[f] = statistics.median(vals)
        out[key] = s
    return out


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def evaluate_targets(summ, workloads, names):
    """List of (target, measured, limit, ok) for libmbuddy; None if it did
    not run."""
    if MBUDDY not in names:
        return None
    rows = []

    def get(w, a, f):
        return summ.get((w, a), {}).get(f)

    for wl in workloads:
        mine = get(wl.name, MBUDDY, "wall")
        je = get(wl.name, "jemalloc", "wall")
        peers = [get(wl.name, p, "wall") for p in PEERS]
        peers = [p for p in peers if p]
        if mine is None:
            rows.append((f"{wl.name}: runs", "failed", "must run", False))
            continue
        if wl.name in MICRO:
            continue  # judged by its own ns/op figures below
        if je:
            rows.append((f"{wl.name}: time vs jemalloc", mine / je, TIME_VS_JEMALLOC,
                         mine / je <= TIME_VS_JEMALLOC))
        if peers:
            fastest = min(peers)
            rows.append((f"{wl.name}: time vs fastest peer", mine / fastest, TIME_VS_FASTEST,
                         mine / fastest <= TIME_VS_FASTEST))
    drop = get("phase", MBUDDY, "rss_after_drop")
    live = get("phase", MBUDDY, "live_bytes")
    eager = get("phase", "jemalloc-eager", "rss_after_drop")
    if drop and live:
        rows.append(("phase: RSS after drop vs live bytes", drop / live, DROP_VS_LIVE,
                     drop / live <= DROP_VS_LIVE))
    if drop and eager:
        rows.append(("phase: RSS after drop vs jemalloc-eager", drop / eager, DROP_VS_EAGER,
                     drop / eager <= DROP_VS_EAGER))
    both = [w.name for w in workloads if w.name not in MICRO and
            get(w.name, MBUDDY, "maxrss") and get(w.name, "jemalloc", "maxrss")]
    if both:
        ratio = (geomean(get(w, MBUDDY, "maxrss") for w in both) /
                 geomean(get(w, "jemalloc", "maxrss") for w in both))
        rows.append((f"peak RSS geomean vs jemalloc ({len(both)} workloads)", ratio, 1.0,
                     ratio <= 1.0))
    for f, _, target, limit in FASTPATH_FIELDS:
        mine = get("fastpath", MBUDDY, f)
        je = get("fastpath", "jemalloc", f)
        if target and mine and je:
            rows.append((target, mine / je, limit, mine / je <= limit))
    return rows


# ------------------------------------------------------------------ report

def fmt_ratio(x):
    return f"{x:.2f}x" if x is not None else "-"


def mib(b):
    return f"{b / 2**20:.1f}"


def write_markdown(path, data):
    meta, names = data["meta"], [a["name"] for a in data["allocators"]]
    workloads = [w for w in WORKLOADS if w.name in data["workloads"]]
    summ = summarise(data["runs"])
    targets = evaluate_targets(summ, workloads, names)
    missed = {row[0] for row in targets or [] if not row[3]}
    L = []
    L.append("# libmbuddy side-by-side benchmark\n")
    L.append(f"* Date: {meta['date']}")
    L.append(f"* Machine: `{meta['uname']}`")
    L.append(f"* CPU: {meta['cpu']}, {meta['nproc']} CPUs available, {meta['memory']} RAM")
    L.append(f"* Load average (1 min) at start / end: {meta['loadavg_start']:.2f} / "
             f"{meta['loadavg_end']:.2f}")
    if max(meta["loadavg_start"], meta["loadavg_end"]) > 0.5 * meta["nproc"]:
        L.append("* **Warning: the machine was busy during the run; wall times are noisy.**")
    L.append(f"* Repetitions: {meta['reps']} per cell, median reported"
             f"{' (quick mode: smaller sizes)' if meta['quick'] else ''};"
             f" runs interleaved round-robin across allocators")
    L.append(f"* Total run time: {meta['total_sec'] / 60:.1f} min")
    for note in meta.get("notes", []):
        L.append(f"* {note}")
    L.append("")

    L.append("## Allocators\n")
    L.append("| name | LD_PRELOAD | environment | runs |")
    L.append("|---|---|---|---|")
    for a in data["allocators"]:
        env = " ".join(f"{k}={v}" for k, v in a["env"].items()) or "-"
        L.append(f"| {a['name']} | {a['preload'] or '(none)'} | {env} | "
                 f"{', '.join(a['only']) if a['only'] else 'all'}"
                 f"{' - ' + a['note'] if a['note'] else ''} |")
    L.append("")
    L.append("## Workloads\n")
    L.append("| workload | what |")
    L.append("|---|---|")
    for w in workloads:
        L.append(f"| {w.name} | {w.title} |")
    L.append("")

    L.append("## Targets for libmbuddy\n")
    if targets is None:
        L.append("Not evaluated: libmbuddy did not run.\n")
    else:
        L.append("| target | measured | limit | status |")
        L.append("|---|---|---|---|")
        for name, val, limit, ok in targets:
            shown = fmt_ratio(val) if isinstance(val, float) else val
            limit_s = f"<= {limit:.2f}x" if isinstance(limit, float) else limit
            L.append(f"| {name} | {shown} | {limit_s} | {'ok' if ok else '**MISS**'} |")
        n_miss = sum(1 for t in targets if not t[3])
        L.append(f"\n{n_miss} of {len(targets)} targets missed.\n")

    def table(title, field, fmt, unit_note, mark_time=False):
        L.append(f"## {title}\n")
        L.append(unit_note + "\n")
        L.append("| workload | " + " | ".join(names) + " |")
        L.append("|---|" + "---|" * len(names))
        for w in workloads:
            je = summ.get((w.name, "jemalloc"), {}).get(field)
            cells = []
            for a in names:
                s = summ.get((w.name, a))
                if s is None:
                    cells.append("")
                    continue
                v = s.get(field)
                if v is None:
                    cells.append("FAIL")
                    continue
                cell = fmt(v) + (f" ({v / je:.2f}x)" if je else "")
                if s["errors"]:
                    cell += f" [{len(s['errors'])} failed]"
                if mark_time and a == MBUDDY:
                    miss = [t for t in (f"{w.name}: time vs jemalloc",
                                        f"{w.name}: time vs fastest peer") if t in missed]
                    if miss:
                        cell += " **MISS**"
                cells.append(cell)
            L.append(f"| {w.name} | " + " | ".join(cells) + " |")

    table("Wall time", "wall", lambda v: f"{v:.2f}",
          "Median seconds (ratio to jemalloc). **MISS** marks libmbuddy cells over "
          f"{TIME_VS_JEMALLOC}x jemalloc or {TIME_VS_FASTEST}x the fastest peer.",
          mark_time=True)
    L.append("")
    table("Peak RSS", "maxrss", mib, "Median MiB (ratio to jemalloc), from wait4 ru_maxrss.")
    geo = []
    je_set = [w.name for w in workloads if summ.get((w.name, "jemalloc"), {}).get("maxrss")]
    for a in names:
        both = [w for w in je_set if summ.get((w, a), {}).get("maxrss")]
        if len(both) < max(2, len(je_set)):
            geo.append("")  # a partial set would not compare like with like
            continue
        r = (geomean(summ[(w, a)]["maxrss"] for w in both) /
             geomean(summ[(w, "jemalloc")]["maxrss"] for w in both))
        mark = " **MISS**" if a == MBUDDY and r > 1.0 else ""
        geo.append(f"{r:.2f}x{mark}")
    L.append("| geomean vs jemalloc | " + " | ".join(geo) + " |")
    L.append("")
    table("CPU time", "cpu", lambda v: f"{v:.2f}",
          "Median user+sys seconds (ratio to jemalloc); informational, steadier than "
          "wall time on a busy machine.")
    L.append("")

    L.append("## Phase change: memory after the load drops\n")
    L.append("Resident set read by the workload itself after the cache and temporaries "
             "were freed and a light load ran on; live = bytes the program still holds "
             "(pinned objects and the light load's temporaries). MiB, medians.\n")
    L.append("| allocator | live | RSS at start | RSS before drop | RSS after drop | "
             "after / live | after / jemalloc-eager |")
    L.append("|---|---|---|---|---|---|---|")
    eager = summ.get(("phase", "jemalloc-eager"), {}).get("rss_after_drop")
    for a in names:
        s = summ.get(("phase", a))
        if not s or "rss_after_drop" not in s:
            if s:
                L.append(f"| {a} | FAIL | | | | | |")
            continue
        after, live = s["rss_after_drop"], s["live_bytes"]
        vs_live = after / live
        vs_eager = after / eager if eager else None
        m1 = " **MISS**" if a == MBUDDY and vs_live > DROP_VS_LIVE else ""
        m2 = " **MISS**" if a == MBUDDY and vs_eager and vs_eager > DROP_VS_EAGER else ""
        L.append(f"| {a} | {mib(live)} | {mib(s['rss_start'])} | {mib(s['rss_before_drop'])} "
                 f"| {mib(after)} | {vs_live:.2f}x{m1} | {fmt_ratio(vs_eager)}{m2} |")
    L.append("")

    if any(summ.get(("fastpath", a), {}).get("pair_ns") for a in names):
        L.append("## Fast path: small malloc+free\n")
        L.append("Nanoseconds per malloc+free of 16-256 B objects, measured inside the "
                 "workload (best of its repetitions after a warm-up), median over runs "
                 "(ratio to jemalloc). pair: free what was just allocated; batch: 64 "
                 "objects of a size, freed oldest first; 1 / 2 threads: the pair loop in "
                 "spawned threads, ns/op per thread; scaling: 2-thread over 1-thread "
                 "ns/op (1.00 = perfect, 2.00 = serialised). **MISS** marks libmbuddy "
                 f"over {FAST_VS_JEMALLOC}x jemalloc (scaling: over {SCALE_VS_JEMALLOC}x "
                 "jemalloc's scaling).\n")
        L.append("| allocator | " + " | ".join(h for _, h, _, _ in FASTPATH_FIELDS) + " |")
        L.append("|---|" + "---|" * len(FASTPATH_FIELDS))
        for a in names:
            s = summ.get(("fastpath", a))
            if not s:
                continue
            if "pair_ns" not in s:
                L.append(f"| {a} | FAIL |" + " |" * (len(FASTPATH_FIELDS) - 1))
                continue
            cells = []
            for f, _, target, _ in FASTPATH_FIELDS:
                v = s.get(f)
                je = summ.get(("fastpath", "jemalloc"), {}).get(f)
                cell = (f"{v:.2f}" if v is not None else "-") + \
                    (f" ({v / je:.2f}x)" if v is not None and je else "")
                if a == MBUDDY and target in missed:
                    cell += " **MISS**"
                cells.append(cell)
            L.append(f"| {a} | " + " | ".join(cells) + " |")
        L.append("")

    noisy = [(w, a, s["spread"]) for (w, a), s in summ.items()
             if s.get("spread", 0) > 0.10 and s["ok"] > 1]
    failures = [(w, a, e) for (w, a), s in summ.items() for e in s["errors"]]
    if noisy or failures:
        L.append("## Notes\n")
    for w, a, e in failures:
        L.append(f"* FAILED {w} under {a}: {e}")
    if noisy:
        L.append("* Wall-time spread (max-min)/median above 10%: " +
                 ", ".join(f"{w}/{a} {sp:.0%}" for w, a, sp in sorted(noisy)))
    Path(path).write_text("\n".join(L) + "\n")


def ratio_axis(ax, labels, title):
    """A log axis of ratios to jemalloc (1x, 2x, 0.5x...) over labelled bars."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def write_chart(png, json_path, data):
    """Draw the PNG here, or in /usr/bin/python3 if only that has matplotlib.
    Returns True when drawn in this process."""
    try:
        import matplotlib
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
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [a["name"] for a in data["allocators"]]
    wls = [w for w in data["workloads"]]
    summ = summarise(data["runs"])
    fast = [a for a in names if summ.get(("fastpath", a), {}).get("pair_ns")]
    fast_je = summ.get(("fastpath", "jemalloc"), {})
    panels = 4 if fast and fast_je.get("pair_ns") else 3
    fig, axes = plt.subplots(panels, 1, figsize=(13, 13 + 4 * (panels - 3)))
    width = 0.8 / max(len(names), 1)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    for ax, field, title in ((axes[0], "wall", "Wall time, ratio to jemalloc (lower is better)"),
                             (axes[1], "maxrss", "Peak RSS, ratio to jemalloc (lower is better)")):
        for i, a in enumerate(names):
            xs, ys = [], []
            for j, w in enumerate(wls):
                v = summ.get((w, a), {}).get(field)
                je = summ.get((w, "jemalloc"), {}).get(field)
                if v and je:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(v / je)
            ax.bar(xs, ys, width, label=a, color=colours[i % len(colours)])
        ax.axhline(1.0, color="black", linewidth=0.8)
        if field == "wall":
            ax.axhline(TIME_VS_JEMALLOC, color="red", linewidth=0.8, linestyle="--",
                       label=f"target {TIME_VS_JEMALLOC}x")
        ratio_axis(ax, wls, title)
    axes[0].legend(ncol=4, fontsize=8)

    ax = axes[2]
    present = [a for a in names if summ.get(("phase", a), {}).get("rss_after_drop")]
    if present:
        after = [summ[("phase", a)]["rss_after_drop"] / 2**20 for a in present]
        before = [summ[("phase", a)]["rss_before_drop"] / 2**20 for a in present]
        live = statistics.median(summ[("phase", a)]["live_bytes"] for a in present) / 2**20
        xs = range(len(present))
        ax.bar([x - 0.2 for x in xs], before, 0.4, label="RSS before drop", color="#bbbbbb")
        ax.bar([x + 0.2 for x in xs], after, 0.4, label="RSS after drop", color=colours[0])
        ax.axhline(live, color="green", linewidth=1, label=f"live bytes ({live:.0f} MiB)")
        ax.axhline(live * DROP_VS_LIVE, color="red", linewidth=0.8, linestyle="--",
                   label=f"target {DROP_VS_LIVE}x live")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(present, fontsize=8)
        ax.set_ylabel("MiB")
        ax.set_ylim(0, max(before + after) * 1.35)  # headroom for the legend
        ax.legend(fontsize=8, ncol=4, loc="upper center")
    ax.set_title("Phase change: resident memory before and after the load drops")

    if panels == 4:
        ax = axes[3]
        ratios = []
        for i, a in enumerate(names):
            if a not in fast:
                continue
            xs, ys = [], []
            for j, (f, *_) in enumerate(FASTPATH_FIELDS):
                v, je = summ[("fastpath", a)].get(f), fast_je.get(f)
                if v and je:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(v / je)
            ratios += ys
            ax.bar(xs, ys, width, label=a, color=colours[i % len(colours)])
        # Fixed limits around 1x: bars on a log axis start at its bottom, so
        # an autoscaled bottom just under the smallest ratio would hide it.
        ax.set_ylim(min([0.25, *ratios]) / 1.2, max([4, *ratios]) * 1.2)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(FAST_VS_JEMALLOC, color="red", linewidth=0.8, linestyle="--",
                   label=f"target {FAST_VS_JEMALLOC}x")
        ratio_axis(ax, [h for _, h, *_ in FASTPATH_FIELDS],
                   "Fast path (fastpath workload): ns/op and 2-thread scaling, "
                   "ratio to jemalloc (lower is better)")
        ax.legend(ncol=4, fontsize=8)
    meta = data["meta"]
    fig.suptitle(f"libmbuddy benchmark, {meta['date']}, {meta['cpu']} x{meta['nproc']}"
                 f"{' (quick)' if meta['quick'] else ''}", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return True


# -------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=".libs/libmbuddy.so",
                   help="libmbuddy shared object (default: %(default)s)")
    p.add_argument("--build-dir", default="bench-results/bin",
                   help="where the workloads are compiled (default: %(default)s)")
    p.add_argument("--reps", type=int, help="repetitions per cell (default: 3, 1 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1 repetition, smaller sizes, no warm-up")
    p.add_argument("--only", help="comma-separated workloads to run (default: all)")
    p.add_argument("--allocators", help="comma-separated allocators to run (default: all)")
    p.add_argument("--timeout", type=float, default=180, help="seconds per run (default: 180)")
    p.add_argument("--out-md", default="bench-results/bench.md",
                   help="markdown report (default: %(default)s; empty: none)")
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


def pick(items, spec, what):
    if not spec:
        return items
    want = [s.strip() for s in spec.split(",") if s.strip()]
    names = {i.name for i in items}
    unknown = [w for w in want if w not in names]
    if unknown:
        sys.exit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
    return [i for i in items if i.name in want]


def report(args, data):
    if args.out_json and not args.from_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(data, indent=1))
        print(f"wrote {args.out_json}", file=sys.stderr)
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        write_markdown(args.out_md, data)
        print(f"wrote {args.out_md}", file=sys.stderr)
    if args.out_png:
        Path(args.out_png).parent.mkdir(parents=True, exist_ok=True)
        if write_chart(args.out_png, args.from_json or args.out_json, data):
            print(f"wrote {args.out_png}", file=sys.stderr)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        report(args, json.loads(Path(args.from_json).read_text()))
        return 0

    lib = Path(args.lib).resolve()
    allocs = pick(allocators(lib), args.allocators, "allocators")
    workloads = pick(WORKLOADS, args.only, "workloads")
    if args.list:
        for w in WORKLOADS:
            print(f"workload  {w.name:10} {w.title}")
        for a in allocators(lib):
            print(f"allocator {a.name:21} {a.preload or '(none)'} {a.env or ''}")
        return 0

    notes = []
    if any(a.name.startswith(MBUDDY) for a in allocs) and not lib.is_file():
        msg = (f"libmbuddy not found at {lib}: skipping libmbuddy and "
               f"libmbuddy-noclassify (build it, or pass --lib)")
        print(msg, file=sys.stderr)
        notes.append(msg)
        allocs = [a for a in allocs if not a.name.startswith(MBUDDY)]
    for a in list(allocs):
        if a.preload and not Path(a.preload).is_file():
            msg = f"{a.name}: {a.preload} not found, skipped"
            print(msg, file=sys.stderr)
            notes.append(msg)
            allocs.remove(a)
    for w in list(workloads):
        missing = [n for n in w.needs if not shutil.which(n)]
        if missing:
            msg = f"workload {w.name} skipped: {', '.join(missing)} not installed"
            print(msg, file=sys.stderr)
            notes.append(msg)
            workloads.remove(w)
    if "jemalloc" not in [a.name for a in allocs]:
        print("note: without jemalloc there are no ratios", file=sys.stderr)

    print("building workloads", file=sys.stderr)
    build(Path(args.build_dir))
    meta = machine_info()
    meta.update(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                reps=args.reps, quick=args.quick, lib=str(lib), notes=notes)
    t0 = time.monotonic()
    runs = run_suite(args, allocs, workloads)
    meta["total_sec"] = time.monotonic() - t0
    meta["loadavg_end"] = os.getloadavg()[0]
    data = {
        "meta": meta,
        "allocators": [{"name": a.name, "preload": str(a.preload) if a.preload else None,
                        "env": a.env, "only": list(a.only) if a.only else None,
                        "note": a.note} for a in allocs],
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
