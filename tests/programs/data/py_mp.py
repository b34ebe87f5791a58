# py_mp.py — multiprocessing under the allocator, for python-multiprocessing.test.
# Usage: py_mp.py fork|spawn|forkserver
# A Pool of the given start method maps an allocation-heavy task; with "fork"
# background threads keep allocating in the parent while it forks, so the
# allocator's fork handling is exercised.  Output is deterministic.
import hashlib
import json
import multiprocessing as mp
import sys
import threading


def task(n):
    d = {"k%d" % i: [i, str(i) * (i % 9), {"n": n}] for i in range(2000 + n % 100)}
    s = json.dumps(d, sort_keys=True)
    lst = sorted(s.split(","), key=lambda x: (len(x), x))
    return n, len(s), hashlib.md5("".join(lst).encode()).hexdigest()[:10]


def chatter(stop):
    junk = []
    while not stop.is_set():
        junk.append({"x": "y" * 100, "l": list(range(50))})
        if len(junk) > 1000:
            junk = []


def main():
    method = sys.argv[1]
    ctx = mp.get_context(method)
    stop = threading.Event()
    bg = []
    if method == "fork":
        bg = [threading.Thread(target=chatter, args=(stop,)) for _ in range(3)]
        for t in bg:
            t.start()
    tasks = 300 if method == "fork" else 120
    with ctx.Pool(4, maxtasksperchild=25) as pool:
        res = pool.map(task, range(tasks), chunksize=5)
        res2 = sorted(pool.imap_unordered(task, range(tasks, tasks + 40)))
    stop.set()
    for t in bg:
        t.join()
    print(method, "results", len(res), len(res2))
    print(method, "first", res[0], "last", res2[-1])
    print(method, "digest", hashlib.sha1(repr(res + res2).encode()).hexdigest()[:16])
    # A Queue and explicit Processes too.
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(q, i)) for i in range(6)]
    for p in procs:
        p.start()
    got = sorted(q.get() for _ in procs)
    for p in procs:
        p.join()
    print(method, "processes", got, [p.exitcode for p in procs])


def worker(q, i):
    q.put((i, task(i * 1000)[1]))


if __name__ == "__main__":
    main()
