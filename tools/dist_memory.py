"""Memory per rank for the shipped scenarios' models (the README's 'Across machines' table).

Weights are counted on a lazy random build of each scenario's config (nothing is allocated), in
its dtype and bits; `mlatui.models.fit.estimate` adds three cache copies at the largest context and the
stock arm's materialised K/V of one layer; `DistRun.per_rank` splits it as each shard mode does.
Run: .venv/bin/python tools/dist_memory.py
"""

import json

from mlatui.config.scenario import load_scenario
from mlatui.host.distributed import ShardMode, World
from mlatui.models import register
from mlatui.models.fit import estimate, largest_context, size
from mlatui.models.loading import DTYPES, model_from_config, quantize
from mlatui.models.mx_typed import flat_arrays
from mlatui.run.engine_dist import DistRun

CHECKPOINT_LAYERS = {"deepseek-v3": 61}  # the real model, beside the scenario's 8-layer build


def lazy_bytes(config: dict, dtype: str, bits: int | None) -> int:
    model = model_from_config(dict(config))
    model.set_dtype(DTYPES[dtype])
    if bits:
        quantize(model, bits)
    return sum(v.nbytes for _, v in flat_arrays(model.parameters()))


def rows(name: str):
    s = load_scenario(f"scenarios/{name}.toml")
    if s.model.source == "embedded":
        config = json.load(open("mlatui/models/embedded/model/config.json"))
        dtype, bits = "float32", None
    else:
        config = dict(s.model.config, model_type=s.model.family)
        dtype, bits = s.model.dtype, s.model.bits
    configs = [config]
    if name in CHECKPOINT_LAYERS:
        configs.append(dict(config, num_hidden_layers=CHECKPOINT_LAYERS[name]))
    context = largest_context(s)
    for c in configs:
        e = estimate(c, dtype, lazy_bytes(c, dtype, bits), context, device=(None, "-"))
        row = [f"{name}, {c['num_hidden_layers']} layers, {f'{bits}-bit' if bits else dtype}"]
        row += [str(context), size(e.total_bytes)]
        for n in (2, 4):
            for mode in (ShardMode.TENSOR, ShardMode.PIPELINE):
                row.append(
                    size(DistRun(World(0, n, "ring", ("h",) * n), mode).per_rank(e).total_bytes)
                )
        yield row


if __name__ == "__main__":
    register()
    for scenario in ("deepseek-v3", "glm47-flash", "glm53-flash-sparse", "default"):
        for row in rows(scenario):
            print("| " + " | ".join(str(x) for x in row) + " |")
