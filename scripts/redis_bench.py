#!/usr/bin/env python3
"""A real server: Redis filled, then mostly deleted, under each allocator.

Debian's redis-server (linked with jemalloc) is started on its own port on
127.0.0.1 with `--save '' --appendonly no`, once per allocator:
  glibc                 LD_PRELOAD=libc.so.6, so that malloc and free resolve
                        to glibc's before the jemalloc the binary links
  jemalloc              the binary as Debian ships it
  mimalloc, tcmalloc    LD_PRELOAD of the peer
  libmbuddy             LD_PRELOAD=--lib, call sites classified
  libmbuddy-noclassify  the same with MBUDDY_CLASSIFY=off
Under a preloaded allocator malloc, calloc, realloc, free and
malloc_usable_size are the preloaded ones; only mallctl and friends still
reach the linked jemalloc (Redis asks it for statistics).

Each server is filled through `redis-cli --pipe` with KEYS string keys whose
values have mixed sizes (70 % 16-128 B, 28 % 128 B-1 KiB, 2 % 1-8 KiB,
roughly log-uniform within each band; the stream is the same for every
allocator), then a random DELETE % of the keys are deleted with DEL. Read
from INFO memory after the fill, right after the deletes and after IDLE
seconds without commands: used_memory (the bytes Redis accounts for, from
malloc_usable_size) and used_memory_rss; the ratio is Redis's own
mem_fragmentation_ratio. For libmbuddy the report (MBUDDY_STATS, JSON) is
taken on a signal after the fill and after the deletes: objects allocated
per reclaim type, pageblocks and pages in use per type, fallbacks, and the
call sites that allocated the most sampled bytes with the type each got,
i.e. which types the stored data went to.

Examples
  make bench-redis
  python3 scripts/redis_bench.py --lib .libs/libmbuddy.so --keys 2500000
  python3 scripts/redis_bench.py --quick          # 200k keys
  python3 scripts/redis_bench.py --from-json bench-results/redis.json

Exit status: 0 if every server ran, 1 if one failed, 2 if redis-server or
redis-cli is missing (apt-get install redis-server redis-tools).
"""

import argparse
import datetime
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (clean_env(), machine_info(), LIBDIR)

LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
STATS_SIGNAL = "WINCH"  # Redis leaves SIGWINCH alone
TYPES = ("KernNoRclm", "KernRclm", "UserRclm")


def allocators(lib):
    return [
        ("glibc", LIBC, {}),
        ("jemalloc", None, {}),
        ("mimalloc", bench.LIBDIR / "libmimalloc.so.2", {}),
        ("tcmalloc", bench.LIBDIR / "libtcmalloc_minimal.so.4", {}),
        ("libmbuddy", lib, {}),
        ("libmbuddy-noclassify", lib, {"MBUDDY_CLASSIFY": "off"}),
    ]


# ------------------------------------------------------------- the load

def value_size(r):
    u = r.random()
    lo, hi = (16, 128) if u < 0.70 else (128, 1024) if u < 0.98 else (1024, 8192)
    return int(lo * (hi / lo) ** r.random())


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def write_streams(keys, delete_pct, seed, fill_path, del_path):
    """The fill (SET) and delete (DEL) protocol streams, made once."""
    r = random.Random(seed)
    pool = bytes(r.randrange(97, 123) for _ in range(16384))
    with open(fill_path, "wb") as f:
        chunk = []
        for i in range(keys):
            n = value_size(r)
            off = r.randrange(0, len(pool) - n)
            chunk.append(resp(b"SET", b"key:%08d" % i, pool[off:off + n]))
            if len(chunk) == 4096:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    doomed = r.sample(range(keys), keys * delete_pct // 100)
    with open(del_path, "wb") as f:
        for k in range(0, len(doomed), 4096):
            f.write(b"".join(resp(b"DEL", b"key:%08d" % i) for i in doomed[k:k + 4096]))
    return len(doomed)


# ----------------------------------------------------------- one server

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args, stdin=None, timeout=600):
    p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], stdin=stdin,
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"redis-cli {' '.join(args)}: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


def info_memory(port, pid):
    fields = {}
    for line in cli(port, "INFO", "memory").splitlines():
        k, _, v = line.strip().partition(":")
        fields[k] = v
    out = {"used_memory": int(fields["used_memory"]), "rss": int(fields["used_memory_rss"])}
    out["ratio"] = out["rss"] / out["used_memory"]
    out["keys"] = int(cli(port, "DBSIZE").strip())
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        out["vm_rss"] = int(status.split("VmRSS:")[1].split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return out


def take_stats(proc, port, path, timeout=10):
    """Ask libmbuddy for its report and return it once written. libmbuddy
    writes it at its next large allocation: a 1 MiB value set and deleted
    at once makes one."""
    before = path.stat().st_mtime_ns if path.exists() else None
    proc.send_signal(getattr(signal, "SIG" + STATS_SIGNAL))
    time.sleep(0.1)
    probe = "__mbuddy_stats_probe__"
    subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "-x", "SET", probe],
                   input=b"x" * (1 << 20), capture_output=True, timeout=60)
    cli(port, "DEL", probe)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime_ns != before:
            time.sleep(0.3)  # let the writer finish
            try:
                return json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
        time.sleep(0.1)
    return None


def summarise_stats(d):
    """What the report says about where the data went."""
    if not d:
        return None
    pages = {t: 0 for t in TYPES}
    for pb in d.get("pageblocks", []):
        if pb.get("owner") in pages:
            pages[pb["owner"]] += pb.get("used_pages", 0)
    types = {t["name"]: {"objects": t.get("objects"), "pageblocks": t.get("pageblocks"),
                         "fallbacks": t.get("fallbacks"), "used_pages": pages.get(t["name"])}
             for t in d.get("types", [])}
    sites = [{k: s.get(k) for k in ("type", "lane", "samples", "sampled_bytes", "freed_samples",
                                    "mean_lifetime_bytes", "wrapper", "deep", "frames")}
             for s in d.get("sites", [])]
    return {"types": types, "sites": sites, "heap": d.get("heap")}


def run_server(name, preload, extra_env, args, streams, tmp):
    port = free_port()
    work = tmp / name
    work.mkdir()
    env = bench.clean_env(extra_env)
    stats_path = work / "mbuddy-stats.json"
    is_mbuddy = name.startswith("libmbuddy")
    if preload:
        env["LD_PRELOAD"] = str(preload)
    if is_mbuddy:
        env.update(MBUDDY_STATS=str(stats_path), MBUDDY_STATS_FORMAT="json",
                   MBUDDY_STATS_SIGNAL=STATS_SIGNAL)
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--dir", str(work),
            "--logfile", str(work / "redis.log")]
    result = {"allocator": name, "port": port, "error": None}
    with open(work / "stderr", "wb") as err:
        proc = subprocess.Popen(argv, env=env, cwd=work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if cli(port, "PING", timeout=5).strip() == "PONG":
                    break
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING")
            time.sleep(0.2)
        result["start"] = info_memory(port, proc.pid)
        t0 = time.monotonic()
        with open(streams["fill"], "rb") as f:
            cli(port, "--pipe", stdin=f)
        result["fill_sec"] = time.monotonic() - t0
        result["after_fill"] = info_memory(port, proc.pid)
        if is_mbuddy:
            result["stats_after_fill"] = summarise_stats(take_stats(proc, port, stats_path))
        t0 = time.monotonic()
        with open(streams["del"], "rb") as f:
            cli(port, "--pipe", stdin=f)
        result["delete_sec"] = time.monotonic() - t0
        result["after_delete"] = info_memory(port, proc.pid)
        time.sleep(args.idle)
        result["after_idle"] = info_memory(port, proc.pid)
        if is_mbuddy:
            result["stats_after_delete"] = summarise_stats(take_stats(proc, port, stats_path))
        cli(port, "SHUTDOWN", "NOSAVE")
        proc.wait(30)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        tail = (work / "stderr").read_text(errors="replace").strip().splitlines()[-3:]
        result["error"] = f"{e}" + (f" ({' | '.join(tail)})" if tail else "")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return result


# --------------------------------------------------------------- report

def mib(b):
    return f"{b / 2**20:.1f}"


def render(data):
    m = data["meta"]
    L = ["# Redis filled and mostly deleted, per allocator (scripts/redis_bench.py)\n",
         f"* Date: {m['date']}; {m['redis']}; library `{m['lib']}`",
         f"* Machine: {m['cpu']}, {m['nproc']} CPUs; load average {m['loadavg_start']:.2f}",
         f"* {m['keys']} keys set (values 16 B-8 KiB, mixed), then {m['deleted']} deleted "
         f"({m['delete_pct']} %, random); idle {m['idle']} s\n",
         "RSS against Redis's used_memory (MiB; ratio = used_memory_rss / used_memory, "
         "Redis's mem_fragmentation_ratio):\n",
         "| allocator | used after fill | RSS after fill | ratio | used after delete | "
         "RSS after delete | ratio | RSS after idle | ratio after idle | fill s | delete s |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
        if r.get("error"):
            L.append(f"| {r['allocator']} | FAILED: {r['error']} |" + " |" * 9)
            continue
        f, d, i = r["after_fill"], r["after_delete"], r["after_idle"]
        L.append(f"| {r['allocator']} | {mib(f['used_memory'])} | {mib(f['rss'])} | "
                 f"{f['ratio']:.2f} | {mib(d['used_memory'])} | {mib(d['rss'])} | {d['ratio']:.2f} | "
                 f"{mib(i['rss'])} | {i['ratio']:.2f} | {r['fill_sec']:.1f} | {r['delete_sec']:.1f} |")
    runs = {r["allocator"]: r for r in data["runs"] if not r.get("error")}
    on, off = runs.get("libmbuddy"), runs.get("libmbuddy-noclassify")
    if on and off:
        ra = on["after_idle"]["ratio"] / off["after_idle"]["ratio"]
        L.append(f"\nClassified against off after the deletes and the idle pause: "
                 f"{on['after_idle']['ratio']:.2f} / {off['after_idle']['ratio']:.2f} = {ra:.2f}x "
                 f"({'not worse' if ra <= 1.0 else 'WORSE'}).")
    for name in ("libmbuddy", "libmbuddy-noclassify"):
        r = runs.get(name)
        if not r:
            continue
        L.append(f"\n## {name}: where the data went\n")
        for moment in ("after_fill", "after_delete"):
            s = r.get("stats_" + moment)
            if not s:
                L.append(f"* {moment}: no report")
                continue
            L.append(f"{moment.replace('_', ' ')}:\n")
            L.append("| type | objects allocated | pageblocks | pages in use | fallbacks |")
            L.append("|---|---|---|---|---|")
            for t in TYPES:
                x = s["types"].get(t, {})
                L.append(f"| {t} | {x.get('objects')} | {x.get('pageblocks')} | "
                         f"{x.get('used_pages')} | {x.get('fallbacks')} |")
            L.append("")
            if s["sites"]:
                L.append("| type | lane | samples | sampled MiB | freed | mean lifetime MiB | "
                         "flags | frames |")
                L.append("|---|---|---|---|---|---|---|---|")
                for x in s["sites"][:12]:
                    flags = ("W" if x["wrapper"] else "") + ("D" if x["deep"] else "")
                    L.append(f"| {x['type']} | {x['lane']} | {x['samples']} | "
                             f"{mib(x['sampled_bytes'])} | {x['freed_samples']} | "
                             f"{mib(x['mean_lifetime_bytes'] or 0)} | {flags} | "
                             f"{' < '.join(x['frames'] or [])} |")
                L.append("")
    return "\n".join(L) + "\n"


# ----------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=".libs/libmbuddy.so",
                   help="libmbuddy shared object (default: %(default)s)")
    p.add_argument("--keys", type=int, default=2500000, help="keys set (default: 2500000)")
    p.add_argument("--delete", type=int, default=80, dest="delete_pct",
                   help="percent of the keys deleted (default: 80)")
    p.add_argument("--idle", type=float, default=5, help="idle seconds after the deletes (default: 5)")
    p.add_argument("--seed", type=int, default=1, help="seed of the values and deletes (default: 1)")
    p.add_argument("--quick", action="store_true", help="200,000 keys")
    p.add_argument("--allocators", help="comma-separated subset (default: all)")
    p.add_argument("--out-json", default="bench-results/redis.json",
                   help="raw results (default: %(default)s)")
    p.add_argument("--out-md", default="bench-results/redis.md",
                   help="report (default: %(default)s; empty: none)")
    p.add_argument("--from-json", metavar="FILE", help="do not run: rebuild the report from FILE")
    args = p.parse_args(argv)
    if args.quick:
        args.keys = 200000
    if not 0 <= args.delete_pct <= 100 or args.keys < 1:
        p.error("--delete is a percentage and --keys at least 1")
    return args


def output(args, data):
    text = render(data)
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_md).write_text(text)
    print(text)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        output(args, json.loads(Path(args.from_json).read_text()))
        return 0
    for tool in ("redis-server", "redis-cli"):
        if not shutil.which(tool):
            print(f"{tool} not found: apt-get install redis-server redis-tools", file=sys.stderr)
            return 2
    lib = Path(args.lib).absolute()
    allocs = allocators(lib)
    if args.allocators:
        want = args.allocators.split(",")
        allocs = [a for a in allocs if a[0] in want]
    ok = []
    for name, preload, env in allocs:
        if preload and not Path(preload).is_file():
            print(f"{name}: {preload} not found, skipped", file=sys.stderr)
            continue
        ok.append((name, preload, env))
    meta = bench.machine_info()
    meta.update(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                lib=str(lib), keys=args.keys, delete_pct=args.delete_pct, idle=args.idle,
                redis=subprocess.run(["redis-server", "--version"], capture_output=True,
                                     text=True).stdout.strip())
    runs = []
    with tempfile.TemporaryDirectory(prefix="mbuddy-redis-") as tmpdir:
        tmp = Path(tmpdir)
        streams = {"fill": tmp / "fill.resp", "del": tmp / "del.resp"}
        print(f"writing the protocol streams ({args.keys} keys)", file=sys.stderr)
        meta["deleted"] = write_streams(args.keys, args.delete_pct, args.seed,
                                        streams["fill"], streams["del"])
        for name, preload, env in ok:
            r = run_server(name, preload, env, args, streams, tmp)
            runs.append(r)
            if r["error"]:
                print(f"{name}: FAILED: {r['error']}", file=sys.stderr)
            else:
                print(f"{name}: ratio after fill {r['after_fill']['ratio']:.2f}, after delete "
                      f"{r['after_delete']['ratio']:.2f}, after idle {r['after_idle']['ratio']:.2f}",
                      file=sys.stderr)
    data = {"meta": meta, "runs": runs}
    if args.out_json:
        Path(args.out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_json).write_text(json.dumps(data, indent=1))
    output(args, data)
    return 1 if any(r["error"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
