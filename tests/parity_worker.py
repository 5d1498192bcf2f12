"""Run under `mlx.launch -n 2`: a tiny family sharded (tensor-parallel, or `--pipeline`: each rank
keeps a block of layers; `--both`: one, then the other), patched after sharding, against the same weights unsharded and stock on
this rank. One JSON line per family on stdout."""

import json
import sys

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from random_models import build_model

from mlatui.gate import mla
from mlatui.host import distributed
from mlatui.host.distributed import ShardMode
from mlatui.models import family_configs
from mlatui.run.arms import build_arms
from mlatui.run.engine_dist import shard

F32_TOL = 1e-4  # tests/test_mla.py's parity tolerance
WIDTHS = (1, 2, 3, 4)


def main(names: list[str], mode: ShardMode = ShardMode.TENSOR) -> None:
    world = distributed.world()
    assert world is not None and world.size == 2, "run me under mlx.launch -n 2"
    for name in names:
        full = build_model(name, seed=0)
        stock, _ = build_arms(full)
        sharded = build_model(name, seed=0, evaluate=False)
        shard(sharded, mode, distributed.group())
        _, patched = build_arms(sharded)
        heads = patched.report.geometry.num_heads
        mx.random.seed(1)
        context = mx.random.randint(0, family_configs.VOCAB_TINY, (1, 48))
        cs, cp = make_prompt_cache(stock.model), make_prompt_cache(patched.model)
        mx.eval(stock.model(context, cache=cs), patched.model(context, cache=cp))
        counters = mla.branch_counters(patched.model)
        counters.reset()
        diffs = {}
        for i, length in enumerate(WIDTHS):
            mx.random.seed(10 + i)
            tokens = mx.random.randint(0, family_configs.VOCAB_TINY, (1, length))
            a, b = stock.model(tokens, cache=cs), patched.model(tokens, cache=cp)
            mx.eval(a, b)
            diffs[length] = {
                "max_diff": mx.abs(a - b).max().item(),
                "close": mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item(),
                "argmax_equal": mx.array_equal(a.argmax(-1), b.argmax(-1)).item(),
            }
        snap = counters.snapshot()
        print(
            json.dumps(
                {
                    "rank": world.rank,
                    "family": name,
                    "mode": mode.value,
                    "heads_per_rank": heads,
                    "widths": {str(k): v for k, v in diffs.items()},
                    "absorbed": {str(k): v for k, v in snap["absorbed"].items()},
                    "materialised": {str(k): v for k, v in snap["materialised"].items()},
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    # `--pipeline`: pipeline only; `--both`: tensor, then pipeline, in one launch
    args = sys.argv[1:]
    names = [a for a in args if not a.startswith("--")]
    if "--both" in args:
        modes = [ShardMode.TENSOR, ShardMode.PIPELINE]
    else:
        modes = [ShardMode.PIPELINE if "--pipeline" in args else ShardMode.TENSOR]
    for mode in modes:
        main(names, mode)
