"""The PNG chart of scripts/bench.py (needs matplotlib)."""

import statistics

from bench_suite import (DROP_VS_LIVE, FAST_VS_JEMALLOC, FASTPATH_FIELDS, IDLE_VS_LIVE,
                         MT_VS_BEST_PEER, TIME_VS_JEMALLOC, WORKLOADS, summarise)
from bench_targets import mt_best_peer, mt_cost

RATIO_TICKS = [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
IDLE_TIMES = (0, 500, 1000, 1500, 2000)


def ratio_axis(ax, labels, title, fontsize=None):
    """A log axis of ratios (1x, 2x, 0.5x...) over labelled bars."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=fontsize, rotation=30 if fontsize else 0,
                       ha="right" if fontsize else "center")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)


def bars(ax, names, labels, value, colours):
    """One bar per (allocator, label) where value(allocator, label) is
    known; returns the values drawn."""
    width = 0.8 / max(len(names), 1)
    drawn = []
    for i, a in enumerate(names):
        xs, ys = [], []
        for j, label in enumerate(labels):
            v = value(a, label)
            if v:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(v)
        drawn += ys
        ax.bar(xs, ys, width, label=a, color=colours[i % len(colours)])
    return drawn


def wall_and_rss(axes, summ, names, legacy, colours):
    for ax, field, title in ((axes[0], "wall", "Wall time, ratio to jemalloc (lower is better)"),
                             (axes[1], "maxrss", "Peak RSS, ratio to jemalloc (lower is better)")):
        def value(a, w, field=field):
            v, je = summ.get((w, a), {}).get(field), summ.get((w, "jemalloc"), {}).get(field)
            return v / je if v and je else None
        bars(ax, names, legacy, value, colours)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if field == "wall":
            ax.axhline(TIME_VS_JEMALLOC, color="red", linewidth=0.8, linestyle="--",
                       label=f"target {TIME_VS_JEMALLOC}x")
        ratio_axis(ax, legacy, title)
    axes[0].legend(ncol=4, fontsize=8)


def phase(ax, summ, names, colours):
    present = [a for a in names if summ.get(("phase", a), {}).get("rss_after_drop")]
    if present:
        after = [summ[("phase", a)]["rss_after_drop"] / 2**20 for a in present]
        before = [summ[("phase", a)]["rss_before_drop"] / 2**20 for a in present]
        live = statistics.median(summ[("phase", a)]["live_bytes"] for a in present) / 2**20
        xs = range(len(present))
        ax.bar([x - 0.2 for x in xs], before, 0.4, label="RSS before drop", color="#bbbbbb")
        ax.bar([x + 0.2 for x in xs], after, 0.4, label="RSS after drop", color=colours[0])
        ax.axhline(live, color="green", linewidth=1, label=f"live bytes ({live:.0f} MiB)")
        ax.axhline(live * DROP_VS_LIVE, color="red", linewidth=0.8, linestyle="--",
                   label=f"target {DROP_VS_LIVE}x live")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(present, fontsize=8)
        ax.set_ylabel("MiB")
        ax.set_ylim(0, max(before + after) * 1.35)  # headroom for the legend
        ax.legend(fontsize=8, ncol=4, loc="upper center")
    ax.set_title("Phase change: resident memory before and after the load drops")


def fastpath(ax, summ, names, colours):
    fast = [a for a in names if summ.get(("fastpath", a), {}).get("pair_ns")]
    je = summ.get(("fastpath", "jemalloc"), {})

    def value(a, f):
        v = summ.get(("fastpath", a), {}).get(f)
        return v / je[f] if a in fast and v and je.get(f) else None
    fields = [f for f, *_ in FASTPATH_FIELDS]
    ratios = bars(ax, names, fields, value, colours)
    # Fixed limits around 1x: bars on a log axis start at its bottom, so
    # an autoscaled bottom just under the smallest ratio would hide it.
    ax.set_ylim(min([0.25, *ratios]) / 1.2, max([4, *ratios]) * 1.2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(FAST_VS_JEMALLOC, color="red", linewidth=0.8, linestyle="--",
               label=f"target {FAST_VS_JEMALLOC}x")
    ratio_axis(ax, [h for _, h, *_ in FASTPATH_FIELDS],
               "Fast path (fastpath workload): ns/op and 2-thread scaling, "
               "ratio to jemalloc (lower is better)")
    ax.legend(ncol=4, fontsize=8)


def threads(ax, summ, names, mt, colours):
    best = {w.name: mt_best_peer(summ, w)[1] for w in mt}

    def value(a, wname):
        w = next(x for x in mt if x.name == wname)
        c = mt_cost(summ, w, a)
        return c / best[wname] if c and best[wname] else None
    ratios = bars(ax, names, [w.name for w in mt], value, colours)
    ax.set_ylim(min([0.25, *ratios]) / 1.2, max([4, *ratios]) * 1.2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(MT_VS_BEST_PEER, color="red", linewidth=0.8, linestyle="--",
               label=f"target {MT_VS_BEST_PEER}x")
    ratio_axis(ax, [w.name for w in mt], "Multi-threaded workloads at 2 threads: cost ratio to "
               "the best peer (lower is better)", fontsize=8)
    ax.legend(ncol=4, fontsize=8)


def idle(ax, summ, names, colours):
    live = None
    for i, a in enumerate(names):
        s = summ.get(("idle", a), {})
        if "rss_1500ms" not in s:
            continue
        live = s["live_bytes"] / 2**20
        ax.plot([t / 1000 for t in IDLE_TIMES], [s[f"rss_{t}ms"] / 2**20 for t in IDLE_TIMES],
                marker="o", label=a, color=colours[i % len(colours)])
    if live:
        ax.axhline(live, color="green", linewidth=1, label=f"live bytes ({live:.0f} MiB)")
        ax.axhline(live * IDLE_VS_LIVE, color="red", linewidth=0.8, linestyle="--",
                   label=f"target {IDLE_VS_LIVE}x live at 1.5 s")
        ax.legend(fontsize=8, ncol=4)
    ax.set_xlabel("seconds after the drop, no allocator calls")
    ax.set_ylabel("RSS MiB")
    ax.set_title("Idle return: resident memory after the load drops")


def draw(png, data):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    aux = {a["name"] for a in data["allocators"] if a.get("aux")}
    names = [a["name"] for a in data["allocators"] if a["name"] not in aux]
    workloads = [w for w in WORKLOADS if w.name in data["workloads"]]
    legacy = [w.name for w in workloads if w.legacy]
    mt = [w for w in workloads if w.mt2]
    summ = summarise(data["runs"])
    panels = []
    if legacy:
        panels += ["wall", "rss", "phase"]
    if summ.get(("fastpath", "jemalloc"), {}).get("pair_ns"):
        panels.append("fastpath")
    if mt:
        panels.append("threads")
    if any(("idle", a) in summ for a in names):
        panels.append("idle")
    if not panels:
        return
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 4.4 * len(panels)), squeeze=False)
    ax = dict(zip(panels, axes[:, 0]))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if legacy:
        wall_and_rss([ax["wall"], ax["rss"]], summ, names, legacy, colours)
        phase(ax["phase"], summ, names, colours)
    if "fastpath" in ax:
        fastpath(ax["fastpath"], summ, names, colours)
    if "threads" in ax:
        threads(ax["threads"], summ, names, mt, colours)
    if "idle" in ax:
        idle(ax["idle"], summ, names, colours)
    meta = data["meta"]
    fig.suptitle(f"libmbuddy benchmark, {meta['date']}, {meta['cpu']} x{meta['nproc']}"
                 f"{' (quick)' if meta['quick'] else ''}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.985))  # room for the title
    fig.savefig(png, dpi=100)
    plt.close(fig)
