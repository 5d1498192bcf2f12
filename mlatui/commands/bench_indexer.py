"""`mlatui bench indexer`: the pooled-window sparse indexer, stock vs patched pooling."""

from __future__ import annotations

import argparse

from mlatui.commands.argtypes import (
    int_at_least,
    int_list,
    int_list_or_none,
    non_negative_int,
    positive_float,
)
from mlatui.config.scenario import DTYPE_NAMES
from mlatui.stream.phrases import CiStyle, ci_text

HELP = "sparse indexer step ms, stock vs patched pooling (GLM-5.3-Flash geometry, random weights)"
# about two minutes on a 2-core CPU: the first part always runs, later ones only if they fit
DEFAULT_MAX_SECONDS = 100.0
DEFAULT_CONTEXTS = (8192, 32768, 131072)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--contexts",
        type=int_list,
        default=None,
        help=f"cache lengths (> 2048; default {','.join(map(str, DEFAULT_CONTEXTS))}, those that "
        "fit this device's memory)",
    )
    parser.add_argument(
        "--widths",
        type=int_list,
        default="1,2,4",
        help="new tokens per step; 1 is always run (control)",
    )
    parser.add_argument(
        "--layer-contexts",
        type=int_list_or_none,
        default=None,
        help="contexts for the whole sparse layer (default: same as --contexts; 'none' to skip)",
    )
    parser.add_argument(
        "--rounds",
        "--reps",
        dest="rounds",
        type=int_at_least(2, " (a round and its mirror)"),
        default=6,
        help="rounds before the S=1 check may decide (default 6); each round measures every S "
        "once per arm as an A B B A quad, S=1 three times",
    )
    parser.add_argument(
        "--max-rounds",
        type=int_at_least(2),
        default=None,
        help="while the S=1 check is inconclusive, add rounds up to this (default 3x --rounds)",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help=f"time limit (default {DEFAULT_MAX_SECONDS:g}): no rounds past the minimum and no "
        "part a later context would overrun once S seconds are spent; what it left out or "
        "undecided is listed",
    )
    parser.add_argument(
        "--warmup", type=non_negative_int, default=1, help="untimed steps per arm and S (default 1)"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="weights, inputs and bootstrap seed"
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default=None,
        help="default: float32 on CPU, bfloat16 on GPU",
    )
    parser.add_argument(
        "--out", default=None, help="write the records as JSONL here, streamed part by part"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --out file; run even where the memory estimate says it "
        "will not fit",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-sample progress on stderr")


def _ci(median: float | None, low: float | None, high: float | None, digits: int = 3) -> str:
    return ci_text(median, low, high, digits, style=CiStyle.PAREN)


def summary_table(records) -> str:
    """One row per (bench, context, S): each arm's median over rounds with its 95% CI, the paired
    stock/patched with its CI, patched S over patched S=1 (paired within rounds), the S=1 check."""
    from mlatui.views.mdtable import num, table

    by = {(r.bench, r.context, r.width, r.arm): r for r in records}
    rows = []
    for bench, context, width in sorted({(r.bench, r.context, r.width) for r in records}):
        s, p = by[(bench, context, width, "stock")], by[(bench, context, width, "patched")]
        rows.append(
            (
                bench,
                context,
                width,
                _ci(s.median_ms, s.ci_low_ms, s.ci_high_ms),
                _ci(p.median_ms, p.ci_low_ms, p.ci_high_ms),
                _ci(s.ratio, s.ratio_low, s.ratio_high, 2 if width > 1 else 4),
                _ci(p.vs_s1, p.vs_s1_low, p.vs_s1_high, 2) if width > 1 else "1",
                s.n_rounds,
                s.outcome if s.outcome == "valid" else s.outcome.upper(),
            )
        )
    return table(
        (
            "bench",
            "context",
            "S",
            "stock ms (95% CI)",
            "patched ms (95% CI)",
            "stock/patched paired (95% CI)",
            "patched / patched S=1 (95% CI)",
            "rounds",
            "S=1 check",
        ),
        rows,
        cell=num,
    )


def verdict(records) -> list[str]:
    """The issue's bar, on contexts whose S=1 check is valid: patched S=2..4 within 1.5x of its
    S=1 (the CI's upper end decides), and stock S=2 grows with the context."""
    lines = []
    idx = {(r.context, r.width, r.arm): r for r in records if r.bench == "indexer"}
    contexts = sorted({c for c, _, _ in idx})
    for c in contexts:
        one = idx.get((c, 1, "stock"))
        if one is None or not one.valid:
            outcome = one.outcome if one else "missing"
            lines.append(f"T={c}: excluded, S=1 check {outcome}")
            continue
        for w in (2, 3, 4):
            r = idx.get((c, w, "patched"))
            if r is None or r.vs_s1 is None:
                continue
            ok = "ok" if r.vs_s1_high <= 1.5 else ("OVER 1.5x" if r.vs_s1_low > 1.5 else "unsure")
            lines.append(
                f"T={c} S={w}: patched {_ci(r.vs_s1, r.vs_s1_low, r.vs_s1_high, 2)}x of S=1 ({ok})"
            )
    s2 = [
        idx[(c, 2, "stock")]
        for c in contexts
        if (c, 2, "stock") in idx and idx[(c, 1, "stock")].valid
    ]
    if len(s2) > 1:
        grows = all(b.ci_low_ms > a.ci_high_ms for a, b in zip(s2, s2[1:], strict=False))
        trend = ", ".join(
            f"{r.context}: {_ci(r.median_ms, r.ci_low_ms, r.ci_high_ms, 2)} ms" for r in s2
        )
        lines.append(
            f"stock S=2 by context: {trend} ({'grows' if grows else 'does NOT clearly grow'})"
        )
    return lines


def _printer(quiet: bool, check_stop=lambda: None, max_seconds: float | None = None):
    import sys
    import time

    from mlatui.bench.indexer import BenchHooks

    started = time.monotonic()
    deadline = None if max_seconds is None else started + max_seconds

    class Printer(BenchHooks):
        skipped: list[tuple[str, int]] = []
        last: tuple[int, float] | None = None  # (context, seconds) of the last part run
        part_start = started
        rounds = 0  # rounds of the part being sampled
        pair_end = started  # when the part's last pair of rounds (or the part) began

        def check_stop(self) -> None:
            check_stop()

        def decide_more(self, wants_more: bool) -> bool:
            """Past the limit no new pair of rounds, even below --rounds (the second round of
            a pair always runs, so each arm goes first equally often); the S=1 check may then
            stay undecided, and the report says so."""
            self.rounds += 1
            if self.rounds % 2 or deadline is None:
                return wants_more
            now = time.monotonic()  # a new pair must end by the limit, as the last one took
            pair_s, self.pair_end = now - self.pair_end, now
            return wants_more and now + pair_s <= deadline

        def skip(self, part: str, context: int) -> bool:
            """Leave a part out when it would end past the limit: its cost estimated from the
            last part's, scaled by context (every step reads the whole cache)."""
            now = time.monotonic()
            if deadline is not None and self.last is not None:
                last_context, last_s = self.last
                if now + last_s * context / last_context > deadline:
                    self.skipped.append((part, context))
                    return True
            self.part_start, self.rounds, self.pair_end = now, 0, now
            return False

        def warmup(self, part, context, arm, width, ms):
            if not quiet:
                print(
                    f"{part} T={context} S={width} {arm}: {ms:.2f} ms (warm-up)",
                    file=sys.stderr,
                    flush=True,
                )

        def timing(self, part, context, timing):
            if not quiet:
                print(
                    f"{part} T={context} round {timing.round + 1} S={timing.width} "
                    f"{timing.arm}: {timing.ms:.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )

        def done(self, result):
            from mlatui.measure.indexer_records import control_note

            self.last = (result.context, time.monotonic() - self.part_start)
            print(f"{result.part} T={result.context}: {control_note(result)}", file=sys.stderr)

    return Printer()


def undecided_lines(records, skipped, max_seconds: float | None) -> list[str]:
    """What the time limit left: the parts never run, the S = 1 checks it stopped undecided."""
    lines = []
    by_part: dict[str, list[int]] = {}
    for part, context in skipped:
        by_part.setdefault(part, []).append(context)
    for part, contexts in by_part.items():
        lines.append(
            f"time limit {max_seconds:g} s: {part} not run at T={', '.join(map(str, contexts))} "
            "(raise --max-seconds, or pass fewer --contexts)"
        )
    unsure = [
        r for r in records if r.width == 1 and r.arm == "stock" and r.outcome == "inconclusive"
    ]
    if unsure and max_seconds is not None:
        where = ", ".join(f"{r.bench} T={r.context} ({r.n_rounds} rounds)" for r in unsure)
        lines.append(f"S=1 check undecided at {where}: more rounds (--max-seconds) may decide it")
    return lines


def _fitting_defaults(dtype: str | None, width: int, force: bool) -> list[int]:
    """The default contexts this device's memory holds (the largest ones are for GPUs); the
    others are named on stderr. None fits: the smallest, for refuse_unless_fits to explain."""
    import sys

    from mlatui.models.fit import indexer_estimate
    from mlatui.models.indexer import SparseMLAConfig
    from mlatui.models.loading import default_dtype

    config, dtype = SparseMLAConfig(), dtype or default_dtype()
    fit = [c for c in DEFAULT_CONTEXTS if force or indexer_estimate(config, dtype, c, width).fits]
    left = [c for c in DEFAULT_CONTEXTS if c not in fit]
    if left and fit:
        print(
            f"mlatui: default contexts {', '.join(map(str, left))} do not fit this device's "
            "memory: left out (pass --contexts to choose)",
            file=sys.stderr,
        )
    return fit or [DEFAULT_CONTEXTS[0]]


def run(args: argparse.Namespace) -> int:
    from mlatui.errors import UserError

    widths = args.widths
    contexts = args.contexts or _fitting_defaults(args.dtype, max(widths), args.force)
    layer_contexts = contexts if args.layer_contexts is None else args.layer_contexts
    if args.max_rounds is not None and args.max_rounds < args.rounds:
        raise UserError(
            f"--max-rounds {args.max_rounds} is below --rounds {args.rounds}",
            "pass a --max-rounds >= --rounds",
        )
    from mlatui.models.indexer import SparseMLAConfig

    topk = SparseMLAConfig().index_topk
    small = [c for c in [*contexts, *layer_contexts] if c <= topk]
    if small:
        raise UserError(
            f"contexts must be above index_topk ({topk}); the indexer is bypassed at {small[0]}"
        )

    import sys
    import threading

    from mlatui.config.outputs import JsonlSink, claim_output
    from mlatui.errors import ExitStatus, error_line
    from mlatui.host.signals import StopOnSignals, raise_if_set
    from mlatui.models.fit import indexer_estimate, refuse_unless_fits
    from mlatui.models.loading import default_dtype

    refuse_unless_fits(
        indexer_estimate(
            SparseMLAConfig(),
            args.dtype or default_dtype(),
            max(contexts + layer_contexts),
            max(widths),
        ),
        args.force,
        "use smaller --contexts or --widths, or --force to try anyway",
    )
    out = claim_output(args.out, force=args.force) if args.out else None
    from mlatui.bench.indexer import run_indexer_bench
    from mlatui.views.mdtable import env_line

    sink = JsonlSink(out) if out else None
    stop = threading.Event()
    hooks = _printer(args.quiet, raise_if_set(stop), args.max_seconds)
    with StopOnSignals(stop) as signals:
        records = run_indexer_bench(
            contexts,
            widths,
            args.rounds,
            args.warmup,
            hooks,
            layer_contexts=layer_contexts,
            dtype=args.dtype,
            max_rounds=args.max_rounds,
            seed=args.seed,
            on_records=sink.write_records if sink else lambda records: None,
        )
    if sink is not None:
        sink.close()
    if not records:
        if sink is not None and sink.error:
            print(error_line(sink.error), file=sys.stderr)
        print(
            f"mlatui: stopped by {signals.stopped_by.name} before a part completed", file=sys.stderr
        )
        return signals.exit_status or ExitStatus.INTERRUPTED
    first = records[0].settings
    print(
        f"# mlatui bench indexer\n\n{env_line(records[0].env)}, dtype {first['dtype']}, "
        f"rounds {first['min_rounds']} (up to {first['max_rounds']} while the S=1 check is "
        f"inconclusive), warm-up {first['warmup']}; {first['order']}; medians over rounds, "
        f"{first['estimators'].removeprefix('median over rounds with ')}\n"
    )
    print(summary_table(records))
    print()
    for line in verdict(records):
        print(f"- {line}")
    for r in records:
        if r.width == 1 and r.arm == "stock":
            print(f"- {r.bench} T={r.context}: {r.note}")
    for line in undecided_lines(records, hooks.skipped, args.max_seconds):
        print(f"- {line}")
    if sink is not None:
        print(f"\nwrote {len(records)} records to {out}")
        if sink.error:
            print(error_line(sink.error), file=sys.stderr)
            return ExitStatus.FAILED
    if signals.received is not None:
        print(
            f"mlatui: stopped by {signals.stopped_by.name}; the parts done are above",
            file=sys.stderr,
        )
        return signals.stopped_by.exit_status
    return 0
