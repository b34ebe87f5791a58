#!/usr/bin/env python3
"""The seed experiment: 4 MiB ("order-10") allocations under a fragmenting load.

Mel Gorman's 2005 patch attempted 160 order-10 allocations while a
thrashing load ran: 3 succeeded on the vanilla kernel, 81 with free lists
split by reclaim type. This script repeats the experiment in a process
heap: workloads/highorder.c runs a load of pinned, cache and temporary
objects from three call sites in a heap capped by MBUDDY_HEAP_SIZE. The
load first grows to PEAK % of the heap (as the kernel test's page cache had
filled memory), shrinks to FILL % and churns, and malloc(4 MiB) is
attempted 160 times through the churn.

It runs the program twice under libmbuddy:
  MBUDDY_CLASSIFY=off   every call site gets the same type (the "vanilla" run)
  default               call sites classified by lifetime (the patch's run)
and prints the patch's table for each. With --profile the default run is
repeated with MBUDDY_PROFILE: a first run writes what it learned, the second
starts classified (the table is the second run's). With --rules a run states
the three call sites' types in MBUDDY_RULES, as the patch's GFP flags did.

Examples
  python3 scripts/highorder.py --lib build/.libs/libmbuddy.so
  python3 scripts/highorder.py --heap-size 512M --fill 80 --reps 3
  python3 scripts/highorder.py --smoke      # glibc, no cap: checks the program runs

Exit status: 0 if every run completed, 1 otherwise, 2 if libmbuddy is missing.
"""

import argparse
import subprocess
import contextlib
import os
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (build() and clean_env())

PATCH_RESULT = ("2005 patch, 160 order-10 attempts under load: "
                "vanilla 3 (1%), typed free lists 81 (50%)")
CONFIGS = [
    ("libmbuddy, MBUDDY_CLASSIFY=off (one type for every call site)", {"MBUDDY_CLASSIFY": "off"}),
    ("libmbuddy, default (call sites classified by lifetime)", {}),
]
# Types stated up front, like the patch's GFP flags: separates "does the
# grouping work" from "does the classifier learn the types in time".
RULES_CONFIG = ("libmbuddy, MBUDDY_RULES (types given for the three call sites)",
                {"MBUDDY_RULES": "sym:pinned_alloc=pinned,sym:cache_alloc=cache,"
                                 "sym:temp_alloc=short"})
TABLE_PREFIXES = ("Attempted allocations:", "Success allocs:", "Failed allocs:", "% Success:")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=".libs/libmbuddy.so",
                   help="libmbuddy shared object (default: %(default)s)")
    p.add_argument("--build-dir", default="bench-results/bin",
                   help="where highorder.c is compiled (default: %(default)s)")
    p.add_argument("--heap-size", default="256M",
                   help="MBUDDY_HEAP_SIZE for the runs (default: %(default)s)")
    p.add_argument("--fill", type=int, default=70,
                   help="steady load, percent of the heap (default: %(default)s)")
    p.add_argument("--peak", type=int, default=95,
                   help="load reached before the churn, percent of the heap "
                        "(default: %(default)s)")
    p.add_argument("--attempts", type=int, default=160,
                   help="4 MiB attempts (default: %(default)s, as in the patch)")
    p.add_argument("--between", type=int, default=15000,
                   help="load operations between attempts (default: %(default)s)")
    p.add_argument("--reps", type=int, default=1, help="runs per configuration (default: 1)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run (default: 300)")
    p.add_argument("--profile", action="store_true",
                   help="also run twice with MBUDDY_PROFILE and report the second run")
    p.add_argument("--rules", action="store_true",
                   help="also run with the three call sites' types given in MBUDDY_RULES")
    p.add_argument("--smoke", action="store_true",
                   help="run once under glibc (no preload, so no cap) to check the program")
    return p.parse_args()


def run(binary, args, label, extra_env, preload):
    env = bench.clean_env({"MBUDDY_HEAP_SIZE": args.heap_size, **extra_env})
    if preload:
        env["LD_PRELOAD"] = str(preload)
    argv = [str(binary), str(args.fill), str(args.attempts), str(args.between), str(args.peak)]
    shown = [f"MBUDDY_HEAP_SIZE={args.heap_size}", *(f"{k}={v}" for k, v in extra_env.items())]
    if preload:
        shown.append(f"LD_PRELOAD={preload}")
    print(f"\n{label}")
    print("  " + " ".join(shown + [Path(argv[0]).name] + argv[1:]))
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"  FAILED: no result within {args.timeout:.0f} s")
        return False
    table = [l for l in p.stdout.splitlines() if l.startswith(TABLE_PREFIXES)]
    for line in table:
        print(line)
    result = bench.parse_result(p.stdout) or {}
    if result:
        print(f"  ({result.get('sec', 0):.1f} s; peak load "
              f"{result.get('peak_bytes', 0) / 2**20:.0f} MiB; at the end: pinned "
              f"{result.get('pinned_bytes', 0) / 2**20:.0f} MiB, cache "
              f"{result.get('cache_bytes', 0) / 2**20:.0f} MiB; the load met a full heap "
              f"{result.get('pressure_events', 0)} times and dropped "
              f"{result.get('load_failures', 0)} allocations)")
        print(f"  attempts over time (S = success): {result.get('timeline', '')}")
    if p.returncode != 0 or len(table) != 4:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        print(f"  FAILED: exit status {p.returncode}{': ' + tail if tail else ''}")
        return False
    return True


def main():
    args = parse_args()
    build_dir = Path(args.build_dir)
    bench.build(build_dir)
    binary = (build_dir / "highorder").resolve()
    print(PATCH_RESULT)
    if args.smoke:
        label = "glibc (no preload: the cap does nothing, every attempt should succeed)"
        ok = run(binary, args, label, {}, None)
        return 0 if ok else 1
    lib = Path(args.lib).resolve()
    if not lib.is_file():
        print(f"libmbuddy not found at {lib}: build it, or pass --lib", file=sys.stderr)
        return 2
    ok = True
    configs = CONFIGS + ([RULES_CONFIG] if args.rules else [])
    for rep in range(args.reps):
        suffix = f" [run {rep + 1}/{args.reps}]" if args.reps > 1 else ""
        for label, env in configs:
            ok &= run(binary, args, label + suffix, env, lib)
        if args.profile:
            with tempfile.TemporaryDirectory() as tmp:
                prof = {"MBUDDY_PROFILE": str(Path(tmp) / "highorder.profile")}
                with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                    ok &= run(binary, args, "profile-writing run", prof, lib)
                ok &= run(binary, args, "libmbuddy, default with the profile of one earlier run" + suffix,
                          prof, lib)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
