#!/usr/bin/env python3
"""Short processes and small programs under each allocator (issue 19's
targets for them; `make bench-short`, also a step of `make bench`).

A build starts thousands of processes that live a few milliseconds and
make a few thousand allocations each; a tool run from a shell is one of
them. What an allocator costs there is its start-up: loading, setting up,
the page faults of its first tables, the report it writes at exit. Each
program below runs under every allocator, interleaved round-robin (all
allocators of one repetition before the next, in an order rotated per
repetition), --reps times; the report gives medians.

Allocators
  glibc                  the system malloc, no preload
  jemalloc, mimalloc, tcmalloc   Debian's libjemalloc2, libmimalloc2.0,
                         libtcmalloc-minimal4
  libmbuddy              --lib (default .libs/libmbuddy.so)
  libmbuddy-report       the same, writing its text report at exit
                         (MBUDDY_STATS to a file per process)
  libmbuddy-noclassify   the same with MBUDDY_CLASSIFY=off
  libmbuddy-check        the same with MBUDDY_CHECK=1 (the check rows only)

Programs (the time of one measurement is the mean wall time of a batch of
back-to-back runs of the command, each a new process; peak RSS is the
largest of the batch, of the largest process of a run's tree, from wait4.
Each run is started by measure (scripts/measure.c, statically linked),
so that neither this script's own resident set, which a forked child
starts with, nor an allocator is charged to the command)
  openssl-sign  openssl dgst -sha256 -sign of 1 MB with a 2048-bit RSA key
                (about 12,800 allocations)
  cmake-config  cmake configuring a C and C++ project that checks seven
                headers and four functions (about 170 processes: cmake,
                make, sh, cc, cc1, as, ld...); one run per measurement
  gcc-c         gcc -c of a 20-line C file (gcc, cc1, as)
  as            as of the assembly gcc makes of that file
  python-start  python3 -c pass (Debian's /usr/bin/python3 when installed)
  perl-start    perl -e 1
  sqlite-start  sqlite3 :memory: 'select 1'
  gzip          gzip -c of 4 MB of text (generated, fixed seed)
  sed           sed s/a/b/g over the same text (some 200,000 allocations,
                40 KB live: enough to wake classification, too little to
                set a site apart)
Check rows (MBUDDY_CHECK=1 against libmbuddy, peak RSS only):
  check-perl    perl building a hash of 300,000 entries
  check-python  python3 (PYTHONMALLOC=malloc) building a dict of 300,000
                tuples

Targets (medians, ratios from this run):
  * time over glibc's at most 1.1x, with and without the report, on
    openssl-sign and cmake-config (issue 19: "a process that makes ~10k
    allocations and exits ... with and without a report");
  * peak RSS at most glibc's + 1 MiB on every program but cmake-config;
  * MBUDDY_CHECK=1 peak RSS at most 1.2x libmbuddy's on the check rows.

Each run's exit status must be 0; a failed run is reported as such, never
as a number. The output of each program is not compared here (the
real-program benchmark and the test suite do that).
--tiny runs python-start, perl-start and sqlite-start once each with
glibc and libmbuddy: it checks the script, not the allocators.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
LIBDIR = "/usr/lib/x86_64-linux-gnu"
PEER_LIBS = {
    "jemalloc": LIBDIR + "/libjemalloc.so.2",
    "mimalloc": LIBDIR + "/libmimalloc.so.2",
    "tcmalloc": LIBDIR + "/libtcmalloc_minimal.so.4",
}
TIME_TARGET = 1.10
RSS_TARGET_KIB = 1024
CHECK_TARGET = 1.20
TIMED_TARGETS = ["openssl-sign", "cmake-config"]

CMAKE_LISTS = """cmake_minimum_required(VERSION 3.16)
project(probe C CXX)
include(CheckIncludeFile)
include(CheckFunctionExists)
foreach(h stdio.h stdlib.h string.h unistd.h pthread.h sys/mman.h fcntl.h)
  string(MAKE_C_IDENTIFIER ${h} v)
  check_include_file(${h} HAVE_${v})
endforeach()
foreach(f mmap madvise posix_memalign strdup)
  check_function_exists(${f} HAVE_${f})
endforeach()
"""

C_FILE = """#include <stdio.h>
#include <stdlib.h>
struct node { struct node *next; int v; };
static int sum(const struct node *n)
{
	int s = 0;
	for (; n; n = n->next)
		s += n->v;
	return s;
}
int main(int argc, char **argv)
{
	struct node *head = NULL;
	for (int i = 0; i < argc * 10; i++) {
		struct node *n = malloc(sizeof *n);
		n->v = i;
		n->next = head;
		head = n;
	}
	printf("%d %s\\n", sum(head), argv[0]);
	return 0;
}
"""

PERL_HASH = 'my %h; for my $i (1..300000) { $h{"k$i"} = [$i, "v" x ($i % 40)]; } print scalar(keys %h), "\\n";'
PY_DICT = ('d = {}\nfor i in range(300000):\n    d[i] = ("x" * (i % 50), [i, i + 1])\n'
           'print(sum(len(v[0]) for v in d.values()))\n')


def prepare(data):
    """Inputs made once into data (a fixed seed: the same every time)."""
    os.makedirs(data, exist_ok=True)
    key = os.path.join(data, "key.pem")
    if not os.path.exists(key) and shutil.which("openssl"):
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                        "-out", key], check=True, stderr=subprocess.DEVNULL)
    rng = random.Random(19)
    blob = os.path.join(data, "blob-1m")
    if not os.path.exists(blob):
        with open(blob, "wb") as f:
            f.write(bytes(rng.getrandbits(8) for _ in range(1 << 20)))
    text = os.path.join(data, "text-4m.txt")
    if not os.path.exists(text):
        words = ["page", "block", "order", "free", "list", "zone", "type", "reclaim", "buddy", "slab",
                 "the", "of", "a", "to", "in", "and", "memory", "kernel", "allocator", "fragment"]
        with open(text, "w") as f:
            size = 0
            while size < (4 << 20):
                line = " ".join(rng.choice(words) for _ in range(12)) + "\n"
                f.write(line)
                size += len(line)
    proj = os.path.join(data, "cmake-project")
    os.makedirs(proj, exist_ok=True)
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write(CMAKE_LISTS)
    src = os.path.join(data, "small.c")
    with open(src, "w") as f:
        f.write(C_FILE)
    asm = os.path.join(data, "small.s")
    if not os.path.exists(asm) and shutil.which("gcc"):
        subprocess.run(["gcc", "-S", "-O1", "-o", asm, src], check=True)
    return {"key": key, "blob": blob, "text": text, "proj": proj, "src": src, "asm": asm}


# Debian's python3, as in bench_programs.py: a python3 first on PATH may
# be a wrapper (pyenv's shim is a bash script that starts some forty
# processes before the interpreter), which this benchmark would time.
SYSTEM_PYTHON = "/usr/bin/python3"


def python3():
    return SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else "python3"


def programs(d, scratch):
    """name -> (argv, runs per measurement, needed tools, kind); kind is
    'time' (timed and RSS) or 'check' (RSS, MBUDDY_CHECK rows)."""
    out = os.path.join(scratch, "out")
    py = python3()
    return {
        "openssl-sign": (["openssl", "dgst", "-sha256", "-sign", d["key"], "-out", out + ".sig", d["blob"]], 20,
                         ["openssl"], "time"),
        "cmake-config": (["sh", "-c", 'rm -rf "$1" && exec cmake -S "$2" -B "$1" >/dev/null', "sh",
                          os.path.join(scratch, "cmake-build"), d["proj"]], 1, ["cmake", "gcc", "g++"], "time"),
        "gcc-c": (["gcc", "-c", "-o", out + ".o", d["src"]], 10, ["gcc"], "time"),
        "as": (["as", "-o", out + "-as.o", d["asm"]], 20, ["as"], "time"),
        "python-start": ([py, "-c", "pass"], 10, [py], "time"),
        "perl-start": (["perl", "-e", "1"], 20, ["perl"], "time"),
        "sqlite-start": (["sqlite3", ":memory:", "select 1"], 20, ["sqlite3"], "time"),
        "gzip": (["sh", "-c", 'exec gzip -c "$1" >/dev/null', "sh", d["text"]], 5, ["gzip"], "time"),
        "sed": (["sh", "-c", 'exec sed -e s/a/b/g "$1" >/dev/null', "sh", d["text"]], 5, ["sed"], "time"),
        "check-perl": (["perl", "-e", PERL_HASH], 1, ["perl"], "check"),
        "check-python": ([py, "-c", PY_DICT], 1, [py], "check"),
    }


def allocators(lib, scratch):
    a = {"glibc": {}}
    for name, path in PEER_LIBS.items():
        if os.path.exists(path):
            a[name] = {"LD_PRELOAD": path}
    a["libmbuddy"] = {"LD_PRELOAD": lib}
    a["libmbuddy-report"] = {"LD_PRELOAD": lib, "MBUDDY_STATS": os.path.join(scratch, "report-%p.txt")}
    a["libmbuddy-noclassify"] = {"LD_PRELOAD": lib, "MBUDDY_CLASSIFY": "off"}
    a["libmbuddy-check"] = {"LD_PRELOAD": lib, "MBUDDY_CHECK": "1"}
    return a


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MBUDDY_") and k not in (
        "LD_PRELOAD", "MALLOC_CONF", "PYTHONMALLOC")}
    env["LC_ALL"] = "C"
    return env


def build_launcher(build_dir):
    """measure from measure.c, statically linked; rebuilt when older."""
    os.makedirs(build_dir, exist_ok=True)
    exe = os.path.join(os.path.abspath(build_dir), "measure")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measure.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        r = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-static", "-o", exe, src],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("cannot build measure (a static libc is needed): " + r.stderr.strip())
    return exe


def run_once(sampler, report, argv, env):
    """(wall seconds, peak RSS KiB of the tree's largest process, status)."""
    p = subprocess.run([sampler, report] + argv, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    head = {}
    try:
        with open(report) as f:
            for field in f.readline().split():
                k, _, v = field.partition("=")
                head[k] = int(v)
    except (OSError, ValueError):
        return None, None, p.returncode or 1
    return head.get("wall_ns", 0) / 1e9, head.get("maxrss_kib"), p.returncode


def measure(sampler, report, argv, env, batch):
    """One measurement: batch runs back to back; None if one failed."""
    total, peak = 0.0, 0
    for _ in range(batch):
        sec, rss, rc = run_once(sampler, report, argv, env)
        if rc != 0 or sec is None:
            return None
        total += sec
        peak = max(peak, rss or 0)
    return {"sec": total / batch, "rss_kib": peak}


def columns_for(kind, names):
    if kind == "check":
        return [n for n in names if n in ("glibc", "libmbuddy", "libmbuddy-check")]
    return [n for n in names if n != "libmbuddy-check"]


def fmt_ratio(r, limit):
    if r is None:
        return "-"
    return "%.2fx%s" % (r, " **MISS**" if limit is not None and r > limit else "")


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def report(res, progs, names, reps, out):
    """Markdown: time and peak RSS per program and allocator, ratios to
    glibc, the targets."""
    lines = ["# Short processes and small programs", "",
             "Medians of %d interleaved repetitions (`scripts/bench_short.py`). Time: wall seconds of one run "
             "(a measurement averages a batch of back-to-back runs); peak RSS: the largest process of one run "
             "(wait4), KiB." % reps, ""]
    timed = [p for p in progs if progs[p][3] == "time" and p in res]
    # The check rows compare libmbuddy-check with libmbuddy: only when both
    # were asked for (--allocators may name fewer).
    checks = [p for p in progs if progs[p][3] == "check" and p in res
              and {"libmbuddy", "libmbuddy-check"} <= set(names)]
    cols = columns_for("time", names)
    med = {p: {a: {k: median([r[k] if r else None for r in res[p].get(a, [])]) for k in ("sec", "rss_kib")}
               for a in names} for p in res}
    fails = sum(1 for p in res for a in res[p] for r in res[p][a] if r is None)
    def table(title, key, cell):
        """One table over the timed programs: cell(value, glibc's value)."""
        lines.extend([title, "", "| program | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"])
        for p in timed:
            g = med[p]["glibc"][key] if "glibc" in med[p] else None
            cells = ["failed" if med[p][a][key] is None and res[p].get(a) else "-" if med[p][a][key] is None
                     else cell(med[p][a][key], g) for a in cols]
            lines.append("| %s | %s |" % (p, " | ".join(cells)))
        lines.append("")

    if timed:
        table("## Time (ms), median; in brackets over glibc", "sec",
              lambda v, g: "%.2f (%.2fx)" % (1e3 * v, v / g) if g else "%.2f" % (1e3 * v))
        table("## Peak RSS (KiB), median; in brackets minus glibc's", "rss_kib",
              lambda v, g: "%d (%+d)" % (v, v - g) if g else "%d" % v)
    if checks:
        lines += ["## MBUDDY_CHECK=1: peak RSS (KiB), median", "",
                  "| program | glibc | libmbuddy | libmbuddy-check | check / libmbuddy |", "|---|---|---|---|---|"]
        for p in checks:
            g, m, c = (med[p][a]["rss_kib"] for a in ("glibc", "libmbuddy", "libmbuddy-check"))
            lines.append("| %s | %s | %s | %s | %s |" % (p, g or "-", m or "-", c or "-",
                                                         fmt_ratio(c / m if c and m else None, CHECK_TARGET)))
    lines += ["", "## Targets", "", "| target | measured | limit | status |", "|---|---|---|---|"]
    missed = 0

    def target(what, value, limit, shown):
        nonlocal missed
        ok = value is not None and value <= limit
        missed += not ok
        lines.append("| %s | %s | %s | %s |" % (what, shown, "<= %s" % (
            "%.2fx" % limit if isinstance(limit, float) else "+%d KiB" % limit), "ok" if ok else "**MISS**"))

    for p in TIMED_TARGETS:
        if p not in med or "glibc" not in names:
            continue
        g = med[p]["glibc"]["sec"]
        for a in ("libmbuddy", "libmbuddy-report"):
            if a not in names:
                continue
            s = med[p][a]["sec"]
            r = s / g if s and g else None
            target("%s: %s time over glibc" % (p, a), r, TIME_TARGET, "%.2fx" % r if r else "failed")
    for p in timed:
        if p == "cmake-config" or not {"glibc", "libmbuddy"} <= set(names):
            continue
        g, m = med[p]["glibc"]["rss_kib"], med[p]["libmbuddy"]["rss_kib"]
        d = m - g if m and g else None
        target("%s: libmbuddy peak RSS minus glibc's" % p, d, RSS_TARGET_KIB, "%+d KiB" % d if d is not None
               else "failed")
    for p in checks:
        m, c = med[p]["libmbuddy"]["rss_kib"], med[p]["libmbuddy-check"]["rss_kib"]
        r = c / m if c and m else None
        target("%s: MBUDDY_CHECK=1 peak RSS over libmbuddy's" % p, r, CHECK_TARGET, "%.2fx" % r if r else "failed")
    lines += ["", "%d of the targets missed. Failed runs: %d." % (missed, fails), ""]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=".libs/libmbuddy.so")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", help="comma-separated programs")
    ap.add_argument("--allocators", help="comma-separated allocators")
    ap.add_argument("--data", default="bench-results/short-data")
    ap.add_argument("--build-dir", default=None, help="where measure is built (default DATA/bin)")
    ap.add_argument("--out-md", default="bench-results/short.md")
    ap.add_argument("--out-json", default="bench-results/short.json")
    ap.add_argument("--tiny", action="store_true", help="the machinery only: three programs, one repetition")
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    if not os.path.exists(lib):
        sys.exit("no library at %s" % lib)
    for path in (args.out_md, args.out_json):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="mbuddy-short.")
    try:
        d = prepare(args.data)
        sampler = build_launcher(args.build_dir or os.path.join(args.data, "bin"))
        sample_file = os.path.join(scratch, "measure.txt")
        progs = programs(d, scratch)
        allocs = allocators(lib, scratch)
        if args.tiny:
            args.only = args.only or "python-start,perl-start,sqlite-start"
            args.allocators = args.allocators or "glibc,libmbuddy,libmbuddy-report"
            args.reps = 1
        if args.only:
            progs = {p: progs[p] for p in args.only.split(",")}
        names = args.allocators.split(",") if args.allocators else list(allocs)
        names = [n for n in names if n in allocs]
        for p in list(progs):
            missing = [t for t in progs[p][2] if not shutil.which(t)]
            if missing:
                print("skipped %s: %s not installed" % (p, ", ".join(missing)), file=sys.stderr)
                del progs[p]
        base = clean_env()
        res = {p: {a: [] for a in columns_for(progs[p][3], names)} for p in progs}
        for rep in range(args.reps):
            for p, (argv, batch, _, kind) in progs.items():
                order = columns_for(kind, names)
                k = rep % len(order)
                for a in order[k:] + order[:k]:
                    env = dict(base, **allocs[a])
                    if p.startswith("check-python"):
                        env["PYTHONMALLOC"] = "malloc"
                    r = measure(sampler, sample_file, argv, env, 1 if args.tiny else batch)
                    res[p][a].append(r)
                    print("[%d/%d] %-13s %-21s %s" % (rep + 1, args.reps, p, a, "failed" if r is None else
                                                       "%.2f ms, %d KiB" % (1e3 * r["sec"], r["rss_kib"])),
                          file=sys.stderr)
        if args.out_json:
            with open(args.out_json, "w") as f:
                json.dump({"reps": args.reps, "lib": lib, "results": res}, f, indent=1)
        fails = report(res, progs, names, args.reps, args.out_md)
        if "libmbuddy-report" in names:
            reports = [f for f in os.listdir(scratch) if f.startswith("report-")]
            print("reports written by libmbuddy-report runs: %d" % len(reports))
            if not reports:
                print("no report was written: the library did not serve the runs (or MBUDDY_STATS did not "
                      "reach it)", file=sys.stderr)
                fails += 1
        return 1 if fails else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
