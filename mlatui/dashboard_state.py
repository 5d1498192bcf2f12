"""What the dashboard shows, computed from the event stream alone (no mlx, no textual).

`DashboardState.apply(event)` folds one event in; the UI reads the fields and `changed` (the
sections touched since it last looked) on its tick. Replay, live and isolated runs all feed it
the same events, so a recording is enough to test every number on screen.
"""

from __future__ import annotations

import csv
import io
from collections import deque

from mlatui.acceptance import AcceptanceCounts, VerifyStep
from mlatui.dashboard_views import SERIES_POINTS, ArmView, PhaseView, _median
from mlatui.distributed import world_label
from mlatui.events import (
    ARMS,
    DecodeBlock,
    DecodeResult,
    DriftEvent,
    ErrorEvent,
    Estimate,
    Event,
    LogMessage,
    MemorySample,
    PhaseStart,
    PhaseSummary,
    Progress,
    RunEnd,
    RunHeader,
    SpecStep,
    Step,
    Validity,
)

LOG_LINES = 500
SECTIONS = ("header", "phase", "arms", "marginal", "memory", "validity", "log")


class DashboardState:
    def __init__(self) -> None:
        self.header: RunHeader | None = None
        self.phase = PhaseView()
        self.arms: dict[str, ArmView] = {arm: ArmView() for arm in ARMS}
        # sweep steps: (arm, context, width) -> [ms]
        self.sweep_ms: dict[tuple[str, int, int], list[float]] = {}
        self.validity: dict[tuple[str, int], Validity] = {}  # (phase, context)
        self.estimates: dict[tuple[str, int], Estimate] = {}  # (phase, context): the latest
        self.drifts: list[DriftEvent] = []
        self.memory: MemorySample | None = None
        self.rss_history: deque = deque(maxlen=SERIES_POINTS)
        self.log: deque = deque(maxlen=LOG_LINES)
        self.summaries: list[PhaseSummary] = []
        self.phase_kinds: dict[str, str] = {}
        self.decode_results: list[DecodeResult] = []
        self.status = "waiting"  # waiting | running | completed | interrupted | error
        self.error: str | None = None
        self.t = 0.0
        self.context: int | None = None  # of the latest timed step
        self.events = 0
        self.changed: set[str] = set(SECTIONS)

    # -- folding events ---------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        self.events += 1
        t = getattr(event, "t", None)
        if t is not None:
            self.t = max(self.t, t)
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def apply_all(self, events: list[Event]) -> None:
        for e in events:
            self.apply(e)

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def _log(self, t: float | None, level: str, message: str) -> None:
        self.log.append((t, level, message))
        self.changed.add("log")

    def _on_header(self, e: RunHeader) -> None:
        self.header = e
        self.status = "running"
        self.changed |= {"header", "phase", "arms"}
        scenario = e.scenario.get("name", "?")
        self._log(0.0, "info", f"run started: {e.model} · scenario {scenario} · {e.started_at}")
        if e.synthetic_acceptance:
            self._log(0.0, "warning", "random weights: acceptance numbers are synthetic")

    def _on_phase_start(self, e: PhaseStart) -> None:
        self.phase = PhaseView(e.phase, e.kind, e.index, e.total_phases, 0, e.planned_steps)
        self.phase_kinds[e.phase] = e.kind
        for arm in self.arms.values():
            arm.phase_verify_ms = []
            if e.kind in ("decode", "tune"):
                arm.spec_live, arm.spec_result, arm.plain_tok_s = {}, {}, None
                arm.counts, arm.depth, arm.spec_vs_plain = {}, None, {}
        self.changed |= {"phase", "arms"}
        self._log(e.t, "info", f"phase {e.index + 1}/{e.total_phases}: {e.phase} ({e.kind})")

    def _on_progress(self, e: Progress) -> None:
        if e.phase == self.phase.name:
            self.phase.done, self.phase.total, self.phase.eta_s = e.done, e.total, e.eta_s
            self.changed.add("phase")

    def _arm(self, name: str) -> ArmView:
        if name not in self.arms:
            self.arms[name] = ArmView()
        return self.arms[name]

    def _kind(self, phase: str) -> str:
        """A phase's kind; the indexer phase's parts ("indexer:layer") take their phase's."""
        return self.phase_kinds.get(phase, self.phase_kinds.get(phase.split(":")[0], "sweep"))

    def _on_step(self, e: Step) -> None:
        arm = self._arm(e.arm)
        self.context = e.context
        if self._kind(e.phase) == "sweep":  # indexer timings are not sweep cells
            self.sweep_ms.setdefault((e.arm, e.context, e.width), []).append(e.ms)
        arm.absorbed_calls += e.absorbed_calls
        arm.materialised_calls += e.materialised_calls
        if e.width >= 2:  # a verify-shaped forward
            arm.verify_ms.append(e.ms)
            arm.verify_key.append((e.phase, e.context))
            arm.phase_verify_ms.append(e.ms)
        self.changed |= {"arms", "marginal"} if e.width <= 2 else {"arms"}

    def _on_spec_step(self, e: SpecStep) -> None:  # recordings before schema 3
        arm = self._arm(e.arm)
        self.context = e.context
        arm.verify_ms.append(e.verify_ms)
        arm.verify_key.append((e.phase, e.context))
        arm.phase_verify_ms.append(e.verify_ms)
        arm.absorbed_calls += e.absorbed_calls
        arm.materialised_calls += e.materialised_calls
        arm.add_steps(e.depth, [VerifyStep(e.depth, e.accepted, e.accepted + 1)])
        live = arm.spec_live.setdefault(e.depth, [0, 0.0])
        live[0] += e.tokens
        live[1] += e.draft_ms + e.verify_ms
        self.changed.add("arms")

    def _on_decode_block(self, e: DecodeBlock) -> None:
        arm = self._arm(e.arm)
        self.context = e.context
        if arm.counts_context != e.context:
            arm.counts, arm.spec_live, arm.counts_context = {}, {}, e.context
        if e.depth:
            arm.add_steps(
                e.depth,
                [VerifyStep(*s) for s in zip(e.drafted, e.accepted, e.emitted, strict=True)],
            )
            arm.acceptance_rule = e.acceptance_rule
        arm.temperature = e.temperature
        live = arm.spec_live.setdefault(e.depth, [0, 0.0])
        live[0] += e.tokens
        live[1] += e.ms
        self.changed.add("arms")

    def _on_decode_result(self, e: DecodeResult) -> None:
        arm = self._arm(e.arm)
        self.decode_results.append(e)
        if e.depth == 0:
            arm.plain_tok_s = e.tok_s
        else:
            arm.spec_result[e.depth] = e.tok_s
            if e.vs_plain is not None:
                arm.spec_vs_plain[e.depth] = e.vs_plain
            if e.counts:
                arm.counts[e.depth] = AcceptanceCounts.from_dict(e.counts)
        self.changed.add("arms")
        label = "plain decode" if e.depth == 0 else f"depth {e.depth}"
        ci = (
            f" [{e.tok_s_low:.1f}, {e.tok_s_high:.1f}]"
            if e.tok_s_low is not None and e.tok_s_high is not None
            else ""
        )
        msg = f"{e.arm}: {label} at {e.context}: {e.tok_s:.1f} tok/s{ci}"
        if e.depth and e.vs_plain is not None:
            lo, hi = e.vs_plain_low, e.vs_plain_high
            msg += (
                f", ×{e.vs_plain:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo and hi else "") + " plain"
            )
        self._log(e.t, "warning" if e.warnings else "info", msg)
        for w in e.warnings:
            self._log(
                e.t,
                "warning",
                f"{e.arm} depth {e.depth} at {e.context}: {w} (left out of verdicts)",
            )

    def _on_memory(self, e: MemorySample) -> None:
        self.memory = e
        self.rss_history.append(e.process_rss_bytes)
        self.changed.add("memory")

    def _on_validity(self, e: Validity) -> None:
        self.validity[(e.phase, e.context)] = e
        self.changed |= {"validity", "marginal", "arms"}
        ci = (
            f" paired {e.ratio:.3f} [{e.ratio_low:.3f}, {e.ratio_high:.3f}], {e.rounds} rounds"
            if e.ratio is not None
            else ""
        )
        if e.valid:
            msg = f"L=1 check at {e.context}: ✓ {e.stock_l1_ms:.3g} vs {e.patched_l1_ms:.3g} ms"
            self._log(e.t, "info", msg + f" ({e.diff_pct:+.1f}%{ci})")
        else:
            word = "INCONCLUSIVE" if e.verdict == "inconclusive" else "INVALID"
            msg = f"L=1 check at {e.context}: {'?' if word == 'INCONCLUSIVE' else '✗'} {word} {e.stock_l1_ms:.3g} vs {e.patched_l1_ms:.3g} ms"
            self._log(
                e.t,
                "warning",
                msg + f" ({e.diff_pct:+.1f}%{ci}; CI not inside ±{e.tolerance_pct:g}%)",
            )

    def _on_estimate(self, e: Estimate) -> None:
        self.estimates[(e.phase, e.context)] = e
        self.changed |= {"marginal", "arms"}

    def _on_drift(self, e: DriftEvent) -> None:
        self.drifts.append(e)

    def _on_phase_summary(self, e: PhaseSummary) -> None:
        self.summaries.append(e)
        self._log(e.t, "info", f"{e.phase} done" + (f": {e.verdict}" if e.verdict else ""))

    def _on_log(self, e: LogMessage) -> None:
        self._log(e.t, e.level, e.message)

    def _on_error(self, e: ErrorEvent) -> None:
        self.error = e.message + (f" (in {e.where})" if e.where else "")
        self.status = "error"
        self.changed |= {"header", "phase"}
        self._log(e.t, "error", self.error)

    def _on_run_end(self, e: RunEnd) -> None:
        if self.status != "error" or e.status == "error":
            self.status = e.status
        self.phase.eta_s = None
        self.changed |= {"header", "phase"}
        extra = (
            f"; left out of verdicts (L=1 check invalid or inconclusive): {', '.join(map(str, e.invalid_contexts))}"
            if e.invalid_contexts
            else ""
        )
        self._log(e.t, "error" if e.status == "error" else "info", f"run {e.status}{extra}")

    # -- derived views ----------------------------------------------------------------------

    def is_invalid(self, context: int, phase: str | None = None) -> bool:
        """Failed the L = 1 check at this context (in `phase`, or in any phase)."""
        return any(
            not v.valid and c == context and phase in (None, p)
            for (p, c), v in self.validity.items()
        )

    def sweep_invalid(self, context: int) -> bool:
        """Failed the L = 1 check of a sweep phase at this context (the marginal-cost figure)."""
        return any(
            not v.valid and c == context and self.phase_kinds.get(p, "sweep") == "sweep"
            for (p, c), v in self.validity.items()
        )

    def verdict(self, context: int) -> Validity | None:
        """The sweep's check at this context if there is one, else any phase's."""
        checks = [v for (p, c), v in self.validity.items() if c == context]
        return next((v for v in checks if not v.valid), checks[0] if checks else None)

    def contexts(self) -> list[int]:
        """Sweep contexts: from their steps, or from their estimates when only those were kept."""
        from_estimates = {c for (p, c) in self.estimates if self._kind(p) == "sweep"}
        return sorted({c for (_, c, _) in self.sweep_ms} | from_estimates)

    def _sweep_estimate(self, context: int) -> Estimate | None:
        found = [
            e for (p, c), e in self.estimates.items() if c == context and self._kind(p) == "sweep"
        ]
        return found[-1] if found else None

    def estimate(self, quantity: str, arm: str, context: int, width: int) -> dict | None:
        """The latest paired estimate row {median, low, high, n} of a sweep context, if any."""
        e = self._sweep_estimate(context)
        if e is None:
            return None
        return next(
            (
                r
                for r in e.rows
                if r["quantity"] == quantity and r["arm"] == arm and r["width"] == width
            ),
            None,
        )

    def l_median(self, arm: str, context: int, width: int) -> float | None:
        """Step ms: the sampler's median over rounds when estimates exist (schema 2), else the
        plain median of the samples (older recordings)."""
        row = self.estimate("step_ms", arm, context, width)
        if row is not None:
            return row["median"]
        return _median(self.sweep_ms.get((arm, context, width), []))

    def marginal(self, arm: str) -> list[tuple[int, float]]:
        """(context, marginal cost of the second query, ms) for every context that has one: the
        paired per-round estimate when the recording has it, else median(L=2) - median(L=1)."""
        return [(c, m) for c, m, _, _ in self.marginal_ci(arm)]

    def marginal_ci(self, arm: str) -> list[tuple[int, float, float | None, float | None]]:
        """(context, median, CI low, CI high) of the marginal cost; CI None for older recordings."""
        out = []
        for c in self.contexts():
            row = self.estimate("marginal_ms", arm, c, 2)
            if row is not None:
                out.append((c, row["median"], row["low"], row["high"]))
                continue
            l1, l2 = self.l_median(arm, c, 1), self.l_median(arm, c, 2)
            if l1 is not None and l2 is not None:
                out.append((c, l2 - l1, None, None))
        return out

    @property
    def harness_bias(self) -> str:
        """'harness bias ±0.4% (...)' from the header, when an A/A run was stored for this device."""
        from mlatui.harness_bias import describe

        if self.header is None:
            return ""
        return describe((self.header.settings or {}).get("harness_bias"))

    @property
    def synthetic(self) -> bool:
        return bool(self.header and self.header.synthetic_acceptance)

    # -- export (used until mlatui.report is available) -------------------------------------

    def summary_rows(self) -> list[dict]:
        rows = []
        for c in self.contexts():
            v = self.verdict(c)
            for arm in ARMS:
                l1, l2 = self.l_median(arm, c, 1), self.l_median(arm, c, 2)
                rows.append(
                    {
                        "context": c,
                        "arm": arm,
                        "l1_ms_median": l1,
                        "l2_ms_median": l2,
                        "marginal_ms": None if l1 is None or l2 is None else l2 - l1,
                        "valid": None if v is None else v.valid,
                    }
                )
        return rows

    def summary_markdown(self) -> str:
        h = self.header
        lines = ["# mlatui run summary", ""]
        if h is not None:
            g = h.geometry
            lines += [
                f"- model: {h.model} ({h.model_type}), r/n/v = {g.get('kv_lora_rank')}/"
                f"{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}",
                f"- device: {h.device.get('name', '?')} · BLAS {h.device.get('blas', '?')}"
                + (
                    f" · {world_label(h.distributed)} (memory: rank 0's)"
                    if world_label(h.distributed)
                    else ""
                ),
                f"- scenario: {h.scenario.get('name', '?')} · started {h.started_at}",
                f"- mlx {h.mlx_version} · mlx-lm {h.mlx_lm_version} · mlatui {h.mlatui_version}",
            ]
        lines += [f"- status: {self.status}" + (f" ({self.error})" if self.error else ""), ""]
        lines += [
            "## Marginal cost of the second query (paired per round, median over rounds)",
            "",
            "| context | stock L=1 ms | patched L=1 ms | stock Δ ms | patched Δ ms | L=1 check |",
            "|---:|---:|---:|---:|---:|:---:|",
        ]
        for c in self.contexts():
            cells = [str(c)]
            for arm in ARMS:
                cells.append(_fmt(self.l_median(arm, c, 1)))
            marg = {arm: dict(self.marginal(arm)).get(c) for arm in ARMS}
            cells += [_fmt(marg["stock"]), _fmt(marg["patched"])]
            v = self.verdict(c)
            cells.append(
                "–" if v is None else "✓" if v.valid else f"✗ invalid ({v.diff_pct:+.1f}%)"
            )
            lines.append("| " + " | ".join(cells) + " |")
        if self.decode_results:
            acc = "acceptance (synthetic)" if self.synthetic else "acceptance"
            lines += [
                "",
                "## Decode",
                "",
                f"| arm | context | depth | tok/s | {acc} P(i ∣ 1..i-1) | accepted / verify |",
                "|---|---:|---:|---:|---|---:|",
            ]
            for d in self.decode_results:
                cond = d.acceptance_conditional or d.acceptance_by_position
                a = " ".join("–" if x is None else f"{x:.2f}" for x in cond) or "–"
                m = "–" if d.mean_accepted is None else f"{d.mean_accepted:.2f}"
                lines.append(f"| {d.arm} | {d.context} | {d.depth} | {d.tok_s:.1f} | {a} | {m} |")
        return "\n".join(lines) + "\n"

    def summary_csv(self) -> str:
        buf = io.StringIO()
        cols = ["context", "arm", "l1_ms_median", "l2_ms_median", "marginal_ms", "valid"]
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for row in self.summary_rows():
            w.writerow(row)
        return buf.getvalue()


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"
