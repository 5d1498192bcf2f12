"""Argparse types for every command's numbers, a parser whose errors are one line, and the
options several commands share.

Each type raises argparse.ArgumentTypeError with what was wrong and an example, so a bad value
is refused before anything loads: `mlatui: error: --reps: expected an integer >= 3, got '0' —
see `mlatui bench attention --help``. The shared options: `--overwrite` replaces an output file
that exists and `--force` runs what the memory estimate says will not fit (one never implies the
other: replacing yesterday's recording must not switch off the memory guard); `--expect` and the
summary's formats; the options that choose what the arms run (`launch`, `bench SCENARIO`), parsed
in one place so they reach every gated layer, dense and sparse, and every draft alike.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from mlatui.errors import UserError

BIT_WIDTHS = (2, 3, 4, 5, 6, 8)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors turned into a UserError (one line, exit status 2) instead of the
    usage block and a SystemExit."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        raise UserError(message, f"see `{self.prog} --help`")


def _named(fn: Callable, name: str) -> Callable:
    fn.__name__ = name  # argparse names the type in its own fallback messages
    return fn


def int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An integer >= minimum (`why` says where the minimum comes from)."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except (TypeError, ValueError):
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}{why}, got {text!r}")
        return value

    return _named(parse, f"int>={minimum}")


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def _float(text: str) -> float:
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


finite_float = _named(_float, "finite float")


def _positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


positive_float = _named(_positive_float, "positive float")


def _bit_width(text: str) -> int:
    try:
        bits = int(str(text).strip())
    except (TypeError, ValueError):
        bits = None
    if bits not in BIT_WIDTHS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(map(str, BIT_WIDTHS))} (weight quantisation bits), "
            f"got {text!r}"
        )
    return bits


bit_width = _named(_bit_width, "bit width")


def parse_int_list(text: str) -> list[int]:
    """Comma-separated positive integers; `k` multiplies by 1024 (1k,8k). ValueError otherwise."""
    out = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        try:
            if item.lower().endswith("k"):
                value = float(item[:-1]) * 1024
                if not math.isfinite(value) or value != int(value):
                    raise ValueError(item)
                out.append(int(value))
            else:
                out.append(int(item))
        except (ValueError, OverflowError):
            raise ValueError(
                f"{text!r}: expected comma-separated integers, e.g. 1024,8192 or 1k,8k"
            ) from None
    if not out or min(out) < 1:
        raise ValueError(f"{text!r}: expected positive integers, e.g. 1024,8192 or 1k,8k")
    return out


def _int_list(text: str) -> list[int]:
    try:
        return parse_int_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


int_list = _named(_int_list, "integer list")


def int_list_or_none(text: str) -> list[int]:
    """An int list, or `none` (an empty list: skip that part)."""
    if str(text).strip().lower() in ("none", ""):
        return []
    return _int_list(text)


def add_overwrite(parser: argparse.ArgumentParser, what: str = "--out file") -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace an existing {what} (without it an existing file is refused; the memory "
        "estimate still applies)",
    )


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even where the memory estimate says it will not fit (existing outputs are "
        "still refused: --overwrite)",
    )


def _expectation(text: str):
    from mlatui.views.expect import parse

    try:
        return parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_expect(parser: argparse.ArgumentParser) -> None:
    """`--expect`, checked against the summary's CIs (mlatui.views.expect has the grammar)."""
    parser.add_argument(
        "--expect",
        action="append",
        type=_expectation,
        default=[],
        metavar="ASSERTION",
        help="an assertion on a measured ratio, e.g. 'stock/patched@L=2,32K >= 5' (RATIO@L=WIDTH,"
        "CONTEXT OP BOUND; RATIO stock/patched or patched/stock, OP >= > <= <); repeatable. One "
        "line each on stderr; exit 1 when the whole 95%% CI misses it, 3 when the CI straddles "
        "it or the context's L = 1 check did not pass, 0 when every one holds for the whole CI",
    )


def check_expectations(summary, expectations) -> tuple[list, int | None]:
    """Each assertion checked on `summary`, its line printed on stderr; (the results as the JSON
    document carries them, the exit status they decide, None when none were given)."""
    import sys

    from mlatui.views.expect import check, exit_status
    from mlatui.views.summary_doc import ExpectationDoc, figure

    results = [check(summary, e) for e in expectations]
    for r in results:
        print(r.line, file=sys.stderr)
    docs = [
        ExpectationDoc(r.expectation.text, r.outcome.value, figure(r.measured, "×"), r.line)
        for r in results
    ]
    return docs, exit_status(results) if results else None


def print_summary(summary, format_name: str, expected: list | None = None, end: str = "\n") -> None:
    """The one summary as markdown, CSV or the JSON document (the `e` export's three files);
    `end` after markdown and CSV (the document ends its own line)."""
    from mlatui.views.export import summary_csv, summary_markdown
    from mlatui.views.summary_doc import document, document_json

    if format_name == "json":
        print(document_json(document(summary, expected)), end="")
    else:
        print({"md": summary_markdown, "csv": summary_csv}[format_name](summary), end=end)


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    from mlatui.config.scenario import FILLS

    parser.add_argument(
        "--threshold",
        default=None,
        help="the patched arm's MLA gate, in every gated layer (dense and sparse) and draft: "
        "formula | calibrated | stock | an integer (max absorbed queries); default: the "
        "scenario's `threshold`, else formula",
    )
    parser.add_argument(
        "--arms",
        default=None,
        metavar="A,B",
        help="what the two arms run, e.g. pre-fix,installed or installed,calibrated: each one of "
        "installed (the runtime as it is), pre-fix (L == 1), formula, calibrated, compiled "
        "(mlatui's own absorbed attention, mx.compile, formula gate) or an integer; "
        "default: the scenario's [arms], else installed,formula on pre-fix code and "
        "pre-fix,installed on code that already carries the fix",
    )
    parser.add_argument(
        "--arm-source",
        action="append",
        default=None,
        metavar="NAME=PATH",
        help="an arm whose model code comes from another source tree: NAME is A, B, stock or "
        "patched; PATH an mlx-lm or mlx-vlm checkout (holding mlx_lm/ or mlx_vlm/) or package "
        "folder. The model is built from that tree's classes on the same weights, its gate its "
        "own code; the other arm runs the installed code as it is unless --arms says otherwise "
        "(e.g. --arm-source B=~/src/mlx-lm to review a patch)",
    )
    parser.add_argument(
        "--indexer",
        choices=("patched", "stock"),  # config.arm_settings.IndexerMode
        default=None,
        help="the patched arm's sparse indexer pooling (default: the scenario's `indexer`, else patched)",
    )
    parser.add_argument(
        "--null",
        action="store_true",
        help="A/A null test: both arms the same variant (both stock, then both patched) through "
        "the identical harness; reports the harness bias and remembers it for this device and "
        "scenario",
    )
    parser.add_argument(
        "--fill",
        choices=FILLS,
        help="with --random-weights: fill caches with random latents instead of a prefill "
        "(timing only; long contexts in seconds instead of minutes)",
    )


def resolve_request(args: argparse.Namespace, **request: Any):
    """The request the flags make (`RunConfig`, with `request`'s fields beside the model, the
    scenario, the gates, the budget and --force) and its plan, resolved once; bad input (a bad
    gate, a bad file, a missing model, an unknown --phases name) is a one-line error here, before
    anything loads."""
    from mlatui.config.model_inputs import check_model_ref
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.config.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    gates = gate_settings(args)
    if not args.random_weights:
        check_model_ref(args.model)
    check_model_ref(args.draft_model, "--draft-model")
    config = RunConfig(
        model=args.model,
        draft_model=args.draft_model,
        scenario=args.scenario,
        random_weights=args.random_weights,
        budget_s=args.budget,
        force=args.force,
        **gates,
        **request,
    )
    return config, resolve_plan(config, scenario)


def progress_line(line: str) -> None:
    """A benchmark's progress on stderr, indented under its title, as it happens."""
    import sys

    print(f"  {line}", file=sys.stderr, flush=True)


def end_status(signals: Any, stopped: str, write_error: str | None = None) -> int | None:
    """How a benchmark ends once its table is printed: its record file's write error (FAILED),
    else the signal that stopped it, said with what that left (`stopped`), else None (it ran to
    its end)."""
    import sys

    from mlatui.errors import ExitStatus, error_line

    if write_error:
        print(error_line(write_error), file=sys.stderr)
        return ExitStatus.FAILED
    if signals.received is not None:
        print(f"mlatui: stopped by {signals.stopped_by.name}{stopped}", file=sys.stderr)
        return signals.stopped_by.exit_status
    return None


def gate_settings(args: argparse.Namespace) -> dict:
    """RunConfig fields; a bad threshold is a one-line error before anything loads."""
    from mlatui.config.arm_settings import Threshold
    from mlatui.errors import UserError

    threshold = None
    if args.threshold is not None:
        try:
            threshold = str(Threshold.parse(args.threshold))
        except ValueError as e:
            raise UserError(f"--{e}") from None
    arms = getattr(args, "arms", None)
    if arms is not None:
        from mlatui.config.arm_settings import parse_arms

        try:
            baseline, candidate = parse_arms(arms)
        except ValueError as e:
            raise UserError(f"--{e}") from None
        arms = f"{baseline},{candidate}"
    from mlatui.config.arm_settings import parse_arm_sources

    arm_sources = parse_arm_sources(getattr(args, "arm_source", None))
    if args.fill == "random-latents" and not getattr(args, "random_weights", False):
        raise UserError("--fill random-latents is a timing-only fill: add --random-weights")
    return {
        "threshold": threshold,
        "arms": arms,
        "arm_sources": arm_sources,
        "indexer": args.indexer,
        "null": args.null,
        "fill": args.fill,
    }
