"""The header's records of how a run was set up, as typed Structs: its settings (every choice
that shapes the figures), what code each arm slot ran, the runtime's own gate, the stored harness
bias, and the device's memory-bandwidth limit. A key a recording leaves out reads as its field's
default, and a field at its default is left out when written (`omit_defaults`), so a run
without a setting records no key for it. Nothing here imports mlx or textual.
"""

from __future__ import annotations

import msgspec

from mlatui.config.run_plan import OverrideValue, PlanRecord
from mlatui.stream.event_base import Count, Finite


class ArmSource(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What code an arm slot ran (mlatui.models.tree_model.provenance): its package's folder,
    how it was given ("installed" or the source tree's path), its version, a sha256 (16 hex) of
    each model file by its path in the package, and the git commit of a checkout."""

    path: str
    given: str
    package: str
    version: str
    files: dict[str, str]
    commit: str = ""
    dirty: bool | None = None  # with a commit: whether the checkout had uncommitted changes

    @property
    def installed(self) -> bool:
        return self.given == "installed"


class ArmSlot(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One slot's gate as recorded (`str(Threshold)`), in words, the code it ran, and why its
    branches are not counted where they are not (a source tree whose gate mlatui cannot read)."""

    gate: str
    label: str = ""
    source: ArmSource | None = None
    counters: str = ""


class RuntimeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The installed runtime and the gate form it has per attention class."""

    name: str
    version: str
    gate_forms: dict[str, str]
    state: str  # pre-fix | fixed


class BiasCell(msgspec.Struct, frozen=True, kw_only=True):
    """One A/A ratio as a bias: (median - 1) and its 95% CI in %, over `quads` quads."""

    phase: str
    context: Count
    width: Count
    bias_pct: Finite
    low_pct: Finite
    high_pct: Finite
    quads: Count


class HarnessBias(msgspec.Struct, frozen=True, kw_only=True):
    """The harness's bias an earlier A/A run measured for this device, scenario and settings
    (mlatui.store): the L = 1 headline, the worst cell at any width, and how many
    cells' CIs contain no bias."""

    max_abs_bias_pct: Finite
    at: BiasCell
    worst: BiasCell
    cis_containing_zero: Count
    n_cells: Count
    all_ci_contain_zero: bool
    measured_at: str


class RunSettings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The header's `settings`: every choice that shapes the figures (the fields
    mlatui.store.bias_key reads key a stored harness bias), the resolved plan as
    `bench --plan --format json` prints it, and the arm slots. A field that a run always
    records but an older recording may lack is None there (its reading is said beside it), so
    that a recording read and written again keeps its keys."""

    threshold: str = ""  # the patched slot's gate (`str(Threshold)`); "": the thresholds' policy
    indexer: str = ""  # the patched slot's indexer pooling
    null: bool | None = None  # A/A (None: an A/B)
    passes: tuple[str, ...] = ()  # each pass's tag, in order ("" for A/B)
    fill: str | None = None  # prefill | random-latents (None: prefill)
    settle: bool | None = None  # None: settled (see `settles`)
    cache_rounds: str = ""
    timed_gc: str = ""
    seed: int | None = None  # --seed (the run's seed is the scenario's plus this)
    overrides: dict[str, OverrideValue] | None = None
    random_weights: bool | None = None  # None: a checkpoint
    arm_threads: str = ""  # shared | one per arm
    arm_cpus: tuple[int, ...] | None = None
    dashboard: str = ""  # a dashboard in the run's process, and when it drew ("": none there)
    draft_kinds: tuple[str, ...] | None = None  # None: not recorded (the header's draft says)
    mtp_missing: str = ""  # why an MTP draft had no head to run
    plan: PlanRecord | None = None  # None: not recorded
    arms: dict[str, ArmSlot] = msgspec.field(default_factory=dict)  # by slot: stock, patched
    prefill: str = ""  # how a source-tree arm shares the prefill
    runtime: RuntimeRecord | None = None
    harness_bias: HarnessBias | None = None
    wired_limit: str = ""

    @property
    def settles(self) -> bool:
        """The device settles before each timed block (recordings that do not say did)."""
        return self.settle is not False

    def arm_source(self, slot: str) -> ArmSource | None:
        arm = self.arms.get(slot)
        return arm.source if arm is not None else None


class WorldRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The header's `distributed`: under mlx.launch, how many ranks, their backend, how the
    model is sharded and each rank's host (rank order); every field at its default for one
    process."""

    world_size: Count = 1
    backend: str = ""
    shard: str = ""  # tensor | pipeline
    hosts: tuple[str, ...] = ()


class BandwidthLimit(msgspec.Struct, frozen=True, kw_only=True):
    """The device's memory bandwidth (mlatui.store.device_bandwidth): the probe's
    measured read and copy, and the vendor's figure where the device is known."""

    measured_read_gb_s: Finite
    measured_copy_gb_s: Finite
    probe_bytes: Count | None = None
    published_gb_s: Finite | None = None
    published_name: str | None = None
    published_source: str | None = None
