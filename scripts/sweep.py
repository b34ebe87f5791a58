#!/usr/bin/env python3
"""Typed against untyped on a family of generated workloads (issue 11).

Each configuration is a seed. The seed gives the shape parameters of one
synthetic program (workloads/gen.c: call sites, lifetimes, sizes, fill
level against the heap cap, threads, mid-run changes, big objects...), and
the program is run
  on       libmbuddy, call sites classified (default), heap capped at CAP
  off      libmbuddy with MBUDDY_CLASSIFY=off (one type: the vanilla buddy)
  glibc, jemalloc, mimalloc, tcmalloc   the peers, for memory (no cap: CAP
           only sizes the load)
each run in a process of its own, two at a time (on and off of one seed
side by side, so they share the machine's state). Per configuration:
  high-order  4 MiB blocks obtained out of 160 attempts, one per churn round
  RSS         resident set after the drop of caches and temporaries and a
              malloc_trim(0), against the bytes still live (also given: right
              after the drop, and after an idle pause with no allocator call)
  fail fill   live bytes / cap at the first failed small allocation, during
              the run or, if none failed, when the heap is then filled with
              small objects until malloc fails (libmbuddy only: the cap)
  time        CPU seconds (user+sys) of the load and the drop, measured by
              the program; a configuration where on is more than 1.1x off
              is run REPEAT more times and judged on the medians
Targets (issue 11) for on against off, per configuration:
  high-order  on >= off - 5 % of the attempts
  RSS         on <= 1.05x off
  time        on <= 1.1x off
  and, where off falls below 150/160, classification should win.

Examples
  make sweep                                   # 200 configurations, ~15 min on 2 cores
  python3 scripts/sweep.py --quick             # 20 configurations
  python3 scripts/sweep.py --only 17           # one row again, with its command lines
  python3 scripts/sweep.py --seeds 17,42 --stats    # plus libmbuddy's report for each
  python3 scripts/sweep.py --count 50 --set threads=1 --no-peers
  python3 scripts/sweep.py --from-json bench-results/sweep.json   # redo the report
  python3 scripts/sweep.py --params 17         # print a seed's parameters and command

The raw results go to --out-json, the report to --out-md and stdout.
Exit status: 0 when every run completed (targets missed or not), 1 if
a run failed, 2 on bad usage or a missing library.
"""

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import random
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench  # noqa: E402  (build(), clean_env(), machine_info())
import sweep_report  # noqa: E402

PEERS = {
    "glibc": None,
    "jemalloc": bench.LIBDIR / "libjemalloc.so.2",
    "mimalloc": bench.LIBDIR / "libmimalloc.so.2",
    "tcmalloc": bench.LIBDIR / "libtcmalloc_minimal.so.4",
}
TIME_REPEAT = 2          # extra on/off runs for a configuration that loses on time...
RETIME_MAX = 40          # ...for at most this many, the closest to the limit first
RETIME_BAND = 1.5        # beyond this ratio a loss is a loss whatever the noise
STATS_SIGNAL = "USR2"    # with --stats: libmbuddy's report before the drop too


# ------------------------------------------------------------ parameters

def params_for(seed):
    """The shape of configuration `seed`: gen's options, as a dict."""
    r = random.Random(seed)
    threads = r.choice([1, 1, 1, 2, 2, 3, 4])
    lo = r.choice([0.3, 0.5, 1, 2])
    p = {
        "cap": r.choice(["128M", "192M", "256M"]),
        "fill": r.randint(30, 95),
        "sites": max(3, min(2000, round(math.exp(r.uniform(math.log(3), math.log(2000)))))),
        "threads": threads,
        "xthread": 0 if threads == 1 else r.choice([0, 10, 30, 60, 100]),
        "pinned": r.randint(3, 40),
        "temp": r.randint(1, 12),
        "caches": r.choice([1, 1, 2, 3, 4, 8]),
        "policies": r.choice(["fifo", "lru", "random", "fifo,lru,random"]),
        "cache-tau": f"{lo:g}:{lo * r.choice([1, 2, 4, 8]):g}",
        "temp-tau": r.choice(["5:50", "10:100", "20:200", "50:500", "5:500"]),
        "imm": r.choice([0, 0, 0.5, 1, 2]),
        "mixed": r.choice([0, 0, 0, 10, 30, 100]),
        "change": r.choice([0, 0, 10, 30, 60]),
        "big": r.choice([0, 0, 5, 20, 50]),
        "max-big": r.choice(["64K", "256K", "1M"]),
        "wrapper": r.choice([0, 0, 0, 20, 100]),
        "pinned-start": round(r.uniform(0.2, 0.9), 2),
        "max-ops": 700000,
        "rounds": "40:160",
        "idle-ms": 100,
    }
    return p


def apply_overrides(p, sets):
    for kv in sets:
        k, v = kv
        if k not in p:
            sys.exit(f"--set {k}: not a parameter (known: {', '.join(sorted(p))})")
        p[k] = type(p[k])(v) if not isinstance(p[k], str) else v
    return p


def gen_argv(gen, seed, p, fill_to_fail, extra=()):
    argv = [str(gen), "--seed", str(seed)]
    for k, v in p.items():
        argv += [f"--{k}", str(v)]
    if fill_to_fail:
        argv.append("--fill-to-fail")
    return argv + list(extra)


# ---------------------------------------------------------------- configs

class Variant:
    def __init__(self, name, preload=None, env=None, capped=False):
        self.name = name
        self.preload = preload
        self.env = env or {}
        self.capped = capped   # MBUDDY_HEAP_SIZE is the cap: fill to failure


def variants(lib, peers):
    vs = [Variant("on", lib, capped=True),
          Variant("off", lib, {"MBUDDY_CLASSIFY": "off"}, capped=True)]
    if peers:
        vs += [Variant(n, path) for n, path in PEERS.items() if path is None or path.is_file()]
    return vs


def run_env(v, p, extra=None):
    env = dict(v.env)
    if v.capped:
        env["MBUDDY_HEAP_SIZE"] = p["cap"]
    if v.preload:
        env["LD_PRELOAD"] = str(v.preload)
    env.update(extra or {})
    return env


def command_line(v, seed, p, gen):
    env = run_env(v, p)
    return " ".join([*(f"{k}={shlex.quote(str(x))}" for k, x in env.items()),
                     *map(shlex.quote, gen_argv(gen, seed, p, v.capped))])


# ---------------------------------------------------------------- running

def run_one(measure, argv, env, timeout):
    """One process through the measure launcher; its JSON line and figures."""
    with tempfile.TemporaryDirectory(prefix="mbuddy-sweep-") as tmp:
        run = bench.launch(measure, Path(tmp) / "measure.txt", argv, bench.clean_env(env),
                           tmp, timeout)
    stdout, stderr = run["stdout"], run["stderr"]
    r = {"error": None, "stderr": stderr[-20000:]}
    if run["wall"] is not None:
        r["launcher_wall"] = run["wall"]
        r["maxrss"] = run["maxrss_kib"] * 1024
    result = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                pass
            break
    r["result"] = result
    if run["timed_out"]:
        r["error"] = f"timed out after {timeout:.0f} s"
    elif run["rc"] != 0 or result is None:
        tail = " | ".join((stderr.strip() or stdout.strip()).splitlines()[-3:])
        r["error"] = f"exit status {run['rc']}: {tail}"
    return r


class Job:
    def __init__(self, seed, variant, env=None, argv=(), keep_stderr=False, fill_to_fail=None):
        self.seed = seed
        self.variant = variant
        self.fill_to_fail = variant.capped if fill_to_fail is None else fill_to_fail
        self.env = env or {}
        self.argv = list(argv)
        self.keep_stderr = keep_stderr


def run_jobs(jobs, args, ctx, label):
    """Run the jobs, args.jobs at a time, in the given order."""
    out = []
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = []
        for j in jobs:
            p = ctx["params"][j.seed]
            argv = gen_argv(ctx["gen"], j.seed, p, j.fill_to_fail, j.argv)
            futs.append((j, pool.submit(run_one, ctx["measure"], argv,
                                        run_env(j.variant, p, j.env), args.timeout)))
        for i, (j, f) in enumerate(futs, 1):
            r = f.result()
            seed, v = j.seed, j.variant
            r.update(seed=seed, variant=v.name)
            if not (args.keep_stderr or j.keep_stderr):
                r.pop("stderr", None)
            out.append(r)
            res = r["result"] or {}
            status = r["error"] or (f"{res.get('success')}/{res.get('attempts')} "
                                    f"cpu {res.get('cpu_sec', 0):.2f}s "
                                    f"rss {res.get('rss_after_trim', 0) / 2**20:.0f}M")
            if args.verbose or r["error"] or i % 50 == 0 or i == len(futs):
                print(f"[{label} {i}/{len(futs)} {time.monotonic() - t0:.0f}s] seed {seed} "
                      f"{v.name}: {status}", file=sys.stderr)
    return out


def pair_order(seeds, vs):
    """on and off of a seed side by side, the peers after them."""
    return [Job(s, v) for s in seeds for v in vs]


def retime(runs, args, ctx, vs):
    """Run on and off again for configurations that lose on time."""
    by = sweep_report.index(runs)
    ratios = {s: sweep_report.time_ratio(by, s) or 0 for s in ctx["seeds"]}
    doubtful = sorted((s for s, x in ratios.items()
                       if sweep_report.TIME_LIMIT < x < RETIME_BAND), key=ratios.get)
    slow = doubtful[:RETIME_MAX]
    if not slow or TIME_REPEAT <= 0:
        return []
    on_off = [v for v in vs if v.name in ("on", "off")]
    jobs = [Job(s, v) for _ in range(TIME_REPEAT) for s in slow for v in on_off]
    print(f"{len(doubtful)} configurations between {sweep_report.TIME_LIMIT}x and "
          f"{RETIME_BAND}x on time: {TIME_REPEAT} more runs of on and off each for "
          f"{len(slow)} of them", file=sys.stderr)
    extra = run_jobs(jobs, args, ctx, "retime")
    for r in extra:
        r["repeat"] = True
    return extra


def stats_jobs(seeds, vs):
    """libmbuddy's report before the drop (on a signal the program raises)
    and at exit (after the drop; no fill to failure, so that the exit
    report shows the heap as the drop left it)."""
    env = {"MBUDDY_STATS": "stderr", "MBUDDY_STATS_SIGNAL": STATS_SIGNAL}
    argv = ["--stats-signal", str(int(getattr(signal, "SIG" + STATS_SIGNAL)))]
    return [Job(s, v, env, argv, keep_stderr=True, fill_to_fail=False)
            for s in seeds for v in vs if v.name in ("on", "off")]


# ------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=".libs/libmbuddy.so",
                   help="libmbuddy shared object (default: %(default)s)")
    p.add_argument("--build-dir", default="bench-results/bin",
                   help="where gen.c and the launcher are compiled (default: %(default)s)")
    p.add_argument("--count", type=int, default=200, help="configurations (default: 200)")
    p.add_argument("--first-seed", type=int, default=1, help="first seed (default: 1)")
    p.add_argument("--quick", action="store_true", help="20 configurations")
    p.add_argument("--seeds", help="comma-separated seeds to run instead")
    p.add_argument("--only", type=int, metavar="SEED", help="one configuration")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter in every configuration (repeatable)")
    p.add_argument("--no-peers", action="store_true", help="libmbuddy on and off only")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (default: 2)")
    p.add_argument("--timeout", type=float, default=120, help="seconds per run (default: 120)")
    p.add_argument("--stats", action="store_true",
                   help="also run on and off with MBUDDY_STATS=stderr and keep the reports "
                        "(taken before the drop and at exit) in the JSON and in --stats-dir")
    p.add_argument("--stats-dir", default="bench-results/sweep-stats",
                   help="where --stats writes the reports (default: %(default)s)")
    p.add_argument("--keep-stderr", action="store_true", help="keep every run's stderr in the JSON")
    p.add_argument("--out-json", default="bench-results/sweep.json",
                   help="raw results (default: %(default)s)")
    p.add_argument("--out-md", default="bench-results/sweep.md",
                   help="report (default: %(default)s; empty: none)")
    p.add_argument("--from-json", metavar="FILE", help="do not run: rebuild the report from FILE")
    p.add_argument("--update", metavar="FILE",
                   help="merge this run's configurations into the results in FILE (replacing "
                        "those of the same seeds) and report on all of them")
    p.add_argument("--params", type=int, metavar="SEED",
                   help="print the parameters and command lines of SEED and exit")
    p.add_argument("--worst", type=int, default=5, help="worst configurations listed (default: 5)")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per run")
    args = p.parse_args(argv)
    sets = []
    for kv in args.set:
        if "=" not in kv:
            p.error(f"--set {kv}: expected KEY=VALUE")
        sets.append(kv.split("=", 1))
    args.set = sets
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    return args


def seeds_of(args):
    if args.only is not None:
        return [args.only]
    if args.seeds:
        try:
            return [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            sys.exit(f"--seeds {args.seeds}: expected comma-separated integers")
    n = 20 if args.quick else args.count
    return list(range(args.first_seed, args.first_seed + n))


def write_outputs(args, data):
    text = sweep_report.render(data, args.worst)
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_md).write_text(text)
    print(text)
    if args.out_md:
        print(f"wrote {args.out_md}", file=sys.stderr)


def merge(old, new):
    """old's results with new's configurations put in place of the same seeds."""
    seeds = set(new["params"])
    out = {"meta": dict(old["meta"], updated=new["meta"]["date"],
                        updated_seeds=sorted(int(s) for s in seeds))}
    for key in ("params", "commands"):
        out[key] = {**old.get(key, {}), **new[key]}
    out["runs"] = [r for r in old["runs"] if str(r["seed"]) not in seeds] + new["runs"]
    return out


def save_stats(args, runs):
    d = Path(args.stats_dir)
    d.mkdir(parents=True, exist_ok=True)
    for r in runs:
        if r.get("stats"):
            path = d / f"seed{r['seed']}-{r['variant']}.txt"
            path.write_text(r["stderr"])
            print(f"wrote {path}", file=sys.stderr)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        write_outputs(args, json.loads(Path(args.from_json).read_text()))
        return 0
    lib = Path(args.lib).absolute()
    build_dir = Path(args.build_dir)
    gen = (build_dir / "gen").resolve()
    seeds = seeds_of(args)
    params = {s: apply_overrides(params_for(s), args.set) for s in seeds}
    vs = variants(lib, not args.no_peers)
    if args.params is not None:
        p = apply_overrides(params_for(args.params), args.set)
        print(json.dumps(p))
        for v in vs:
            print(f"{v.name:9} {command_line(v, args.params, p, gen)}")
        return 0
    if not lib.is_file():
        print(f"libmbuddy not found at {lib}: build it, or pass --lib", file=sys.stderr)
        return 2
    print("building the generator", file=sys.stderr)
    bench.build(build_dir, verbose=False, only=("gen",))
    ctx = {"gen": gen, "measure": (build_dir / "measure").resolve(), "params": params,
           "seeds": seeds}
    meta = bench.machine_info()
    meta.update(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                lib=str(lib), jobs=args.jobs, overrides=args.set, gen=str(gen),
                variants=[{"name": v.name, "preload": str(v.preload) if v.preload else None,
                           "env": v.env, "capped": v.capped} for v in vs])
    t0 = time.monotonic()
    runs = run_jobs(pair_order(seeds, vs), args, ctx, "sweep")
    runs += retime(runs, args, ctx, vs)
    if args.stats:
        extra = run_jobs(stats_jobs(seeds, vs), args, ctx, "stats")
        for r in extra:
            r["stats"] = True
        runs += extra
        save_stats(args, extra)
    meta["total_sec"] = time.monotonic() - t0
    meta["loadavg_end"] = os.getloadavg()[0]
    data = {"meta": meta, "params": {str(s): params[s] for s in seeds},
            "commands": {str(s): {v.name: command_line(v, s, params[s], gen) for v in vs}
                         for s in seeds},
            "runs": runs}
    if args.update:
        data = merge(json.loads(Path(args.update).read_text()), data)
    if args.out_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(data, indent=1))
        print(f"wrote {args.out_json}", file=sys.stderr)
    write_outputs(args, data)
    failed = [r for r in runs if r["error"]]
    print(f"done in {meta['total_sec'] / 60:.1f} min, {len(runs)} runs, {len(failed)} failed",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
