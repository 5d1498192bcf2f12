"""TOML scenarios: which model, which draft, and which phases to run.

Errors name the file, the key and what is allowed, in one line.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlatui.config.checks import ScenarioError as ScenarioError  # raised by load_scenario
from mlatui.config.checks import check_keys, int_list
from mlatui.config.draft_spec import DraftSpec, kind_depths, parse_draft
from mlatui.config.gate_settings import IndexerMode, Threshold, parse_arms
from mlatui.config.phase_kind import SCENARIO_KINDS, PhaseKind
from mlatui.config.story import Story, parse_story

MODEL_SOURCES = ("embedded", "random", "path")


FILLS = ("prefill", "random-latents")
DTYPE_NAMES = ("float32", "bfloat16", "float16")  # mlatui.models.loading.DTYPES maps them to mlx
SHARD_MODES = ("tensor", "pipeline")  # mlatui.host.distributed.ShardMode (no mlx import here)
# decode / tune: rounds of synced verify steps before their L = 1 check may decide
# (mlatui.measure.plans.VERIFY_MIN_ROUNDS says why 6)
DEFAULT_VERIFY_ROUNDS = 6


@dataclass(frozen=True)
class Phase:
    name: str
    kind: PhaseKind
    contexts: tuple[int, ...]
    widths: tuple[int, ...] = (1, 2, 3, 4)
    reps: int = 9  # rounds before the L = 1 check may decide (each round: every width, A B B A)
    warmup: int = 2
    tokens: int = 32
    depths: tuple[int, ...] = (1, 2, 3)
    max_rounds: int | None = (
        None  # while the check is inconclusive, add rounds up to this (3x reps)
    )
    # decode / tune: `tokens` per block, `reps` rounds of two blocks per arm and setting
    temperature: float = 0.0  # 0: greedy
    top_p: float = 0.0  # 0 or 1: off
    min_draft_share: float = 0.25  # guard: a result whose accepted drafts are fewer is excluded
    min_verify_steps: int = 16  # guard: fewer verify steps than this are excluded
    min_distinct_4gram: float = 0.5  # guard: text whose distinct-4-gram share is lower loops
    # per draft kind, depths other than `depths` (the budget keeps a weaker kind at fewer)
    kind_depths: tuple[tuple[str, tuple[int, ...]], ...] = ()
    verify_rounds: int = DEFAULT_VERIFY_ROUNDS  # decode / tune: synced verify rounds (at least)
    # decode / tune: take the verify steps from this sweep phase's rounds at the same context
    # when it measured every width they need ("": measure them; the budget's last resort)
    verify_from: str = ""
    # decode / tune: a setting whose bound says it cannot win runs no blocks (mlatui.measure.bound);
    # false measures every setting (a test that needs measured blocks whatever the machine's speed)
    reject_by_bound: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PhaseKind(self.kind))  # "sweep" reads as the kind

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Phase | None:
        """A phase as `to_dict` wrote it (a header's plan, a BudgetPlanned's phases); None for
        a kind this tool does not know or a record that is not one."""
        kind = PhaseKind.of(d.get("kind"))
        if kind is None or not isinstance(d.get("name"), str) or not d.get("contexts"):
            return None
        known = {f.name for f in dataclasses.fields(cls)} - {"name", "kind"}
        values = {k: _frozen(v) for k, v in d.items() if k in known}
        if isinstance(d.get("kind_depths"), dict):
            values["kind_depths"] = tuple((k, tuple(v)) for k, v in d["kind_depths"].items())
        return cls(d["name"], kind, **values)

    def depths_for(self, kind: str) -> tuple[int, ...]:
        return dict(self.kind_depths).get(kind, self.depths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "contexts": list(self.contexts),
            "widths": list(self.widths),
            "reps": self.reps,
            "warmup": self.warmup,
            "tokens": self.tokens,
            "depths": list(self.depths),
            "max_rounds": self.max_rounds,  # None: each phase kind's default (mlatui.measure.plans)
            "temperature": self.temperature,
            "top_p": self.top_p,
            "min_draft_share": self.min_draft_share,
            "min_verify_steps": self.min_verify_steps,
            "min_distinct_4gram": self.min_distinct_4gram,
            "kind_depths": {k: list(d) for k, d in self.kind_depths},
            "verify_rounds": self.verify_rounds,
            "verify_from": self.verify_from,
            "reject_by_bound": self.reject_by_bound,
        }


@dataclass(frozen=True)
class ModelSpec:
    source: str = "embedded"  # embedded | random | path
    path: str | None = None
    family: str | None = None  # mlx-lm model_type for random weights
    config: dict[str, Any] = field(
        default_factory=dict[str, Any]
    )  # config values for random weights
    bits: int | None = None
    dtype: str = "float32"
    fill: str = "prefill"  # prefill | random-latents (random weights only: timing, not values)
    shard: str = (
        "tensor"  # under mlx.launch: tensor (model.shard) | pipeline (model.model.pipeline)
    )


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    description: str
    model: ModelSpec
    draft: DraftSpec
    phases: tuple[Phase, ...]
    seed: int = 0
    null: bool = False  # A/A: both arms the same (both stock, then both patched)
    threshold: str | None = None  # the patched arm's MLA gate (None: formula; the CLI wins)
    arms: str | None = None  # [arms] a, b: "A,B" as --arms reads it (None: by the runtime's state)
    # [arms] a_source / b_source: (slot, path) of arms whose model code comes from a source tree
    arm_sources: tuple[tuple[str, str], ...] = ()
    indexer: str | None = None  # the patched arm's indexer pooling (None: patched; the CLI wins)
    budget_s: float = 0.0  # launch fits the phases to this many seconds (mlatui.run.budget); 0: off
    # what the run is to show: a budgeted run picks the contexts that show it on this device
    story: Story | None = None

    def run_seed(self, offset: int = 0) -> int:
        """The run's one seed (`seed`, plus `--seed`): random weights, random context ids, the
        synthetic draft, random-latent fills, sampling and every bootstrap CI draw from it."""
        return self.seed + offset

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "description": self.description,
            "model_source": self.model.source,
            "model_family": self.model.family,
            "draft_source": self.draft.source.value,
            "draft_sources": [k.value for k in self.draft.kinds],
            "phases": [p.to_dict() for p in self.phases],
            "seed": self.seed,
            "null": self.null,
            "threshold": self.threshold,
            "arms": self.arms,
            "arm_sources": dict(self.arm_sources),
            "indexer": self.indexer,
            "budget_s": self.budget_s,
            "fill": self.model.fill,
            "story": self.story.to_dict() if self.story else None,
        }


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def shipped_dir() -> Path:
    """The shipped scenarios and recordings: package data of `mlatui.scenarios` when installed,
    else the checkout's `scenarios/` (a source tree run with PYTHONPATH, as on the lent GPU)."""
    try:
        base = Path(str(importlib.resources.files("mlatui.scenarios")))
        if (base / "default.toml").is_file():
            return base
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "scenarios"


def shipped(name: str) -> Path:
    """Path of a scenario shipped with mlatui (`default`, `glm47-flash`, ...)."""
    return shipped_dir() / (name if name.endswith(".toml") else f"{name}.toml")


def _int(where: str, key: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ScenarioError(f"{where}: '{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def _fraction(where: str, key: str, value: Any, closed_low: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (0 <= value <= 1 if closed_low else 0 < value <= 1):
        raise ScenarioError(f"{where}: '{key}' must be a number in [0, 1], got {value!r}")
    return float(value)


def _temperature(where: str, value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 <= value <= 10:
        raise ScenarioError(
            f"{where}: 'temperature' must be a number in [0, 10] (0 = greedy), got {value!r}"
        )
    return float(value)


def parse_phase(
    where: str, raw: dict[str, Any], index: int, defaults: dict[str, Any] | None = None
) -> Phase:
    defaults = defaults or {}
    allowed = (
        "name",
        "kind",
        "contexts",
        "widths",
        "reps",
        "warmup",
        "tokens",
        "depths",
        "max_rounds",
        "temperature",
        "top_p",
        "min_draft_share",
        "min_verify_steps",
        "min_distinct_4gram",
        "kind_depths",
        "verify_rounds",
        "verify_from",
        "reject_by_bound",
    )
    check_keys(where, raw, allowed)
    kind = PhaseKind.of(raw["kind"]) if isinstance(raw.get("kind"), str) else None
    if kind is None or not kind.rules.in_scenarios:
        raise ScenarioError(
            f"{where}: 'kind' must be one of {', '.join(SCENARIO_KINDS)}, got {raw.get('kind')!r}"
        )
    rules = kind.rules
    if "contexts" not in raw:
        raise ScenarioError(f"{where}: 'contexts' is required (a list of cache lengths in tokens)")
    widths = int_list(where, "widths", raw.get("widths", [1, 2, 3, 4]))
    if rules.timed_widths and 1 not in widths:
        widths = (1, *widths)  # the L = 1 control is never optional
    depths = int_list(where, "depths", raw.get("depths", [1, 2, 3]))
    if rules.one_depth and len(depths) != 1:
        raise ScenarioError(
            f'{where}: a decode phase takes one depth, e.g. depths = [2]; use kind = "tune" to compare depths'
        )
    reps = _int(where, "reps", raw.get("reps", rules.default_reps), rules.min_reps)
    max_rounds = raw.get("max_rounds")
    if max_rounds is not None:
        max_rounds = _int(where, "max_rounds", max_rounds, reps)
    return Phase(
        max_rounds=max_rounds,
        name=_text(where, "name", raw.get("name", f"{kind}-{index + 1}")),
        kind=kind,
        contexts=int_list(where, "contexts", raw["contexts"], minimum=16),
        widths=widths,
        reps=reps,
        warmup=_int(where, "warmup", raw.get("warmup", 2), 1),
        tokens=_int(where, "tokens", raw.get("tokens", 32), 4),
        depths=depths,
        temperature=_temperature(where, raw.get("temperature", defaults.get("temperature", 0.0))),
        top_p=_fraction(where, "top_p", raw.get("top_p", defaults.get("top_p", 0.0))),
        min_draft_share=_fraction(where, "min_draft_share", raw.get("min_draft_share", 0.25)),
        min_verify_steps=_int(where, "min_verify_steps", raw.get("min_verify_steps", 16), 1),
        min_distinct_4gram=_fraction(
            where, "min_distinct_4gram", raw.get("min_distinct_4gram", 0.5)
        ),
        kind_depths=kind_depths(where, raw.get("kind_depths", {})),
        verify_rounds=_int(
            where, "verify_rounds", raw.get("verify_rounds", DEFAULT_VERIFY_ROUNDS), 2
        ),
        verify_from=_name(where, "verify_from", raw.get("verify_from", "")),
        reject_by_bound=_bool(where, "reject_by_bound", raw.get("reject_by_bound", True)),
    )


def _bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _text(where: str, key: str, value: Any) -> str:
    """A name or description: a string (a table or a number here is a typo, never a name)."""
    if not isinstance(value, str):
        raise ScenarioError(
            f"{where}: '{key}' must be a string, e.g. {key} = \"my-run\"; got {value!r}"
        )
    return value


def _name(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{where}: '{key}' must be a phase name (a string), got {value!r}")
    return value


def _arms(where: str, raw: Any) -> str | None:
    """[arms] a = "pre-fix", b = "installed": the two slots' gates, as --arms A,B says them."""
    if raw is None:
        return None
    gates = {k: v for k, v in raw.items() if k not in SOURCE_KEYS} if isinstance(raw, dict) else raw
    if isinstance(gates, dict) and not gates and raw:
        return None  # only sources: the arms follow them (mlatui.run.arm_plan)
    if not isinstance(gates, dict) or set(gates) != {"a", "b"}:
        raise ScenarioError(
            f'{where}: [arms] must hold exactly a = "..." and b = "..." (e.g. a = "pre-fix", '
            f'b = "installed"), and optionally a_source / b_source = "PATH", got {raw!r}'
        )
    try:
        baseline, candidate = parse_arms(f"{raw['a']},{raw['b']}")
    except ValueError as e:
        raise ScenarioError(f"{where}: [arms] {str(e).split(': ', 1)[1]}") from None
    return f"{baseline},{candidate}"


SOURCE_KEYS = {"a_source": "stock", "b_source": "patched"}


def _arm_sources(where: str, raw: Any) -> tuple[tuple[str, str], ...]:
    """[arms] b_source = "PATH": the slot whose model code comes from a source tree (an mlx-lm
    or mlx-vlm checkout or package folder); a relative path is read from the scenario's folder."""
    if not isinstance(raw, dict):
        return ()
    out = []
    for key, slot in SOURCE_KEYS.items():
        if key not in raw:
            continue
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise ScenarioError(f"{where}: [arms] {key} must be a path (a string), got {value!r}")
        path = Path(value).expanduser()
        out.append((slot, str(path if path.is_absolute() else Path(where).parent / path)))
    return tuple(out)


def load_scenario(path: str | Path | None = None) -> Scenario:
    path = Path(path) if path is not None else shipped("default")
    if not path.exists():
        raise ScenarioError(
            f"{path}: no such scenario file (shipped ones: default, glm47-flash, deepseek-v3, glm53-flash-sparse)"
        )
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: invalid TOML ({e})") from e
    check_keys(
        str(path),
        raw,
        (
            "name",
            "description",
            "seed",
            "null",
            "threshold",
            "indexer",
            "budget_s",
            "temperature",
            "top_p",
            "model",
            "draft",
            "phase",
            "story",
            "arms",
        ),
    )
    sampling = {
        "temperature": _temperature(str(path), raw.get("temperature", 0.0)),
        "top_p": _fraction(str(path), "top_p", raw.get("top_p", 0.0)),
    }
    threshold = raw.get("threshold")
    if threshold is not None:
        try:
            threshold = str(Threshold.parse(threshold))
        except ValueError as e:
            raise ScenarioError(
                f"{path}: 'threshold' must be {str(e).split(': use ', 1)[1]}"
            ) from None
    arms = _arms(str(path), raw.get("arms"))
    arm_sources = _arm_sources(str(path), raw.get("arms"))
    indexer = raw.get("indexer")
    if indexer is not None and indexer not in tuple(IndexerMode):
        raise ScenarioError(f'{path}: \'indexer\' must be "patched" or "stock", got {indexer!r}')
    budget_s = raw.get("budget_s", 0)
    if (
        isinstance(budget_s, bool)
        or not isinstance(budget_s, (int, float))
        or not (0 <= budget_s < 1e7)
    ):
        raise ScenarioError(
            f"{path}: 'budget_s' must be a number of seconds >= 0 (0: no budget), got {budget_s!r}"
        )
    null = raw.get("null", False)
    if not isinstance(null, bool):
        raise ScenarioError(f"{path}: 'null' must be true or false, got {null!r}")
    model_raw = raw.get("model", {})
    check_keys(
        f"{path} [model]",
        model_raw,
        ("source", "path", "family", "config", "bits", "dtype", "fill", "shard"),
    )
    shard = model_raw.get("shard", "tensor")
    if shard not in SHARD_MODES:
        raise ScenarioError(
            f"{path} [model]: 'shard' must be one of {', '.join(SHARD_MODES)}, got {shard!r}"
        )
    fill = model_raw.get("fill", "prefill")
    if fill not in FILLS:
        raise ScenarioError(
            f"{path} [model]: 'fill' must be one of {', '.join(FILLS)}, got {fill!r}"
        )
    source = model_raw.get("source", "embedded")
    if source not in MODEL_SOURCES:
        raise ScenarioError(
            f"{path} [model]: 'source' must be one of {', '.join(MODEL_SOURCES)}, got {source!r}"
        )
    if model_raw.get("dtype", "float32") not in DTYPE_NAMES:
        raise ScenarioError(f"{path} [model]: 'dtype' must be one of {', '.join(DTYPE_NAMES)}")
    if source == "random" and not (
        model_raw.get("family") and isinstance(model_raw.get("config"), dict)
    ):
        raise ScenarioError(
            f"{path} [model]: source = \"random\" needs 'family' (an mlx-lm model_type) and a [model.config] table"
        )
    bits = model_raw.get("bits")
    if bits is not None and bits not in (2, 3, 4, 5, 6, 8):
        raise ScenarioError(f"{path} [model]: 'bits' must be one of 2, 3, 4, 5, 6, 8, got {bits!r}")
    model = ModelSpec(
        source,
        model_raw.get("path"),
        model_raw.get("family"),
        dict(model_raw.get("config", {})),
        bits,
        model_raw.get("dtype", "float32"),
        fill,
        shard,
    )
    draft = parse_draft(f"{path} [draft]", raw.get("draft", {}))
    phases_raw = raw.get("phase", [])
    if not isinstance(phases_raw, list) or not phases_raw:
        raise ScenarioError(
            f"{path}: needs at least one [[phase]] table (kinds: {', '.join(SCENARIO_KINDS)})"
        )
    for i, p in enumerate(phases_raw):
        if not isinstance(p, dict):
            raise ScenarioError(
                f"{path} [[phase]] #{i + 1}: must be a table (keys name, kind, contexts, ...), got {p!r}"
            )
    phases = tuple(
        parse_phase(f"{path} [[phase]] #{i + 1}", p, i, sampling) for i, p in enumerate(phases_raw)
    )
    return Scenario(
        name=_text(str(path), "name", raw.get("name", path.stem)),
        path=str(path),
        description=_text(str(path), "description", raw.get("description", "")),
        model=model,
        draft=draft,
        phases=phases,
        seed=_int(str(path), "seed", raw.get("seed", 0), 0),
        null=null,
        threshold=threshold,
        arms=arms,
        arm_sources=arm_sources,
        indexer=indexer,
        budget_s=float(budget_s),
        story=parse_story(f"{path} [story]", raw.get("story")),
    )
