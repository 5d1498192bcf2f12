"""The README and docs/ say what runs: every complete `mlatui ...` and `python -m tools.train...`
command line in them parses with the real argument parsers (nothing runs), the repository files
they name exist, their links resolve, and the recordings docs/results.md keeps replay."""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import re
import shlex
from pathlib import Path

import pytest

from mlatui.stream.recorder import read_recording

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"\.\.\.|…|\[|\||<|\b(FILE|SCENARIO|COMMAND)\b")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`((?:MLATUI_\w+=\S+ )*(?:\.venv/bin/)?mlatui [^`]+)`")


class Parsed(SystemExit):
    """Raised in place of running a command once its arguments are parsed."""


def _commands(text: str) -> list[str]:
    lines = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|;", line.split("  #")[0]):
                lines.append(part.strip())
    lines += [m.strip() for m in INLINE.findall(text)]
    found = []
    for line in lines:
        words = [w for w in line.split() if not re.fullmatch(r"[A-Z_]+=\S*", w)]
        if not words or PLACEHOLDER.search(line):
            continue
        head = words[0].removeprefix(".venv/bin/")
        if head == "mlatui" or (head.startswith("python") and words[1:3] == ["-m", "mlatui"]):
            found.append(" ".join(["mlatui", *words[1 if head == "mlatui" else 3 :]]))
        elif head.startswith("python") and words[1:2] == ["-m"] and words[2].startswith("tools."):
            found.append(" ".join(words[2:]))
    return found


def _documented() -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for page in PAGES:
        for cmd in _commands(page.read_text()):
            seen.setdefault(cmd, page.name)
    return sorted((page, cmd) for cmd, page in seen.items())


DOCUMENTED = _documented()


def test_the_pages_document_commands_at_all():
    pages = {page for page, _ in DOCUMENTED}
    assert {"README.md", "results.md", "embedded-model.md"} <= pages
    assert sum(cmd.startswith("mlatui bench") for _, cmd in DOCUMENTED) >= 5


def _parse_only(monkeypatch) -> None:
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        ns = original(self, args, namespace)
        if getattr(ns, "command", None) == "bench" and hasattr(ns, "rest"):
            return ns  # `bench` parses its target's own options next
        raise Parsed(ns)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)


@pytest.mark.parametrize(("page", "cmd"), DOCUMENTED, ids=[c for _, c in DOCUMENTED])
def test_a_documented_command_parses_and_names_files_that_exist(page, cmd, monkeypatch):
    words = shlex.split(cmd)
    for word in words:
        if re.fullmatch(r"(scenarios|docs|tests|tools|mlatui)/[\w./-]+", word):
            assert (ROOT / word).exists(), f"{page}: `{cmd}` names {word}, which does not exist"
    _parse_only(monkeypatch)
    if words[0] == "mlatui":
        from mlatui.cli import main

        run = lambda: main(words[1:])  # noqa: E731
    else:
        run = lambda: importlib.import_module(words[0]).main(words[1:])  # noqa: E731
    try:
        code = run()
    except Parsed:
        return
    except SystemExit as e:
        code = e.code
    pytest.fail(f"{page}: `{cmd}` does not parse (exit {code})")


def test_every_local_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def _kept() -> list[Path]:
    return sorted((ROOT / "docs" / "data").glob("*.jsonl*"))


def _brace_expanded(text: str) -> str:
    """`data/run-{1,2}.jsonl` as a shell reads it: the names it stands for, one per line, added."""
    names = []
    for head, options, tail in re.findall(r"([\w./-]*)\{([\w.,-]+)\}([\w./-]*)", text):
        names += [f"{head}{option}{tail}" for option in options.split(",")]
    return "\n".join([text, *names])


def test_every_kept_recording_is_linked_and_reads():
    pages = _brace_expanded("\n".join(page.read_text() for page in PAGES))
    assert _kept()
    for path in _kept():
        assert f"data/{path.name}" in pages, f"{path.name} is kept but no page names it"
        with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
            first = json.loads(f.readline())
        if "bench" in first:  # a bench record: one JSON object per line with its samples
            assert "samples_ms" in first, path
        else:
            rec = read_recording(path)
            assert rec.events and not rec.skipped, path


def test_every_documented_tool_script_imports():
    """`python tools/NAME.py` in a page: the script exists and its imports resolve (not run)."""
    import importlib.util

    scripts = {
        name for page in PAGES for name in re.findall(r"python3? (tools/\w+\.py)", page.read_text())
    }
    assert scripts
    for name in sorted(scripts):
        spec = importlib.util.spec_from_file_location(Path(name).stem, ROOT / name)
        assert spec and spec.loader, name
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
