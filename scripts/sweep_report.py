"""The report of scripts/sweep.py: win/loss table, distributions, the
workload shapes where classification loses, and the worst configurations
with the command lines that re-run them. Works on the JSON sweep.py
writes, so a report can be regenerated (sweep.py --from-json)."""

import statistics

# Issue 11's targets, classified ("on") against MBUDDY_CLASSIFY=off.
HIGHORDER_SLACK = 0.05   # on >= off - 5 % of the attempts
RSS_LIMIT = 1.05         # on <= 1.05x off
TIME_LIMIT = 1.10        # on <= 1.1x off (CPU seconds, medians when repeated)
FILL_SLACK = 0.01        # on >= off - 1 point of the cap (no target in the issue)
OFF_WEAK = 150           # where off scores below this, typing should win
PEER_NAMES = ("glibc", "jemalloc", "mimalloc", "tcmalloc")


def index(runs):
    """{(seed, variant): [results of the completed plain and repeat runs]},
    first run first."""
    by = {}
    for r in runs:
        if r.get("stats") or r.get("error") or not r.get("result"):
            continue
        res = dict(r["result"], maxrss=r.get("maxrss"))
        by.setdefault((r["seed"], r["variant"]), []).append(res)
    return by


def first(by, seed, variant):
    rs = by.get((seed, variant))
    return rs[0] if rs else None


def time_ratio(by, seed):
    """CPU time on / off, medians of every run of the configuration."""
    on, off = by.get((seed, "on")), by.get((seed, "off"))
    if not on or not off:
        return None
    a = statistics.median(r["cpu_sec"] for r in on)
    b = statistics.median(r["cpu_sec"] for r in off)
    return a / b if b > 0 else None


def fail_fill(res):
    """Live share of the cap at the first failed small allocation: in the
    run if one failed there, else when the heap was filled to failure."""
    if not res:
        return None
    v = res.get("first_fail_fill")
    return v if v is not None else res.get("fill_to_fail")


# ------------------------------------------------------------- the rows

class Row:
    """One configuration's comparison of on against off."""

    def __init__(self, seed, params, by):
        self.seed = seed
        self.params = params
        self.on, self.off = first(by, seed, "on"), first(by, seed, "off")
        self.peers = {n: first(by, seed, n) for n in PEER_NAMES}
        self.ok = bool(self.on and self.off)
        if not self.ok:
            return
        on, off = self.on, self.off
        self.attempts = on["attempts"]
        self.ho_on, self.ho_off = on["success"], off["success"]
        self.ho_diff = self.ho_on - self.ho_off
        self.rss_on, self.rss_off = on["rss_after_trim"], off["rss_after_trim"]
        self.rss = self.rss_on / self.rss_off if self.rss_off else None
        self.time = time_ratio(by, seed)
        self.time_runs = len(by.get((seed, "on"), []))
        self.fill_on, self.fill_off = fail_fill(on), fail_fill(off)

    def lose_highorder(self):
        return self.ho_on < self.ho_off - HIGHORDER_SLACK * self.attempts

    def win_highorder(self):
        return self.ho_on > self.ho_off + HIGHORDER_SLACK * self.attempts

    def lose_rss(self):
        return self.rss is not None and self.rss > RSS_LIMIT

    def win_rss(self):
        return self.rss is not None and self.rss < 1 / RSS_LIMIT

    def lose_time(self):
        return self.time is not None and self.time > TIME_LIMIT

    def win_time(self):
        return self.time is not None and self.time < 1 / TIME_LIMIT

    def lose_fill(self):
        return None not in (self.fill_on, self.fill_off) and self.fill_on < self.fill_off - FILL_SLACK

    def win_fill(self):
        return None not in (self.fill_on, self.fill_off) and self.fill_on > self.fill_off + FILL_SLACK

    def losses(self):
        return [m for m, f in (("high-order", self.lose_highorder), ("RSS", self.lose_rss),
                               ("time", self.lose_time), ("fill", self.lose_fill)) if f()]


METRICS = [
    ("high-order successes", "on >= off - 5% of attempts", "win_highorder", "lose_highorder"),
    ("RSS after drop+trim", f"on <= {RSS_LIMIT}x off", "win_rss", "lose_rss"),
    ("CPU time", f"on <= {TIME_LIMIT}x off (median of repeats)", "win_time", "lose_time"),
    ("fill at first failure", "on >= off - 1 point (no target)", "win_fill", "lose_fill"),
]


# ------------------------------------------------------------ formatting

def quantiles(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    def q(f):
        return xs[min(len(xs) - 1, int(round(f * (len(xs) - 1))))]
    return [xs[0], q(0.1), q(0.25), q(0.5), q(0.75), q(0.9), xs[-1]]


def qrow(name, xs, fmt):
    qs = quantiles(xs)
    if qs is None:
        return f"| {name} | 0 |" + " - |" * 7
    n = sum(1 for x in xs if x is not None)
    return f"| {name} | {n} | " + " | ".join(fmt(v) for v in qs) + " |"


def mib(b):
    return f"{b / 2**20:.1f}"


def shape(p):
    return (f"cap {p['cap']} fill {p['fill']}% sites {p['sites']} thr {p['threads']}"
            f"{' x' + str(p['xthread']) + '%' if p['threads'] > 1 else ''} "
            f"pin {p['pinned']}% tmp {p['temp']}% caches {p['caches']} {p['policies']} "
            f"tau {p['cache-tau']} mixed {p['mixed']}% change {p['change']}% "
            f"big {p['big']}%/{p['max-big']} wrap {p['wrapper']}%")


# ------------------------------------------------------------- sections

def section_header(data, rows):
    m = data["meta"]
    L = ["# Typed against untyped: generated workloads (scripts/sweep.py)\n"]
    L.append(f"* Date: {m.get('date')}; library: `{m.get('lib')}`")
    L.append(f"* Machine: {m.get('cpu')}, {m.get('nproc')} CPUs, {m.get('memory')}; load average "
             f"at start / end {m.get('loadavg_start', 0):.2f} / {m.get('loadavg_end', 0):.2f}")
    ok = sum(1 for r in rows if r.ok)
    L.append(f"* {len(rows)} configurations ({ok} complete), {len(data['runs'])} runs, "
             f"{m.get('jobs')} at a time, {m.get('total_sec', 0) / 60:.1f} min")
    if m.get("updated_seeds"):
        L.append(f"* Re-run on {m['updated']} and merged in: seeds "
                 + ", ".join(map(str, m["updated_seeds"])))
    if m.get("overrides"):
        L.append("* Overrides: " + ", ".join(f"{k}={v}" for k, v in m["overrides"]))
    L.append("* on = libmbuddy classified; off = `MBUDDY_CLASSIFY=off`; both capped at "
             "`MBUDDY_HEAP_SIZE`=cap. RSS = resident set after the drop and `malloc_trim(0)`.")
    L.append("")
    return L


def judged_on(r, lose):
    if lose == "lose_time":
        return r.time is not None
    if lose == "lose_fill":
        return None not in (r.fill_on, r.fill_off)
    if lose == "lose_rss":
        return r.rss is not None
    return True


def section_winloss(rows):
    ok = [r for r in rows if r.ok]
    L = ["## Win/loss: classified against off\n",
         "win / tie / loss per configuration; a loss is a miss of the issue's target "
         "(a win is the same margin the other way).\n",
         "| metric | target | wins | ties | losses | target holds |", "|---|---|---|---|---|---|"]
    for name, rule, win, lose in METRICS:
        judged = [r for r in ok if judged_on(r, lose)]
        w = sum(1 for r in judged if getattr(r, win)())
        lo = sum(1 for r in judged if getattr(r, lose)())
        L.append(f"| {name} | {rule} | {w} | {len(judged) - w - lo} | {lo} | "
                 f"{len(judged) - lo}/{len(judged)} |")
    single = sum(1 for r in ok if r.lose_time() and r.time_runs == 1)
    every = sum(1 for r in ok if not (r.lose_highorder() or r.lose_rss() or r.lose_time()))
    L.append(f"| all three targets | | | | | {every}/{len(ok)} |")
    weak = [r for r in ok if r.ho_off < OFF_WEAK]
    L.append("")
    L.append(f"Time: CPU seconds (user+sys) of the load and the drop, measured by the program; "
             f"on and off of a configuration run side by side. {single} of the time losses rest "
             f"on one pair of runs (far beyond the limit, or beyond the repeat budget); the "
             f"others are medians of 3.")
    L.append("")
    if weak:
        better = sum(1 for r in weak if r.ho_on > r.ho_off)
        worse = sum(1 for r in weak if r.ho_on < r.ho_off)
        L.append(f"Where off scores below {OFF_WEAK}/{weak[0].attempts} ({len(weak)} "
                 f"configurations): classified better in {better}, equal in "
                 f"{len(weak) - better - worse}, worse in {worse}; successes in total "
                 f"{sum(r.ho_on for r in weak)} classified against {sum(r.ho_off for r in weak)} "
                 f"off (median {statistics.median(r.ho_on for r in weak):g} against "
                 f"{statistics.median(r.ho_off for r in weak):g}).")
    else:
        L.append(f"Off never scored below {OFF_WEAK}: no configuration where typing had to win.")
    L.append("")
    return L


def section_distributions(rows):
    ok = [r for r in rows if r.ok]
    pct = lambda v: f"{v:.2f}"  # noqa: E731
    L = ["## Distributions\n", "| figure | n | min | p10 | p25 | median | p75 | p90 | max |",
         "|---|---|---|---|---|---|---|---|---|"]
    L.append(qrow("high-order successes, on", [r.ho_on for r in ok], str))
    L.append(qrow("high-order successes, off", [r.ho_off for r in ok], str))
    L.append(qrow("high-order on - off", [r.ho_diff for r in ok], lambda v: f"{v:+d}"))
    L.append(qrow("RSS on / off", [r.rss for r in ok], pct))
    L.append(qrow("CPU time on / off", [r.time for r in ok], pct))
    L.append(qrow("fail fill on (share of cap)", [r.fill_on for r in ok], pct))
    L.append(qrow("fail fill off (share of cap)", [r.fill_off for r in ok], pct))
    L.append(qrow("fail fill on - off", [None if None in (r.fill_on, r.fill_off)
                                         else r.fill_on - r.fill_off for r in ok],
                  lambda v: f"{v:+.3f}"))
    L.append(qrow("CPU seconds, on", [r.on["cpu_sec"] for r in ok], pct))
    L.append("")
    L.append("RSS after the drop against live bytes (resident set / bytes the program "
             "still holds; the program's own image counts, as for every allocator):\n")
    L.append("| allocator | moment | n | min | p10 | p25 | median | p75 | p90 | max |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("on", "off", *PEER_NAMES):
        for field, moment in (("rss_after_drop", "right after"), ("rss_after_trim", "after trim")):
            vals = []
            for r in rows:
                res = {"on": r.on, "off": r.off}.get(name, r.peers.get(name))
                if res and res.get("live_after_drop"):
                    vals.append(res[field] / res["live_after_drop"])
            qs = quantiles(vals)
            if qs:
                L.append(f"| {name} | {moment} | {len(vals)} | " +
                         " | ".join(f"{v:.2f}" for v in qs) + " |")
    L.append("")
    hist = [(0, 0), (1, 39), (40, 79), (80, 119), (120, 149), (150, 159), (160, 160)]
    L.append("High-order successes out of 160, configurations per band:\n")
    L.append("| band | " + " | ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in hist) + " |")
    L.append("|---|" + "---|" * len(hist))
    for name, get in (("on", lambda r: r.ho_on), ("off", lambda r: r.ho_off)):
        L.append(f"| {name} | " + " | ".join(str(sum(1 for r in ok if a <= get(r) <= b))
                                          for a, b in hist) + " |")
    L.append("")
    return L


BINS = [
    ("fill %", lambda p: p["fill"], [(30, 49), (50, 69), (70, 84), (85, 95)]),
    ("sites", lambda p: p["sites"], [(3, 9), (10, 99), (100, 499), (500, 2000)]),
    ("threads", lambda p: p["threads"], [(1, 1), (2, 2), (3, 4)]),
    ("pinned %", lambda p: p["pinned"], [(3, 10), (11, 25), (26, 40)]),
    ("mixed sites %", lambda p: p["mixed"], [(0, 0), (10, 30), (100, 100)]),
    ("changing sites %", lambda p: p["change"], [(0, 0), (10, 30), (60, 60)]),
    ("big-object sites %", lambda p: p["big"], [(0, 0), (5, 20), (50, 50)]),
    ("wrapped sites %", lambda p: p["wrapper"], [(0, 0), (20, 20), (100, 100)]),
    ("cache turnover (low end)", lambda p: float(p["cache-tau"].split(":")[0]),
     [(0, 0.5), (1, 2)]),
    ("pinned at churn start", lambda p: p["pinned-start"], [(0, 0.5), (0.51, 1)]),
]


def section_shapes(rows):
    ok = [r for r in rows if r.ok]
    L = ["## Where classification loses, by workload shape\n",
         "Configurations per parameter band; losses per metric; mean high-order "
         "successes on and off.\n",
         "| parameter | band | n | high-order losses | RSS losses | time losses | "
         "high-order on / off (mean) | RSS on/off (median) |",
         "|---|---|---|---|---|---|---|---|"]
    for name, get, bands in BINS:
        for a, b in bands:
            sel = [r for r in ok if a <= get(r.params) <= b]
            if not sel:
                continue
            L.append(shape_row(name, f"{a:g}" if a == b else f"{a:g}-{b:g}", sel))
    pols = {}
    for r in ok:
        pols.setdefault(r.params["policies"], []).append(r)
    for pol, sel in sorted(pols.items()):
        L.append(shape_row("eviction", pol, sel))
    L.append("")
    return L


def shape_row(name, band, sel):
    rss = [r.rss for r in sel if r.rss]
    return (f"| {name} | {band} | {len(sel)} | {sum(r.lose_highorder() for r in sel)} | "
            f"{sum(r.lose_rss() for r in sel)} | {sum(r.lose_time() for r in sel)} | "
            f"{statistics.mean(r.ho_on for r in sel):.0f} / "
            f"{statistics.mean(r.ho_off for r in sel):.0f} | "
            f"{statistics.median(rss) if rss else float('nan'):.2f} |")


def row_detail(r, commands):
    on, off = r.on, r.off
    L = [f"* **seed {r.seed}**: high-order {r.ho_on} on / {r.ho_off} off; RSS "
         f"{mib(r.rss_on)} / {mib(r.rss_off)} MiB ({r.rss:.2f}x) for {mib(on['live_after_drop'])} "
         f"MiB live; CPU {on['cpu_sec']:.2f} / {off['cpu_sec']:.2f} s "
         f"({r.time:.2f}x{', median of ' + str(r.time_runs) if r.time_runs > 1 else ''}); "
         f"fail fill {fmt_fill(r.fill_on)} / {fmt_fill(r.fill_off)}; "
         f"loses on: {', '.join(r.losses()) or 'nothing'}",
         f"  * shape: {shape(r.params)}",
         f"  * live at the attempts {mib(on['live_mean_at_attempts'])} / "
         f"{mib(off['live_mean_at_attempts'])} MiB "
         f"({on['live_mean_at_attempts'] / parse_cap(r.params['cap']):.0%} / "
         f"{off['live_mean_at_attempts'] / parse_cap(r.params['cap']):.0%} of the cap); "
         f"pressure events {on['pressure_events']} / {off['pressure_events']}; "
         f"user {on.get('user_sec', 0):.2f} / {off.get('user_sec', 0):.2f} s, sys "
         f"{on.get('sys_sec', 0):.2f} / {off.get('sys_sec', 0):.2f} s, minor faults "
         f"{on.get('minor_faults', 0)} / {off.get('minor_faults', 0)}",
         f"  * effective turnovers: caches {on.get('cache_tau')}, temporaries "
         f"{on.get('temp_tau')}; attempts on (S success, . failure): `{rle(on['timeline'])}`"]
    if commands:
        L.append(f"  * re-run: `python3 scripts/sweep.py --only {r.seed}`; on alone: "
                 f"`{commands['on']}`")
    return L


def rle(timeline):
    """'SSS..S' as '3S 2. 1S'."""
    out, i = [], 0
    while i < len(timeline):
        j = i
        while j < len(timeline) and timeline[j] == timeline[i]:
            j += 1
        out.append(f"{j - i}{timeline[i]}")
        i = j
    return " ".join(out)


def fmt_fill(v):
    return "-" if v is None else f"{v:.3f}"


def parse_cap(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def badness(r):
    """Order for the overall worst list: targets missed, then by how far."""
    ho = max(0.0, (r.ho_off - r.ho_on) / r.attempts - HIGHORDER_SLACK)
    rss = max(0.0, (r.rss or 1) - RSS_LIMIT)
    tm = max(0.0, (r.time or 1) - TIME_LIMIT)
    return (len([m for m in r.losses() if m != "fill"]), ho * 10 + rss + tm)


def section_worst(rows, commands, n):
    ok = [r for r in rows if r.ok]
    L = [f"## The {n} worst configurations\n"]
    worst = sorted(ok, key=badness, reverse=True)[:n]
    for r in worst:
        L += row_detail(r, commands.get(str(r.seed)))
    L.append("")
    for title, key in (("high-order (off - on)", lambda r: r.ho_off - r.ho_on),
                       ("RSS on / off", lambda r: r.rss or 0),
                       ("CPU time on / off", lambda r: r.time or 0)):
        top = sorted(ok, key=key, reverse=True)[:n]
        L.append(f"Worst by {title}: " + ", ".join(
            f"seed {r.seed} ({key(r):.2f})" if isinstance(key(r), float) else
            f"seed {r.seed} ({key(r)})" for r in top))
        L.append("")
    return L


def section_failures(data):
    bad = [r for r in data["runs"] if r.get("error")]
    if not bad:
        return []
    L = ["## Failed runs\n"]
    for r in bad:
        cmd = data.get("commands", {}).get(str(r["seed"]), {}).get(r["variant"], "")
        L.append(f"* seed {r['seed']} {r['variant']}: {r['error']}" + (f" — `{cmd}`" if cmd else ""))
    L.append("")
    return L


def render(data, worst=5):
    by = index(data["runs"])
    rows = [Row(int(s), p, by) for s, p in data["params"].items()]
    L = section_header(data, rows)
    if any(r.ok for r in rows):
        L += section_winloss(rows)
        L += section_distributions(rows)
        L += section_shapes(rows)
        L += section_worst(rows, data.get("commands", {}), worst)
    L += section_failures(data)
    return "\n".join(L) + "\n"
