"""Contention figures of scripts/bench.py: lock counts from a libmbuddy
built with --enable-lock-stats and from jemalloc under lockprof.so, the
serial fraction, and the Amdahl prediction of throughput at more threads.

The model. Every lock is a serial resource: while one thread holds it,
the others that need it wait. A lock counts when threads alive at the
same time took it in turns (a lock passed down a chain of threads that
each exit serialises nothing). The busiest such lock bounds the
throughput: in a run at T threads that lasted E seconds (the workload's
timed part), if it was held H seconds in all, the serial fraction is
s = H / (T * E), the share of each thread's time spent inside the one
critical section every thread must queue for. Amdahl's law then bounds
the speed-up at N threads by S(N) = N / (1 + s * (N - 1)) (at most 1/s),
and the prediction is X(N) = X(1) * S(N), with X(1) the measured
one-thread throughput of the normal build. s is taken from the 2-thread
run, where the locks are really shared and their hold times include the
cache-line transfers between cores. The same rule applies to libmbuddy's
locks (one per heap, one per slab key and size class...) and to each of
jemalloc's mutexes (one per arena and bin...).

What it leaves out, both ways: waiting for a lock is not counted as
serial (only holding it is), so convoys are missed; hold times grow with
more cores contending for a lock's cache line; a thread that needs two
busy locks in a row is limited by both, where the busiest one alone is
counted; the workload's own scaling limits (memory bandwidth, its
queues) are not modelled. It is a ceiling set by the locks, for
comparing allocators under the same rules, not a forecast.
"""

import statistics

AGGREGATE = "pthread mutexes"  # lockprof.so reports one row per mutex


def parse_lock_lines(text):
    """The 'lockstat key=value ...' lines of a report, as dicts."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("lockstat "):
            continue
        row = {}
        for tok in line.split()[1:]:
            k, eq, v = tok.partition("=")
            if not eq:  # a word of a name with a space in it
                row["name"] = row.get("name", "") + " " + k
                continue
            row[k] = v if k == "name" else int(v)
        rows.append(row)
    return rows


def per_name(rows, aggregate):
    """Rows added up per lock name (all into one with aggregate)."""
    out = {}
    for r in rows:
        name = AGGREGATE if aggregate else r["name"]
        acc = out.setdefault(name, {k: 0 for k in r if k != "name"})
        for k, v in r.items():
            if k != "name":
                acc[k] += v
    return out


def run_figures(run):
    """Per-run contention figures, or None: per lock name its acquisitions
    per 1,000 operations, mean hold and wait, share contended; and the
    serial fraction of the run (from its busiest shared lock)."""
    res = run.get("result") or {}
    ops, sec, threads = res.get("ops"), res.get("sec"), res.get("threads")
    rows = run.get("locks")
    if rows is None or not ops or not sec or not threads:
        return None
    locks = {}
    for name, r in per_name(rows, run.get("lock_source") == "lockprof").items():
        if r["acquisitions"] <= 1:
            continue  # taken once at exit (the report's own lock)
        acq = r["acquisitions"]
        locks[name] = {
            "acq_per_kop": acq * 1000.0 / ops,
            "hold_ns": r["hold_ns"] / acq,
            "wait_ns": r["wait_ns"] / r["contended"] if r["contended"] else 0.0,
            "contended_pct": 100.0 * r["contended"] / acq,
            "instances": r["instances"],
        }
    busiest = max((r.get("busiest_hold_ns", r.get("shared_hold_ns", 0)) for r in rows), default=0)
    return {"locks": locks, "serial": busiest / (threads * sec * 1e9)}


def summarise_locks(runs):
    """Medians over runs of run_figures(), or None."""
    figs = [f for f in (run_figures(r) for r in runs) if f]
    if not figs:
        return None
    names = sorted({n for f in figs for n in f["locks"]})
    locks = {}
    for n in names:
        have = [f["locks"][n] for f in figs if n in f["locks"]]
        locks[n] = {k: statistics.median(h[k] for h in have) for k in have[0]}
    return {"locks": locks, "serial": statistics.median(f["serial"] for f in figs)}


def amdahl(x1, s, n):
    return x1 * n / (1 + s * (n - 1))


def prediction(summ, group, alloc, counted, threads):
    """Measured Mops/s at 1 and 2 threads of `alloc`, the serial fraction
    from its lock-counting twin `counted` at 2 threads, and the predicted
    Mops/s at each of `threads`; None without the figures."""
    one = summ.get((f"{group}-1t", alloc), {}).get("mops")
    two = summ.get((f"{group}-2t", alloc), {}).get("mops")
    locks = summ.get((f"{group}-2t", counted), {}).get("locks")
    if not one or not locks:
        return None
    s = locks["serial"]
    return {"x1": one, "x2": two, "serial": s, "pred": {n: amdahl(one, s, n) for n in threads}}
