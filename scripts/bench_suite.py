"""What scripts/bench.py runs: allocators, workloads, target limits, and
the medians the report is made of (see bench.py's docstring)."""

import math
import statistics
from pathlib import Path

from bench_contention import summarise_locks

HERE = Path(__file__).resolve().parent
WORKLOAD_SRC = HERE / "workloads"
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
SYSTEM_PYTHON = Path("/usr/bin/python3")
JEMALLOC = LIBDIR / "libjemalloc.so.2"

PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
MBUDDY = "libmbuddy"
NOCLASSIFY = MBUDDY + "-noclassify"
DECAY0 = MBUDDY + "-decay0"
LOCKSTATS = MBUDDY + "-lockstats"
EAGER = "jemalloc-eager"
JE_LOCKPROF = "jemalloc-lockprof"
EAGER_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"

# Targets (see bench.py's docstring).
TIME_VS_JEMALLOC = 1.2
TIME_VS_FASTEST = 1.5
DROP_VS_LIVE = 1.3
DROP_VS_EAGER = 0.7
FAST_VS_JEMALLOC = 1.2
SCALE_VS_JEMALLOC = 1.2
MT_VS_BEST_PEER = 1.2        # issue 15: every multi-threaded workload, 2 threads
MSTRESS_RSS_VS_GLIBC = 1.5   # issue 15
PREDICT_VS_JEMALLOC = 1.0    # issue 15: predicted Mops/s at 64 threads >= jemalloc's
LATENCY_MAX_VS_JEMALLOC = 3.0  # issue 12: slowest single call
LARGE_TIME_VS_JEMALLOC = 5.0   # issue 12: malloc+free of 8 GiB
LARGE_META_KIB = 1024          # issue 12: resident metadata of 8 GiB
STARTUP_TIME_VS_MIN = 1.25     # issue 12: /bin/true at any heap size
STARTUP_RSS_VS_MIN = 1.10
IDLE_VS_LIVE = 1.3             # issue 12: RSS 1.5 s after the drop
IDLE_VS_EAGER = 0.7
DECAY0_VS_DEFAULT = 1.5        # issue 12: MBUDDY_DECAY_MS=0 on every workload
DECAY0_STOP = 4                # its runs are stopped at 4x the default's wall time
PREDICT_THREADS = (16, 64, 128)

# Microbenchmarks: their wall time (thread start-up, repetitions) and tiny
# RSS say nothing; they count only through their own figures.
MICRO = ("fastpath",)

# Variables that would change an allocator's behaviour behind our back.
SCRUB_PREFIXES = ("LD_PRELOAD", "MALLOC_", "MIMALLOC_", "TCMALLOC_", "JEMALLOC_",
                  "MBUDDY_", "PYTHON", "GLIBC_TUNABLES", "LOCKPROF_")

PY_TESTS = ["test_json", "test_re", "test_collections", "test_dict",
            "test_ordered_dict", "test_xml_etree"]
PY_TESTS_QUICK = ["test_json", "test_collections"]


class Allocator:
    def __init__(self, name, preload=None, env=None, only=None, note="", aux=False,
                 locks=None, stop_vs=None):
        self.name = name
        self.preload = preload    # path(s) of the libraries, None for glibc
        self.env = env or {}
        self.only = only          # workload names it runs, None for all
        self.note = note
        self.aux = aux            # contention figures only: not in tables or targets
        self.locks = locks        # "stats" (MBUDDY_STATS report) or "lockprof"
        self.stop_vs = stop_vs    # (allocator, factor): stop a run that takes factor
                                  # times that allocator's wall time (its target is
                                  # far below: the run would only waste time)

    def runs(self, workload):
        return self.only is None or workload in self.only

    def preload_paths(self):
        if self.preload is None:
            return []
        return list(self.preload) if isinstance(self.preload, (list, tuple)) else [self.preload]


class Workload:
    """One program of the suite. `argv(ctx)` builds its command line from
    the run context (build dir, scratch dir, quick flag, libmbuddy).

    metric: the figure ratios are taken of, as (RESULT field, "higher" or
      "lower" is better); None: the wall time.
    group: the family (a program at several thread counts); --only takes
      group names too.
    threads: thread count of a family member.
    mt2: multi-threaded at 2 threads: judged against the best peer.
    lockstats: also run under the lock-counting builds.
    legacy: one of the original workloads (wall-time targets, RSS geomean).
    only: the allocators it runs under (None: all).
    preload_in_argv: the workload passes libmbuddy to its children itself.
    """

    def __init__(self, name, title, argv, env=None, result=True, needs=(), metric=None,
                 group=None, threads=None, mt2=False, lockstats=False, legacy=False,
                 only=None, preload_in_argv=False):
        self.name = name
        self.title = title
        self.argv = argv
        self.env = env or {}
        self.result = result      # prints a RESULT line we must see
        self.needs = needs        # executables that must exist
        self.metric = metric
        self.group = group or name
        self.threads = threads
        self.mt2 = mt2
        self.lockstats = lockstats
        self.legacy = legacy
        self.only = only
        self.preload_in_argv = preload_in_argv

    def unit(self):
        field = self.metric[0] if self.metric else "wall"
        return {"mops": "Mops/s", "mops_per_thread": "Mops/s per thread", "sec": "s",
                "wall": "s", "pair_ns": "ns", "work_sec": "s", "us_8g": "us"}.get(field, field)


def _bin(ctx, name):
    return str(ctx["bin"] / name)


def _q(ctx, quick, full):
    return quick if ctx["quick"] else full


def family(group, title, prog, full, quick, metric, threads=(1, 2)):
    """A program at 1 and 2 threads; "{t}" in its arguments is the thread
    count."""
    out = []
    for t in threads:
        def argv(c, t=t):
            return [_bin(c, prog), *(a.replace("{t}", str(t)) for a in _q(c, quick, full))]
        out.append(Workload(f"{group}-{t}t", f"{title}, {t} thread{'s' if t > 1 else ''}", argv,
                            metric=metric, group=group, threads=t, mt2=t == 2, lockstats=True))
    return out


MOPS = ("mops", "higher")
SEC = ("sec", "lower")
TIMED = "0.5"        # seconds of a fixed-time run
TIMED_QUICK = "0.15"

# The heap sizes of the start-up check (MBUDDY_MAX_ORDER=6: 128 KiB
# pageblocks, so the minimum of two pageblocks is 256 KiB).
STARTUP_ORDER = "6"
STARTUP_HEAPS = (("min", "256K"), ("default", "64G"), ("max", "8T"))


def _startup_argv(c):
    variants = ["glibc:"] + [f"{label}:LD_PRELOAD={c['lib']},MBUDDY_MAX_ORDER={STARTUP_ORDER},"
                             f"MBUDDY_HEAP_SIZE={size}" for label, size in STARTUP_HEAPS]
    return [_bin(c, "startup"), _q(c, "3", "10"), *variants, "--", "/bin/true"]


WORKLOADS = [
    Workload("phase", "three-lifetime phase change, RSS after drop",
             lambda c: [_bin(c, "phase"), *_q(c, ["48M", "4M", "500"], ["256M", "24M", "1500"])],
             legacy=True),
    Workload("xthread", "cross-thread producer/consumer, 2 threads",
             lambda c: [_bin(c, "xthread"), _q(c, "500K", "4M")], legacy=True, mt2=True),
    Workload("sizesweep", "size sweep 8 B - 1 MiB",
             lambda c: [_bin(c, "sizesweep"), _q(c, "2", "15")], legacy=True),
    Workload("realloc", "realloc growth, small steps and doubling",
             lambda c: [_bin(c, "realloc"), *_q(c, ["500", "1M", "256K"], ["1000", "8M", "512K"])],
             legacy=True),
    Workload("largebuf", "5-25 MiB zeroed buffers in a loop",
             lambda c: [_bin(c, "largebuf"), _q(c, "30", "250")], legacy=True),
    Workload("threads", "short-lived threads, waves of 8",
             lambda c: [_bin(c, "threads"), _q(c, "1000", "8000")], legacy=True, mt2=True),
    Workload("fastpath", "small malloc+free fast path, ns/op, 1 and 2 threads",
             lambda c: [_bin(c, "fastpath"), _q(c, "2M", "10M")], legacy=True, mt2=True,
             metric=("pair_ns", "lower")),
    Workload("python", "CPython test slice, PYTHONMALLOC=malloc",
             lambda c: [str(SYSTEM_PYTHON), "-m", "test", "-q",
                        *_q(c, PY_TESTS_QUICK, PY_TESTS)],
             env={"PYTHONMALLOC": "malloc", "PYTHONDONTWRITEBYTECODE": "1"},
             result=False, needs=(str(SYSTEM_PYTHON),), legacy=True),
    Workload("sqlite", "sqlite3 :memory:, 200k rows, index, sort",
             lambda c: ["sqlite3", "-batch", ":memory:",
                        f".read '{WORKLOAD_SRC / 'sqlite.sql'}'"],
             needs=("sqlite3",), legacy=True),
    Workload("gxx", "g++ -O1 -c stl_heavy.cpp",
             lambda c: ["g++", "-O1", "-c", str(WORKLOAD_SRC / "stl_heavy.cpp"),
                        "-o", str(c["scratch"] / "stl_heavy.o")],
             result=False, needs=("g++",), legacy=True),
    # Issue 15: threads.
    *family("larson", "larson-like server simulation, 8-1000 B, threads replaced",
            "larson", ["{t}", TIMED], ["{t}", TIMED_QUICK], MOPS),
    *family("larson-sized", "larson-like, 8 B - 32 KiB log-uniform",
            "larson", ["{t}", TIMED, "8", "32K", "l"], ["{t}", TIMED_QUICK, "8", "32K", "l"], MOPS),
    *family("xmalloc", "xmalloc-test-like: producers allocate, consumers free",
            "xmalloc", ["{t}", TIMED], ["{t}", TIMED_QUICK], MOPS),
    *family("rptest", "rptest-like: random sizes, 1 in 8 freed by the next thread",
            "rptest", ["{t}", TIMED], ["{t}", TIMED_QUICK], MOPS),
    *family("glibc-thread", "glibc bench-malloc-thread-like, private working sets",
            "glibc_thread", ["{t}", TIMED], ["{t}", TIMED_QUICK], ("mops_per_thread", "higher")),
    *family("mstress", "mstress-like: mixed lifetimes, transfers, threads replaced per round",
            "mstress", ["{t}", "40", "80K"], ["{t}", "8", "20K"], SEC),
    *family("alloc-test", "alloc-test-like: per-thread allocation bursts",
            "alloc_test", ["{t}", "3M"], ["{t}", "500K"], SEC),
    *family("cache-scratch", "cache-scratch-like: passive false sharing",
            "false_sharing", ["scratch", "{t}", "100000", "500"], ["scratch", "{t}", "20000", "500"],
            SEC),
    *family("cache-thrash", "cache-thrash-like: active false sharing",
            "false_sharing", ["thrash", "{t}", "100000", "500"], ["thrash", "{t}", "20000", "500"],
            SEC),
    *family("churn", "cross-thread producer/consumer churn, 16-128 B",
            "churn", ["{t}", TIMED], ["{t}", TIMED_QUICK], MOPS),
    # Issue 12: memory return and stalls.
    Workload("latency", "single calls timed on a heap full of holes after 1.2 s idle",
             lambda c: [_bin(c, "latency"),
                        *_q(c, ["100000", "32M", "6M", "1200"], ["400000", "160M", "28M", "1200"])],
             metric=("work_sec", "lower")),
    Workload("largealloc", "malloc+free of 8 and 32 GiB, untouched",
             lambda c: [_bin(c, "largealloc"), "8G", "32G"], metric=("us_8g", "lower")),
    Workload("startup", "/bin/true at heap sizes 256K, 64G, 8T (MAX_ORDER 6)", _startup_argv,
             only=(MBUDDY,), preload_in_argv=True),
    Workload("idle", "load spike, drop to 15% live, then idle with no calls: RSS over 2 s",
             lambda c: [_bin(c, "idle"), *_q(c, ["48M", "8M"], ["256M", "45M"])],
             metric=("work_sec", "lower")),
]

GROUP_ALIASES = {
    "issue15": [w.name for w in WORKLOADS if w.lockstats],
    "issue12": ["latency", "largealloc", "startup", "idle"],
    "legacy": [w.name for w in WORKLOADS if w.legacy],
}

LOCK_WORKLOADS = tuple(w.name for w in WORKLOADS if w.lockstats)

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


def allocators(lib, lockstats_lib=None, lockprof=None):
    return [
        Allocator("glibc"),
        Allocator("jemalloc", JEMALLOC),
        Allocator(EAGER, JEMALLOC, {"MALLOC_CONF": EAGER_CONF},
                  only=("phase", "largebuf", "idle"), note="purges freed pages at once"),
        Allocator("mimalloc", LIBDIR / "libmimalloc.so.2"),
        Allocator("tcmalloc", LIBDIR / "libtcmalloc_minimal.so.4"),
        Allocator(MBUDDY, lib),
        Allocator(NOCLASSIFY, lib, {"MBUDDY_CLASSIFY": "off"},
                  note="control: call sites not classified"),
        Allocator(DECAY0, lib, {"MBUDDY_DECAY_MS": "0"}, stop_vs=(MBUDDY, DECAY0_STOP),
                  note="frees pages at once (target: at most 1.5x the default's time)"),
        Allocator(LOCKSTATS, lockstats_lib, only=LOCK_WORKLOADS, aux=True, locks="stats",
                  note="built with --enable-lock-stats: contention figures only"),
        Allocator(JE_LOCKPROF, [lockprof, JEMALLOC], only=LOCK_WORKLOADS, aux=True,
                  locks="lockprof", note="jemalloc under lockprof.so: contention figures only"),
    ]


def workload_by_name(name):
    for w in WORKLOADS:
        if w.name == name:
            return w
    return None


# ----------------------------------------------------------------- summary

def summarise(runs):
    """Medians per (workload, allocator) over the successful runs: wall,
    CPU, peak RSS, every numeric field of the RESULT lines, and the
    contention figures of lock-counting runs (see bench_contention)."""
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
            fields = {f for r in ok if r["result"] for f, v in r["result"].items()
                      if isinstance(v, (int, float))}
            for f in fields:
                vals = [r["result"][f] for r in ok if r["result"] and f in r["result"]]
                s[f] = statistics.median(vals)
            locks = summarise_locks(ok)
            if locks:
                s["locks"] = locks
        out[key] = s
    return out


def cost(summ, wl, alloc):
    """The workload's figure as a cost (lower is better), or None."""
    s = summ.get((wl.name, alloc), {})
    field, better = wl.metric or ("wall", "lower")
    v = s.get(field)
    if v is None or v <= 0:
        return None
    return 1.0 / v if better == "higher" else v


def figure(summ, wl, alloc):
    field = wl.metric[0] if wl.metric else "wall"
    return summ.get((wl.name, alloc), {}).get(field)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_ratio(x):
    return f"{x:.2f}x" if x is not None else "-"


def mib(b):
    return f"{b / 2**20:.1f}"
