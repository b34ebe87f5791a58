#!/usr/bin/env python3
"""Huge-page benchmark for libmbuddy (issue 21): TLB-bound workloads.

Runs each workload under every allocator, interleaved round-robin, and
reports medians of --runs runs: the time of the TLB-bound part, peak RSS
(wait4, through the static launcher measure.c) and AnonHugePages near the
end of the run, with ratios to the best peer of the same run.

Allocators
  glibc               the system malloc (no preload)
  jemalloc            libjemalloc.so.2, default settings
  jemalloc-thp        the same with MALLOC_CONF=thp:always,metadata_thp:always
  mimalloc            libmimalloc.so.2, default settings
  mimalloc-large      the same with MIMALLOC_LARGE_OS_PAGES=1 and
                      MIMALLOC_ALLOW_LARGE_OS_PAGES=1
  tcmalloc            libtcmalloc_minimal.so.4
  libmbuddy           --lib, MBUDDY_HUGEPAGES=auto (the default)
  libmbuddy-never     the same with MBUDDY_HUGEPAGES=never
An allocator whose library is missing is left out, and said so.

Workloads
  hash    workloads/tlb.c: a chained hash table of NODES 24-byte nodes, each
          its own malloc, then LOOKUPS random lookups; timed: the lookups.
          Then the load drops (nine tenths of the nodes freed) and the RSS
          2 s later is reported ("RSS after drop").
  tree    workloads/tlb.c: a binary search tree of NODES nodes built in random
          key order, then random lookups; timed: the lookups.
  sqlite  sqlite3 CLI, an in-memory database of ROWS rows (its pages are
          malloc'd) under random point queries; timed: the whole run (the
          CLI reports no phase); AnonHugePages read by the CLI itself from
          /proc/$PPID/smaps_rollup (.shell) before it exits. Skipped
          without /usr/bin/sqlite3.
Once per run, with no allocator, `tlb chase` times dependent random reads
over 1 GiB (512 MiB with --quick) on 4 KiB pages and on huge pages: what
huge pages buy this machine at most, so that a missed speed target can be
told from a machine that gives huge pages nothing (a VM whose host maps
guest memory in 4 KiB pages, say).

Targets (issue 21), judged on the medians of this run, never on stored
numbers: on each workload libmbuddy's time <= 1/1.3 of the best peer at its
defaults (glibc, jemalloc, mimalloc, tcmalloc) and <= the best peer with
its huge-page option (jemalloc-thp, mimalloc-large); libmbuddy's peak RSS
<= 1.05x libmbuddy-never's; after the drop libmbuddy's RSS <= its RSS
before the drop / 2 (free 2 MiB ranges still go back).

Usage: bench_huge.py --lib PATH [--runs N] [--quick] [--only hash,tree,sqlite]
                     [--build-dir DIR] [--out FILE]
The table goes to stdout and to --out (default bench-results/huge.md).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")

PEERS_DEFAULT = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
PEERS_HUGE = ["jemalloc-thp", "mimalloc-large"]


def allocators(lib):
    je, mi, tc = LIBDIR / "libjemalloc.so.2", LIBDIR / "libmimalloc.so.2", LIBDIR / "libtcmalloc_minimal.so.4"
    table = [
        ("glibc", None, {}),
        ("jemalloc", je, {}),
        ("jemalloc-thp", je, {"MALLOC_CONF": "thp:always,metadata_thp:always"}),
        ("mimalloc", mi, {}),
        ("mimalloc-large", mi, {"MIMALLOC_LARGE_OS_PAGES": "1", "MIMALLOC_ALLOW_LARGE_OS_PAGES": "1"}),
        ("tcmalloc", tc, {}),
        ("libmbuddy", Path(lib), {"MBUDDY_HUGEPAGES": "auto"}),
        ("libmbuddy-never", Path(lib), {"MBUDDY_HUGEPAGES": "never"}),
    ]
    out = []
    for name, so, env in table:
        if so is not None and not so.exists():
            print(f"note: {name} left out: no {so}", file=sys.stderr)
            continue
        out.append((name, so, env))
    return out


def build(bdir):
    bdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-static", "-o", str(bdir / "measure"), str(HERE / "measure.c")], check=True)
    subprocess.run(["cc", "-O2", "-I", str(HERE / "workloads"), "-o", str(bdir / "tlb"),
                    str(HERE / "workloads" / "tlb.c")], check=True)


SQLITE_SQL = """
CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
CREATE INDEX tv ON t(v);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {rows})
  INSERT INTO t SELECT i, hex(randomblob(24)) FROM c;
SELECT 'checksum', sum(length(v)) FROM (
  WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {queries})
  SELECT (SELECT v FROM t WHERE k = abs(random()) % {rows} + 1) AS v FROM c);
.shell grep AnonHugePages /proc/$PPID/smaps_rollup
"""


def workloads(args, bdir):
    q = args.quick
    wl = {
        "hash": [str(bdir / "tlb"), "hash", str(4_000_000 if q else 8_000_000), str(8_000_000 if q else 20_000_000),
                 "drop"],
        "tree": [str(bdir / "tlb"), "tree", str(2_000_000 if q else 4_000_000), str(4_000_000 if q else 8_000_000)],
    }
    if shutil.which("sqlite3"):
        rows, queries = (500_000, 1_000_000) if q else (1_500_000, 3_000_000)
        wl["sqlite"] = ["sqlite3", ":memory:"], SQLITE_SQL.format(rows=rows, queries=queries)
    else:
        print("note: sqlite left out: no sqlite3", file=sys.stderr)
    return {k: v for k, v in wl.items() if not args.only or k in args.only}


def run_one(bdir, name, so, extra_env, cmd, scratch):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "MALLOC_CONF", "MIMALLOC_LARGE_OS_PAGES", "MIMALLOC_ALLOW_LARGE_OS_PAGES",
              "MBUDDY_HUGEPAGES", "MBUDDY_STATS"):
        env.pop(k, None)
    env.update(extra_env)
    if so is not None:
        env["LD_PRELOAD"] = str(so)
    stdin = None
    if isinstance(cmd, tuple):
        cmd, stdin = cmd
    report = scratch / "measure.txt"
    p = subprocess.run([str(bdir / "measure"), str(report), *cmd], env=env, input=stdin, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {cmd[0]} exited {p.returncode}: {p.stderr[-500:]}")
    m = dict(kv.split("=") for kv in report.read_text().split())
    r = {"wall": int(m["wall_ns"]) / 1e9, "maxrss": int(m["maxrss_kib"]) * 1024}
    res = re.search(r"^RESULT (.*)$", p.stdout, re.M)
    if res:
        kv = dict(x.split("=") for x in res.group(1).split())
        r["time"] = float(kv["lookup_s"])
        r["huge"] = int(kv["anon_huge_kib"]) * 1024
        if "drop_rss_kib" in kv:
            r["drop_rss"] = int(kv["drop_rss_kib"]) * 1024
            r["rss_before_drop"] = int(kv["rss_kib"]) * 1024
    else:  # sqlite: the whole run; its own smaps_rollup lines
        r["time"] = r["wall"]
        h = re.search(r"^AnonHugePages:\s+(\d+)", p.stdout, re.M)
        r["huge"] = int(h.group(1)) * 1024 if h else 0
    return r


def mib(b):
    return f"{b / 2**20:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", type=lambda s: s.split(","), default=None)
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--out", default="bench-results/huge.md")
    args = ap.parse_args()
    if args.quick:
        args.runs = min(args.runs, 3)
    if not Path(args.lib).exists():
        print(f"SKIP: no {args.lib}", file=sys.stderr)
        return 0
    bdir = Path(args.build_dir) if args.build_dir else Path(tempfile.mkdtemp(prefix="bench-huge-"))
    build(bdir)
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    thp_setting = thp.read_text().strip() if thp.exists() else "unavailable"
    allocs = allocators(args.lib)
    wls = workloads(args, bdir)
    results = {w: {a[0]: [] for a in allocs} for w in wls}
    # What huge pages buy this machine with no allocator involved: the
    # ceiling of any allocator's gain (tlb.c, chase).
    chase_mib, chase_reads = (512, 5_000_000) if args.quick else (1024, 10_000_000)
    chase = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for i in range(args.runs):
            p = subprocess.run([str(bdir / "tlb"), "chase", str(chase_mib), str(chase_reads)],
                               capture_output=True, text=True, timeout=600, check=True)
            chase.append(dict(kv.split("=") for kv in
                              re.search(r"^RESULT (.*)$", p.stdout, re.M).group(1).split()))
            for w, cmd in wls.items():
                order = allocs[i % len(allocs):] + allocs[:i % len(allocs)]  # interleaved, rotated
                for name, so, env in order:
                    results[w][name].append(run_one(bdir, name, so, env, cmd, scratch))
            print(f"run {i + 1}/{args.runs} done", file=sys.stderr)

    def med(w, a, key):
        v = [r[key] for r in results[w][a] if key in r]
        return statistics.median(v) if v else None

    lines = [f"# Huge pages: medians of {args.runs} interleaved runs", "",
             f"THP: `{thp_setting}`; command: `{' '.join(sys.argv)}`", "",
             "| workload | allocator | time (s) | vs best default peer | vs best huge peer | peak RSS (MiB) "
             "| AnonHugePages (MiB) | RSS after drop (MiB) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for w in wls:
        names = [a for a in results[w]]
        best_def = min((med(w, a, "time"), a) for a in names if a in PEERS_DEFAULT)
        huge_peers = [(med(w, a, "time"), a) for a in names if a in PEERS_HUGE]
        best_huge = min(huge_peers) if huge_peers else None
        for a in names:
            t = med(w, a, "time")
            drop = med(w, a, "drop_rss")
            vs_huge = f"{t / best_huge[0]:.2f}" if best_huge else "-"
            lines.append(f"| {w} | {a} | {t:.3f} | {t / best_def[0]:.2f} | {vs_huge} | "
                         f"{mib(med(w, a, 'maxrss'))} | {mib(med(w, a, 'huge'))} | "
                         f"{mib(drop) if drop is not None else '-'} |")
        if "libmbuddy" in names:
            t = med(w, "libmbuddy", "time")
            sp = best_def[0] / t
            verdicts.append(f"{w}: {sp:.2f}x faster than the best default peer ({best_def[1]}) "
                            f"-> {'PASS' if sp >= 1.3 else 'MISS'} (target 1.3x)")
            if best_huge:
                verdicts.append(f"{w}: time / best huge-page peer ({best_huge[1]}) = {t / best_huge[0]:.2f} "
                                f"-> {'PASS' if t <= best_huge[0] else 'MISS'} (target <= 1.00)")
            if "libmbuddy-never" in names:
                rr = med(w, "libmbuddy", "maxrss") / med(w, "libmbuddy-never", "maxrss")
                verdicts.append(f"{w}: peak RSS auto / never = {rr:.3f} -> {'PASS' if rr <= 1.05 else 'MISS'} "
                                f"(target <= 1.05)")
            drop = med(w, "libmbuddy", "drop_rss")
            if drop is not None:
                before = med(w, "libmbuddy", "rss_before_drop")
                verdicts.append(f"{w}: RSS after the drop {mib(drop)} MiB of {mib(before)} MiB before -> "
                                f"{'PASS' if drop <= before / 2 else 'MISS'} (target <= half)")
    t4 = statistics.median(float(c["chase_4k_s"]) for c in chase)
    th = statistics.median(float(c["chase_huge_s"]) for c in chase)
    hk = statistics.median(int(c["chase_huge_kib"]) for c in chase)
    gain = t4 / th
    lines += ["", f"This machine, no allocator (`tlb chase {chase_mib} {chase_reads}`): dependent random "
              f"one-byte reads over {chase_mib} MiB take {t4:.3f} s on 4 KiB pages and {th:.3f} s "
              f"advised MADV_HUGEPAGE ({hk // 1024} MiB of it in huge pages): huge pages buy "
              f"{gain:.2f}x here, the most any allocator can gain from them."]
    verdicts.append(f"machine: huge pages buy {gain:.2f}x on the chase -> the 1.3x target over the default "
                    f"peers is {'within reach' if gain >= 1.3 else 'out of reach'} here")
    lines += ["", "Targets:", ""] + [f"- {v}" for v in verdicts]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
