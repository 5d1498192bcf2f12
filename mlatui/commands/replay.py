"""`mlatui replay FILE [--speed X]`: the dashboard from a recording, on any machine (no MLX)."""

from __future__ import annotations

import argparse

from mlatui.commands.argtypes import add_expect, check_expectations, positive_float, print_summary

HELP = "replay a recorded run in the dashboard (no MLX needed)"


def epilog() -> str:
    from mlatui.views.keys import keys_epilog

    return keys_epilog(replay=True)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        help="a JSONL recording (from `mlatui launch` or `mlatui bench SCENARIO`), or the --out "
        "record file of a `bench` target or `calibrate` (--dump prints its table)",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="a recording still being written (a headless or distributed bench): show it as it "
        "grows, end with the run",
    )
    add_view_options(parser)


def add_view_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speed", type=positive_float, default=1.0, help="replay speed factor (default 1)"
    )
    parser.add_argument(
        "--ui-hz", type=positive_float, default=4.0, help="screen updates per second (default 4)"
    )
    parser.add_argument(
        "--out-dir", default=None, help="where e/s write exports and screenshots (default: .)"
    )
    parser.add_argument(
        "--dump",
        action="store_true",
        help="no terminal UI: replay headless at full speed through the dashboard, then print its summary",
    )
    parser.add_argument(
        "--format",
        choices=("md", "json"),
        default="md",
        help="with --dump: the summary as markdown (default) or one JSON document, as `bench "
        "--format json` prints it",
    )
    add_expect(parser)
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave out lines that do not fit the schema and report how many (default: stop at the first)",
    )


def play(path, args: argparse.Namespace, mode: str) -> int:
    """The dashboard from a recording; a bad line is a RecordingError (one line, exit 2)."""
    import sys

    from mlatui.stream.sources import ReplaySource

    source = ReplaySource(
        path,
        speed=1e6 if args.dump else args.speed,
        skip_bad=getattr(args, "skip_bad", False),
        max_gap_s=1.0 / max(0.2, min(_ui_hz(args), 30.0)),  # the app's tick (it clamps ui_hz so)
    )
    for w in source.warnings:
        print(f"mlatui: warning: {w}", file=sys.stderr)
    app, status = _show(source, args, mode, "replayed", source.notices)
    skipped = source.scan.skipped_note()
    if skipped:
        if args.dump:
            print(skipped)
        print(f"mlatui: warning: {skipped}", file=sys.stderr)
    if args.dump and app.dash.status == "error":
        return recorded_error(path, app.dash.error)
    return status


def _ui_hz(args: argparse.Namespace) -> float:
    return 20.0 if args.dump else args.ui_hz


def _show(source, args: argparse.Namespace, mode: str, verb: str, notices=()):
    """The app on `source`, on screen or (--dump) headless with the summary printed after; the
    app and the exit status --expect decided (0 on screen)."""
    from mlatui.widgets.app import MlatuiApp

    app = MlatuiApp(
        source, mode=mode, ui_hz=_ui_hz(args), out_dir=args.out_dir, exit_when_done=args.dump
    )
    if not args.dump:
        app.run()
        return app, 0
    app.run(headless=True, size=(120, 40))
    return app, print_dump(app, args, verb, notices)


def print_dump(app, args: argparse.Namespace, verb: str, notices=()) -> int:
    """--dump: the dashboard's summary in --format (markdown: then the recording's notices, as
    the screen's header says them), then --expect's lines; the exit status they decide (0
    without --expect)."""
    from mlatui.views.summary import summarize

    summary = summarize(app.dash)
    expected, decided = check_expectations(summary, args.expect)
    print_summary(summary, args.format, expected, end="")
    if args.format == "md":
        for notice in notices:
            print(f"⚠ {notice.text}")
        print(f"{verb} {app.dash.events} events through the dashboard; status {app.dash.status}")
    return decided or 0


def recorded_error(path, error: str | None) -> int:
    """A recording of a run that failed: --dump ends with the run's error, as the run did."""
    import sys

    from mlatui.errors import UserError, error_line

    sys.stdout.flush()
    what = f"{path}: the recorded run failed: {error or 'engine error'}"
    hint = f"the summary above is the run up to the error; `mlatui replay {path}` shows its log"
    print(error_line(UserError(what, hint)), file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    following = getattr(args, "follow", False)
    refuse_summary_options(args)
    if not following or Path(args.file).is_file():
        if not following:
            refuse_missing(args.file)
        shown = show_record_file(args.file, args.dump, getattr(args, "skip_bad", False))
        if shown is not None:
            return shown
    if following:
        return follow(args.file, args)  # may wait for a file the run has not created yet
    return play(args.file, args, "replay")


def show_record_file(file: str, dump: bool, skip_bad: bool = False) -> int | None:
    """A benchmark's or calibrate's record file (not a run recording): --dump prints its table
    as its bench did; without --dump, one line says what it is and how to see it. None: not one
    of those (the recording reader takes it)."""
    from pathlib import Path

    from mlatui.stream.recorder import record_kind

    kind = record_kind(file)
    if kind is None:
        return None
    from mlatui.errors import UserError
    from mlatui.views.bench_report import record_file_dump, record_file_line

    if dump:
        print(record_file_dump(Path(file), kind, skip_bad), end="")
        return 0

    raise UserError(
        record_file_line(Path(file), kind, skip_bad),
        f"`mlatui replay --dump {file}` {kind.dump_shows}",
    )


def refuse_summary_options(args: argparse.Namespace) -> None:
    """--format json and --expect read a run's summary: a benchmark's record file has none, and
    both need --dump."""
    from mlatui.errors import UserError
    from mlatui.stream.recorder import record_kind

    asked = [
        f for f, on in (("--format json", args.format == "json"), ("--expect", args.expect)) if on
    ]
    if not asked:
        return
    if not args.dump:
        raise UserError(
            f"{asked[0]} needs --dump", f"mlatui replay --dump {args.file} {asked[0]} ..."
        )
    kind = record_kind(args.file) if not getattr(args, "follow", False) else None
    if kind is not None:
        raise UserError(
            f"{asked[0]}: {args.file} is a record file of `{kind.command}`, not a run recording",
            "use them on a recording of `mlatui bench SCENARIO` or `mlatui launch`",
        )


def refuse_missing(file: str) -> None:
    """A path that is not there (a typo, a recording from another machine) says where this
    machine's recordings are, before the dashboard loads."""
    from pathlib import Path

    if Path(file).exists():
        return
    from mlatui.config.outputs import runs_dir
    from mlatui.errors import UserError, shell_path

    raise UserError(
        f"{file}: no such recording",
        f"pass a .jsonl or .jsonl.gz written by `mlatui launch` (kept in {shell_path(runs_dir())}) or by "
        "`mlatui bench SCENARIO --out FILE`; `mlatui demo` plays a shipped one",
    )


def follow(path, args: argparse.Namespace) -> int:
    """The full dashboard on a recording that is still growing; it ends when `run_end` is read
    (--dump: then prints the summary)."""
    from mlatui.stream.replay_source import FollowSource

    app, status = _show(FollowSource(path), args, "follow", "followed")
    return 1 if args.dump and app.dash.status == "error" else status
