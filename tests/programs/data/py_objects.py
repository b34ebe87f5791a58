# py_objects.py — json/dict/str-heavy workload for python-objects.test.
# Deterministic output (run with PYTHONHASHSEED=0); prints digests and sizes.
import collections
import gc
import hashlib
import json
import random
import re
import sys


def digest(obj):
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


rng = random.Random(20050301)

# 1. Build a large nested document, serialise and parse it repeatedly.
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 12)))
         for _ in range(5000)]
doc = {
    "users": [
        {"id": i, "name": rng.choice(words).title(), "tags": rng.sample(words, 5),
         "score": rng.random(), "nested": {"a": [i, i * 2, {"b": str(i)}]}}
        for i in range(10000)
    ],
    "meta": {w: len(w) for w in words},
}
text = json.dumps(doc, sort_keys=True)
print("json bytes", len(text))
for rnd in range(3):
    back = json.loads(text)
    assert back == doc
    text2 = json.dumps(back, sort_keys=True, indent=rnd or None)
    print("round", rnd, "bytes", len(text2), hashlib.md5(text2.encode()).hexdigest()[:12])
del back

# 2. Dict churn: insert, delete, resize, many small strings as keys.
d = {}
for i in range(200000):
    d["k%d" % (i * 7919 % 1000003)] = [i] * (i % 7)
    if i % 3 == 0:
        d.pop("k%d" % ((i // 2) * 7919 % 1000003), None)
print("dict size", len(d), "sum of lens", sum(map(len, d.values())))
d.clear()

# 3. String building, slicing, joining, formatting, regexes.
parts = []
for i in range(200000):
    parts.append(f"{i:06d}:{words[i % len(words)]}:{i * 0.5:.2f}")
big = "|".join(parts)
print("joined", len(big), hashlib.md5(big.encode()).hexdigest()[:12])
pat = re.compile(r"(\d{6}):([a-z]+):(\d+)\.50")
m = pat.findall(big)
print("regex matches", len(m), m[:2])
sub = re.sub(r"[aeiou]+", lambda mo: str(len(mo.group())), big[:2000000])
print("sub", len(sub), hashlib.md5(sub.encode()).hexdigest()[:12])
s = ""
for i in range(50000):
    s += words[i % 97]
    if len(s) > 10000:
        s = s[5000:]
print("concat tail", s[-20:], len(s))
print("split", len(big.split("|")), len(big.upper()), big.count("a"))
print("unicode", len(("\u00e9\u4e2d\U0001F600" * 50000).encode("utf-8")),
      len("\u00e9\u4e2d".join(words).encode("utf-16")))

# 4. Counters, sets, sorting, tuples, classes with __dict__, bytes.
c = collections.Counter(w[:3] for w in words * 40)
print("counter", c.most_common(3))
st = set()
for i in range(200000):
    st.add((i % 1000, str(i % 777)))
print("set", len(st))


class Node:
    def __init__(self, k, nxt):
        self.k = k
        self.nxt = nxt
        self.payload = {"k": k, "s": str(k) * 3}


head = None
for i in range(100000):
    head = Node(i, head)
n, total = head, 0
while n:
    total += n.k
    n = n.nxt
print("linked list sum", total)
head = None
ba = bytearray()
for i in range(100000):
    ba += i.to_bytes(4, "little")
print("bytearray", len(ba), hashlib.md5(ba).hexdigest()[:12])
big_list = sorted((rng.random(), i) for i in range(300000))
print("sorted", big_list[0][1], big_list[-1][1])

# 5. Reference cycles for the cyclic GC.
for r in range(20):
    cyc = []
    for i in range(5000):
        a, b = {}, {}
        a["b"], b["a"] = b, a
        cyc.append(a)
    del cyc
    gc.collect()
print("gc garbage", len(gc.garbage))
print("final digest", digest({"words": words[:100], "c": c.most_common(10)}))
sys.stdout.flush()
