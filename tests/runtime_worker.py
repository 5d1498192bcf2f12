"""Run inside a subprocess whose sys.path puts a PR-form mlx-lm first (tests/test_runtime_arms.py):
build a tiny model, make the default arms for that runtime, step L = 1..4 on a shared warm cache
and print what each arm did as one JSON line."""

import copy
import json
import sys

import mlx.core as mx
import msgspec
from mlx_lm.models.cache import make_prompt_cache
from random_models import build_model

from mlatui.models import family_configs
from mlatui.run.arms import arm_settings, build_arms, resolve_gates, runtime_gates

F32_TOL = 1e-4  # as tests/test_mla.py: float32, the two branches differ by summation order


def main(family: str) -> None:
    import mlx_lm

    model = build_model(family, dtype=mx.float32)
    mx.eval(model.parameters())
    runtime = runtime_gates(model)
    gates = resolve_gates(None, None, None, runtime)
    a, b = build_arms(model, gates)
    cache = make_prompt_cache(model)
    mx.eval(model(mx.arange(72)[None] % family_configs.VOCAB_TINY, cache=cache))
    out = {
        "mlx_lm": mlx_lm.__file__,
        "runtime": runtime.describe(),
        "fixed": runtime.fixed,
        "arms": msgspec.to_builtins(arm_settings(gates, runtime)),
        "steps": {},
    }
    ca, cb = copy.deepcopy(cache), copy.deepcopy(cache)
    for length in (1, 2, 3, 4):
        mx.random.seed(length)
        tokens = mx.random.randint(0, family_configs.VOCAB_TINY, (1, length))
        a.counters.reset()
        b.counters.reset()
        la, lb = a.model(tokens, cache=ca), b.model(tokens, cache=cb)
        mx.eval(la, lb)
        out["steps"][length] = {
            "identical": mx.array_equal(la, lb).item(),
            "close": mx.allclose(la, lb, atol=F32_TOL, rtol=F32_TOL).item(),
            "a": a.counters.snapshot(),
            "b": b.counters.snapshot(),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
