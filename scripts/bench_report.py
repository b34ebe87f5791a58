"""The markdown report of scripts/bench.py."""

from pathlib import Path

from bench_contention import AGGREGATE, prediction
from bench_suite import (
    DECAY0, DROP_VS_EAGER, DROP_VS_LIVE, EAGER, FAST_VS_JEMALLOC, FASTPATH_FIELDS, IDLE_VS_EAGER,
    IDLE_VS_LIVE, JE_LOCKPROF, LOCKSTATS, MBUDDY, MT_VS_BEST_PEER, PREDICT_THREADS,
    SCALE_VS_JEMALLOC, STARTUP_HEAPS, STARTUP_ORDER, TIME_VS_FASTEST, TIME_VS_JEMALLOC, WORKLOADS,
    cost, figure, fmt_ratio, geomean, mib, summarise)
from bench_targets import evaluate_targets, mt_best_peer, mt_cost, mt_target_name

IDLE_TIMES = (0, 500, 1000, 1500, 2000)


class Doc:
    def __init__(self, data):
        self.data = data
        self.meta = data["meta"]
        self.aux = {a["name"] for a in data["allocators"] if a.get("aux")}
        self.names = [a["name"] for a in data["allocators"] if a["name"] not in self.aux]
        self.workloads = [w for w in WORKLOADS if w.name in data["workloads"]]
        self.summ = summarise(data["runs"])
        self.targets = evaluate_targets(self.summ, self.workloads, self.names)
        self.missed = {row[1] for row in self.targets or [] if not row[4]}
        self.L = []

    def get(self, w, a, f):
        return self.summ.get((w, a), {}).get(f)

    def has(self, name):
        return any(w.name == name for w in self.workloads)

    def add(self, *lines):
        self.L.extend(lines)

    def section(self, title, text, *cols):
        """A heading, its explanation, and a table header if cols."""
        self.add(f"## {title}\n", text + "\n")
        if cols:
            self.table_head(*cols)

    def table_head(self, *cols):
        self.add("| " + " | ".join(cols) + " |", "|" + "---|" * len(cols))

    def row(self, *cells):
        self.add("| " + " | ".join(str(c) for c in cells) + " |")


def header(d):
    meta = d.meta
    d.add("# libmbuddy side-by-side benchmark\n", f"* Date: {meta['date']}",
          f"* Machine: `{meta['uname']}`",
          f"* CPU: {meta['cpu']}, {meta['nproc']} CPUs available, {meta['memory']} RAM",
          f"* Load average (1 min) at start / end: {meta['loadavg_start']:.2f} / "
          f"{meta['loadavg_end']:.2f}")
    if max(meta["loadavg_start"], meta["loadavg_end"]) > 0.5 * meta["nproc"]:
        d.add("* **Warning: the machine was busy during the run; wall times are noisy.**")
    d.add(f"* Repetitions: {meta['reps']} per cell, median reported"
          f"{' (quick mode: smaller sizes)' if meta['quick'] else ''};"
          f" runs interleaved round-robin across allocators",
          f"* Total run time: {meta['total_sec'] / 60:.1f} min")
    for note in meta.get("notes", []):
        d.add(f"* {note}")
    d.add("", "## Allocators\n")
    d.table_head("name", "LD_PRELOAD", "environment", "runs")
    for a in d.data["allocators"]:
        env = " ".join(f"{k}={v}" for k, v in a["env"].items()) or "-"
        preload = a["preload"] or "(none)"
        if isinstance(preload, list):
            preload = " ".join(preload)
        only = "all" if not a["only"] else (
            "the lock-counted workloads" if a["name"] in d.aux else ", ".join(a["only"]))
        d.row(a["name"], preload, env, only + (" - " + a["note"] if a["note"] else ""))
    d.add("", "## Workloads\n")
    d.table_head("workload", "what", "figure")
    for w in d.workloads:
        d.row(w.name, w.title, (w.metric[0] if w.metric else "wall") + f" ({w.unit()})")
    d.add("")


def targets(d):
    d.add("## Targets for libmbuddy\n")
    if d.targets is None:
        d.add("Not evaluated: libmbuddy did not run.\n")
        return
    for group in dict.fromkeys(r[0] for r in d.targets):
        d.add(f"### Targets: {group}\n")
        d.table_head("target", "measured", "limit", "status")
        for g, name, val, limit, ok in d.targets:
            if g != group:
                continue
            shown = fmt_ratio(val) if isinstance(val, float) else val
            limit_s = f"<= {limit:.2f}x" if isinstance(limit, float) else limit
            d.row(name, shown, limit_s, "ok" if ok else "**MISS**")
        d.add("")
    n_miss = sum(1 for t in d.targets if not t[4])
    d.add(f"{n_miss} of {len(d.targets)} targets missed.\n")


def per_workload_table(d, title, field, fmt, note, workloads, mark_time=False):
    d.add(f"## {title}\n", note + "\n")
    d.table_head("workload", *d.names)
    for w in workloads:
        je = d.get(w.name, "jemalloc", field)
        cells = []
        for a in d.names:
            s = d.summ.get((w.name, a))
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
            if mark_time and a == MBUDDY and any(
                    t in d.missed for t in (f"{w.name}: time vs jemalloc",
                                            f"{w.name}: time vs fastest peer")):
                cell += " **MISS**"
            cells.append(cell)
        d.row(w.name, *cells)


def general_tables(d):
    legacy = [w for w in d.workloads if w.legacy]
    if legacy:
        per_workload_table(d, "Wall time", "wall", lambda v: f"{v:.2f}",
                           "Median seconds of the original workloads (ratio to jemalloc). "
                           f"**MISS** marks libmbuddy cells over {TIME_VS_JEMALLOC}x jemalloc or "
                           f"{TIME_VS_FASTEST}x the fastest peer.", legacy, mark_time=True)
        d.add("")
    with_rss = [w for w in d.workloads if not w.preload_in_argv]
    per_workload_table(d, "Peak RSS", "maxrss", mib,
                       "Median MiB (ratio to jemalloc), from wait4 ru_maxrss.", with_rss)
    geo = []
    je_set = [w.name for w in legacy if d.get(w.name, "jemalloc", "maxrss")]
    for a in d.names:
        both = [w for w in je_set if d.get(w, a, "maxrss")]
        if not je_set or len(both) < max(2, len(je_set)):
            geo.append("")  # a partial set would not compare like with like
            continue
        r = (geomean(d.get(w, a, "maxrss") for w in both) /
             geomean(d.get(w, "jemalloc", "maxrss") for w in both))
        geo.append(f"{r:.2f}x" + (" **MISS**" if a == MBUDDY and r > 1.0 else ""))
    if any(geo):
        d.row("geomean vs jemalloc (original workloads)", *geo)
    d.add("")
    if legacy:
        per_workload_table(d, "CPU time", "cpu", lambda v: f"{v:.2f}",
                           "Median user+sys seconds (ratio to jemalloc); informational, steadier "
                           "than wall time on a busy machine.", legacy)
        d.add("")


def phase_table(d):
    if not d.has("phase"):
        return
    d.section("Phase change: memory after the load drops",
              "Resident set read by the workload itself after the cache and temporaries were freed "
              "and a light load ran on; live = bytes the program still holds (pinned objects and the "
              "light load's temporaries). MiB, medians.",
              "allocator", "live", "RSS at start", "RSS before drop", "RSS after drop",
              "after / live", "after / jemalloc-eager")
    eager = d.get("phase", EAGER, "rss_after_drop")
    for a in d.names:
        s = d.summ.get(("phase", a))
        if not s:
            continue
        if "rss_after_drop" not in s:
            d.row(a, "FAIL", "", "", "", "", "")
            continue
        after, live = s["rss_after_drop"], s["live_bytes"]
        vs_eager = after / eager if eager else None
        m1 = " **MISS**" if a == MBUDDY and after / live > DROP_VS_LIVE else ""
        m2 = " **MISS**" if a == MBUDDY and vs_eager and vs_eager > DROP_VS_EAGER else ""
        d.row(a, mib(live), mib(s["rss_start"]), mib(s["rss_before_drop"]), mib(after),
              f"{after / live:.2f}x{m1}", f"{fmt_ratio(vs_eager)}{m2}")
    d.add("")


def fastpath_table(d):
    if not any(d.get("fastpath", a, "pair_ns") for a in d.names):
        return
    d.add("## Fast path: small malloc+free\n",
          "Nanoseconds per malloc+free of 16-256 B objects, measured inside the workload (best "
          "of its repetitions after a warm-up), median over runs (ratio to jemalloc). pair: free "
          "what was just allocated; batch: 64 objects of a size, freed oldest first; 1 / 2 "
          "threads: the pair loop in spawned threads, ns/op per thread; scaling: 2-thread over "
          "1-thread ns/op (1.00 = perfect, 2.00 = serialised). **MISS** marks libmbuddy over "
          f"{FAST_VS_JEMALLOC}x jemalloc (scaling: over {SCALE_VS_JEMALLOC}x jemalloc's "
          "scaling).\n")
    d.table_head("allocator", *(h for _, h, _, _ in FASTPATH_FIELDS))
    for a in d.names:
        s = d.summ.get(("fastpath", a))
        if not s:
            continue
        if "pair_ns" not in s:
            d.row(a, "FAIL", *[""] * (len(FASTPATH_FIELDS) - 1))
            continue
        cells = []
        for f, _, target, _ in FASTPATH_FIELDS:
            v, je = s.get(f), d.get("fastpath", "jemalloc", f)
            cell = (f"{v:.2f}" if v is not None else "-") + \
                (f" ({v / je:.2f}x)" if v is not None and je else "")
            if a == MBUDDY and target in d.missed:
                cell += " **MISS**"
            cells.append(cell)
        d.row(a, *cells)
    d.add("")


def threads_table(d):
    mt = [w for w in d.workloads if w.lockstats or w.mt2]
    if not mt:
        return
    d.add("## Threads: the multi-threaded workloads\n",
          "Each workload's own figure, median over runs: Mops/s (millions of mallocs, each "
          "with its free, per second: higher is better) or seconds of fixed work (lower is "
          "better); fastpath: ns per malloc+free in each of 2 threads. In brackets the cost "
          "ratio to the best peer (glibc, jemalloc, mimalloc, tcmalloc) at the same thread "
          f"count: 1.00x = as good as the best. **MISS** marks libmbuddy over {MT_VS_BEST_PEER}x "
          "at 2 threads.\n")
    d.table_head("workload", "unit", *d.names, "best peer")
    for w in mt:
        peer, best = mt_best_peer(d.summ, w)
        cells = []
        for a in d.names:
            s = d.summ.get((w.name, a))
            if s is None:
                cells.append("")
                continue
            c = mt_cost(d.summ, w, a)
            v = s.get("pair2t_ns") if w.name == "fastpath" else figure(d.summ, w, a)
            if c is None or v is None:
                cells.append("FAIL")
                continue
            cell = f"{v:.3g}" + (f" ({c / best:.2f}x)" if best else "")
            if s["errors"]:
                cell += f" [{len(s['errors'])} failed]"
            if a == MBUDDY and mt_target_name(w) in d.missed:
                cell += " **MISS**"
            cells.append(cell)
        unit = "ns, 2 threads" if w.name == "fastpath" else w.unit()
        d.row(w.name, unit, *cells, peer or "-")
    d.add("")


def contention_tables(d):
    counted = [w for w in d.workloads if w.lockstats and
               (d.get(w.name, LOCKSTATS, "locks") or d.get(w.name, JE_LOCKPROF, "locks"))]
    if not counted:
        return
    d.add("## Contention: lock figures and predicted scaling\n",
          f"From the runs of `{LOCKSTATS}` (libmbuddy configured with `--enable-lock-stats`: "
          "every allocator lock counts its acquisitions, contended acquisitions and hold time "
          "and reports them through `MBUDDY_STATS`) and of `jemalloc-lockprof` (jemalloc with "
          "`lockprof.so` preloaded in front of it, which counts its pthread mutexes by the same "
          "rules). Per lock: acquisitions per 1,000 operations (mallocs of the workload), mean "
          "hold time, and the share of acquisitions that found the lock held. Locks taken once "
          "(the report's own) are left out. serial: the fraction of each thread's time spent "
          "holding the busiest lock that live threads share (see the model below). Medians "
          "over runs.\n")
    names = sorted({n for w in counted for n in
                    (d.get(w.name, LOCKSTATS, "locks") or {"locks": {}})["locks"]})
    cols = [f"{n}: {h}" for n in names for h in ("acq/1k ops", "mean hold ns", "contended")]
    d.add(f"### libmbuddy ({LOCKSTATS})\n")
    d.table_head("workload", "Mops/s (counting build)", *cols, "serial")
    for w in counted:
        lk = d.get(w.name, LOCKSTATS, "locks")
        if not lk:
            continue
        cells = []
        for n in names:
            f = lk["locks"].get(n)
            cells += ([f"{f['acq_per_kop']:.3g}", f"{f['hold_ns']:.0f}", f"{f['contended_pct']:.1f}%"]
                      if f else ["-", "-", "-"])
        mops = d.get(w.name, LOCKSTATS, "mops")
        d.row(w.name, f"{mops:.3g}" if mops else "-", *cells, f"{lk['serial']:.4f}")
    d.add("")
    if any(d.get(w.name, JE_LOCKPROF, "locks") for w in counted):
        d.add("### jemalloc (jemalloc-lockprof)\n",
              "All of jemalloc's pthread mutexes added up (per-arena and global ones alike); "
              "instances: mutexes taken more than once.\n")
        d.table_head("workload", "Mops/s (counted)", "instances", "acq/1k ops", "mean hold ns",
                     "contended", "serial")
        for w in counted:
            lk = d.get(w.name, JE_LOCKPROF, "locks")
            if not lk:
                continue
            f = lk["locks"].get(AGGREGATE)
            mops = d.get(w.name, JE_LOCKPROF, "mops")
            cells = ([f"{f['instances']:.0f}", f"{f['acq_per_kop']:.3g}", f"{f['hold_ns']:.0f}",
                      f"{f['contended_pct']:.1f}%"] if f else ["-"] * 4)
            d.row(w.name, f"{mops:.3g}" if mops else "-", *cells, f"{lk['serial']:.4f}")
        d.add("")
    prediction_table(d, counted)


def prediction_table(d, counted):
    groups = list(dict.fromkeys(w.group for w in counted))
    d.add("### Predicted throughput at more threads (Amdahl on the serial fraction)\n",
          "The machine has few cores, so more threads cannot be measured. Each lock is a serial "
          "resource; with s the serial fraction measured at 2 threads (the time the busiest "
          "lock that live threads took in turns was held, over threads x the run's duration), "
          "Amdahl's law gives the speed-up at N threads as N / (1 + s (N - 1)), at most 1/s; "
          "the prediction is the measured 1-thread Mops/s of the normal build times that. It is "
          "a ceiling set by the locks alone (waiting, cache-line transfers that grow with cores, "
          "threads that need two busy locks, and the workload's own limits are not modelled), "
          "for comparing allocators under one rule. jemalloc's s comes from lockprof.so; "
          "glibc, mimalloc and tcmalloc do not lock through pthread mutexes that a preloaded "
          "library can see, so they have no prediction.\n")
    heads = [f"{n} thr" for n in PREDICT_THREADS]
    d.table_head("workload", "allocator", "1 thr (measured)", "2 thr (measured)", "s", *heads)
    for g in groups:
        for alloc, counter in ((MBUDDY, LOCKSTATS), ("jemalloc", JE_LOCKPROF)):
            p = prediction(d.summ, g, alloc, counter, PREDICT_THREADS)
            if not p:
                continue
            d.row(g, alloc, f"{p['x1']:.3g}", f"{p['x2']:.3g}" if p["x2"] else "-",
                  f"{p['serial']:.4f}", *(f"{p['pred'][n]:.3g}" for n in PREDICT_THREADS))
    d.add("")


def latency_table(d):
    if not d.has("latency"):
        return
    d.section("Latency: the slowest single call",
              "A load spike leaves the heap full of holes; after 1.2 s idle, 400,000 single "
              "malloc or free calls are timed one by one (clock_gettime around each). Medians "
              "over runs of each run's percentiles, in microseconds; the maximum is the slowest "
              "call of a run (ratio to jemalloc's).",
              "allocator", "p50 us", "p99 us", "p99.9 us", "max us", "slowest malloc us",
              "slowest free us")
    je = d.get("latency", "jemalloc", "max_ns")
    for a in d.names:
        s = d.summ.get(("latency", a))
        if not s:
            continue
        if "max_ns" not in s:
            d.row(a, "FAIL", "", "", "", "", "")
            continue
        mx = f"{s['max_ns'] / 1e3:.0f}" + (f" ({s['max_ns'] / je:.2f}x)" if je else "")
        if a == MBUDDY and "latency: slowest single call vs jemalloc" in d.missed:
            mx += " **MISS**"
        d.row(a, f"{s['p50_ns'] / 1e3:.3f}", f"{s['p99_ns'] / 1e3:.3f}",
              f"{s['p999_ns'] / 1e3:.3f}", mx, f"{s['max_malloc_ns'] / 1e3:.0f}",
              f"{s['max_free_ns'] / 1e3:.0f}")
    d.add("")


def large_tables(d):
    if d.has("largealloc"):
        d.add("## Large allocations\n",
              "malloc(SIZE) then free(), memory untouched: the time of the pair and the RSS "
              "the allocator added before the program touched anything (its metadata); 'left': "
              "RSS still above the start after the free. n/a: the allocation failed (an "
              "allocator that maps eagerly hits the kernel's overcommit limit). Medians.\n")
        d.table_head("allocator", "8 GiB us", "8 GiB metadata KiB", "8 GiB left KiB",
                     "32 GiB us", "32 GiB metadata KiB", "32 GiB left KiB")
        for a in d.names:
            s = d.summ.get(("largealloc", a))
            if not s:
                continue
            cells = []
            for k in ("8g", "32g"):
                if not s.get(f"ok_{k}"):
                    cells += ["n/a"] * 3
                    continue
                cells += [f"{s[f'us_{k}']:.0f}", f"{s[f'meta_kib_{k}']:.0f}",
                          f"{s[f'left_kib_{k}']:.0f}"]
            d.row(a, *cells)
        d.add("")
    if d.has("startup"):
        s = d.summ.get(("startup", MBUDDY), {})
        d.add("## Start-up at any heap size\n",
              f"`/bin/true` run under libmbuddy with MBUDDY_MAX_ORDER={STARTUP_ORDER} and "
              "MBUDDY_HEAP_SIZE at the minimum, the default and the maximum (glibc: no preload, "
              "for reference); median wall ms and peak RSS over the runs inside the workload, "
              "medians over repetitions.\n")
        d.table_head("heap", "ms", "slowest ms", "peak RSS KiB")
        for label, size in (("glibc", "-"), *STARTUP_HEAPS):
            if f"ms_{label}" in s:
                d.row(f"{label} ({size})", f"{s[f'ms_{label}']:.2f}", f"{s[f'ms_max_{label}']:.2f}",
                      f"{s[f'rss_kib_{label}']:.0f}")
        d.add("")


def idle_table(d):
    if not d.has("idle"):
        return
    d.section("Idle return: memory given back with no allocator call",
              "A load spike grows to a few hundred MiB, then drops its cache and temporaries and "
              "makes no more allocator calls; the program reads its own RSS at these times after "
              "the drop. MiB, medians; ratios of the 1.5 s figure to the live bytes and to "
              "jemalloc-eager's.",
              "allocator", "live", "peak", *(f"{t / 1000:g} s" for t in IDLE_TIMES),
              "1.5 s / live", "1.5 s / jemalloc-eager")
    eager = d.get("idle", EAGER, "rss_1500ms")
    for a in d.names:
        s = d.summ.get(("idle", a))
        if not s:
            continue
        if "rss_1500ms" not in s:
            d.row(a, "FAIL", *[""] * (len(IDLE_TIMES) + 3))
            continue
        r_live, r_eager = s["rss_1500ms"] / s["live_bytes"], s["rss_1500ms"] / eager if eager else None
        m1 = " **MISS**" if a == MBUDDY and r_live > IDLE_VS_LIVE else ""
        m2 = " **MISS**" if a == MBUDDY and r_eager and r_eager > IDLE_VS_EAGER else ""
        d.row(a, mib(s["live_bytes"]), mib(s["rss_peak"]),
              *(mib(s[f"rss_{t}ms"]) for t in IDLE_TIMES), f"{r_live:.2f}x{m1}",
              fmt_ratio(r_eager) + m2)
    d.add("")


def decay0_table(d):
    if DECAY0 not in d.names:
        return
    d.section("MBUDDY_DECAY_MS=0",
              "Each workload's figure under libmbuddy with MBUDDY_DECAY_MS=0 against the default "
              "(as a cost: time, or 1 / throughput); the target is at most 1.5x everywhere. A run "
              "that timed out is not repeated.",
              "workload", "figure", "default", "MBUDDY_DECAY_MS=0", "ratio")
    for w in d.workloads:
        s = d.summ.get((w.name, DECAY0))
        if s is None:
            continue
        mine, base = cost(d.summ, w, DECAY0), cost(d.summ, w, MBUDDY)
        miss = " **MISS**" if f"{w.name}: MBUDDY_DECAY_MS=0 time vs default" in d.missed else ""
        v0, v = figure(d.summ, w, DECAY0), figure(d.summ, w, MBUDDY)
        d.row(w.name, f"{w.metric[0] if w.metric else 'wall'} ({w.unit()})",
              f"{v:.4g}" if v else "-",
              f"{v0:.4g}" if v0 else "FAIL" + "".join(f": {e}" for e in s["errors"][:1]),
              (fmt_ratio(mine / base) if mine and base else "-") + miss)
    d.add("")


def notes(d):
    wall_timed = {w.name for w in d.workloads if not w.metric}
    noisy = [(w, a, s["spread"]) for (w, a), s in d.summ.items()
             if w in wall_timed and s.get("spread", 0) > 0.10 and s["ok"] > 1]
    failures = [(w, a, e) for (w, a), s in d.summ.items() for e in s["errors"]]
    if noisy or failures:
        d.add("## Notes\n")
    for w, a, e in failures:
        d.add(f"* FAILED {w} under {a}: {e}")
    if noisy:
        d.add("* Wall-time spread (max-min)/median above 10%: " +
              ", ".join(f"{w}/{a} {sp:.0%}" for w, a, sp in sorted(noisy)))


def markdown(data):
    d = Doc(data)
    for section in (header, targets, general_tables, phase_table, fastpath_table, threads_table,
                    contention_tables, latency_table, large_tables, idle_table, decay0_table,
                    notes):
        section(d)
    return "\n".join(d.L) + "\n"


def write_markdown(path, data):
    Path(path).write_text(markdown(data))


DOC_BEGIN = "<!-- BEGIN: written by `make bench` (scripts/bench.py --out-doc); edits here are lost -->"
DOC_END = "<!-- END: written by `make bench` -->"


def write_doc(path, data):
    """Replace the part of `path` (doc/benchmarks.md) between DOC_BEGIN and
    DOC_END with the report, without its title and with its headings one
    level down; the text around it is kept."""
    text = Path(path).read_text()
    start, end = text.find(DOC_BEGIN), text.find(DOC_END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: no {DOC_BEGIN!r} ... {DOC_END!r} block to replace")
    lines = markdown(data).splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        lines = lines[1:]  # the title: the file has its own headings
    body = "".join("#" + line if line.startswith("#") else line for line in lines).lstrip("\n")
    chart = "![benchmark](bench.png)\n\n"  # make bench copies the chart beside the file
    Path(path).write_text(text[:start + len(DOC_BEGIN)] + "\n\n" + chart + body + "\n" + text[end:])
