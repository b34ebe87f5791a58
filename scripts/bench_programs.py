#!/usr/bin/env python3
"""Real programs on real data under each allocator: the memory yardstick
of issue 19 (`make bench-programs`, also a step of `make bench`).

Eleven programs that nobody in this project wrote run on data that Debian
packages provide, each under every allocator, interleaved round-robin (all
allocators of one repetition before the next repetition starts, in an
order rotated per repetition), --reps times (default 3); the report gives
medians.

Allocators
  glibc                 the system malloc, no preload (for redis-server,
                        which links jemalloc, LD_PRELOAD=libc.so.6 so that
                        malloc and free resolve to glibc's)
  jemalloc              libjemalloc.so.2 (Debian's libjemalloc2)
  mimalloc              libmimalloc.so.2 (libmimalloc2.0)
  tcmalloc              libtcmalloc_minimal.so.4 (libtcmalloc-minimal4)
  libmbuddy             --lib (default .libs/libmbuddy.so)
  libmbuddy-noclassify  the same with MBUDDY_CLASSIFY=off
  libmbuddy-nohuge      the same with MBUDDY_HUGEPAGES=never; only when named in
                        --allocators: what huge pages cost in memory (a column
                        of its own, libmbuddy / nohuge)
The "best peer" of a figure is the lowest of glibc, jemalloc, mimalloc and
tcmalloc.

Programs (full size; --quick uses smaller inputs, noted in brackets)
  git-blame    git blame -w -C HEAD -- mm/page_alloc.c
  git-log      git log -p --stat -n 150                        [-n 40]
  git-pack     git pack-objects --all --revs --stdout --no-reuse-delta
               --no-reuse-object --threads=1 --window=10 of the whole
               repository (one thread: with two, the delta search splits
               its work by timing and the pack differs from run to run)
  git-grep     git grep -n -I -E on the tree of HEAD~100 (from the object
               store, not the work tree), three patterns
  python-tests /usr/bin/python3 -m test test_json test_re test_collections
               test_dict test_ordered_dict test_xml_etree, PYTHONMALLOC=malloc
               (libpython3.11-testsuite)                  [test_json test_collections]
  sqlite       sqlite3 in memory: 400,000 lines of kernel C (path, line
               number, text) imported, indexes on (path, lineno) and on text,
               80% deleted, then group-bys       [100,000 lines]
  perl-words   perl counting words and word pairs of 8 MB of the kernel's
               Documentation, most frequent printed   [2 MB]
  redis        redis-server filled by redis-cli --pipe with 400,000 keys of
               16 B-8 KiB, 80% deleted, 100,000 larger keys set, then
               DEBUG DIGEST and DBSIZE             [100,000 keys]
  gxx          g++ -O1 -c googlemock's gmock-matchers.cc (package googletest)
                                                   [gtest-printers.cc -O0]
  xz           xz -6 compressing 8 MB of kernel sources (net/, a tar), piped
               into xz -d                          [2 MB]
  jq           jq grouping and sorting a 10 MB JSON description of kernel
               C files in drivers/ (paths, line counts, includes, function
               names, common words)                [3 MB]
Chosen because each spends its time in its own heap (objects of many
sizes and lifetimes: git's object cache and delta windows, CPython's
objects with PYTHONMALLOC=malloc, sqlite's page cache in a :memory:
database, perl's hashes, Redis's keyspace with holes left by the deletes,
GCC's trees, jq's values), while finishing in a few seconds on 2 cores.
Left out: a make/cmake build (its memory is that of the compilers, which
gxx already measures, and its time that of the process starts); awk (only
mawk is installed, its hash tables are perl-words again); zstd (xz is the
compressor).

Data (prepared once into --data, default bench-results/programs-data, and
reused; never timed; --quick data in a subdirectory of its own)
  linux-6.1/   /usr/src/linux-source-6.1.tar.xz (package linux-source-6.1),
               extracted.
  kernel.git   a git repository made from that tree: include, kernel, mm,
               lib, block, ipc, init, io_uring and fs (quick: kernel, mm,
               lib, include/linux), committed one directory at a time (each
               top directory's own files, then each subdirectory; a
               directory of more than 300 files split by initial letter),
               about 200 commits, then 200 commits (quick: 40) that edit
               files: each commit moves a block of 10-60 lines from one file
               into another (mm/page_alloc.c is one of the two every other
               commit, so git blame -C has copies across files to find),
               moves a block within a third file, deletes a few lines and
               re-indents a block (whitespace for blame -w). Random choices
               from a fixed seed, fixed author and dates: the same
               repository every time. Packed once (git repack -a -d).
  Others       text derived from the same tree, from a fixed seed. Each
               name carries its size; a changed generator needs a new name
               (or the cache removed).
In --tiny mode (the machinery test) the text comes from Python's own
library (/usr/lib/python3.11), the git repository is not made, and inputs
are a few hundred KiB: it checks the script, not the allocators.

Measured per run, by a small static launcher (treerss.c) so that the
runner's own memory is not charged and no allocator is loaded into the
sampler:
  peak RSS   the highest sum of resident pages (/proc/PID/statm) of the
             command's process tree, sampled every 5 ms, or the exact peak
             of its largest process (wait4's ru_maxrss) if that is higher
             (a spike between samples)
  avg RSS    that sum averaged over the run, each sample weighted by the
             time it stood for
  In both sums a child that has not called exec (its code and stack start
  where its parent's do) is left out: between fork (or vfork) and exec it
  maps its parent's pages, and counting them twice made CPython's tests
  peak at 60 or at 96 MiB by chance (a sample inside subprocess's window
  or not). A program that forks workers without exec would be undercounted
  by their private pages; none of these does.
  wall time  from start to exit of the command
The process tree is: one process for git, sqlite3, perl, jq and python
(its tests run in one process); g++ and the cc1plus and as it starts;
sh and its two xz. For redis only the server (redis-server is the tree;
the redis-cli clients are not preloaded and not measured) from its start
to its SHUTDOWN, which includes the time the clients took. The report
names the largest process of each program.

Checks, each a failure of that run (shown in the tables as such, never as
a number):
  * the command's exit status, and a time limit (--timeout, or 10x the
    program's fastest run so far, at least 30 s; a timed-out pair is not
    run again);
  * its output hashed (SHA-256, after dropping timings from python's)
    must equal glibc's (or, without a glibc run, the most common one);
  * libmbuddy really served it: in the first repetition each libmbuddy
    column has one more run, a check run, right after its measured one,
    with MBUDDY_STATS=<run dir>/mb.%p.json and MBUDDY_STATS_FORMAT=json;
    the largest process must have left a report with served true and
    objects counted (counters.mallocs > 0). Other processes whose report
    says served false are listed. The check runs are not in the medians:
    writing the report costs libmbuddy time (the account reads
    /proc/self/smaps, the call-site rows are symbolized) and once cost it
    13-15 MiB of peak RSS when call sites were classified, which would
    bias both the peer ratios and classified against off (--no-check-runs
    leaves them out). One exception to served false: Debian's
    /usr/bin/python3.11 and GCC's cc1plus are not position-independent and
    take malloc's address, so dlsym finds the executable's canonical PLT
    entry and the report says served false although that entry jumps to
    libmbuddy's malloc; when readelf shows the named symbol undefined in the named
    object, with an address, and objects were counted, the run is taken
    as served and the report says so.

Report: --out-md (default bench-results/programs.md) has one table per
metric with the allocators as columns, then ratio tables: libmbuddy and
libmbuddy-noclassify to the best peer, and classified to noclassify, each
with the geometric mean and the worst case. --out-json (default
bench-results/programs.json) has every run; --from-json redoes the report.

Examples
  make bench-programs
  python3 scripts/bench_programs.py --lib .libs/libmbuddy.so      # ~25 min
  python3 scripts/bench_programs.py --quick                       # 1 rep, small
  python3 scripts/bench_programs.py --only git-blame,sqlite --reps 5
  python3 scripts/bench_programs.py --prepare-only                # data only
  python3 scripts/bench_programs.py --from-json bench-results/programs.json

Exit status: 0 if every run passed its checks, 1 if one failed (bad exit,
time-out, output that differs, a process libmbuddy did not serve), 2 if
nothing could be run (no library, no program whose tools are installed).
"""

import argparse
import datetime
import fcntl
import hashlib
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
LIBC = LIBDIR / "libc.so.6"
SYSTEM_PYTHON = Path("/usr/bin/python3")
KERNEL_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
TINY_SOURCE = Path("/usr/lib/python3.11")
GOOGLETEST = Path("/usr/src/googletest")
SAMPLE_MS = 5
SEED = 19
PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
MBUDDY = "libmbuddy"
NOCLASSIFY = "libmbuddy-noclassify"
NOHUGE = "libmbuddy-nohuge"
ADAPTIVE_FACTOR = 10
ADAPTIVE_FLOOR = 30
# Variables that would change an allocator's or a program's behaviour.
SCRUB_PREFIXES = ("LD_PRELOAD", "MALLOC_", "MIMALLOC_", "TCMALLOC_", "JEMALLOC_", "MBUDDY_",
                  "PYTHON", "GLIBC_TUNABLES", "LOCKPROF_", "GIT_", "PERL", "SQLITE",
                  "JQ_", "XZ_", "LANG", "LC_")
FIXED_DATE = 1700000000  # commit dates of the generated repository


class Allocator:
    def __init__(self, name, preload, env=None, default=True):
        self.name, self.preload, self.env = name, preload, env or {}
        self.default = default  # run when --allocators does not name any

    @property
    def mbuddy(self):
        return self.name in (MBUDDY, NOCLASSIFY, NOHUGE)


def allocators(lib):
    return [
        Allocator("glibc", None),
        Allocator("jemalloc", LIBDIR / "libjemalloc.so.2"),
        Allocator("mimalloc", LIBDIR / "libmimalloc.so.2"),
        Allocator("tcmalloc", LIBDIR / "libtcmalloc_minimal.so.4"),
        Allocator(MBUDDY, lib),
        Allocator(NOCLASSIFY, lib, {"MBUDDY_CLASSIFY": "off"}),
        Allocator(NOHUGE, lib, {"MBUDDY_HUGEPAGES": "never"}, default=False),
    ]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ data

def run(argv, **kw):
    kw.setdefault("check", True)
    return subprocess.run(argv, **kw)


class Data:
    """The data directory of one size: full, quick or tiny. Each piece is
    made once, in a temporary name renamed into place when complete."""

    def __init__(self, root, scale):
        self.root = Path(root).resolve()
        self.scale = scale
        self.dir = self.root if scale == "full" else self.root / scale
        self.dir.mkdir(parents=True, exist_ok=True)
        # One preparation at a time (a second run waits for the first).
        self.lock = open(self.root / ".lock", "w")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"data: waiting for another run preparing {self.root}")
            fcntl.flock(self.lock, fcntl.LOCK_EX)

    def path(self, name):
        return self.dir / name

    def done(self, name):
        return (self.dir / name).exists()

    def kernel_tree(self):
        """The extracted linux-source-6.1 tree (shared by full and quick)."""
        if self.scale == "tiny":
            return TINY_SOURCE
        dest = self.root / "linux-6.1"
        if dest.exists():
            return dest
        if not KERNEL_TARBALL.exists():
            raise SetupError(f"{KERNEL_TARBALL} missing (apt-get install linux-source-6.1)")
        log(f"data: extracting {KERNEL_TARBALL}")
        tmp = self.root / "linux-6.1.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        run(["tar", "-xJf", str(KERNEL_TARBALL), "-C", str(tmp), "--strip-components=1"])
        tmp.rename(dest)
        return dest

    def text_files(self, tops, exts, limit_bytes=None):
        """Files under tops of the source tree, sorted, with the given
        extensions, up to limit_bytes in all."""
        tree = self.kernel_tree()
        out, total = [], 0
        for top in tops:
            base = tree / top if top else tree
            if not base.exists():
                continue
            for d, dirs, files in os.walk(base):
                dirs.sort()
                for f in sorted(files):
                    if not f.endswith(exts):
                        continue
                    p = Path(d) / f
                    if p.is_symlink():
                        continue
                    out.append(p)
                    total += p.stat().st_size
                    if limit_bytes and total >= limit_bytes:
                        return out
        return out

    def make(self, name, builder):
        """self.dir/name made by builder(tmp_path) unless it is there."""
        dest = self.dir / name
        if dest.exists():
            return dest
        tmp = self.dir / (name + ".tmp")
        if tmp.is_dir():
            shutil.rmtree(tmp)
        else:
            tmp.unlink(missing_ok=True)
        log(f"data: making {dest}")
        t0 = time.monotonic()
        builder(tmp)
        tmp.rename(dest)
        log(f"data: {name} made in {time.monotonic() - t0:.0f} s")
        return dest


class SetupError(Exception):
    pass


def pick_scale(scale, full, quick, tiny):
    return {"full": full, "quick": quick, "tiny": tiny}[scale]


# ----- the git repository

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench Author", "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Bench Committer", "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git_units(tree, tops):
    """The import commits: for each top directory its own files, then each
    subdirectory; a directory with more than 300 own files split by the
    initial letter of the names."""
    units = []
    for top in tops:
        base = tree / top
        own = sorted(p.name for p in base.iterdir() if p.is_file() and not p.is_symlink())
        subs = sorted(p.name for p in base.iterdir() if p.is_dir())
        if len(own) > 300:
            for letter in sorted({n[0].lower() for n in own}):
                units.append((f"{top}: files {letter}*",
                              [f"{top}/{n}" for n in own if n[0].lower() == letter]))
        elif own:
            units.append((f"{top}: files", [f"{top}/{n}" for n in own]))
        for s in subs:
            sub = base / s
            sown = sorted(p.name for p in sub.iterdir() if p.is_file() and not p.is_symlink())
            if len(sown) > 300:
                for letter in sorted({n[0].lower() for n in sown}):
                    units.append((f"{top}/{s}: files {letter}*",
                                  [f"{top}/{s}/{n}" for n in sown if n[0].lower() == letter]))
                units.append((f"{top}/{s}: subdirectories",
                              [f"{top}/{s}/{p.name}" for p in sorted(sub.iterdir())
                               if p.is_dir()]))
            else:
                units.append((f"{top}/{s}", [f"{top}/{s}"]))
    return [(msg, paths) for msg, paths in units if paths]


def edit_commit(rng, work, target, pool, i):
    """One commit's edits (see the docstring); returns its message."""
    def lines(p):
        return (work / p).read_text(encoding="utf-8", errors="surrogateescape").splitlines(True)

    def write(p, ls):
        (work / p).write_text("".join(ls), encoding="utf-8", errors="surrogateescape")

    others = rng.sample([p for p in pool if p != target], 3)
    if i % 2 == 0:  # the target gives or takes a block every other commit
        a, b = (target, others[0]) if i % 4 == 0 else (others[0], target)
    else:
        a, b = others[0], others[2]
    third = others[1]
    la, lb = lines(a), lines(b)
    n = rng.randint(10, 60)
    if len(la) > n + 10:
        s = rng.randrange(len(la) - n)
        block = la[s:s + n]
        del la[s:s + n]
        at = rng.randrange(len(lb) + 1)
        lb[at:at] = block
    # delete a few lines of a, re-indent a block of b
    if len(la) > 30:
        s = rng.randrange(len(la) - 5)
        del la[s:s + rng.randint(1, 5)]
    if len(lb) > 30:
        s = rng.randrange(len(lb) - 20)
        for k in range(s, s + rng.randint(5, 20)):
            if lb[k].strip():
                lb[k] = ("    " + lb[k]) if rng.random() < 0.5 else lb[k].replace("\t", "        ", 1)
    write(a, la)
    write(b, lb)
    lt = lines(third)
    if len(lt) > 80:
        n = rng.randint(10, 40)
        s = rng.randrange(len(lt) - n)
        block = lt[s:s + n]
        del lt[s:s + n]
        at = rng.randrange(len(lt) + 1)
        lt[at:at] = block
        write(third, lt)
    return f"edit {i}: move {n} lines {a} -> {b}, shuffle {third}"


def make_git_repo(data, tops, edits, target):
    tree = data.kernel_tree()

    def build(tmp):
        tmp.mkdir()
        env = dict(os.environ, **GIT_ENV, HOME=str(tmp), LC_ALL="C")
        for k in list(env):
            if k.startswith("GIT_") and k not in GIT_ENV:
                del env[k]
        git = ["git", "-C", str(tmp)]
        run([*git, "init", "-q", "-b", "main"], env=env)
        for k, v in (("gc.auto", "0"), ("core.autocrlf", "false"), ("user.name", "Bench"),
                     ("user.email", "bench@example.invalid"), ("commit.gpgsign", "false")):
            run([*git, "config", k, v], env=env)
        units = git_units(tree, tops)
        clock = FIXED_DATE
        for n, (msg, paths) in enumerate(units):
            for p in paths:
                src, dst = tree / p, tmp / p
                dst.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir():
                    shutil.copytree(src, dst, symlinks=True)
                else:
                    shutil.copy2(src, dst, follow_symlinks=False)
            clock += 3600
            cenv = dict(env, GIT_AUTHOR_DATE=f"@{clock} +0000", GIT_COMMITTER_DATE=f"@{clock} +0000")
            run([*git, "add", "-A", "--", *paths], env=cenv)
            run([*git, "commit", "-q", "--no-verify", "-m", f"import {msg}"], env=cenv,
                stdout=subprocess.DEVNULL)
            if n % 50 == 0:
                log(f"data: git import {n}/{len(units)}")
        rng = random.Random(SEED)
        pool = sorted(str(p.relative_to(tmp)) for top in ("mm", "kernel")
                      if (tmp / top).exists()
                      for p in (tmp / top).rglob("*.c") if p.stat().st_size > 8000)
        for i in range(edits):
            msg = edit_commit(rng, tmp, target, pool, i)
            clock += 3600
            cenv = dict(env, GIT_AUTHOR_DATE=f"@{clock} +0000", GIT_COMMITTER_DATE=f"@{clock} +0000")
            run([*git, "commit", "-q", "-a", "--no-verify", "-m", msg], env=cenv,
                stdout=subprocess.DEVNULL)
        log("data: git repack")
        run([*git, "repack", "-a", "-d", "-q"], env=env)
        run([*git, "prune"], env=env)
    return data.make(f"kernel-{edits}e.git", build)


GIT_SCALES = {
    "full": (("include", "kernel", "mm", "lib", "block", "ipc", "init", "io_uring", "fs"), 200),
    "quick": (("kernel", "mm", "lib", "include/linux"), 40),
}


def git_repo(data):
    if data.scale == "tiny":
        raise SetupError("no git repository in --tiny mode")
    tops, edits = GIT_SCALES[data.scale]
    return make_git_repo(data, tops, edits, "mm/page_alloc.c")


# ----- text data

def concat_text(data, name, tops, exts, limit):
    def build(tmp):
        with open(tmp, "wb") as out:
            for p in data.text_files(tops, exts, limit):
                out.write(p.read_bytes())
    return data.make(name, build)


def sqlite_data(data):
    rows = pick_scale(data.scale, 400_000, 100_000, 20_000)
    tops = ("kernel", "mm", "fs", "lib", "include") if data.scale != "tiny" else ("",)
    exts = (".c", ".h") if data.scale != "tiny" else (".py",)
    tree = data.kernel_tree()

    def build_lines(tmp):
        n = 0
        with open(tmp, "w", encoding="utf-8", errors="replace") as out:
            for p in data.text_files(tops, exts):
                rel = str(p.relative_to(tree))
                with open(p, encoding="utf-8", errors="replace") as f:
                    for i, line in enumerate(f, 1):
                        line = line.rstrip("\n").replace("\x1f", " ").replace("\x1e", " ")
                        out.write(f"{rel}\x1f{i}\x1f{line}\x1e")
                        n += 1
                        if n >= rows:
                            return
    lines = data.make(f"sqlite-lines-{rows}.txt", build_lines)

    def build_sql(tmp):
        tmp.write_text(f"""\
.mode ascii
CREATE TABLE lines(path TEXT, lineno INTEGER, text TEXT);
.import '{lines}' lines
CREATE INDEX lines_path ON lines(path, lineno);
CREATE INDEX lines_text ON lines(text);
.mode list
SELECT count(*), count(DISTINCT path), sum(length(text)) FROM lines;
DELETE FROM lines WHERE (rowid * 7) % 5 <> 0;
SELECT count(*), count(DISTINCT path), sum(length(text)) FROM lines;
SELECT count(*) AS n, text FROM lines WHERE length(trim(text)) > 3
  GROUP BY text ORDER BY n DESC, text LIMIT 40;
SELECT path, count(*), max(lineno) FROM lines GROUP BY path ORDER BY 2 DESC, 1 LIMIT 40;
""")
    return data.make(f"sqlite-{rows}.sql", build_sql)


PERL_WORDS = r"""
my (%w, %pair, $prev);
while (<>) {
    for my $t (/([A-Za-z_][A-Za-z0-9_]*)/g) {
        $t = lc $t;
        $w{$t}++;
        $pair{"$prev $t"}++ if defined $prev;
        $prev = $t;
    }
}
my @top = sort { $w{$b} <=> $w{$a} || $a cmp $b } keys %w;
my $n = 0;
$n += $_ for values %w;
printf "%d words, %d distinct, %d pairs\n", $n, scalar(@top), scalar(keys %pair);
printf "%8d %s\n", $w{$_}, $_ for grep { defined } @top[0 .. 199];
my @tp = sort { $pair{$b} <=> $pair{$a} || $a cmp $b } grep { $pair{$_} > 2 } keys %pair;
printf "%8d %s\n", $pair{$_}, $_ for grep { defined } @tp[0 .. 199];
"""


def perl_data(data):
    limit = pick_scale(data.scale, 8 << 20, 2 << 20, 256 << 10)
    name = f"perl-text-{limit >> 10}K.txt"
    if data.scale == "tiny":
        return concat_text(data, name, ("",), (".py",), limit)
    return concat_text(data, name, ("Documentation",), (".rst", ".txt"), limit)


def xz_data(data):
    limit = pick_scale(data.scale, 8 << 20, 2 << 20, 256 << 10)
    tops = ("net",) if data.scale != "tiny" else ("",)
    exts = (".c", ".h") if data.scale != "tiny" else (".py",)
    tree = data.kernel_tree()

    def build(tmp):
        with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
            for p in data.text_files(tops, exts, limit):
                info = tar.gettarinfo(str(p), arcname=str(p.relative_to(tree)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = FIXED_DATE, 0, 0, "", ""
                with open(p, "rb") as f:
                    tar.addfile(info, f)
    return data.make(f"xz-input-{limit >> 10}K.tar", build)


JQ_PROGRAM = r"""
def top($n): group_by(.) | map({key: .[0], n: length}) | sort_by(-.n, .key) | .[:$n];
{
  files: length,
  lines: (map(.lines) | add),
  bytes: (map(.bytes) | add),
  by_dir: (group_by(.dir) | map({dir: .[0].dir, files: length, lines: (map(.lines) | add),
           functions: (map(.functions | length) | add)}) | sort_by(-.lines, .dir) | .[:60]),
  includes: ([.[].includes[]] | top(60)),
  names: ([.[].functions[] | .name] | top(60)),
  longest: ([.[] | .path as $p | .functions[] | {path: $p, name, lines}]
            | sort_by(-.lines, .path, .name) | .[:40]),
  words: ([.[].words[]] | top(60))
}
"""

FUNC_RE = re.compile(r"^(?:[A-Za-z_][\w \t\*]*?[\s\*])?([A-Za-z_]\w*)\s*\([^;]*$")
DEF_RE = re.compile(r"^\s*def\s+(\w+)")
INC_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]|^\s*(?:from|import)\s+([\w.]+)')
WORD_RE = re.compile(r"[A-Za-z_]\w{3,}")


def describe_file(rel, text):
    """The jq input's record of one source file."""
    lines = text.splitlines()
    incs, funcs, words = [], [], {}
    start = None
    for i, line in enumerate(lines):
        m = INC_RE.match(line)
        if m:
            incs.append(m.group(1) or m.group(2))
        m = DEF_RE.match(line) if rel.endswith(".py") else (
            FUNC_RE.match(line) if line[:1].isalpha() else None)
        if m and m.group(1) not in ("if", "for", "while", "switch", "return", "sizeof"):
            if start is not None:
                funcs[-1]["lines"] = i - start
            funcs.append({"name": m.group(1), "line": i + 1, "lines": 0})
            start = i
        for w in WORD_RE.findall(line):
            words[w] = words.get(w, 0) + 1
    if funcs:
        funcs[-1]["lines"] = len(lines) - start
    common = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:30]
    return {"path": rel, "dir": rel.rsplit("/", 1)[0] if "/" in rel else ".",
            "ext": rel.rsplit(".", 1)[-1], "bytes": len(text.encode("utf-8", "replace")),
            "lines": len(lines), "includes": incs, "functions": funcs,
            "words": [w for w, _ in common]}


def jq_data(data):
    limit = pick_scale(data.scale, 10 << 20, 3 << 20, 256 << 10)
    tops = ("drivers",) if data.scale != "tiny" else ("",)
    exts = (".c", ".h") if data.scale != "tiny" else (".py",)
    tree = data.kernel_tree()

    def build(tmp):
        size = 0
        with open(tmp, "w") as out:
            out.write("[")
            first = True
            for p in data.text_files(tops, exts):
                rec = json.dumps(describe_file(str(p.relative_to(tree)),
                                               p.read_text(encoding="utf-8", errors="replace")),
                                 separators=(",", ":"))
                out.write(("" if first else ",\n") + rec)
                first = False
                size += len(rec) + 2
                if size >= limit:
                    break
            out.write("]\n")
    return data.make(f"jq-input-{limit >> 10}K.json", build)


def redis_data(data):
    keys = pick_scale(data.scale, 400_000, 100_000, 5_000)

    def resp(*args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def size(rng, bands):
        u, acc = rng.random(), 0.0
        for share, lo, hi in bands:
            acc += share
            if u < acc:
                return int(lo * (hi / lo) ** rng.random())
        return bands[-1][1]

    small = ((0.70, 16, 128), (0.28, 128, 1024), (0.02, 1024, 8192))
    large = ((0.50, 128, 1024), (0.45, 1024, 4096), (0.05, 4096, 16384))

    def build(tmp):
        tmp.mkdir()
        rng = random.Random(SEED)
        letters = b"abcdefghijklmnopqrstuvwxyz0123456789"
        pad = bytes(rng.choice(letters) for _ in range(20000))
        with open(tmp / "fill.resp", "wb") as f:
            for k in range(keys):
                n = size(rng, small)
                o = rng.randrange(20000 - n)
                f.write(resp("SET", f"key:{k:08d}", pad[o:o + n]))
        victims = [k for k in range(keys) if rng.random() < 0.8]
        with open(tmp / "delete.resp", "wb") as f:
            for i in range(0, len(victims), 16):
                f.write(resp("DEL", *(f"key:{k:08d}" for k in victims[i:i + 16])))
        with open(tmp / "refill.resp", "wb") as f:
            for k in range(keys // 4):
                n = size(rng, large)
                o = rng.randrange(20000 - n)
                f.write(resp("SET", f"new:{k:08d}", pad[o:o + n]))
    return data.make(f"redis-{keys}", build)


# ------------------------------------------------------------- programs

class Program:
    """One program: how to prepare its data, its command, how to check its
    output. measured: what the process tree is, for the report."""

    def __init__(self, name, title, needs, prepare, argv, measured, env=None, cwd=None,
                 normalize=None, output=None, driver=None, glibc_preload=None, scales=None):
        self.name, self.title, self.needs = name, title, needs
        self.prepare, self.argv, self.measured = prepare, argv, measured
        self.env = env or {}
        self.cwd = cwd
        self.normalize = normalize
        self.output = output
        self.driver = driver
        self.glibc_preload = glibc_preload
        self.scales = scales or ("full", "quick")


def python_normalize(out):
    """regrtest's summary without its timings."""
    keep = []
    for line in out.decode("utf-8", "replace").splitlines():
        if re.search(r"duration|load avg|\d+(\.\d+)? ?(sec|ms)\b|^\s*$", line):
            continue
        keep.append(line)
    return "\n".join(keep).encode()


def git_argv(*args):
    return lambda ctx: ["git", "-C", str(ctx["prepared"]), "-c", "core.pager=cat",
                        "-c", "gc.auto=0", "-c", "pack.threads=1", *args]


PY_TESTS = ["test_json", "test_re", "test_collections", "test_dict", "test_ordered_dict",
            "test_xml_etree"]
PY_TESTS_QUICK = ["test_json", "test_collections"]
PY_TESTS_TINY = ["test_bool"]
GXX_FULL = ("googlemock/src/gmock-matchers.cc", "-O1")
GXX_QUICK = ("googletest/src/gtest-printers.cc", "-O0")


def gxx_argv(ctx):
    src, opt = GXX_FULL if ctx["scale"] == "full" else GXX_QUICK
    inc = []
    for part in ("googletest", "googlemock"):
        inc += ["-I", str(GOOGLETEST / part / "include"), "-I", str(GOOGLETEST / part)]
    return ["g++", opt, "-frandom-seed=19", *inc, "-c", str(GOOGLETEST / src),
            "-o", str(ctx["rundir"] / "out.o")]


def gxx_prepare(data):
    if not GOOGLETEST.exists():
        raise SetupError(f"{GOOGLETEST} missing (apt-get install googletest)")
    return GOOGLETEST


def redis_argv(ctx):
    return ["redis-server", "--port", "0", "--unixsocket", str(ctx["rundir"] / "redis.sock"),
            "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
            "--dir", str(ctx["rundir"]), "--enable-debug-command", "local",
            "--daemonize", "no", "--logfile", str(ctx["rundir"] / "redis.log")]


def redis_driver(ctx, proc, out, deadline):
    """Fill, delete, refill through redis-cli (not preloaded, not
    measured), write the digest and key count to out, shut down."""
    sock = str(ctx["rundir"] / "redis.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB_PREFIXES)}
    env["LC_ALL"] = "C"

    def cli(*args, stdin=None):
        left = max(1.0, deadline - time.monotonic())
        with open(stdin, "rb") if stdin else open(os.devnull, "rb") as f:
            return subprocess.run(["redis-cli", "-s", sock, *args], stdin=f, env=env,
                                  capture_output=True, timeout=left)

    while True:
        if proc.poll() is not None:
            raise RuntimeError("redis-server exited before it answered")
        if time.monotonic() > deadline:
            raise TimeoutError
        if os.path.exists(sock) and cli("PING").stdout.strip() == b"PONG":
            break
        time.sleep(0.02)
    for name in ("fill.resp", "delete.resp", "refill.resp"):
        r = cli("--pipe", stdin=ctx["prepared"] / name)
        if r.returncode != 0 or b"errors: 0," not in r.stdout:
            raise RuntimeError(f"redis-cli --pipe {name}: {r.stdout[-200:]!r} {r.stderr[-200:]!r}")
    for args in (("DEBUG", "DIGEST"), ("DBSIZE",)):
        r = cli(*args)
        out.write(r.stdout)
    cli("SHUTDOWN", "NOSAVE")


PROGRAMS = [
    Program("git-blame", "git blame -w -C of mm/page_alloc.c", ("git",), git_repo,
            git_argv("blame", "-w", "-C", "HEAD", "--", "mm/page_alloc.c"),
            "git"),
    Program("git-log", "git log -p --stat -n 150", ("git",), git_repo,
            lambda ctx: git_argv("log", "-p", "--stat", "-n",
                                 "150" if ctx["scale"] == "full" else "40")(ctx),
            "git"),
    Program("git-pack", "git pack-objects of the whole repository, deltas recomputed", ("git",),
            git_repo,
            git_argv("pack-objects", "--all", "--revs", "--stdout", "--no-reuse-delta",
                     "--no-reuse-object", "--threads=1", "--window=10", "-q"),
            "git", cwd=None),
    Program("git-grep", "git grep -n -I -E, three patterns, tree of HEAD~100", ("git",), git_repo,
            git_argv("grep", "-n", "-I", "-E", "-e", r"spin_lock(_irq)?\(&[a-z_]+->lock\)",
                     "-e", r"kmalloc\([^,]+, GFP_ATOMIC\)", "-e", r"\bstruct folio \*[a-z]+ =",
                     "HEAD~100"),
            "git"),
    Program("python-tests", "python3 -m test (CPython's tests), PYTHONMALLOC=malloc",
            (str(SYSTEM_PYTHON),),
            lambda data: Path(SYSTEM_PYTHON),
            lambda ctx: [str(SYSTEM_PYTHON), "-m", "test", "-q",
                         *pick_scale(ctx["scale"], PY_TESTS, PY_TESTS_QUICK, PY_TESTS_TINY)],
            "python3", env={"PYTHONMALLOC": "malloc", "PYTHONDONTWRITEBYTECODE": "1",
                            "PYTHONHASHSEED": "0"},
            normalize=python_normalize, scales=("full", "quick", "tiny")),
    Program("sqlite", "sqlite3 :memory: import, 2 indexes, 80% deleted", ("sqlite3",),
            sqlite_data, lambda ctx: ["sqlite3", "-batch", ":memory:",
                                      f".read '{ctx['prepared']}'"],
            "sqlite3", scales=("full", "quick", "tiny")),
    Program("perl-words", "perl word and word-pair counts", ("perl",), perl_data,
            lambda ctx: ["perl", "-e", PERL_WORDS, str(ctx["prepared"])],
            "perl", scales=("full", "quick", "tiny")),
    Program("redis", "redis-server: fill, delete 80%, refill", ("redis-server", "redis-cli"),
            redis_data, redis_argv, "redis-server only (clients not preloaded)",
            driver=redis_driver, glibc_preload=LIBC, scales=("full", "quick", "tiny")),
    Program("gxx", "g++ -O1 -c gmock-matchers.cc", ("g++",), gxx_prepare, gxx_argv,
            "g++, cc1plus and as", output="out.o"),
    Program("xz", "xz -6 | xz -d of kernel sources", ("xz", "sh"), xz_data,
            lambda ctx: ["sh", "-c", 'xz -6 -T1 -c "$1" | xz -d -T1 -c', "sh",
                         str(ctx["prepared"])],
            "sh and two xz", scales=("full", "quick", "tiny")),
    Program("jq", "jq grouping and sorting source-file records", ("jq",), jq_data,
            lambda ctx: ["jq", "-c", "-S", JQ_PROGRAM, str(ctx["prepared"])],
            "jq", scales=("full", "quick", "tiny")),
]


def extra_program(spec):
    name, sep, cmd = spec.partition("=")
    if not sep or not name or not cmd:
        raise SetupError(f"--program wants NAME=COMMAND, not {spec!r}")
    return Program(name, f"sh -c '{cmd}'", ("sh",), lambda data: "(none)",
                   lambda ctx: ["sh", "-c", cmd], "sh and its children",
                   scales=("full", "quick", "tiny"))


# -------------------------------------------------------------- running

def build_sampler(build_dir):
    """treerss from treerss.c, statically linked; rebuilt when older."""
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir.resolve() / "treerss"
    src = HERE / "treerss.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        cc = os.environ.get("CC", "cc")
        r = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-static", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SetupError(f"cannot build treerss: {r.stderr.strip()}")
    return exe


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB_PREFIXES)}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def parse_sampler(path):
    text = path.read_text()
    lines = text.splitlines()
    head = dict(tok.split("=", 1) for tok in lines[0].split())
    procs = []
    for line in lines[1:]:
        if line.startswith("proc "):
            f = line[5:].split(" ", 2)
            procs.append({"pid": int(f[0].split("=")[1]), "peak_kib": int(f[1].split("=")[1]),
                          "comm": f[2].split("=", 1)[1]})
    return {k: int(v) for k, v in head.items()}, procs


def served_check(rundir, main_proc):
    """libmbuddy's reports in rundir: did it serve the process that did the
    work (main_proc, the largest), and which processes did it not serve."""
    reports = {}
    for f in rundir.glob("mb.*.json"):
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            reports[f.name] = {"error": str(e)}
            continue
        reports[int(r.get("pid", -1))] = r
    res = {"reports": len(reports), "main_pid": main_proc["pid"] if main_proc else None,
           "main_comm": main_proc["comm"] if main_proc else None,
           "main_served": False, "main_objects": 0, "not_served": [], "error": None}
    for pid, r in reports.items():
        if isinstance(pid, int) and r.get("served") is False:
            res["not_served"].append({"pid": pid, "program": r.get("program"),
                                      "foreign_symbol": r.get("foreign_symbol"),
                                      "foreign_object": r.get("foreign_object"),
                                      "plt": canonical_plt(r.get("foreign_object"),
                                                           r.get("foreign_symbol"))})
    if main_proc is None:
        res["error"] = "no process was sampled"
        return res
    r = reports.get(main_proc["pid"])
    if r is None:
        res["error"] = (f"not served: no libmbuddy report from {main_proc['comm']} "
                        f"(pid {main_proc['pid']})")
        return res
    objects = int(r.get("counters", {}).get("mallocs", 0))
    res["main_served"] = r.get("served") is True
    res["main_objects"] = objects
    if (not res["main_served"] and objects > 0
            and canonical_plt(r.get("foreign_object"), r.get("foreign_symbol"))):
        # The executable is not position-independent and takes the address
        # of malloc: dlsym finds its PLT entry, which jumps to the malloc
        # the dynamic linker bound, the preloaded one. Served in fact.
        res["main_served"] = True
        res["plt_note"] = (f"{r.get('program')}: the report says served false, but "
                           f"{r.get('foreign_symbol')} in {r.get('foreign_object')} is an "
                           "undefined symbol with a canonical PLT address (a non-PIE "
                           "executable), bound to libmbuddy; objects were counted")
    if not res["main_served"]:
        res["error"] = (f"not served: {main_proc['comm']} (pid {main_proc['pid']}) reports "
                        f"served false ({r.get('foreign_symbol')} from {r.get('foreign_object')})")
    elif objects <= 0:
        res["error"] = f"not served: {main_proc['comm']} (pid {main_proc['pid']}) counted no objects"
    return res


_PLT_CACHE = {}


def canonical_plt(obj, sym):
    """True if sym is undefined in the ELF object obj but has an address
    there (the canonical PLT entry of a non-PIE executable)."""
    if not obj or not sym:
        return False
    key = (obj, sym)
    if key not in _PLT_CACHE:
        found = False
        try:
            out = subprocess.run(["readelf", "-W", "--dyn-syms", obj], capture_output=True,
                                 text=True, timeout=30).stdout
            for line in out.splitlines():
                f = line.split()
                if (len(f) >= 8 and f[6] == "UND" and f[7].split("@")[0] == sym
                        and int(f[1], 16) != 0):
                    found = True
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
        _PLT_CACHE[key] = found
    return _PLT_CACHE[key]


def hash_output(prog, rundir):
    path = rundir / (prog.output or "stdout")
    h = hashlib.sha256()
    if not path.exists():
        return None, 0
    if prog.normalize:
        data = prog.normalize(path.read_bytes())
        h.update(data)
        return h.hexdigest(), path.stat().st_size
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest(), path.stat().st_size


def measure(prog, alloc, ctx, timeout, check=False):
    """One run of prog under alloc; a dict for the JSON. A check run (of a
    libmbuddy column) asks for libmbuddy's reports and checks that it
    served the program."""
    rundir = Path(tempfile.mkdtemp(prefix=f"{prog.name}.{alloc.name}.", dir=ctx["scratch"]))
    ctx = dict(ctx, rundir=rundir)
    env = clean_env(prog.env)
    env["TMPDIR"] = str(rundir)
    env["HOME"] = str(rundir)
    preload = alloc.preload if (alloc.preload or not prog.glibc_preload) else prog.glibc_preload
    if preload:
        env["LD_PRELOAD"] = str(preload)
    env.update(alloc.env)
    if check:
        env["MBUDDY_STATS"] = str(rundir / "mb.%p.json")
        env["MBUDDY_STATS_FORMAT"] = "json"
    argv = prog.argv(ctx)
    res = {"program": prog.name, "allocator": alloc.name, "wall": None, "peak_kib": None,
           "avg_kib": None, "maxrss_kib": None, "cpu": None, "samples": None, "rc": None,
           "hash": None, "out_bytes": None, "main": None, "served": None, "error": None,
           "check": check}
    report = rundir / "treerss.txt"
    t0 = time.monotonic()
    deadline = t0 + timeout
    with open(rundir / "stdout", "wb") as out, open(rundir / "stderr", "wb") as err:
        proc = subprocess.Popen([str(ctx["sampler"]), str(report), str(SAMPLE_MS), *argv],
                                env=env, cwd=str(prog.cwd or rundir), stdout=err if prog.driver
                                else out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            if prog.driver:
                prog.driver(ctx, proc, out, deadline)
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (subprocess.TimeoutExpired, TimeoutError):
            res["error"] = f"timed out after {timeout:.0f} s"
        except Exception as e:  # noqa: BLE001  (the driver's failure is the run's)
            res["error"] = f"driver: {e}"
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
    res["rc"] = proc.returncode
    if report.exists() and not res["error"]:
        head, procs = parse_sampler(report)
        res["wall"] = head["wall_ns"] / 1e9
        res["cpu"] = (head["utime_us"] + head["stime_us"]) / 1e6
        res["maxrss_kib"] = head["maxrss_kib"]
        res["peak_kib"] = max(head["peak_kib"], head["maxrss_kib"])
        res["avg_kib"] = head["avg_kib"]
        res["samples"] = head["samples"]
        main_proc = max(procs, key=lambda p: p["peak_kib"]) if procs else None
        res["main"] = main_proc["comm"] if main_proc else None
        res["processes"] = len(procs)
        if proc.returncode != 0:
            tail = (rundir / "stderr").read_bytes()[-400:].decode("utf-8", "replace").strip()
            res["error"] = f"exit status {proc.returncode}: {tail}"
        res["hash"], res["out_bytes"] = hash_output(prog, rundir)
        if check:
            res["served"] = served_check(rundir, main_proc)
            if res["served"]["error"] and not res["error"]:
                res["error"] = res["served"]["error"]
    elif not res["error"]:
        tail = (rundir / "stderr").read_bytes()[-400:].decode("utf-8", "replace").strip()
        res["error"] = f"no measurement (exit status {proc.returncode}): {tail}"
    if ctx.get("keep"):
        res["rundir"] = str(rundir)
    else:
        shutil.rmtree(rundir, ignore_errors=True)
    return res


def rotate(seq, k):
    """Round-robin order that changes per repetition, so no allocator always
    runs first or right after the same neighbour."""
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


def run_all(args, programs, allocs, ctx):
    """Every repetition runs every program under every allocator before
    the next one starts. In the first repetition each libmbuddy column also
    has a check run, right after its measured one: the same command with
    MBUDDY_STATS, whose report tells whether libmbuddy served the program.
    It is kept out of the medians because writing the report costs
    libmbuddy time (and once cost it 13-15 MiB of peak RSS under
    classification), which would bias both the comparison with the peers
    and classified against off."""
    runs = []
    todo = []
    for rep in range(args.reps):
        for p in programs:
            for a in rotate(allocs, rep):
                todo.append((rep, p, a, False))
                if a.mbuddy and rep == 0 and not args.no_check_runs:
                    todo.append((rep, p, a, True))
    fastest = {}
    timed_out = {}
    for i, (rep, prog, alloc, check) in enumerate(todo, 1):
        key = (prog.name, alloc.name)
        if key in timed_out:
            res = {"program": prog.name, "allocator": alloc.name, "wall": None,
                   "peak_kib": None, "avg_kib": None, "hash": None, "check": check,
                   "error": f"not run: {timed_out[key]} in an earlier repetition"}
        else:
            limit = args.timeout
            if prog.name in fastest:
                limit = min(limit, max(ADAPTIVE_FLOOR, ADAPTIVE_FACTOR * fastest[prog.name]))
            res = measure(prog, alloc, dict(ctx, prepared=ctx["prepared"][prog.name]), limit,
                          check=check)
            if res["error"] and res["error"].startswith("timed out"):
                timed_out[key] = res["error"]
            elif res["wall"] is not None and res["rc"] == 0 and not check:
                fastest[prog.name] = min(fastest.get(prog.name, res["wall"]), res["wall"])
        res["rep"] = rep
        runs.append(res)
        status = res["error"] or (f"{res['wall']:.2f} s, peak {res['peak_kib'] / 1024:.1f} MiB, "
                                  f"avg {res['avg_kib'] / 1024:.1f} MiB")
        if check and not res["error"]:
            sv = res["served"]
            status = (f"check run: {sv['main_comm']} served, {sv['main_objects']} objects, "
                      f"{sv['reports']} report(s)" + (" (via PLT)" if sv.get("plt_note") else ""))
        log(f"[{i}/{len(todo)}] {prog.name:13} {alloc.name:21} {status}")
    check_outputs(runs)
    return runs


def check_outputs(runs):
    """A run whose output hash differs from glibc's (or from the most
    common one, without glibc) fails loudly."""
    by_prog = {}
    for r in runs:
        by_prog.setdefault(r["program"], []).append(r)
    for prog, rs in by_prog.items():
        good = [r for r in rs if r.get("hash") and r.get("rc") == 0]
        ref = next((r["hash"] for r in good if r["allocator"] == "glibc"), None)
        source = "glibc's"
        if ref is None and good:
            counts = {}
            for r in good:
                counts[r["hash"]] = counts.get(r["hash"], 0) + 1
            ref = max(counts, key=counts.get)
            source = "the most common"
        for r in rs:
            r["reference_hash"] = ref
            if r.get("hash") and ref and r["hash"] != ref:
                msg = (f"OUTPUT DIFFERS from {source} (sha256 {r['hash'][:12]} vs {ref[:12]}, "
                       f"{r.get('out_bytes')} bytes)")
                r["error"] = f"{msg}; {r['error']}" if r.get("error") else msg
                log(f"FAIL: {prog} under {r['allocator']} (rep {r['rep']}): {msg}")


# ------------------------------------------------------------- reporting

METRICS = (("peak_kib", "Peak RSS (MiB)", "MiB"), ("avg_kib", "Time-averaged RSS (MiB)", "MiB"),
           ("wall", "Wall time (s)", "s"))


def short_error(err):
    for pat, label in (("OUTPUT DIFFERS", "OUTPUT DIFFERS"), ("not served", "NOT SERVED"),
                       ("timed out", "TIMED OUT"), ("not run", "TIMED OUT"),
                       ("exit status", "FAILED (exit)"), ("driver", "FAILED (driver)")):
        if pat in err:
            return label
    return "FAILED"


def summarize(data):
    """Medians per program and allocator (None where a run failed, with
    the failure's label), and the ratios."""
    allocs = [a["name"] for a in data["allocators"]]
    progs = [p["name"] for p in data["programs"]]
    cells = {}
    for p in progs:
        for a in allocs:
            every = [r for r in data["runs"] if r["program"] == p and r["allocator"] == a]
            rs = [r for r in every if not r.get("check")]
            bad = [r for r in every if r.get("error")]
            c = {"runs": len(rs), "failed": len(bad)}
            if not rs:
                c["label"] = "not run"
            elif bad:
                c["label"] = short_error(bad[0]["error"]) + (
                    f" ({len(bad)}/{len(every)})" if len(every) > 1 else "")
            else:
                for key, _, _ in METRICS:
                    c[key] = statistics.median(r[key] for r in rs)
                c["main"] = rs[0].get("main")
            cells[f"{p}|{a}"] = c
    ratios = {}
    for key, _, _ in METRICS:
        rows = {}
        for p in progs:
            peers = [(cells[f"{p}|{a}"].get(key), a) for a in PEERS if a in allocs]
            peers = [(v, a) for v, a in peers if v is not None]
            best = min(peers) if peers else None
            mb = cells.get(f"{p}|{MBUDDY}", {}).get(key)
            off = cells.get(f"{p}|{NOCLASSIFY}", {}).get(key)
            nohuge = cells.get(f"{p}|{NOHUGE}", {}).get(key)
            row = {"best_peer": best[1] if best else None, "best": best[0] if best else None,
                   "peers_counted": len(peers),
                   "mbuddy_vs_best": mb / best[0] if (mb is not None and best and best[0]) else None,
                   "off_vs_best": off / best[0] if (off is not None and best and best[0]) else None,
                   "classified_vs_off": mb / off if (mb is not None and off) else None,
                   "huge_vs_nohuge": mb / nohuge if (mb is not None and nohuge) else None}
            rows[p] = row
        agg = {}
        for col in ("mbuddy_vs_best", "off_vs_best", "classified_vs_off", "huge_vs_nohuge"):
            vals = [(rows[p][col], p) for p in progs if rows[p][col] is not None]
            agg[col] = {"geomean": math.exp(sum(math.log(v) for v, _ in vals) / len(vals))
                        if vals else None,
                        "worst": max(vals) if vals else None, "n": len(vals)}
        ratios[key] = {"rows": rows, "aggregate": agg}
    return {"cells": cells, "ratios": ratios}


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "MiB":
        return f"{v / 1024:.1f}"
    return f"{v:.2f}"


def fmt_ratio(v):
    return "n/a" if v is None else f"{v:.2f}x"


def write_markdown(data, summary, path):
    meta = data["meta"]
    allocs = [a["name"] for a in data["allocators"]]
    progs = data["programs"]
    L = []
    L.append("# Real programs under each allocator\n")
    L.append(f"{meta['date']}, `{meta['command']}`: {meta['reps']} interleaved repetition(s), "
             f"medians; {'quick' if meta['scale'] == 'quick' else meta['scale']} inputs. "
             f"Machine: {meta['cpu']}, {meta['nproc']} CPUs, {meta['memory']}, "
             f"load average {meta['loadavg_start']:.1f} at the start and "
             f"{meta.get('loadavg_end', 0):.1f} at the end. Library: `{meta['lib']}`"
             f"{' (its source tree at ' + meta['lib_commit'] + ')' if meta.get('lib_commit') else ''}. "
             f"Runs took {meta.get('total_sec', 0) / 60:.1f} min "
             f"(data preparation {meta.get('prepare_sec', 0) / 60:.1f} min, not timed).\n")
    L.append("RSS is the summed resident set of the process tree (/proc/PID/statm every "
             f"{SAMPLE_MS} ms, children between fork and exec left out; peak: the highest "
             "sum, or the exact peak of the largest process if higher); lower is better "
             "everywhere. A failed run shows as "
             "such: every run of a cell must pass (exit status, identical output, "
             "libmbuddy serving the process) for it to have a number.\n")
    L.append("| program | what | process tree measured | largest process |")
    L.append("|---|---|---|---|")
    for p in progs:
        title = p["title"].replace("|", "\\|")
        main = next((summary["cells"][f"{p['name']}|{a}"].get("main") for a in allocs
                     if summary["cells"][f"{p['name']}|{a}"].get("main")), "?")
        L.append(f"| {p['name']} | {title} | {p['measured']} | {main} |")
    L.append("")
    for key, title, unit in METRICS:
        L.append(f"## {title}, median\n")
        L.append("| program | " + " | ".join(allocs) + " |")
        L.append("|---|" + "---:|" * len(allocs))
        for p in progs:
            row = []
            for a in allocs:
                c = summary["cells"][f"{p['name']}|{a}"]
                row.append(c["label"] if "label" in c else fmt(c[key], unit))
            L.append(f"| {p['name']} | " + " | ".join(row) + " |")
        L.append("")
    L.append("## Ratios\n")
    L.append("Ratios of medians; below 1.00x libmbuddy uses less (or is faster). "
             "Best peer: the lowest of glibc, jemalloc, mimalloc and tcmalloc (named). "
             "Classified / off: libmbuddy over libmbuddy-noclassify "
             "(MBUDDY_CLASSIFY=off), what classifying call sites costs (>1) or saves (<1)."
             + (" Huge / never: libmbuddy over libmbuddy-nohuge (MBUDDY_HUGEPAGES=never), "
                "what huge pages cost (>1) or save (<1)." if NOHUGE in allocs else "") + "\n")
    cols = ["mbuddy_vs_best", "off_vs_best", "classified_vs_off"]
    heads = ["libmbuddy / best peer", "noclassify / best peer", "classified / off"]
    if NOHUGE in allocs:
        cols.append("huge_vs_nohuge")
        heads.append("huge / never")
    # A ratio no run could give (no peer, no noclassify run) is no column.
    keep = [i for i, c in enumerate(cols)
            if any(summary["ratios"][k]["rows"][p["name"]].get(c) is not None
                   for k, _, _ in METRICS for p in progs)]
    cols, heads = [cols[i] for i in keep] or cols[:1], [heads[i] for i in keep] or heads[:1]
    for key, title, unit in METRICS:
        rt = summary["ratios"][key]
        L.append(f"### {title}: ratios\n")
        L.append("| program | best peer | " + " | ".join(heads) + " |")
        L.append("|---|---|" + "---:|" * len(cols))
        for p in progs:
            r = rt["rows"][p["name"]]
            best = (f"{r['best_peer']} {fmt(r['best'], unit)}" if r["best_peer"] else "n/a")
            if r["best_peer"] and r["peers_counted"] < len([a for a in PEERS if a in allocs]):
                best += f" (of {r['peers_counted']} peers)"
            L.append(f"| {p['name']} | {best} | " + " | ".join(fmt_ratio(r.get(c)) for c in cols) + " |")
        agg = rt["aggregate"]
        L.append("| **geomean** | | " + " | ".join(
            fmt_ratio(agg[c]["geomean"]) if c in agg else "n/a" for c in cols) + " |")
        L.append("| **worst** | | " + " | ".join(
            (f"{agg[c]['worst'][0]:.2f}x ({agg[c]['worst'][1]})" if c in agg and agg[c]["worst"] else "n/a")
            for c in cols) + " |")
        L.append("")
    L.append("## Checks\n")
    L.append("Output: SHA-256 of each run's output (the object file for gxx; python's "
             "summary without timings), compared with glibc's. Served: in a check run of "
             "libmbuddy and of libmbuddy-noclassify per program (the first repetition's, "
             "not in the medians: the report costs libmbuddy memory), the largest "
             "process's own report (MBUDDY_STATS=DIR/mb.%p.json, MBUDDY_STATS_FORMAT=json) "
             "says served true with objects counted.\n")
    L.append("| program | output (glibc's sha256) | runs with the same output | "
             "check runs served | objects counted (median, largest process) | "
             "processes not served |")
    L.append("|---|---|---:|---:|---:|---|")
    for p in progs:
        rs = [r for r in data["runs"] if r["program"] == p["name"]]
        ref = next((r.get("reference_hash") for r in rs if r.get("reference_hash")), None)
        same = sum(1 for r in rs if r.get("hash") and r["hash"] == ref)
        mrs = [r for r in rs if r.get("check")]
        served = [r for r in mrs if r.get("served") and not r["served"].get("error")]
        objs = [r["served"]["main_objects"] for r in served]
        ns = sorted({f"{n['program']} ({n.get('foreign_symbol') or '?'}"
                     + (": a PLT entry, served in fact)" if n.get("plt") else ")")
                     for r in mrs if r.get("served") for n in r["served"]["not_served"]})
        L.append(f"| {p['name']} | {ref[:16] if ref else 'n/a'} | {same}/{len(rs)} | "
                 f"{len(served)}/{len(mrs)} | "
                 f"{int(statistics.median(objs)) if objs else 'n/a'} | "
                 f"{', '.join(ns) if ns else 'none'} |")
    L.append("")
    plt = sorted({r["served"]["plt_note"] for r in data["runs"]
                  if r.get("served") and r["served"].get("plt_note")})
    if plt:
        L.append("Served, though libmbuddy's report says otherwise:\n")
        L += [f"* {n}" for n in plt]
        L.append("")
    failed = [r for r in data["runs"] if r.get("error")]
    L.append(f"## Failures: {len(failed)}\n")
    for r in failed:
        L.append(f"* {r['program']} under {r['allocator']}, repetition {r['rep'] + 1}: "
                 f"{r['error']}")
    if not failed:
        L.append("None: every run exited 0, had glibc's output and, under libmbuddy, was served.")
    L.append("")
    if meta.get("notes"):
        L.append("## Notes\n")
        L += [f"* {n}" for n in meta["notes"]]
        L.append("")
    L.append("## Commands\n")
    L.append(f"In {meta.get('data')}; RUNDIR is each run's own empty directory.\n")
    L += [f"* {p['name']}: `{p.get('command', '')}`".replace("\n", " ") for p in progs]
    L.append("")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(L))


def report(args, data):
    summary = summarize(data)
    data["summary"] = summary
    if not args.from_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(data, indent=1, sort_keys=True))
    write_markdown(data, summary, args.out_md)
    log(f"report: {args.out_md}" + ("" if args.from_json else f", raw runs: {args.out_json}"))


# ------------------------------------------------------------------ main

def show_command(argv):
    """argv as a shell line, with the perl and jq programs named, not shown."""
    scripts = {PERL_WORDS: "\"$PERL_WORDS\"", JQ_PROGRAM: "\"$JQ_PROGRAM\""}
    return " ".join(scripts.get(a, shlex.quote(str(a))) for a in argv)


def machine_info():
    cpu, mem = "unknown", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = f"{int(Path('/proc/meminfo').read_text().split()[1]) / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "memory": mem, "nproc": len(os.sched_getaffinity(0)),
            "kernel": os.uname().release, "loadavg_start": os.getloadavg()[0]}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring for the programs and checks.")
    ap.add_argument("--lib", default=".libs/libmbuddy.so", help="libmbuddy.so to measure")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3, --quick 1)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, smaller inputs")
    ap.add_argument("--tiny", action="store_true",
                    help="tiny inputs from Python's library (the machinery test)")
    ap.add_argument("--only", help="programs, comma-separated")
    ap.add_argument("--allocators", help="allocators, comma-separated (default all)")
    ap.add_argument("--data", default="bench-results/programs-data", help="data cache directory")
    ap.add_argument("--build-dir", default=None, help="where treerss is built (default DATA/bin)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run at most")
    ap.add_argument("--out-md", default="bench-results/programs.md")
    ap.add_argument("--out-json", default="bench-results/programs.json")
    ap.add_argument("--from-json", help="redo the report from this JSON, run nothing")
    ap.add_argument("--prepare-only", action="store_true", help="prepare the data and stop")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory")
    ap.add_argument("--no-check-runs", action="store_true",
                    help="no served check runs (libmbuddy's reports are not asked for)")
    ap.add_argument("--list", action="store_true", help="list the programs and allocators")
    ap.add_argument("--program", action="append", default=[], metavar="NAME=COMMAND",
                    help="an extra program: a shell command run by sh -c in an empty "
                    "directory, measured with its children (to try a candidate; repeatable)")
    args = ap.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if (args.quick or args.tiny) else 3
    return args


def pick(items, spec, what):
    if not spec:
        return [i for i in items if getattr(i, "default", True)]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    known = {i.name: i for i in items}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SetupError(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[n] for n in names]


def lib_commit(lib):
    """git describe of the source tree of the build directory that holds
    lib (its config.status names it), or None. The tree, not necessarily
    what the library was built from: rebuild before measuring."""
    try:
        build = lib.parent.parent
        status = (build / "config.status").read_text(errors="replace")
        m = re.search(r"^srcdir='?([^'\n]*)'?$", status, re.M)
        if not m:
            return None
        src = Path(m.group(1))
        src = src if src.is_absolute() else (build / src).resolve()
        r = subprocess.run(["git", "-C", str(src), "describe", "--always", "--dirty"],
                           capture_output=True, text=True)
        return r.stdout.strip() or None
    except OSError:
        return None


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        report(args, json.loads(Path(args.from_json).read_text()))
        return 0
    scale = "tiny" if args.tiny else "quick" if args.quick else "full"
    lib = Path(args.lib).resolve()
    try:
        known = PROGRAMS + [extra_program(spec) for spec in args.program]
        programs = pick([p for p in known if scale in p.scales] if not args.only else known,
                        args.only, "programs")
        allocs = pick(allocators(lib), args.allocators, "allocators")
    except SetupError as e:
        log(f"error: {e}")
        return 2
    if args.list:
        for p in PROGRAMS:
            log(f"program   {p.name:13} {p.title} [{', '.join(p.scales)}]")
        for a in allocators(lib):
            log(f"allocator {a.name:21} {a.preload or '(none)'} {a.env or ''}")
        return 0
    notes = []
    for p in list(programs):
        missing = [n for n in p.needs if not shutil.which(n)]
        reason = (f"{', '.join(missing)} not installed" if missing else
                  f"not in --{scale} mode" if scale not in p.scales else None)
        if reason:
            msg = f"program {p.name} skipped: {reason}"
            log(msg)
            notes.append(msg)
            programs.remove(p)
    for a in list(allocs):
        if a.preload and not Path(a.preload).exists():
            msg = f"allocator {a.name} skipped: {a.preload} not found"
            log(msg)
            notes.append(msg)
            allocs.remove(a)
    if not programs or not allocs:
        log("error: nothing to run")
        return 2
    data_root = Path(args.data)
    data = Data(data_root, scale)
    t0 = time.monotonic()
    prepared = {}
    try:
        sampler = build_sampler(Path(args.build_dir) if args.build_dir else data_root / "bin")
        for p in list(programs):
            try:
                prepared[p.name] = p.prepare(data)
            except (SetupError, subprocess.CalledProcessError, OSError) as e:
                msg = f"program {p.name} skipped: its data could not be prepared: {e}"
                log(msg)
                notes.append(msg)
                programs.remove(p)
    except SetupError as e:
        log(f"error: {e}")
        return 2
    prepare_sec = time.monotonic() - t0
    if args.prepare_only:
        log(f"data ready in {data.dir} ({prepare_sec:.0f} s)")
        return 0
    if not programs:
        log("error: no program could be prepared")
        return 2
    meta = machine_info()
    meta.update(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                command=" ".join(["python3", "scripts/bench_programs.py",
                                  *(argv if argv is not None else sys.argv[1:])]),
                reps=args.reps, scale=scale, lib=str(lib), lib_commit=lib_commit(lib),
                sample_ms=SAMPLE_MS, prepare_sec=prepare_sec, notes=notes,
                data=str(data.dir))
    t1 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mbuddy-programs-") as scratch:
        ctx = {"scale": scale, "sampler": sampler, "scratch": Path(scratch),
               "prepared": prepared, "keep": args.keep}
        if args.keep:
            ctx["scratch"] = Path(tempfile.mkdtemp(prefix="mbuddy-programs-keep-"))
            log(f"run directories kept under {ctx['scratch']}")
        runs = run_all(args, programs, allocs, ctx)
    meta["total_sec"] = time.monotonic() - t1
    meta["loadavg_end"] = os.getloadavg()[0]
    result = {
        "meta": meta,
        "allocators": [{"name": a.name, "preload": str(a.preload) if a.preload else None,
                        "env": a.env} for a in allocs],
        "programs": [{"name": p.name, "title": p.title, "measured": p.measured,
                      "command": show_command(p.argv(
                          {"scale": scale, "prepared": prepared[p.name],
                           "rundir": Path("RUNDIR")})),
                      "data": str(prepared[p.name])} for p in programs],
        "runs": runs,
    }
    report(args, result)
    failed = sum(1 for r in runs if r.get("error"))
    log(f"done in {meta['total_sec'] / 60:.1f} min, {len(runs)} runs, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
