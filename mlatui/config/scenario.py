"""TOML scenarios: which model, which draft, and which phases to run.

The Structs below are the file's schema: each key once, with its type, its range and its default.
msgspec validates a file against them; its errors, and the few rules across keys that a schema
cannot say (`check_phases`), are one line naming the file, the key path and what is allowed.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta, Struct
from msgspec.structs import replace

from mlatui.config import checks
from mlatui.config.arm_settings import IndexerMode, Threshold, parse_arms
from mlatui.config.checks import ScenarioError as ScenarioError  # raised by load_scenario
from mlatui.config.checks import fail, one_of, read_toml, toml_text
from mlatui.config.draft_spec import LISTABLE_SOURCES, DraftSpec
from mlatui.config.model_inputs import check_config_types
from mlatui.config.phase_kind import SCENARIO_KINDS, PhaseKind
from mlatui.config.story import Story, StoryTable

ModelSource = Literal["embedded", "random", "path"]
Fill = Literal["prefill", "random-latents"]
DtypeName = Literal["float32", "bfloat16", "float16"]  # mlatui.models.loading.DTYPES maps them
ShardMode = Literal["tensor", "pipeline"]  # mlatui.host.distributed.ShardMode (no mlx here)
DTYPE_NAMES, FILLS = get_args(DtypeName), get_args(Fill)
# decode / tune: rounds of synced verify steps before their L = 1 check may decide
# (mlatui.measure.plans.VERIFY_MIN_ROUNDS says why 6)
DEFAULT_VERIFY_ROUNDS = 6

Positive = Annotated[int, Meta(ge=1)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Ints = tuple[Positive, ...]
NonEmpty = Annotated[Ints, Meta(min_length=1)]
Contexts = Annotated[
    tuple[Annotated[int, Meta(ge=16)], ...],
    Meta(min_length=1, description="cache lengths in tokens, e.g. contexts = [1024, 4096]"),
]
LISTABLE = Meta(extra={"one_of": tuple(LISTABLE_SOURCES)})
Temperature = Annotated[float, Meta(ge=0, le=10, description="0 = greedy")]


class Phase(Struct, frozen=True):
    """A phase as the engine runs it and a recording keeps it (the header's scenario, a
    BudgetPlanned): a key a recording lacks reads as its field's default, one this tool does not
    know is skipped."""

    name: str
    kind: Annotated[PhaseKind, Meta(extra={"one_of": SCENARIO_KINDS})]  # `+`'s is never written
    contexts: Contexts
    widths: NonEmpty = (1, 2, 3, 4)
    reps: Positive = 9  # rounds before the L = 1 check may decide (each: every width, A B B A)
    warmup: Annotated[int, Meta(ge=0)] = 2  # untimed warm-up calls before the timed ones
    tokens: Annotated[int, Meta(ge=4)] = 32
    depths: NonEmpty = (1, 2, 3)
    max_rounds: Positive | None = None  # while the check is inconclusive, add rounds up to this
    # decode / tune: `tokens` per block, `reps` rounds of two blocks per arm and setting
    temperature: Temperature = 0.0
    top_p: Annotated[float, Meta(ge=0, le=1, description="0 or 1: off")] = 0.0
    min_draft_share: Fraction = 0.25  # guard: a result whose accepted drafts are fewer is excluded
    min_verify_steps: Positive = 16  # guard: fewer verify steps than this are excluded
    min_distinct_4gram: Fraction = 0.5  # guard: text whose distinct-4-gram share is lower loops
    # per draft kind, depths other than `depths` (the budget keeps a weaker kind at fewer; none:
    # the kind is left out); the file's `kind_depths = { "draft-model" = [1] }`
    kind_depths: dict[Annotated[str, LISTABLE], Ints] = msgspec.field(default_factory=dict)
    verify_rounds: Annotated[int, Meta(ge=2)] = DEFAULT_VERIFY_ROUNDS  # synced verify rounds
    # decode / tune: take the verify steps from this sweep phase's rounds at the same context
    # when it measured every width they need ("": measure them; the budget's last resort)
    verify_from: Annotated[str, Meta(description="an earlier sweep phase's name")] = ""
    # decode / tune: a setting whose bound says it cannot win runs no blocks
    # (mlatui.measure.acceptance); false measures every setting (a test that needs measured blocks whatever the machine's speed)
    reject_by_bound: bool = True

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "kind", PhaseKind(self.kind))  # "sweep" reads as one

    def depths_for(self, kind: str) -> tuple[int, ...]:
        return self.kind_depths.get(kind, self.depths)


class PhaseTable(Phase, frozen=True, forbid_unknown_fields=True):
    """A scenario file's [[phase]] table: a key no Phase has is an error there, and every width
    is warmed before it is timed (its first call compiles). Tests' overrides may skip the
    warm-up (`Phase`'s floor, which their recordings read back with)."""

    warmup: Positive = 2


class ModelSpec(Struct, frozen=True, forbid_unknown_fields=True):
    source: ModelSource = "embedded"
    path: str | None = None
    family: str | None = None  # mlx-lm model_type for random weights
    config: dict[str, Any] = msgspec.field(default_factory=dict)  # config values for random weights
    bits: Literal[2, 3, 4, 5, 6, 8] | None = None
    dtype: DtypeName = "float32"
    fill: Fill = "prefill"  # random-latents: random weights only (timing, not values)
    shard: ShardMode = "tensor"  # under mlx.launch: model.shard | model.model.pipeline


SourceTree = Annotated[str, Meta(pattern=r"\S", description="an mlx-lm or mlx-vlm source tree")]


class Arms(Struct, frozen=True, forbid_unknown_fields=True):
    """[arms] a = "pre-fix", b = "installed": the two slots' gates, as --arms A,B says them; and
    a_source / b_source = "PATH": a slot whose model code comes from a source tree (an mlx-lm or
    mlx-vlm checkout or package folder; a relative path is read from the scenario's folder)."""

    a: str | None = None
    b: str | None = None
    a_source: SourceTree | None = None
    b_source: SourceTree | None = None


class ScenarioFile(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A scenario file's keys, each once."""

    name: str = ""
    description: str = ""
    seed: Annotated[int, Meta(ge=0)] = 0
    null: bool = False  # A/A: both arms the same (both stock, then both patched)
    threshold: str | int | None = None  # the patched arm's MLA gate (None: formula; the CLI wins)
    indexer: IndexerMode | None = None  # the patched arm's indexer pooling (None: patched)
    # launch fits the phases to this many seconds (mlatui.run.budget); 0: off
    budget_s: Annotated[float, Meta(ge=0, lt=1e7, description="seconds; 0: no budget")] = 0.0
    temperature: Temperature = 0.0  # every phase's, unless it says its own
    top_p: Fraction = 0.0
    model: ModelSpec = ModelSpec()
    draft: DraftSpec = DraftSpec()
    phases: tuple[PhaseTable, ...] = msgspec.field(default=(), name="phase")
    # what the run is to show: a budgeted run picks the contexts that show it on this device
    story: StoryTable | None = None
    arms_table: Arms | None = msgspec.field(default=None, name="arms")


class ScenarioRecord(Struct, frozen=True, kw_only=True):
    """The header's `scenario` (Scenario.record): its names, where its model and drafts come
    from, its phases as they run and its run-wide settings. A key an older recording lacks
    reads as its field's default (`seed`: None, not recorded)."""

    name: str
    path: str = ""
    description: str = ""
    model_source: str = ""
    model_family: str | None = None
    draft_source: str = ""
    draft_sources: tuple[str, ...] = ()
    phases: tuple[Phase, ...] = ()
    seed: int | None = None
    null: bool = False
    threshold: str | None = None
    arms: str | None = None  # "A,B" as --arms reads it
    arm_sources: dict[str, str] = msgspec.field(default_factory=dict)  # slot -> source tree
    indexer: str | None = None
    budget_s: float = 0.0
    fill: str = "prefill"
    story: Story | None = None

    def phase(self, name: str) -> Phase | None:
        """The phase called `name` (an A/A pass's phase by its base name)."""
        return next((p for p in self.phases if p.name == name), None)


class Scenario(ScenarioFile, frozen=True, kw_only=True):
    threshold: str | None = None  # as runs record it (`str(Threshold)`)
    path: str = ""

    @property
    def arms(self) -> str | None:
        """[arms] a, b: "A,B" as --arms reads it (None: by the runtime's state)."""
        t = self.arms_table
        return ",".join(map(str, parse_arms(f"{t.a},{t.b}"))) if t and t.a else None

    @property
    def arm_sources(self) -> tuple[tuple[str, str], ...]:
        """(slot, path) of the arms whose model code comes from a source tree."""
        t, folder = self.arms_table, Path(self.path).parent
        given = (("stock", t.a_source), ("patched", t.b_source)) if t else ()
        return tuple((slot, str(folder / Path(p).expanduser())) for slot, p in given if p)

    def run_seed(self, offset: int = 0) -> int:
        """The run's one seed (`seed`, plus `--seed`): random weights, random context ids, the
        synthetic draft, random-latent fills, sampling and every bootstrap CI draw from it."""
        return self.seed + offset

    def record(self) -> ScenarioRecord:
        """What the header keeps of the scenario."""
        return ScenarioRecord(
            name=self.name,
            path=self.path,
            description=self.description,
            model_source=self.model.source,
            model_family=self.model.family,
            draft_source=self.draft.source.value,
            draft_sources=tuple(k.value for k in self.draft.kinds),
            phases=self.phases,
            seed=self.seed,
            null=self.null,
            threshold=self.threshold,
            arms=self.arms,
            arm_sources=dict(self.arm_sources),
            indexer=self.indexer,
            budget_s=self.budget_s,
            fill=self.model.fill,
            story=self.story,
        )


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


def _with_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    """The file as the schema reads it: each phase with the defaults it takes from its kind and
    from the file (a name, its kind's reps, the file's sampling)."""
    phases = raw.get("phase")
    if not isinstance(phases, list):
        return raw
    sampling = {k: raw[k] for k in ("temperature", "top_p") if k in raw}
    out = []
    for i, p in enumerate(phases):
        if isinstance(p, dict):
            kind = PhaseKind.of(p["kind"]) if isinstance(p.get("kind"), str) else None
            reps = {"reps": kind.rules.default_reps} if kind else {}
            p = {"name": f"{p.get('kind')}-{i + 1}", **reps, **sampling, **p}
        out.append(p)
    return {**raw, "phase": out}


def parse_scenario(path: Path, raw: dict[str, Any]) -> Scenario:
    """The scenario a parsed TOML file holds, checked; a ScenarioError in one line."""
    read = _with_defaults(raw)  # msgspec's key paths and values are this document's
    try:
        file = msgspec.convert(read, ScenarioFile)
    except msgspec.ValidationError as e:
        raise checks.validation_error(path, ScenarioFile, read, e) from None
    fields = {**msgspec.structs.asdict(file), "path": str(path), "name": file.name or path.stem}
    scenario = Scenario(**fields)
    return replace(
        scenario,
        phases=check_phases(path, scenario.phases),
        draft=check_draft(path, raw.get("draft") or {}, file.draft),
        threshold=check_gates(path, file),
    )


def load_scenario(path: str | Path | None = None) -> Scenario:
    """The scenario at `path` (None: the shipped default), checked before anything loads, its
    model and draft configs against their family's declared types too."""
    where = Path(path) if path is not None else shipped("default")
    scenario = parse_scenario(where, read_toml(where))
    model, draft = scenario.model, scenario.draft
    model_type = model.config.get("model_type") or model.family
    check_config_types(where, "model.config", model_type, model.config)
    check_config_types(where, "draft.config", draft.config.get("model_type"), draft.config)
    return scenario


def check_phases(where: Path, phases: tuple[Phase, ...]) -> tuple[Phase, ...]:
    """What each phase's kind asks of it (mlatui.config.phase_kind.KindRules), and what it asks
    of the phases before it."""
    if not phases:
        kinds = ", ".join(SCENARIO_KINDS)
        raise fail(where, "", f"needs at least one [[phase]] table (kinds: {kinds})")
    out: tuple[Phase, ...] = ()
    for i, p in enumerate(phases):
        out += (_check_phase(where, f"phase[{i}]", p, out),)
    return out


def _check_phase(where: Path, at: str, p: Phase, earlier: tuple[Phase, ...]) -> Phase:
    rules = p.kind.rules
    if not rules.in_scenarios:
        raise one_of(where, f"{at}.kind", SCENARIO_KINDS, p.kind.value)
    for k in p.kind_depths:
        if k not in LISTABLE_SOURCES:
            raise one_of(where, f"{at}.kind_depths", LISTABLE_SOURCES, k, "keys among")
    if p.reps < rules.min_reps:
        what = f"expected an integer >= {rules.min_reps} for a {p.kind} phase, got {p.reps}"
        raise fail(where, f"{at}.reps", what)
    if p.max_rounds is not None and p.max_rounds < p.reps:
        what = f"expected an integer >= reps ({p.reps}), got {p.max_rounds}"
        raise fail(where, f"{at}.max_rounds", what)
    if rules.one_depth and len(p.depths) != 1:
        what = "a decode phase takes one depth, e.g. depths = [2]"
        raise fail(where, f"{at}.depths", what, 'use kind = "tune" to compare depths')
    if p.name in (q.name for q in earlier):
        what = f"{toml_text(p.name)} names an earlier phase too"
        raise fail(where, f"{at}.name", what, "give each phase its own name")
    sweeps = [q.name for q in earlier if q.kind.rules.model_widths]
    if p.verify_from and p.verify_from not in sweeps:
        what = f"{toml_text(p.verify_from)} is not an earlier sweep phase"
        hint = f"name one of {', '.join(sweeps)}, or leave it out" if sweeps else "leave it out"
        raise fail(where, f"{at}.verify_from", what, hint)
    if rules.timed_widths and 1 not in p.widths:
        p = replace(p, widths=(1, *p.widths))  # the L = 1 control is never optional
    return p


def check_draft(where: Path, raw: dict[str, Any], draft: DraftSpec) -> DraftSpec:
    """`source` or `sources`, each a kind measured on its own, each once."""
    if "source" in raw and "sources" in raw:
        raise fail(where, "draft", "give 'source' or 'sources', not both")
    for i, s in enumerate(draft.sources):
        if s not in LISTABLE_SOURCES:
            raise one_of(where, f"draft.sources[{i}]", LISTABLE_SOURCES, s.value)
        if s in draft.sources[:i]:
            raise fail(where, f"draft.sources[{i}]", f"names {toml_text(s.value)} twice")
    if not draft.sources:
        return draft
    one = len(draft.sources) == 1
    return replace(draft, source=draft.sources[0], sources=() if one else draft.sources)


def check_gates(where: Path, file: ScenarioFile) -> str | None:
    """The model a random build needs, both arms' gates or neither, and the threshold as runs
    record it (`str(Threshold)`)."""
    model = file.model
    if model.source == "random" and not (model.family and model.config):
        raise fail(
            where,
            "model",
            "source = \"random\" needs 'family' (an mlx-lm model_type) and a [model.config] table",
        )
    t = file.arms_table
    if t and (t.a, t.b).count(None) == 1:
        raise fail(
            where,
            "arms",
            'give both a = "..." and b = "..." (e.g. a = "pre-fix", b = "installed"), or neither',
        )
    if t and t.a:
        try:
            parse_arms(f"{t.a},{t.b}")
        except ValueError as e:
            raise fail(where, "arms", str(e).split(": ", 1)[1]) from None
    if file.threshold is None:
        return None
    try:
        return str(Threshold.parse(file.threshold))
    except ValueError as e:
        raise fail(
            where,
            "threshold",
            f"expected {str(e).split(': use ', 1)[1]}, got {toml_text(file.threshold)}",
        ) from None
