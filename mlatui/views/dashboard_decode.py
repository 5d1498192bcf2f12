"""How DashboardState folds the decode phases' events (pure Python): speculative blocks and
results per setting (a draft kind at a depth, or plain decode)."""

from __future__ import annotations

from collections import deque

from mlatui.config.phase_kind import Pass
from mlatui.measure.acceptance import (
    LOOPING,
    AcceptanceCounts,
    VerifyStep,
    looping_warning,
    repetition_of,
)
from mlatui.measure.plans import PLAIN, Setting
from mlatui.stream.events import DecodeBlock, DecodeResult, RunHeader, arm_label
from mlatui.stream.phrases import interval_text
from mlatui.views.dashboard_views import ArmView, PhaseView, StepSeries, TextRepeat
from mlatui.views.rounding import Ci
from mlatui.views.units import ratio_text


class DecodeFold:
    """The decode half of DashboardState (it provides these fields and `_arm`, `_log`)."""

    header: RunHeader | None
    phase: PhaseView
    decode_results: list[DecodeResult]
    context: int | None
    changed: set[str]
    log: deque
    steps: StepSeries

    def _arm(self, name: str) -> ArmView:
        raise NotImplementedError

    def _log(self, t: float | None, level: str, message: str) -> None:
        raise NotImplementedError

    @property
    def draft_kinds(self) -> tuple[str, ...]:
        """The run's draft kinds in its order: the header's, else those its results name."""
        kinds = self.header.settings.draft_kinds if self.header else None
        if kinds:
            return kinds
        seen = [r.draft_kind for r in self.decode_results if r.depth and r.draft_kind]
        return tuple(dict.fromkeys(seen))

    def min_distinct_4gram(self, phase: str) -> float:
        """The phase's looping-text threshold as its scenario set it (0.5 when not recorded)."""
        phases = (self.header.scenario.get("phases") or []) if self.header else []
        base = Pass.base_name(phase)
        for p in phases:
            if isinstance(p, dict) and p.get("name") == base:
                return float(p.get("min_distinct_4gram", 0.5))
        return 0.5

    def text_repeat(self, arm: str, setting: Setting | None) -> TextRepeat | None:
        """The repetition of `setting`'s text on `arm` at the current context: its result's
        figures once recorded, else computed from the timed blocks so far (None: no tokens)."""
        if setting is None:
            return None
        a = self._arm(arm)
        if setting in a.repeats:
            return a.repeats[setting]
        texts = a.texts.get(setting)
        if not texts:
            return None
        rep = repetition_of(texts, 4)
        if rep.within is None:
            return None
        if setting in a.spec_result:  # a result that recorded no share: no guard looked at it
            return TextRepeat(rep.within, rep.across, False, live=False)
        warning = looping_warning(rep, self.min_distinct_4gram(self.phase.name))
        return TextRepeat(rep.within, rep.across, warning is not None, live=True)

    def _setting(self, e: DecodeBlock | DecodeResult) -> Setting:
        if e.depth == 0:
            return PLAIN
        return Setting(e.draft_kind, e.depth)

    def _on_decode_block(self, e: DecodeBlock) -> None:
        arm = self._arm(e.arm)
        self.context = e.context
        if arm.counts_context != e.context:
            arm.counts, arm.spec_live, arm.spec_bound = {}, {}, {}
            arm.counts_context = e.context
            arm.texts, arm.repeats = {}, {}
        st = self._setting(e)
        if e.token_ids:
            arm.texts.setdefault(st, []).append(e.token_ids)
        if e.depth:
            arm.add_steps(
                st,
                [VerifyStep(*s) for s in zip(e.drafted, e.accepted, e.emitted, strict=True)],
            )
            arm.rules[st] = e.acceptance_rule
        arm.temperature = e.temperature
        live = arm.spec_live.setdefault(st, [0, 0.0])
        live[0] += e.tokens
        live[1] += e.ms
        self.changed.add("arms")

    def _on_decode_result(self, e: DecodeResult) -> None:
        arm = self._arm(e.arm)
        st = self._setting(e)
        self.decode_results.append(e)
        if not e.measured:  # before the context's blocks: the tok/s lines start there
            if arm.counts_context != e.context:
                arm.counts, arm.spec_live, arm.spec_bound = {}, {}, {}
                arm.counts_context = e.context
            if e.bound is not None:
                arm.spec_bound[st] = e.bound
            self.changed.add("arms")
            if e.bound is None:  # a bound rejection: the engine's own log line says it, once
                who = arm_label(e.arm, e.phase)
                self._log(
                    e.t, "info", f"{who}: {st.label} at {e.context}: not measured (no blocks run)"
                )
            return
        tok_s = e.tok_s.median if e.tok_s is not None else None
        if e.tok_s is not None:
            arm.tok_s_ci[st] = Ci.of(e.tok_s)
        if e.depth == 0:
            arm.plain_tok_s = tok_s
        else:
            arm.spec_result[st] = tok_s
            if e.vs_plain is not None:
                arm.spec_vs_plain[st] = e.vs_plain.median
                if e.vs_plain.known:
                    arm.spec_ci[st] = (e.vs_plain.low, e.vs_plain.high)
            if e.counts:
                arm.counts[st] = AcceptanceCounts.from_dict(e.counts)
            if e.distinct_4gram_share is not None:
                looping = any(w.startswith(LOOPING) for w in e.warnings)
                share, across = e.distinct_4gram_share, e.distinct_4gram_share_across
                arm.repeats[st] = TextRepeat(share, across, looping, live=False)
        self.changed.add("arms")
        label = "plain decode" if e.depth == 0 else st.label
        who = arm_label(e.arm, e.phase)
        msg = f"{who}: {label} at {e.context}: {interval_text(e.tok_s, 1, ' tok/s')}"
        if e.depth and e.vs_plain is not None:
            msg += f", {ratio_text(e.vs_plain)} plain"
        self._log(e.t, "warning" if e.warnings else "info", msg)
        for w in e.warnings:
            self._log(
                e.t,
                "warning",
                f"{who} {st.label} at {e.context}: {w} (left out of verdicts)",
            )
