# py_threads.py — many Python threads allocating at once, for python-threads.test.
# Objects are made in one thread and freed in another (queues), threads are
# created and joined repeatedly (per-thread caches are born and die), and a
# thread pool churns json/str/dict work.  Output is deterministic.
import concurrent.futures
import hashlib
import json
import queue
import threading

N_PRODUCERS = 16
N_CONSUMERS = 16
ITEMS = 3000


def make_item(t, i):
    return {"t": t, "i": i, "s": ("%d-%d-" % (t, i)) * (1 + i % 20),
            "l": list(range(i % 50)), "b": bytes(i % 300)}


def producer(t, q):
    for i in range(ITEMS):
        q.put(make_item(t, i))
    q.put(None)


def consumer(q, results, lock):
    h = hashlib.sha1()
    n = 0
    while True:
        item = q.get()
        if item is None:
            break
        h.update(json.dumps([item["t"], item["i"], len(item["s"]), sum(item["l"]), len(item["b"])]).encode())
        n += 1
        del item          # freed here, in a different thread from where it was made
    with lock:
        results.append((n, h.hexdigest()))


# 1. Producer/consumer pairs: cross-thread frees.
queues = [queue.Queue(maxsize=64) for _ in range(N_PRODUCERS)]
results, lock = [], threading.Lock()
threads = [threading.Thread(target=producer, args=(t, queues[t])) for t in range(N_PRODUCERS)]
threads += [threading.Thread(target=consumer, args=(queues[t], results, lock)) for t in range(N_CONSUMERS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("producer/consumer:", len(results), "consumers,", sum(n for n, _ in results), "items")
print("digest", hashlib.sha1("".join(sorted(h for _, h in results)).encode()).hexdigest()[:16])


# 2. Waves of short-lived threads, each with a private heap-heavy job.
def job(k, out):
    d = {}
    for i in range(2000):
        d[str(i * k)] = [str(i)] * (i % 5)
    s = json.dumps(d, sort_keys=True)
    out[k] = hashlib.md5(s.encode()).hexdigest()[:8]


for wave in range(10):
    out = {}
    ths = [threading.Thread(target=job, args=(wave * 100 + k, out)) for k in range(32)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    print("wave", wave, hashlib.md5(json.dumps(out, sort_keys=True).encode()).hexdigest()[:12])


# 3. A thread pool doing string/dict work; results in submission order.
def work(n):
    words = ["w%05d" % ((n * 31 + i) % 9973) for i in range(3000)]
    counts = {}
    for w in words:
        counts[w[:4]] = counts.get(w[:4], 0) + 1
    text = " ".join(sorted(words))
    return n, len(text), sorted(counts.items())[:2]


with concurrent.futures.ThreadPoolExecutor(max_workers=24) as ex:
    res = list(ex.map(work, range(400)))
print("pool", len(res), res[0], res[-1][:2])
print("pool digest", hashlib.sha1(repr(res).encode()).hexdigest()[:16])


# 4. Thread-local data that dies with its thread.
tl = threading.local()
sizes = []


def with_local(i):
    tl.buf = [bytearray(1000 + i) for _ in range(200)]
    tl.s = "x" * (i * 1000)
    sizes.append(sum(map(len, tl.buf)) + len(tl.s))


ths = [threading.Thread(target=with_local, args=(i,)) for i in range(64)]
for th in ths:
    th.start()
for th in ths:
    th.join()
print("thread-local total", sum(sizes))
