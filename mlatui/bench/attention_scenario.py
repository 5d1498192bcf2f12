"""What `bench attention` and `calibrate` build (AttentionModel), and the scenario `bench
attention` part (b) writes: random weights from a family's config, one sweep phase, as TOML (and
the check that TOML, which has no null, can say that config)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AttentionModel:
    """What both parts build: a family's geometry at a size (or a model's own config), in a
    dtype, maybe quantised."""

    family: str
    size: str  # "full" or "tiny"
    dtype: str
    bits: int | None  # None: not quantised
    config: dict[str, Any] | None = None  # --config / --model: that config at full size

    def describe(self) -> str:
        return describe(self.size if self.config is None else "its config's", self.dtype, self.bits)

    def layer_config(self) -> dict[str, Any]:
        """The family's config (or the given one), for one layer's estimate."""
        from dataclasses import replace

        from mlatui.models.families import lookup

        fam = lookup(self.family)
        if self.config is not None:
            return replace(fam, full=self.config).config("full")
        return fam.config(self.size)


def describe(size: str, dtype: str, bits: int | None) -> str:
    quant = f"{bits}-bit weights" if bits else "unquantised weights"
    return f"{size} geometry, random weights, {dtype}, {quant}"


@dataclass(frozen=True)
class Sweep:
    """A sweep phase's grid: its contexts, its widths (L = 1 is added) and its rounds."""

    contexts: list[int]
    widths: list[int]
    reps: int


def scenario_toml(
    model: AttentionModel, layers: int | None, fill: str, sweep: Sweep
) -> tuple[str, dict[str, Any]]:
    """The scenario of part (b): random weights from the family's config at the model's size (or
    its own config), one sweep phase. Returns (TOML text, the model config it holds)."""
    from dataclasses import replace

    from mlatui.models.families import lookup

    fam, size = lookup(model.family), model.size
    if model.config is not None:
        fam, size = replace(fam, full=model.config), "full"
    config = fam.config(size, layers)
    spec: dict[str, Any] = {
        "source": "random",
        "family": config["model_type"],
        "dtype": model.dtype,
    }
    if model.bits:
        spec["bits"] = model.bits
    if fill != "prefill":
        spec["fill"] = fill
    shown_layers = f"{layers} layer(s)" if layers else "all layers"
    quantised = f" quantised to {model.bits} bits" if model.bits else ""
    lines = [
        f"name = {_toml_value(f'attention-{model.family}')}",
        "description = "
        + _toml_value(
            f"bench attention part (b): {model.family} ({size} geometry, {shown_layers}), random "
            f"{model.dtype} weights{quantised}, stock vs patched "
            "sweep. Rerun with: mlatui bench THIS.toml --random-weights"
        ),
        "seed = 0",
        "",
        *_toml_table("model", spec),
        *_toml_table("model.config", config),
        *_toml_table("draft", {"source": "none"}),
        "[[phase]]",
        'name = "sweep"',
        'kind = "sweep"',
        f"contexts = {_toml_value(sweep.contexts)}",
        f"widths = {_toml_value(sorted(set(sweep.widths) | {1}))}",
        f"reps = {sweep.reps}",
        "",
    ]
    return "\n".join(lines), config


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} to TOML")


def _toml_table(name: str, table: dict[str, Any]) -> list[str]:
    """`[name]` with its scalar keys, then its sub-tables. None values are left out (TOML has
    no null): the caller checks the written config round-trips."""
    lines = [f"[{name}]"]
    subtables = []
    for key, value in table.items():
        if value is None:
            continue
        if isinstance(value, dict):
            subtables.append((key, value))
            continue
        lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    lines.append("")
    for key, value in subtables:
        lines += _toml_table(f"{name}.{_toml_key(key)}", value)
    return lines


def _toml_key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def _check_round_trip(family_name: str, config: dict[str, Any], written: dict[str, Any]) -> None:
    """The scenario must build the same model as the family's config: TOML cannot say None, so a
    None that differs from mlx-lm's default would silently change the model."""
    from dataclasses import asdict

    from mlx_lm.utils import _get_classes

    from mlatui.errors import UserError

    _, args_cls = _get_classes(config)
    changed = _changed(asdict(args_cls.from_dict(config)), asdict(args_cls.from_dict(written)))
    if changed:
        raise UserError(
            f"{family_name}: a scenario cannot express its config ({', '.join(changed)}: None "
            "in the config, TOML has no null and mlx-lm's default differs); use --part a"
        )


def _changed(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _changed(x, y, f"{prefix}{k}.")
        elif x != y:
            out.append(f"{prefix}{k}={x!r} would be {y!r}")
    return out
