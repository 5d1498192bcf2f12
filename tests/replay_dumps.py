"""What every kept recording prints, as text, so a change to the events or the printers that
changes any of it shows up as a diff (tests/test_replay_dumps.py).

For each event recording under tests/fixtures, scenarios/demo*.jsonl and docs/data, one gzipped
text under tests/fixtures/dumps/ holds, in sections:
- `mlatui replay --dump FILE` (the run's summary), written by that command: `bench --format md`
  and the `e` export print the same markdown (test_replay_dumps checks they are byte-identical);
- what `mlatui bench SCENARIO.toml --format csv|json` prints on stdout for those events (the CSV
  is the `e` export's);
- what its stderr progress printer prints for them.

Write them again (only when a change of output is intended, and say why in the commit):
    .venv/bin/python -m tests.replay_dumps --write
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DUMPS = ROOT / "tests" / "fixtures" / "dumps"
PATTERNS = (
    "tests/fixtures/*.jsonl",
    "tests/fixtures/*.jsonl.gz",
    "tests/fixtures/recordings/*.jsonl",
    "tests/fixtures/recordings/*.jsonl.gz",
    "scenarios/demo*.jsonl",
    "docs/data/*.jsonl.gz",
)
CLI_SECTION = "mlatui replay --dump"
SECTIONS = (
    CLI_SECTION,
    "bench --format csv and the export's csv",
    "bench --format json",
    "bench stderr progress",
)


def is_event_recording(path: Path) -> bool:
    """A recording of events starts with a header line; a bench record file does not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.readline().startswith('{"type":"header"')


def recordings() -> list[Path]:
    found = {p for pattern in PATTERNS for p in ROOT.glob(pattern)}
    return sorted((p for p in found if is_event_recording(p)), key=lambda p: str(p))


def dump_path(recording: Path) -> Path:
    rel = recording.relative_to(ROOT).as_posix().replace("/", "__")
    return DUMPS / f"{rel.removesuffix('.gz')}.txt.gz"


def cli_dump(recording: Path) -> str:
    """`mlatui replay --dump`, run as a user runs it."""
    p = subprocess.run(
        [sys.executable, "-m", "mlatui", "replay", "--dump", str(recording.relative_to(ROOT))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    if p.returncode not in (0, 1):
        raise RuntimeError(f"replay --dump {recording}: exit {p.returncode}: {p.stderr[-400:]}")
    return p.stdout


def folded_dump(events: list) -> str:
    """What `replay --dump` prints, from the same fold without the Textual app."""
    from mlatui.views import export
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.views.summary import summarize

    dash = DashboardState()
    dash.apply_all(events)
    return (
        export.summary_markdown(summarize(dash))
        + f"replayed {dash.events} events through the dashboard; status {dash.status}\n"
    )


def stderr_progress(events: list) -> str:
    from mlatui.views.progress_view import StderrProgress

    stream = io.StringIO()
    progress = StderrProgress(stream)
    for e in events:
        progress(e)
    return stream.getvalue()


def sections(recording: Path, dump: str | None = None) -> dict[str, str]:
    """Every printed text for one recording; `dump` replaces the in-process replay dump."""
    from mlatui.stream.recorder import read_recording
    from mlatui.views import export
    from mlatui.views.summary import summarize_events

    rec = read_recording(recording)
    events = [rec.header, *rec.events]
    return {
        CLI_SECTION: dump if dump is not None else folded_dump(events),
        "bench --format csv and the export's csv": export.summary_csv(summarize_events(events)),
        "bench --format json": export.summary_json(summarize_events(events)),
        "bench stderr progress": stderr_progress(events),
    }


def bench_markdown(recording: Path) -> str:
    """`bench --format md`'s stdout for a recording's events (the summary, then print's newline)."""
    from mlatui.stream.recorder import read_recording
    from mlatui.views import export
    from mlatui.views.summary import summarize_events

    rec = read_recording(recording)
    return export.summary_markdown(summarize_events([rec.header, *rec.events])) + "\n"


def render(parts: dict[str, str]) -> str:
    return "".join(f"===== {name} =====\n{parts[name]}" for name in SECTIONS)


def parse(text: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    name = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if (
            line.startswith("===== ")
            and line.rstrip("\n").endswith(" =====")
            and (line[6:-7] in SECTIONS)
        ):
            if name is not None:
                parts[name] = "".join(lines)
            name, lines = line[6:-7], []
        else:
            lines.append(line)
    if name is not None:
        parts[name] = "".join(lines)
    return parts


def read_expected(recording: Path) -> dict[str, str]:
    return parse(gzip.decompress(dump_path(recording).read_bytes()).decode("utf-8"))


def write_all() -> None:
    DUMPS.mkdir(parents=True, exist_ok=True)
    for path in recordings():
        dump = cli_dump(path)
        parts = sections(path, dump)
        if parts[CLI_SECTION] != folded_dump_of(path):
            raise SystemExit(
                f"{path}: the in-process fold no longer prints what replay --dump does"
            )
        data = gzip.compress(render(parts).encode("utf-8"), mtime=0)
        dump_path(path).write_bytes(data)
        print(f"{dump_path(path).relative_to(ROOT)}: {len(data)} bytes")


def folded_dump_of(path: Path) -> str:
    from mlatui.stream.recorder import read_recording

    rec = read_recording(path)
    return folded_dump([rec.header, *rec.events])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write tests/fixtures/dumps/ again")
    args = parser.parse_args()
    if args.write:
        write_all()
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
