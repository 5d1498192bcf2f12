# A/A of plain-decode blocks through mlx-lm generate_step (issue 10 note): the scatter of A B B A
# quad ratios when both sides are the same model. Run: .venv/bin/python docs/experiments/aa_plain_blocks.py
# (edit n= and the quad count at the top of block() / the loop).
import statistics
import time

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from mlatui.models.embedded import load_embedded
from mlatui.run.arms import copy_cache

model, tok, draft = load_embedded()
ctx = list(range(5, 1029))
cache = make_prompt_cache(model)
for i in range(0, len(ctx), 512):
    model(mx.array([ctx[i : i + 512]]), cache=cache)
    mx.eval([c.state for c in cache])
base = cache[0].offset
caches = {"A": copy_cache(cache), "B": copy_cache(cache)}


def block(c, n=48):
    t0 = time.perf_counter()
    n_ = 0
    t1 = None
    for _tok, _ in generate_step(mx.array([7]), model, max_tokens=n, prompt_cache=c):
        n_ += 1
        if n_ == 1:
            t1 = time.perf_counter()
        if n_ == n:
            break
    t2 = time.perf_counter()
    mx.synchronize()
    trim_prompt_cache(c, c[0].offset - base)
    return (t2 - t0) * 1e3, (t2 - t1) * 1e3 / (n - 1) * n


whole, steady = [], []
block(caches["A"])
block(caches["B"])
for q in range(12):
    order = "ABBA" if q % 2 == 0 else "BAAB"
    r = {"A": [], "B": []}
    for a in order:
        r[a].append(block(caches[a]))
    whole.append(sum(x[0] for x in r["A"]) / sum(x[0] for x in r["B"]))
    steady.append(sum(x[1] for x in r["A"]) / sum(x[1] for x in r["B"]))


def spread(v):
    v = sorted(v)
    return (
        round(statistics.median(v), 4),
        round(statistics.pstdev(v), 4),
        round(v[len(v) // 4], 4),
        round(v[3 * len(v) // 4], 4),
    )


print("whole ", spread(whole))
print("steady", spread(steady))
