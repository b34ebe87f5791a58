"""The targets of scripts/bench.py for libmbuddy, judged on the medians
of one run (see bench.py's docstring for the list)."""

from bench_contention import prediction
from bench_suite import (
    DECAY0, DECAY0_VS_DEFAULT, DROP_VS_EAGER, DROP_VS_LIVE, EAGER, FASTPATH_FIELDS,
    IDLE_VS_EAGER, IDLE_VS_LIVE, JE_LOCKPROF, LARGE_META_KIB, LARGE_TIME_VS_JEMALLOC,
    LATENCY_MAX_VS_JEMALLOC, LOCKSTATS, MBUDDY, MICRO, MSTRESS_RSS_VS_GLIBC, MT_VS_BEST_PEER,
    PEERS, PREDICT_VS_JEMALLOC, STARTUP_HEAPS, STARTUP_RSS_VS_MIN, STARTUP_TIME_VS_MIN,
    TIME_VS_FASTEST, TIME_VS_JEMALLOC, cost, geomean)

GENERAL = "general"
THREADS = "threads"
RETURN = "memory return and stalls"


class Rows:
    """Target rows: (group, name, measured, limit, ok); measured and
    limit are ratios (shown as 1.23x) or text."""

    def __init__(self):
        self.rows = []

    def ratio(self, group, name, value, limit):
        self.rows.append((group, name, value, limit, value <= limit))

    def failed(self, group, name, why, limit):
        self.rows.append((group, name, why, limit, False))


def _get(summ, w, a, f):
    return summ.get((w, a), {}).get(f)


def general(rows, summ, workloads):
    for wl in workloads:
        if not wl.legacy:
            continue
        mine = _get(summ, wl.name, MBUDDY, "wall")
        je = _get(summ, wl.name, "jemalloc", "wall")
        peers = [p for p in (_get(summ, wl.name, p, "wall") for p in PEERS) if p]
        if mine is None:
            rows.failed(GENERAL, f"{wl.name}: runs", "failed", "must run")
            continue
        if wl.name in MICRO:
            continue  # judged by its own ns/op figures below
        if je:
            rows.ratio(GENERAL, f"{wl.name}: time vs jemalloc", mine / je, TIME_VS_JEMALLOC)
        if peers:
            rows.ratio(GENERAL, f"{wl.name}: time vs fastest peer", mine / min(peers),
                       TIME_VS_FASTEST)
    drop = _get(summ, "phase", MBUDDY, "rss_after_drop")
    live = _get(summ, "phase", MBUDDY, "live_bytes")
    eager = _get(summ, "phase", EAGER, "rss_after_drop")
    if drop and live:
        rows.ratio(GENERAL, "phase: RSS after drop vs live bytes", drop / live, DROP_VS_LIVE)
    if drop and eager:
        rows.ratio(GENERAL, "phase: RSS after drop vs jemalloc-eager", drop / eager, DROP_VS_EAGER)
    both = [w.name for w in workloads if w.legacy and w.name not in MICRO and
            _get(summ, w.name, MBUDDY, "maxrss") and _get(summ, w.name, "jemalloc", "maxrss")]
    if both:
        ratio = (geomean(_get(summ, w, MBUDDY, "maxrss") for w in both) /
                 geomean(_get(summ, w, "jemalloc", "maxrss") for w in both))
        rows.ratio(GENERAL, f"peak RSS geomean vs jemalloc ({len(both)} workloads)", ratio, 1.0)
    for f, _, target, limit in FASTPATH_FIELDS:
        mine = _get(summ, "fastpath", MBUDDY, f)
        je = _get(summ, "fastpath", "jemalloc", f)
        if target and mine and je:
            rows.ratio(GENERAL, target, mine / je, limit)


def mt_target_name(wl):
    return f"{wl.name}: vs best peer at 2 threads"


def mt_cost(summ, wl, alloc):
    """The 2-thread figure as a cost: fastpath's 2-thread part, or the
    workload's figure."""
    if wl.name == "fastpath":
        return _get(summ, wl.name, alloc, "pair2t_ns")
    return cost(summ, wl, alloc)


def mt_best_peer(summ, wl):
    costs = [(mt_cost(summ, wl, p), p) for p in PEERS]
    costs = [(c, p) for c, p in costs if c]
    if not costs:
        return None, None
    c, p = min(costs)
    return p, c


def threads(rows, summ, workloads):
    for wl in workloads:
        if not wl.mt2:
            continue
        mine, (_, best) = mt_cost(summ, wl, MBUDDY), mt_best_peer(summ, wl)
        name = mt_target_name(wl)
        if mine is None:
            rows.failed(THREADS, name, "failed", f"<= {MT_VS_BEST_PEER:.2f}x")
        elif best:
            rows.ratio(THREADS, name, mine / best, MT_VS_BEST_PEER)
    for t in (1, 2):
        mine = _get(summ, f"mstress-{t}t", MBUDDY, "maxrss")
        glibc = _get(summ, f"mstress-{t}t", "glibc", "maxrss")
        if mine and glibc:
            rows.ratio(THREADS, f"mstress-{t}t: peak RSS vs glibc", mine / glibc,
                       MSTRESS_RSS_VS_GLIBC)
    for group in sorted({w.group for w in workloads if w.lockstats}):
        mine = prediction(summ, group, MBUDDY, LOCKSTATS, (64,))
        je = prediction(summ, group, "jemalloc", JE_LOCKPROF, (64,))
        if mine and je:
            rows.ratio(THREADS, f"{group}: predicted Mops/s at 64 threads, jemalloc's over ours",
                       je["pred"][64] / mine["pred"][64], PREDICT_VS_JEMALLOC)


def memory_return(rows, summ, workloads):
    names = {w.name for w in workloads}
    if "latency" in names:
        mine = _get(summ, "latency", MBUDDY, "max_ns")
        je = _get(summ, "latency", "jemalloc", "max_ns")
        if mine and je:
            rows.ratio(RETURN, "latency: slowest single call vs jemalloc", mine / je,
                       LATENCY_MAX_VS_JEMALLOC)
    if "largealloc" in names:
        mine = _get(summ, "largealloc", MBUDDY, "us_8g")
        je = _get(summ, "largealloc", "jemalloc", "us_8g")
        ok = _get(summ, "largealloc", MBUDDY, "ok_8g")
        if mine and je and ok:
            rows.ratio(RETURN, "largealloc: 8 GiB malloc+free time vs jemalloc", mine / je,
                       LARGE_TIME_VS_JEMALLOC)
        meta = _get(summ, "largealloc", MBUDDY, "meta_kib_8g")
        if meta is not None:
            rows.rows.append((RETURN, "largealloc: 8 GiB resident metadata", f"{meta:.0f} KiB",
                              f"<= {LARGE_META_KIB} KiB", meta <= LARGE_META_KIB))
    if "startup" in names:
        base = dict(STARTUP_HEAPS)
        for label in base:
            if label == "min":
                continue
            for f, what, limit in (("ms", "time", STARTUP_TIME_VS_MIN),
                                   ("rss_kib", "RSS", STARTUP_RSS_VS_MIN)):
                v = _get(summ, "startup", MBUDDY, f"{f}_{label}")
                m = _get(summ, "startup", MBUDDY, f"{f}_min")
                if v and m:
                    rows.ratio(RETURN, f"startup: /bin/true {what}, heap {base[label]} vs "
                               f"{base['min']}", v / m, limit)
    if "idle" in names:
        mine = _get(summ, "idle", MBUDDY, "rss_1500ms")
        live = _get(summ, "idle", MBUDDY, "live_bytes")
        eager = _get(summ, "idle", EAGER, "rss_1500ms")
        if mine and live:
            rows.ratio(RETURN, "idle: RSS 1.5 s after the drop vs live bytes", mine / live,
                       IDLE_VS_LIVE)
        if mine and eager:
            rows.ratio(RETURN, "idle: RSS 1.5 s after the drop vs jemalloc-eager", mine / eager,
                       IDLE_VS_EAGER)
    for wl in workloads:
        if wl.only and DECAY0 not in wl.only:
            continue
        s = summ.get((wl.name, DECAY0))
        if s is None:
            continue
        name = f"{wl.name}: MBUDDY_DECAY_MS=0 time vs default"
        mine, default = cost(summ, wl, DECAY0), cost(summ, wl, MBUDDY)
        if mine is None:
            why = s["errors"][0] if s["errors"] else "no figure"
            rows.failed(RETURN, name, "failed: " + why.split(":")[0], f"<= {DECAY0_VS_DEFAULT:.2f}x")
        elif default:
            rows.ratio(RETURN, name, mine / default, DECAY0_VS_DEFAULT)


def evaluate_targets(summ, workloads, names):
    """Target rows for libmbuddy; None if it did not run."""
    if MBUDDY not in names:
        return None
    rows = Rows()
    general(rows, summ, workloads)
    threads(rows, summ, workloads)
    memory_return(rows, summ, workloads)
    return rows.rows
