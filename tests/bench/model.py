"""The arithmetic of scripts/bench.py on made-up runs whose answers are
known: lock lines, per-lock figures, the serial fraction, Amdahl's
prediction, cost ratios, targets and the markdown report."""

import os
import sys
import tempfile
from pathlib import Path

top = Path(os.environ.get("MBUDDY_TOP_SRCDIR") or Path(__file__).resolve().parents[2])
sys.dont_write_bytecode = True
sys.path.insert(0, str(top / "scripts"))

from bench_contention import amdahl, parse_lock_lines, prediction, run_figures  # noqa: E402
from bench_report import write_markdown  # noqa: E402
from bench_suite import summarise  # noqa: E402
from bench_targets import evaluate_targets  # noqa: E402
from bench_suite import WORKLOADS  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}")


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


LINES = """libmbuddy statistics
lockstat name=heap instances=1 shared=1 acquisitions=2000 contended=20 handoffs=500 hold_ns=100000000 wait_ns=4000000 shared_hold_ns=100000000 busiest_hold_ns=100000000
lockstat name=sites instances=1 shared=0 acquisitions=100 contended=0 handoffs=0 hold_ns=50000 wait_ns=0 shared_hold_ns=0 busiest_hold_ns=0
lockstat name=dump instances=1 shared=0 acquisitions=1 contended=0 handoffs=0 hold_ns=0 wait_ns=0 shared_hold_ns=0 busiest_hold_ns=0
"""
rows = parse_lock_lines(LINES)
check(len(rows) == 3 and rows[0]["name"] == "heap" and rows[0]["acquisitions"] == 2000,
      "parse_lock_lines")

# 1,000,000 mallocs in 0.5 s on 2 threads; 0.1 s held in the shared heap lock.
run = {"result": {"ops": 1000000, "sec": 0.5, "threads": 2}, "locks": rows,
       "lock_source": "stats"}
fig = run_figures(run)
check(set(fig["locks"]) == {"heap", "sites"}, "the lock taken once is left out")
heap = fig["locks"]["heap"]
check(close(heap["acq_per_kop"], 2.0), "acquisitions per 1,000 operations")
check(close(heap["hold_ns"], 50000.0), "mean hold")
check(close(heap["wait_ns"], 200000.0), "mean wait of a contended acquisition")
check(close(heap["contended_pct"], 1.0), "contended share")
check(close(fig["serial"], 0.1), "serial fraction = shared hold / (threads x seconds)")
# Two shared locks: the busiest one counts, not their sum.
two = [dict(rows[0], name="a", busiest_hold_ns=60000000),
       dict(rows[0], name="b", busiest_hold_ns=100000000)]
check(close(run_figures({**run, "locks": two})["serial"], 0.1), "the busiest shared lock sets s")

# lockprof.so rows (one per mutex) add up into one.
je = {"result": {"ops": 1000, "sec": 1.0, "threads": 2}, "lock_source": "lockprof",
      "locks": parse_lock_lines(LINES.replace("name=heap", "name=mutex1")
                                .replace("name=sites", "name=mutex2"))}
jf = run_figures(je)
check(list(jf["locks"]) == ["pthread mutexes"] and jf["locks"]["pthread mutexes"]["instances"] == 3,
      "lockprof rows add up")

check(close(amdahl(10.0, 0.0, 64), 640.0), "no serial part: linear")
check(close(amdahl(10.0, 1.0, 64), 10.0), "all serial: flat")
check(close(amdahl(10.0, 0.1, 16), 10.0 * 16 / 2.5), "Amdahl at s = 0.1")


def mkrun(w, a, rep, result=None, wall=1.0, rss=1024, locks=None, source=None, error=None):
    r = {"workload": w, "allocator": a, "wall": wall, "cpu": wall, "maxrss_kib": rss, "rc": 0,
         "result": result, "error": error, "rep": rep}
    if locks is not None:
        r["locks"], r["lock_source"] = locks, source
    return r


runs = []
peers = {"glibc": 4.0, "jemalloc": 8.0, "mimalloc": 9.0, "tcmalloc": 10.0}
for rep in range(3):
    for t in (1, 2):
        w = f"larson-{t}t"
        for a, mops in peers.items():
            runs.append(mkrun(w, a, rep, {"threads": t, "sec": 0.5, "ops": 1, "mops": mops * t}))
        runs.append(mkrun(w, "libmbuddy", rep, {"threads": t, "sec": 0.5, "ops": 1, "mops": 5.0 * t}))
        runs.append(mkrun(w, "libmbuddy-decay0", rep,
                          {"threads": t, "sec": 0.5, "ops": 1, "mops": 2.5 * t}))
        runs.append(mkrun(w, "libmbuddy-lockstats", rep, {"threads": t, "sec": 0.5, "ops": 1000000,
                                                          "mops": 4.0}, locks=rows, source="stats"))
        runs.append(mkrun(w, "jemalloc-lockprof", rep, {"threads": t, "sec": 1.0, "ops": 1000,
                                                        "mops": 4.0}, locks=je["locks"],
                          source="lockprof"))
    rss = {f"rss_{t}ms": 500 for t in (0, 500, 1000, 2000)}
    runs.append(mkrun("idle", "libmbuddy", rep, {**rss, "live_bytes": 100, "rss_peak": 900,
                                                 "rss_1500ms": 120, "work_sec": 1.0}))
    runs.append(mkrun("idle", "jemalloc-eager", rep, {**rss, "live_bytes": 100, "rss_peak": 900,
                                                      "rss_1500ms": 200, "work_sec": 1.0}))
    runs.append(mkrun("idle", "libmbuddy-decay0", rep, None, error="timed out after 30 s"))
summ = summarise(runs)
p = prediction(summ, "larson", "libmbuddy", "libmbuddy-lockstats", (16, 64))
check(p and close(p["serial"], 0.1) and close(p["pred"][64], amdahl(5.0, 0.1, 64)),
      "prediction: 1-thread figure of the normal build, s of the counting build at 2 threads")
wls = [w for w in WORKLOADS if w.name in ("larson-1t", "larson-2t", "idle")]
names = ["glibc", "jemalloc", "jemalloc-eager", "mimalloc", "tcmalloc", "libmbuddy",
         "libmbuddy-decay0"]
targets = {t[1]: t for t in evaluate_targets(summ, wls, names)}
t = targets.get("larson-2t: vs best peer at 2 threads")
check(t and close(t[2], 20.0 / 10.0) and not t[4], "2-thread cost ratio to the best peer")
check("larson-1t: vs best peer at 2 threads" not in targets, "no 2-thread target at 1 thread")
t = targets.get("larson-2t: MBUDDY_DECAY_MS=0 time vs default")
check(t and close(t[2], 2.0) and not t[4], "MBUDDY_DECAY_MS=0 as a cost ratio")
t = targets.get("idle: MBUDDY_DECAY_MS=0 time vs default")
check(t and not t[4] and "timed out" in t[2], "a timed-out run misses its target")
t = targets.get("idle: RSS 1.5 s after the drop vs live bytes")
check(t and close(t[2], 1.2) and t[4], "idle RSS vs live")
t = targets.get("idle: RSS 1.5 s after the drop vs jemalloc-eager")
check(t and close(t[2], 0.6) and t[4], "idle RSS vs jemalloc-eager")

data = {"meta": {"date": "2026-01-01", "uname": "test", "cpu": "test", "nproc": 2,
                 "memory": "1 GiB", "loadavg_start": 0.0, "loadavg_end": 0.0, "reps": 3,
                 "quick": False, "total_sec": 60.0, "notes": []},
        "allocators": [{"name": n, "preload": None, "env": {}, "only": None, "note": "",
                        "aux": n.endswith(("lockstats", "lockprof"))}
                       for n in names + ["libmbuddy-lockstats", "jemalloc-lockprof"]],
        "workloads": [w.name for w in wls], "runs": runs}
with tempfile.TemporaryDirectory() as d:
    md = Path(d) / "bench.md"
    write_markdown(md, data)
    text = md.read_text()
for want in ("## Threads: the multi-threaded workloads", "### Predicted throughput",
             "| larson | libmbuddy | 5 | 10 | 0.1000 |", "## Idle return", "## MBUDDY_DECAY_MS=0"):
    check(want in text, f"report has {want!r}")
check("libmbuddy-lockstats |" not in text.split("## Threads")[1].split("\n")[4],
      "counting builds stay out of the figure tables")

print("PASS" if failures == 0 else f"{failures} checks failed")
sys.exit(1 if failures else 0)
