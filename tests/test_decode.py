"""Decode through mlx-lm's runtime: acceptance forms, streams and blocks, guards, tune verdict."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from mlatui.measure.acceptance import AcceptanceCounts, VerifyStep, steps_from_flags
from mlatui.run.phases.decode_verdict import (
    Guard,
    GuardSettings,
    first_divergence,
    guard_warnings,
    pick,
    tune_verdict,
)
from mlatui.stream.phase_rows import DecodeRow

# depth 3: accept all three (then the bonus), accept 1, accept 0, accept 2
STEPS = [VerifyStep(3, 3, 4), VerifyStep(3, 1, 2), VerifyStep(3, 0, 1), VerifyStep(3, 2, 3)]


def test_conditional_acceptance_matches_a_hand_computed_example():
    c = AcceptanceCounts(3).add_all(STEPS)
    # position 1 reached 4 times, accepted 3; position 2 reached by the 3 steps that accepted
    # position 1, accepted 2 times; position 3 reached twice, accepted once
    assert c.reached_at == [4, 3, 2] and c.accepted_at == [3, 2, 1] and c.drafted_at == [4, 4, 4]
    assert c.conditional == pytest.approx((3 / 4, 2 / 3, 1 / 2))
    assert c.unconditional == pytest.approx((3 / 4, 2 / 4, 1 / 4))
    assert c.mean_accepted == pytest.approx(6 / 4)
    assert c.draft_share == pytest.approx(6 / 10) and c.emitted_per_verify == pytest.approx(2.5)
    assert AcceptanceCounts(**dataclasses.asdict(c)) == c  # as an event carries them


def test_depths_never_mix():
    with pytest.raises(ValueError):
        AcceptanceCounts(2).add(VerifyStep(3, 3, 4))
    with pytest.raises(ValueError):
        AcceptanceCounts(2).merged(AcceptanceCounts(3))


def test_steps_rebuilt_from_mlx_lm_from_draft_flags():
    T, F = True, False
    flags = [T, T, T, F, T, F, F, T, T, F]
    assert steps_from_flags(flags, 3, len(flags)) == STEPS
    # the budget runs out: the last step drafts only what is left, and ends on an accepted draft
    assert steps_from_flags([T, T, T, F, T], 3, 5) == [VerifyStep(3, 3, 4), VerifyStep(1, 1, 1)]
    assert steps_from_flags([F, F], 2, 2) == [VerifyStep(2, 0, 1), VerifyStep(1, 0, 1)]


def test_guards_flag_barely_speculated_and_impossible_speedups():
    settings = GuardSettings(min_draft_share=0.25, min_verify_steps=4)
    rare = AcceptanceCounts(3).add_all([VerifyStep(3, 0, 1)] * 30 + [VerifyStep(3, 1, 2)] * 2)
    (w,) = guard_warnings(rare, 0.9, settings)
    assert w.startswith(str(Guard.BARELY_SPECULATED)) and "6% of 34 tokens" in w
    good = AcceptanceCounts(3).add_all(STEPS * 3)
    assert guard_warnings(good, 1.4, settings) == []
    # 2.5 tokens per verify cannot buy a speedup whose CI starts at 3x
    (w,) = guard_warnings(good, 3.0, settings)
    assert w.startswith(str(Guard.IMPOSSIBLE_SPEEDUP))
    few = AcceptanceCounts(3).add_all(STEPS[:2])
    assert any(
        x.startswith(str(Guard.TOO_FEW_VERIFIES)) for x in guard_warnings(few, 1.1, settings)
    )


def test_first_divergence_position():
    assert first_divergence([5, 1, 2, 3], [5, 1, 2, 3, 4]) is None
    assert first_divergence([5, 1, 2, 3], [5, 1, 9, 3]) == 2


def _rows(arm, speedups, warnings=None, valid=True):
    rows = [{"context": 1024, "arm": arm, "depth": 0, "tok_s": 50.0, "valid": valid}]
    for d, (m, lo, hi) in speedups.items():
        rows.append(
            {
                "context": 1024,
                "arm": arm,
                "depth": d,
                "tok_s": 50.0 * m,
                "vs_plain": m,
                "vs_plain_low": lo,
                "vs_plain_high": hi,
                "warnings": (warnings or {}).get(d, []),
                "valid": valid,
            }
        )
    return [msgspec.convert(r, DecodeRow) for r in rows]


def test_a_depth_wins_only_when_its_ci_lies_above_plain():
    d1, d2 = Setting(depth=1), Setting(depth=2)
    assert pick({d1: (1.3, 1.1, 1.5), d2: (1.6, 0.9, 2.2)}, 2.0) == d1  # d2 faster, not significant
    assert pick({d1: (1.3, 1.1, 1.5), d2: (1.31, 1.2, 1.4)}, 2.0) == d2  # within 2%: the deeper
    assert pick({d1: (1.05, 0.97, 1.1)}, 2.0) is None
    rows = _rows("patched", {1: (1.3, 1.1, 1.5)}) + _rows("stock", {1: (0.6, 0.55, 0.65)})
    v = tune_verdict(rows)
    assert "patched @ 1024: depth 1 wins 1.30× [1.10, 1.50] plain" in v
    assert "stock @ 1024: speculation rejected, best d1 0.60× [0.55, 0.65]" in v
    unsure = tune_verdict(_rows("patched", {1: (1.05, 0.97, 1.12)}))
    assert "no significant winner, best d1 1.05× [0.97, 1.12]" in unsure


def test_a_warned_result_is_left_out_of_the_verdict():
    rows = _rows(
        "patched",
        {1: (1.3, 1.1, 1.5), 2: (3.0, 2.8, 3.2)},
        warnings={2: ["barely speculated: 5% of 256 tokens were accepted drafts (< 25%)"]},
    )
    v = tune_verdict(rows)
    assert "depth 1 wins" in v and "d2 left out" in v and "3.00×" not in v
    assert "left out (L = 1 check" in tune_verdict(
        _rows("stock", {1: (1.3, 1.1, 1.5)}, valid=False)
    )


# -- blocks through mlx-lm's runtime, on real (tiny, random-weight) models -----------------------

import mlx.core as mx  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

from mlatui.measure.plans import Setting  # noqa: E402
from mlatui.run.arms import build_arms, cache_len, prefill  # noqa: E402
from mlatui.run.decode_stream import (  # noqa: E402
    Sampling,  # noqa: E402
    open_stream,
    rewind,
    run_block,
)
from mlatui.run.drafts import DraftModelSource  # noqa: E402
from mlatui.run.phases.results import L1Quads  # noqa: E402
from tests.random_models import build_model  # noqa: E402

CONTEXT = list(range(3, 99))  # 96 tokens; the stream starts at the last one


def _mlx_lm_greedy(model, n: int) -> list[int]:
    cache = make_prompt_cache(model)
    model(mx.array([CONTEXT[:-1]]), cache=cache)
    gen = generate_step(mx.array([CONTEXT[-1]]), model, max_tokens=n, prompt_cache=cache)
    return [int(t) for t, _ in gen]


def _arm_with(draft, seed: int = 1):
    target = build_model("deepseek_v3", seed=seed)
    stock, patched = build_arms(target)
    for arm in (stock, patched):
        arm.draft = draft() if draft else None
    return stock, patched


def _open(arm):
    prefill(arm, CONTEXT[:-1])
    return open_stream(arm, len(CONTEXT) - 1, CONTEXT[-1], CONTEXT[:-1])


SETTINGS = [0, 2, 1, 3, 0, 3, 1, 2]  # a round's worth of blocks in a rotated order


def test_blocks_at_every_setting_continue_one_greedy_stream():
    """Plain blocks (generate_step) and speculative blocks (speculative_generate_step) at
    different depths continue one stream: greedy, it is exactly mlx-lm's own greedy output, and
    the caches stay aligned with it after every block."""
    draft_model = build_model("deepseek_v3", seed=2, layers=1)
    stock, patched = _arm_with(lambda: DraftModelSource(draft_model))
    n = 6
    for arm in (stock, patched):
        s = _open(arm)
        for depth in SETTINGS:
            r = run_block(arm, s, Setting(depth=depth), n, Sampling(), seed=0)
            assert len(r.tokens) == n and sum(st.emitted for st in r.steps) == (n if depth else 0)
            assert cache_len(arm.cache) == s.covered
            assert s.tracks[""].draft_len <= s.covered
        want = _mlx_lm_greedy(arm.model, n * len(SETTINGS))
        assert s.tokens[1:] == want, arm.name
        rewind(arm, s)
        assert s.tokens == [CONTEXT[-1]] and cache_len(arm.cache) == len(CONTEXT) - 1
        assert cache_len(arm.draft.cache) == len(CONTEXT) - 1


def test_sampled_blocks_reproduce_from_the_seed_and_share_one_stream_across_arms():
    draft_model = build_model("deepseek_v3", seed=2, layers=1)
    sampling = Sampling(temperature=0.9, top_p=0.95)
    runs = []
    for seed in (11, 11, 12):
        stock, patched = _arm_with(lambda: DraftModelSource(draft_model))
        streams = []
        for arm in (stock, patched):
            s = _open(arm)
            for i, depth in enumerate(SETTINGS):
                run_block(arm, s, Setting(depth=depth), 5, sampling, seed=seed * 100 + i)
            streams.append(s.tokens)
        runs.append(streams)
    assert runs[0] == runs[1]  # exactly reproducible
    assert runs[0][0] == runs[0][1]  # both arms drew the same sampler stream
    assert runs[0][0] != runs[2][0]  # and the seed matters


def test_mtp_blocks_continue_the_greedy_stream(tmp_path):
    """The MTP loop (lazy drafts, one sync per verify), interleaved with plain blocks whose
    tokens the head catches up on: greedy, exactly plain greedy decoding."""
    from mlatui.run import drafts as mtp
    from tests.test_mtp import PROMPT, load, save_checkpoint

    save_checkpoint(tmp_path, "glm4_moe_lite", "index")
    model = load(tmp_path)
    head = mtp.load_mtp_draft(tmp_path, model)
    stock, _ = build_arms(model)
    stock.draft = head.twin()
    ctx = PROMPT  # on this random checkpoint the head's drafts are sometimes right
    prefill(stock, ctx[:-1])
    s = open_stream(stock, len(ctx) - 1, ctx[-1], ctx[:-1])
    accepted = 0
    for depth in SETTINGS:
        r = run_block(stock, s, Setting(depth=depth), 5, Sampling(), seed=0)
        accepted += sum(st.accepted for st in r.steps)
        assert cache_len(stock.cache) == s.covered
        if depth:
            assert stock.draft.consumed == s.covered - 1  # the head is aligned with the stream
    cache = make_prompt_cache(model)
    model(mx.array([ctx[:-1]]), cache=cache)
    gen = generate_step(
        mx.array([ctx[-1]]), model, max_tokens=5 * len(SETTINGS), prompt_cache=cache
    )
    assert s.tokens[1:] == [int(t) for t, _ in gen]
    assert accepted > 0
    # sampled MTP: distribution-preserving rejection sampling, reproducible from the seed
    rewind(stock, s)
    first = run_block(stock, s, Setting(depth=2), 12, Sampling(0.8), seed=5)
    rewind(stock, s)
    again = run_block(stock, s, Setting(depth=2), 12, Sampling(0.8), seed=5)
    assert first.tokens == again.tokens and first.steps == again.steps
    assert cache_len(stock.cache) == s.covered


def test_training_acceptance_uses_the_same_definitions():
    """tools/train/acceptance.py's counts are mlatui.measure.acceptance's: its per-position
    'proposed' is the conditional denominator (reached), and the three forms come from one
    AcceptanceCounts."""
    from tools.train.acceptance import speculative

    target = build_model("deepseek_v3", seed=1)
    draft = build_model("deepseek_v3", seed=1, layers=2)  # shares the first layers' seed
    r = speculative(target, draft, CONTEXT, 40, 3)
    assert r.counts.reached_at == r.proposed and r.counts.accepted_at == r.accepted
    assert r.counts.conditional == tuple(
        a / p if p else None for a, p in zip(r.accepted, r.proposed, strict=True)
    )
    assert r.counts.verify_steps == r.rounds


def _estimates(outcome, median, low, high, rounds=6):
    from mlatui.measure.estimates import ContextEstimates
    from mlatui.stream.event_base import Interval

    iv = Interval(median, low, high, rounds)
    est = ContextEstimates(rounds, ratio={1: iv}, control_outcome=outcome)
    est.step_ms = {("stock", 1): Interval(20.0, 19.0, 21.0, rounds)}
    est.step_ms[("patched", 1)] = Interval(20.0 / median, 19.0, 21.0, rounds)
    return est


def _validity_ctx():
    from mlatui.run.phases.base import RunContext

    events = []
    ctx = RunContext({}, events.append, None, 0, lambda n: [], 16)
    return ctx, events


def test_decode_l1_check_is_decided_on_the_synced_steps_blocks_only_veto():
    from mlatui.config.scenario import Phase
    from mlatui.measure.estimates import Outcome
    from mlatui.run.phases.decode import decode_validity
    from mlatui.stream.events import Validity

    phase = Phase(name="tune", kind="tune", contexts=[1024])
    synced_ok = _estimates(Outcome.VALID, 1.003, 0.995, 1.01)
    # blocks undecided (a ±6% scatter): the synced steps decide, valid
    ctx, events = _validity_ctx()
    v = decode_validity(
        ctx, phase, 1024, synced_ok, _estimates(Outcome.INCONCLUSIVE, 1.02, 0.96, 1.07), L1Quads()
    )
    assert v.valid and v.outcome == "valid" and v.ratio.median == 1.003
    assert any("plain decode stock/patched 1.020" in getattr(e, "message", "") for e in events)
    # blocks show a real arm difference (CI wholly above +2%): invalid, with the blocks' ratio
    ctx, events = _validity_ctx()
    blocks = _estimates(Outcome.INVALID, 1.08, 1.05, 1.11)
    v = decode_validity(ctx, phase, 1024, synced_ok, blocks, L1Quads())
    assert not v.valid and v.outcome == "invalid" and v.ratio.median == 1.08
    # ... but not from 4 rounds of blocks: that bootstrap is too narrow to veto on
    ctx, events = _validity_ctx()
    few = _estimates(Outcome.INVALID, 1.09, 1.09, 1.12, rounds=4)
    v = decode_validity(ctx, phase, 1024, synced_ok, few, L1Quads())
    assert v.valid and v.ratio.median == 1.003
    # synced steps undecided: inconclusive, whatever the blocks say
    ctx, events = _validity_ctx()
    synced_open = _estimates(Outcome.INCONCLUSIVE, 1.01, 0.99, 1.03)
    blocks = _estimates(Outcome.VALID, 1.0, 0.99, 1.01)
    v = decode_validity(ctx, phase, 1024, synced_open, blocks, L1Quads())
    assert v.outcome == "inconclusive" and not v.valid
    # no drafts, so no verify steps: the blocks decide alone
    ctx, events = _validity_ctx()
    blocks = _estimates(Outcome.INCONCLUSIVE, 1.02, 0.96, 1.07)
    v = decode_validity(ctx, phase, 1024, None, blocks, L1Quads())
    assert v.outcome == "inconclusive"
    assert all(isinstance(e, Validity) for e in events)


def _l1_quads(rounds, scatter, seed):
    """Synced L = 1 quads of two identical arms: each quad shares a random device level (the
    regime), each sample its own jitter of `scatter`."""
    import random

    from mlatui.measure.estimates import Timing

    rng = random.Random(seed)
    out = []
    for r in range(rounds):
        for q in range(2):
            level = rng.uniform(10, 30)
            order = (
                ("stock", "patched", "patched", "stock")
                if (r + q) % 2 == 0
                else ("patched", "stock", "stock", "patched")
            )
            for arm in order:
                out.append(Timing(r, 1, arm, level * (1 + rng.gauss(0, scatter)), 0.0))
    return out


def test_an_undecided_decode_check_pools_the_sweeps_l1_quads_at_the_same_context():
    """Same arms, same context: the sweep's tight quads and the tune's scattered ones decide
    together; a context the sweep never measured stays undecided."""
    from msgspec.structs import replace as dc_replace

    from mlatui.config.scenario import Phase
    from mlatui.measure.estimates import Outcome
    from mlatui.run.phases.base import RunContext
    from mlatui.run.phases.decode import decode_validity

    phase = Phase(name="tune", kind="tune", contexts=[1024])
    events = []
    ctx = RunContext({}, events.append, None, 0, lambda n: [], 16)
    sweep = _l1_quads(40, 0.01, 1)  # the sweep: many tight quads
    noisy = _l1_quads(6, 0.06, 2)
    l1 = L1Quads().plus(1024, sweep, 1).plus(1024, noisy, 1).plus(2000, noisy, 1)
    assert len(l1.pooled(1024)) == len(sweep) + len(noisy) and l1.count(1024) == 2
    assert len({t.round for t in l1.pooled(1024)}) == 46  # no two runs share a round
    verify = _estimates(Outcome.INCONCLUSIVE, 1.01, 0.97, 1.05)
    blocks = _estimates(Outcome.INCONCLUSIVE, 1.0, 0.95, 1.05)
    v = decode_validity(ctx, phase, 1024, verify, blocks, l1)
    assert v.outcome == "valid" and v.rounds == 46
    assert 0.98 < v.ratio.low and v.ratio.high < 1.02
    assert any("rounds of L = 1 quads" in getattr(e, "message", "") for e in events)
    v = decode_validity(ctx, dc_replace(phase, contexts=(2000,)), 2000, verify, blocks, l1)
    assert v.outcome == "inconclusive"  # one run only at 2000: nothing to pool
