"""MLA attention benchmark (a): forced absorbed vs materialised branches on one attention layer.

Timed through the one sampler (`mlatui.measure.sampler`): per context, rounds in which every width is
measured once per branch as an A B B A quad (mirrored on odd rounds, widths rotating), every sample
at the same cache length (the step's tokens are trimmed off again), warm-up excluded, raw samples
kept. Figures are medians over rounds with seeded 95% bootstrap CIs; the per-width figure is the
paired ratio absorbed/materialised. Part (b), whole model stock vs patched, is the engine's sweep
(`mlatui bench SCENARIO.toml --random-weights`), see `mlatui.commands.bench_attention`.

The crossover search behind `mlatui calibrate` probes the same forced branches, bisected per
context to the widest L at which the absorbed branch still wins; each probe is one width timed
through the sampler, decided by the median of the per-round paired ratio absorbed/materialised."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import CacheList, KVCache, trim_prompt_cache

from mlatui.bench.attention_scenario import AttentionModel
from mlatui.gate import mla
from mlatui.gate.policy import ForcedPolicy, Geometry
from mlatui.measure.bandwidth import ModelBytes, effective_gb_s, utilisation
from mlatui.measure.estimates import stable_seed
from mlatui.measure.records import BRANCHES, BenchRecord, interval_dict, verdict, within_noise
from mlatui.measure.sampler import Hooks, SamplerPlan, SamplerRun, sample_context, timed_ms
from mlatui.models import step_bytes
from mlatui.models.loading import DTYPES, model_from_config, quantize
from mlatui.models.mx_typed import before_step
from mlatui.stream.event_base import Interval
from mlatui.stream.phrases import interval_text

ARMS = BRANCHES


# ---- one attention layer, two forced branches -----------------------------------------------


@dataclass
class ForcedArms:
    geometry: Geometry
    absorbed: nn.Module
    materialised: nn.Module
    hidden: int
    takes_scale: bool  # mistral4: __call__(x, attn_scale, mask, cache)
    split_caches: bool  # longcat_flash_sparse: __call__(x, mask, latent_cache, index_cache)
    own_caches: bool  # glm5_next: a cache list with a pooling cache, filled through the layer
    dtype: mx.Dtype = mx.float32


def forced_arms(
    family: str,
    size: str = "full",
    bits: int | None = None,
    dtype: mx.Dtype = mx.float32,
    config: dict[str, Any] | None = None,
) -> ForcedArms:
    """One random-weight attention layer of the family's geometry (or `config`'s), as two twins
    that always take the absorbed / the materialised branch (they share the weights)."""
    attn = attention_layer(family, size, bits=bits, dtype=dtype, config=config)
    arms = []
    for force in (True, False):
        t = mla.twin(attn)
        mla.patch_model(t, ForcedPolicy(force))
        arms.append(t)
    params = inspect.signature(type(attn).__call__).parameters
    takes_scale, split_caches = "attn_scale" in params, "latent_cache" in params
    # an indexer that pools its keys into windows keeps a pooling cache in the layer's list
    own_caches = hasattr(getattr(attn, "indexer", None), "index_kpool")
    output = attn.o_proj if hasattr(attn, "o_proj") else attn.dense  # bailing: dense
    hidden = output.weight.shape[0]
    return ForcedArms(
        mla.geometry_of(attn),
        arms[0],
        arms[1],
        hidden,
        takes_scale,
        split_caches,
        own_caches,
        dtype,
    )


def layer_cache(arms: ForcedArms, context: int) -> Any:
    """The layer's cache at `context` tokens: random latents where the cache is a latent (and
    index) KVCache; for a layer with its own cache list (glm5_next: index keys, a pooling cache,
    projected keys), filled through the layer itself in chunks, so every part agrees."""
    if not arms.own_caches:
        return random_cache(arms.absorbed, context, 0, arms.dtype)
    module = sys.modules[type(arms.absorbed).__module__]
    indexer = arms.absorbed.indexer
    cache = module.CacheList(
        module.KVCache(),
        module.KVCache(),
        module.PoolingCache(indexer.index_kpool),
        module.KVCache(),
    )
    mx.random.seed(0)
    for start in range(0, context, PREFILL_CHUNK):
        chunk = min(PREFILL_CHUNK, context - start)
        x = mx.random.normal((1, chunk, arms.hidden)).astype(arms.dtype)  # (B, L, D)
        mx.eval(arms.materialised(x, None, cache))
    return cache


def random_cache(attn: nn.Module, context: int, seed: int = 0, dtype: mx.Dtype = mx.float32) -> Any:
    """A cache holding `context` random latents (normalised like kv_a_layernorm's output); filling it
    through the layer would cost a materialised prefill per chunk and buys nothing for timing."""
    mx.random.seed(seed)
    r, rope = attn.kv_lora_rank, attn.qk_rope_head_dim
    latent = KVCache()
    latent.update_and_fetch(
        mx.random.normal((1, 1, context, r)).astype(dtype),  # (B, 1, T, r)
        mx.random.normal((1, 1, context, rope)).astype(dtype),  # (B, 1, T, rope)
    )
    indexer = getattr(attn, "indexer", None)
    if indexer is None:
        mx.eval(latent.state)
        return latent
    index = KVCache()
    k = mx.random.normal((1, 1, context, indexer.head_dim)).astype(dtype)  # (B, 1, T, Di)
    # mlx-lm's indexers store the keys twice, mlx-vlm's keys and an empty value
    lm_indexer = type(indexer).__module__.startswith("mlx_lm.")
    index.update_and_fetch(k, k if lm_indexer else mx.zeros((1, 1, context, 0), dtype))
    cache = CacheList(latent, index)
    mx.eval(cache.state)
    return cache


PREFILL_CHUNK = 512


def _offset(cache: Any) -> int:
    parts = getattr(cache, "caches", None)  # mlx-lm's and mlx-vlm's CacheList
    return parts[0].offset if parts else cache.offset


def attention_step(
    arms: ForcedArms, width: int, offset: int
) -> Callable[[nn.Module, Any], mx.array]:
    """One forward of `width` new tokens on a cache holding `offset` tokens. The inputs and the
    causal mask are built and evaluated here, once, so the timed call holds only the forward."""
    mx.random.seed(0)
    x = mx.random.normal((1, width, arms.hidden)).astype(arms.dtype)  # (B, L, D)
    scale = mx.ones((width, 1), dtype=arms.dtype)
    mask = create_causal_mask(width, offset) if width > 1 else None
    mx.eval(x, scale, *([mask] if mask is not None else []))

    def step(attn: nn.Module, cache: Any) -> mx.array:
        if arms.takes_scale:
            return attn(x, scale, mask, cache)
        if arms.split_caches:
            parts = getattr(cache, "caches", None)
            latent, index = (parts[0], parts[1]) if parts else (cache, None)
            return attn(x, mask, latent_cache=latent, index_cache=index)
        if arms.own_caches:  # builds its causal mask itself
            return attn(x, None, cache)
        return attn(x, mask=mask, cache=cache)

    return step


def forced_measure(
    arms: ForcedArms, cache: Any, widths: Sequence[int]
) -> Callable[[str, int], float]:
    """The sampler's `measure(arm, width)`: one timed forward of that branch at that width on the
    shared cache (the timed region holds the forward and its `mx.eval` sync only), then the
    width's tokens are trimmed off again, so every sample sees the same cache length."""
    offset = _offset(cache)
    steps = {w: attention_step(arms, w, offset) for w in widths}
    modules = {"absorbed": arms.absorbed, "materialised": arms.materialised}
    held = [cache]  # a cache that cannot be trimmed is put back from its copy after each step

    def measure(arm: str, width: int) -> float:
        step, module = steps[width], modules[arm]
        if _offset(held[0]) != offset:  # checked before the timed region opens
            raise RuntimeError(f"cache holds {_offset(held[0])} tokens, the steps expect {offset}")
        if not arms.own_caches:
            ms = timed_ms(lambda: step(module, held[0]), mx.eval)
            trim_prompt_cache(held, width)
            return ms
        rewind = before_step(held)
        ms = timed_ms(lambda: step(module, held[0]), mx.eval)
        rewind(width)
        return ms

    return measure


def forced_plan(widths: Sequence[int], rounds: int, seed: int) -> SamplerPlan:
    """Forced branches: no L = 1 check (the branches differ at every width), a fixed number of
    rounds (odd counts are rounded up to whole pairs by the sampler)."""
    return SamplerPlan(
        tuple(dict.fromkeys(widths)),
        min_rounds=rounds,
        max_rounds=rounds,
        warmup=1,
        control_width=None,
        arms=ARMS,
        seed=seed,
    )


def time_forced(
    arms: ForcedArms,
    cache: Any,
    plan: SamplerPlan,
    on_round: Callable[[Any], None] = lambda e: None,
    check_stop: Callable[[], None] = lambda: None,
) -> SamplerRun:
    """Both forced branches at every width of `plan`, through the sampler; `check_stop` runs
    before every step (it raises to stop)."""
    return sample_context(
        plan,
        Hooks(forced_measure(arms, cache, plan.widths), on_round=on_round, check_stop=check_stop),
    )


def bandwidth_figures(
    step_ms: Interval, nbytes: int, limit: dict[str, Any]
) -> dict[str, Interval | None]:
    """Effective GB/s and MBU (against the measured limit, and the published one where known)
    of a step that must read `nbytes`, from its time over the same rounds."""
    published = limit.get("published_gb_s")
    return {
        "gb_s": effective_gb_s(step_ms, nbytes),
        "mbu": utilisation(step_ms, nbytes, limit["measured_read_gb_s"]),
        "mbu_published": utilisation(step_ms, nbytes, published) if published else None,
    }


@dataclass(frozen=True)
class SweepHooks:
    """What the caller hears during a sweep: progress lines, each context's records as soon as
    it is done (streamed to JSONL), and a stop check run before every step (it raises)."""

    progress: Callable[[str], None] = lambda line: None
    on_records: Callable[[list[BenchRecord]], None] = lambda records: None
    check_stop: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class _SweepFacts:
    """What every record of a sweep shares."""

    family: str
    settings: dict[str, Any]
    layer_bytes: ModelBytes
    limit: dict[str, Any]  # the device's bandwidth limit (store.device_bandwidth)
    env: dict[str, Any]


def forced_sweep(
    model: AttentionModel,
    contexts: Sequence[int],
    widths: Sequence[int],
    reps: int,
    env: dict | None = None,
    hooks: SweepHooks = SweepHooks(),
) -> list[BenchRecord]:
    """Forced absorbed vs materialised branch per context, all widths of a context in one sampler
    run of `reps` rounds. Returns one record per (context, width, branch) with its raw samples,
    their round indices and the context's estimates (step ms, the paired ratio and its verdict,
    the bytes a step reads, GB/s and MBU): everything its table is printed from
    (mlatui.views.bench_report.forced_summary). A stop (Interrupted from `hooks.check_stop`)
    returns the contexts done so far."""
    from mlatui.host.signals import Interrupted
    from mlatui.measure.records import environment
    from mlatui.store import device_bandwidth

    dtype = DTYPES[model.dtype]
    arms = forced_arms(model.family, model.size, model.bits, dtype=dtype, config=model.config)
    device_env = env or environment()
    facts = _SweepFacts(
        model.family,
        _settings(model, reps, arms.geometry),
        step_bytes.attention_bytes(arms.absorbed, dtype.size),
        device_bandwidth(device_env),
        env or {},
    )
    widths = sorted(set(widths))
    records: list[BenchRecord] = []
    for context in contexts:
        cache = layer_cache(arms, context)
        plan = forced_plan(widths, reps, stable_seed("attention-forced", model.family, context))

        def on_round(est, context=context, plan=plan) -> None:
            hooks.progress(f"T={context}: round {est.rounds}/{plan.first_rounds}")

        try:
            run = time_forced(arms, cache, plan, on_round, hooks.check_stop)
        except Interrupted:  # keep the contexts already done; this one is incomplete
            break
        done = [r for width in widths for r in _width_records(facts, run, context, width, hooks)]
        records += done
        hooks.on_records(done)
        del cache
    return records


def _settings(model: AttentionModel, reps: int, g: Geometry) -> dict[str, Any]:
    return dict(
        size=model.size,
        bits=model.bits,
        dtype=model.dtype,
        reps=reps,
        geometry=g.key,
        heads=g.num_heads,
        sampler="rounds of A B B A quads (mirrored on odd rounds), widths rotating",
        estimator="median over rounds, 95% seeded bootstrap CI",
    )


def _width_records(
    facts: _SweepFacts, run: SamplerRun, context: int, width: int, hooks: SweepHooks
) -> list[BenchRecord]:
    """Both branches' records at one width of a context, and its progress line."""
    est = run.final
    ratio = est.ratio[width]
    a, m = est.step_ms["absorbed", width], est.step_ms["materialised", width]
    hooks.progress(
        f"T={context} L={width}: absorbed {a.median:.3f} ms, materialised {m.median:.3f} ms, "
        f"absorbed/materialised {interval_text(ratio)}: "
        f"{verdict(ratio)}"
    )
    needed = facts.layer_bytes.step(width, context)
    records = []
    for arm in ARMS:
        figures = bandwidth_figures(est.step_ms[arm, width], needed.total.high, facts.limit)
        mine = [t for t in run.timings if t.arm == arm and t.width == width]
        details = {
            **facts.settings,
            "rounds": run.rounds,
            "sample_rounds": [t.round for t in mine],
            "step_ms": interval_dict(est.step_ms[arm, width]),
            "ratio_absorbed_over_materialised": interval_dict(ratio),
            "seed": run.plan.seed,
            "step_bytes": needed.to_dict(),
            "bandwidth_limit": facts.limit,
            **{name: interval_dict(iv) if iv is not None else None for name, iv in figures.items()},
        }
        records.append(
            BenchRecord(
                "attention-forced",
                facts.family,
                arm,
                context,
                width,
                [t.ms for t in mine],
                details,
                facts.env,
                note=verdict(ratio),
            )
        )
    return records


def find_crossover(
    faster: Callable[[int], bool], max_width: int, progress: Callable[[str], None] = lambda s: None
) -> int:
    """Largest width in [1, max_width] where `faster(width)` (absorbed beats materialised), by
    bisection: assumes absorbed wins at 1 on a warm cache and the win region is contiguous."""
    if faster(max_width):
        return max_width
    lo, hi = 1, max_width
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if faster(mid):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Probe:
    """One bisection probe: per-branch step ms and the paired ratio absorbed/materialised."""

    width: int
    absorbed: Interval
    materialised: Interval
    ratio: Interval
    faster: bool  # absorbed faster: the ratio's median < 1

    @property
    def within_noise(self) -> bool:
        return within_noise(self.ratio)


@dataclass(frozen=True)
class CalibrateHooks:
    """What the caller hears during a calibration: progress lines, each probe as it completes,
    and a stop check run before every step (it raises Interrupted)."""

    progress: Callable[[str], None] = lambda line: None
    on_probe: Callable[[int, Probe], None] = lambda context, probe: None
    check_stop: Callable[[], None] = lambda: None


def calibrate(
    model: AttentionModel,
    contexts: Sequence[int],
    reps: int = 6,
    max_width: int = 2048,
    hooks: CalibrateHooks = CalibrateHooks(),
) -> tuple[Any, dict[int, int], dict[int, list[Probe]]]:
    """Forced-branch timing of one attention layer of `model`; returns (geometry, crossovers,
    probes). Each probe runs `reps` sampler rounds at one width; `hooks.on_probe` gets each
    probe as it completes. When `hooks.check_stop` raises Interrupted, the crossovers of the
    contexts completed so far are returned (probes: every completed one)."""
    from mlatui.bench import attention as attnbench
    from mlatui.host.signals import Interrupted
    from mlatui.models.loading import DTYPES

    family = model.family
    arms = attnbench.forced_arms(
        family, model.size, model.bits, dtype=DTYPES[model.dtype], config=model.config
    )
    crossovers: dict[int, int] = {}
    probes: dict[int, list[Probe]] = {}
    for context in contexts:
        cache = attnbench.layer_cache(arms, context)
        probes[context] = []

        def faster(width: int, context=context, cache=cache) -> bool:
            plan = attnbench.forced_plan(
                (width,), reps, stable_seed("calibrate", family, context, width)
            )
            run = attnbench.time_forced(arms, cache, plan, check_stop=hooks.check_stop)
            est = run.final
            ratio = est.ratio[width]
            a, m = est.step_ms["absorbed", width], est.step_ms["materialised", width]
            probe = Probe(width, a, m, ratio, ratio.median < 1)
            probes[context].append(probe)
            hooks.on_probe(context, probe)
            noise = "; CI straddles 1: within noise" if probe.within_noise else ""
            hooks.progress(
                f"T={context} L={width}: absorbed {a.median:.3f} ms, materialised {m.median:.3f} ms, "
                f"absorbed/materialised {interval_text(ratio)} "
                f"over {run.rounds} rounds: {'absorbed' if probe.faster else 'materialised'} "
                f"faster{noise}"
            )
            return probe.faster

        try:
            crossovers[context] = find_crossover(faster, max_width)
        except Interrupted:
            break
        del cache
    return arms.geometry, crossovers, probes


def attention_layer(
    name: str,
    size: str = "full",
    bits: int | None = None,
    seed: int = 0,
    dtype: mx.Dtype = mx.float32,
    config: dict[str, Any] | None = None,
) -> nn.Module:
    """One MLA attention module of the family's geometry (mlx-lm's or mlx-vlm's,
    mlatui.models.families; `config`, when given, instead of the family's at `size`) with
    random weights; only its own weights are allocated (the rest of the model is never
    evaluated)."""
    from mlatui.models.families import lookup

    mx.random.seed(seed)
    family = lookup(name)
    if config is not None:
        family = replace(family, full=config)
    # one layer where the family's layer pattern survives it; hybrids and mlx-vlm's families are
    # built whole, lazily (their layer patterns name indices), and only the layer is evaluated
    one_layer = 1 if family.runtime == "mlx-lm" and not family.hybrid else None
    model = model_from_config(family.config("full" if config is not None else size, one_layer))
    modules = [m for _, m in mla.mla_modules(model)]
    # a layer that runs its own indexer where some layers share another's top-k
    attn = next((m for m in modules if getattr(m, "indexer", False) is not None), modules[0])
    attn.set_dtype(dtype)
    if bits:
        quantize(attn, bits)
    attn.eval()
    mx.eval(attn.parameters())
    return attn
