"""A decode or tune context's results: a DecodeResult per arm and setting (emitted) and the phase
summary's row for each."""

from __future__ import annotations

import dataclasses

from mlatui.measure.estimates import ContextEstimates
from mlatui.measure.plans import Setting
from mlatui.run.arms import Arm
from mlatui.run.decode_stream import SyntheticDraft
from mlatui.run.mtp import MTPDraft
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.decode_blocks import BlockRunner
from mlatui.run.phases.decode_bound import BoundDecision
from mlatui.run.phases.decode_verdict import Guard, GuardSettings, guard_warnings
from mlatui.stream.events import ARMS, DecodeResult, Validity
from mlatui.stream.interval import Interval, flat_interval


def _runtime_name(arm: Arm, st: Setting) -> str:
    if st.depth == 0:
        return "mlx_lm.generate_step"
    if isinstance(arm.draft_of(st.kind), MTPDraft):
        return "mlatui MTP loop (pipelined)"
    return "mlx_lm.speculative_generate_step"


class DecodeResults:
    """A context's DecodeResult per arm and setting, from its blocks' estimates, the runner's
    counts and texts, the verify steps and the bounds; each emitted as it is made."""

    def __init__(
        self,
        ctx: RunContext,
        runner: BlockRunner,
        est: ContextEstimates,
        verify: ContextEstimates | None,
        bounds: BoundDecision,
    ) -> None:
        self.ctx, self.runner, self.est, self.verify, self.bounds = ctx, runner, est, verify, bounds
        phase = runner.phase
        self.guards = GuardSettings(
            phase.min_draft_share, phase.min_verify_steps, phase.min_distinct_4gram
        )
        self.synthetic = any(isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values())

    def rows(self, check: Validity) -> list[dict]:
        rows = []
        for width, st in enumerate(self.runner.settings, start=1):
            for arm in ARMS:
                if (arm, st) in self.bounds.rejected:  # emitted before the blocks
                    rows.append(_row(self.bounds.rejected[(arm, st)], check))
                    continue
                r = self._result(arm, width, st)
                if r is not None:
                    self.ctx.emit(r)
                    rows.append(_row(r, check))
        return rows

    def _speedup(self, arm: str, width: int, depth: int) -> Interval | None:
        """Tok/s over plain decode, paired within rounds (plain decode: exactly 1)."""
        flat = self.est.vs_l1.get((arm, width))
        if flat is not None and flat.median > 0:
            return flat.reciprocal()
        return Interval(1.0, 1.0, 1.0, self.est.rounds) if depth == 0 else None

    def _warnings(self, arm: str, st: Setting, speedup: Interval | None) -> list[str]:
        runner = self.runner
        if not st.depth:
            return []
        rep = runner.repetition(arm, st)
        # a synthetic draft's acceptance does not depend on the text: looping cannot inflate it
        warnings = guard_warnings(
            runner.counts.get((arm, st)),
            speedup.low if speedup else None,
            self.guards,
            None if self.synthetic else rep,
        )
        if runner.divergence is not None and not self.synthetic:
            at, rnd = runner.divergence
            warnings.append(f"{Guard.DIVERGED} at token {at} (round {rnd + 1})")
        return warnings

    def _result(self, arm: str, width: int, st: Setting) -> DecodeResult | None:
        runner, est, depth, n = self.runner, self.est, st.depth, self.runner.n
        ms = est.step_ms.get((arm, width))
        if ms is None:
            return None
        speedup = self._speedup(arm, width, depth)
        counts = runner.counts.get((arm, st))
        rep = runner.repetition(arm, st)
        verify_iv = self.verify.step_ms.get((arm, depth + 1)) if self.verify and depth else None
        timed = [t for t in runner.timings if t.arm == arm and t.width == width]
        return DecodeResult(
            self.ctx.now(),
            runner.phase.name,
            arm,
            runner.length,
            depth,
            n * len(timed),
            sum(t.ms for t in timed) / 1e3,
            ms.reciprocal(n * 1e3),
            counts.unconditional if counts else (),
            verify_iv.median if verify_iv else None,
            None,
            speedup,
            counts.conditional if counts else (),
            counts.mean_accepted if counts else None,
            counts.to_dict() if counts else {},
            runner.rule_of(arm, st.kind).value if depth else "",
            runner.sampling.to_dict(),
            tuple(self._warnings(arm, st, speedup)),
            est.rounds,
            n,
            _runtime_name(self.ctx.workers[arm].arm, st),
            st.kind if depth else "",
            rep.within if rep else None,
            rep.across if rep else None,
            bound=self.bounds.bounds.get((arm, st)),
        )


def _row(r: DecodeResult, check: Validity) -> dict:
    speedup = flat_interval("vs_plain", r.vs_plain)
    if not r.measured and r.bound is not None:  # the most it could have gained
        speedup["vs_plain_high"] = r.bound.value
    return {
        "context": r.context,
        "arm": r.arm,
        "depth": r.depth,
        "draft_kind": r.draft_kind,
        **flat_interval("tok_s", r.tok_s),
        **speedup,
        "acceptance_conditional": list(r.acceptance_conditional),
        "acceptance_by_position": list(r.acceptance_by_position),
        "mean_accepted": r.mean_accepted,
        "verify_ms_median": r.verify_ms_median,
        "tokens": r.tokens,
        "rounds": r.rounds,
        "acceptance_rule": r.acceptance_rule,
        "temperature": r.sampling.get("temperature", 0.0),
        "distinct_4gram_share": r.distinct_4gram_share,
        "distinct_4gram_share_across": r.distinct_4gram_share_across,
        "warnings": list(r.warnings),
        "valid": check.valid,
        "outcome": check.verdict,
        "basis": check.basis.value,
        "measured": r.measured,
        "bound": dataclasses.asdict(r.bound) if r.bound is not None else None,
    }
