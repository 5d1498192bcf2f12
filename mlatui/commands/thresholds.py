"""`mlatui thresholds`: the absorbed-path threshold of an MLA model, from its config alone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = (
    "MLA geometry and absorbed-path thresholds (T->inf and at several cache lengths) from a config"
)
GEOMETRY_KEYS = (
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "num_attention_heads",
)


def configure(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="PATH", help="a model folder with config.json")
    src.add_argument("--config", metavar="FILE", help="a config.json")
    src.add_argument(
        "--family",
        metavar="NAME",
        help="a built-in MLA family (its full config); mlx-vlm's as mlx-vlm:NAME",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def read_config(args: argparse.Namespace) -> tuple[dict, str]:
    from mlatui.errors import UserError

    if args.family:
        import copy

        from mlatui.models.families import lookup

        try:
            fam = lookup(args.family)
        except KeyError as e:
            raise UserError(e.args[0]) from None
        if fam.full is not None:
            return copy.deepcopy(fam.full), f"family {args.family} (full)"
        return copy.deepcopy(fam.tiny), f"family {args.family} (tiny; no public config)"
    path = Path(args.config) if args.config else Path(args.model) / "config.json"
    hint = "pass --model FOLDER (with config.json) or --config FILE"
    if not path.exists():
        raise UserError(f"{path}: no such file", hint)
    if not path.is_file():
        raise UserError(f"{path}: not a regular file", hint)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror})", hint) from None
    except (ValueError, RecursionError) as e:
        raise UserError(
            f"{path}: not valid JSON ({type(e).__name__}: {e})", "pass an mlx-lm/HF config.json"
        ) from None
    if not isinstance(config, dict):
        raise UserError(
            f"{path}: a config.json must be a JSON object, got {type(config).__name__}",
            "pass an mlx-lm/HF config.json",
        )
    return config, str(path)


def thresholds(config: dict) -> dict:
    from mlatui.config.model_inputs import is_positive_int, text_config
    from mlatui.errors import UserError
    from mlatui.gate.policy import THRESHOLD_CONTEXTS, UNBOUNDED, FormulaPolicy, Geometry

    nested = config.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        raise UserError(
            f"config 'text_config' must be a JSON object, got {type(nested).__name__}",
            "pass an mlx-lm/HF config.json",
        )
    text = text_config(config)
    missing = [k for k in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim") if text.get(k) is None]
    if missing:
        raise UserError(
            f"config has no {', '.join(missing)}: not an MLA model (model_type {config.get('model_type')!r})"
        )
    g: dict[str, Any] = {k: text.get(k) for k in GEOMETRY_KEYS}
    # a NoPE model (GLM-5.3-Flash, glm5_next) has qk_rope_head_dim 0
    nope_rope = g["qk_rope_head_dim"] == 0 and not isinstance(g["qk_rope_head_dim"], bool)
    bad = [
        f"{k}={g[k]!r}"
        for k in GEOMETRY_KEYS[:4]
        if g[k] is not None
        and not is_positive_int(g[k])
        and not (k == "qk_rope_head_dim" and nope_rope)
    ]
    if bad:
        raise UserError(
            f"config geometry must be positive integers, got {', '.join(bad)}",
            "pass an mlx-lm/HF config.json",
        )
    r, n, v = int(g["kv_lora_rank"]), int(g["qk_nope_head_dim"]), int(g["v_head_dim"])
    geometry, formula = Geometry(r, n, v, int(g["num_attention_heads"] or 1)), FormulaPolicy()
    limit = formula.limit(geometry)
    return {
        "model_type": config.get("model_type"),
        "text_model_type": text.get("model_type"),
        "geometry": g,
        "limit": None if limit == UNBOUNDED else limit,
        "always_absorbed": limit == UNBOUNDED,
        "exact_limit": r * (n + v) / (2 * r - n - v) if 2 * r > n + v else None,
        "thresholds": {
            str(t): (None if w == UNBOUNDED else w)
            for t in THRESHOLD_CONTEXTS
            for w in [formula.limit(geometry, t)]
        },
    }


def run(args: argparse.Namespace) -> int:
    from mlatui.views.mdtable import num, table

    config, source = read_config(args)
    out = thresholds(config)
    if args.json:
        print(json.dumps({"source": source, **out}, indent=2))
        return 0
    g = out["geometry"]
    print(f"{source}: model_type {out['model_type']}")
    print(
        f"MLA geometry: kv_lora_rank {g['kv_lora_rank']}, qk_nope {g['qk_nope_head_dim']}, "
        f"qk_rope {g['qk_rope_head_dim']}, v {g['v_head_dim']}, heads {g['num_attention_heads']}"
    )
    exact = f" (r*d/(2r-d) = {out['exact_limit']:.2f})" if out["exact_limit"] else ""
    if out["always_absorbed"]:
        print(
            "always absorbed: with d = nope + v >= 2r the materialised path never wins, at any "
            "L and T; stock mlx-lm absorbs only L == 1"
        )
    else:
        print(
            f"absorbed path wins for L <= {out['limit']} as T -> inf{exact}; stock mlx-lm absorbs only L == 1"
        )
    rows = [
        (f"{int(t):,}", "always absorbed" if w is None else w) for t, w in out["thresholds"].items()
    ]
    print(table(["cache T", "max absorbed L"], rows, cell=num))
    return 0
