"""Move mlatui's flat modules into packages and rewrite every reference (re-runnable, idempotent).

Run from the repository root on a clean tree: `python docs/experiments/relayout.py`, then
`ruff format . && ruff check --fix . && pytest`. It fails before touching anything if a flat
module of mlatui/ (mlatui/*.py) has no entry in MOVES, so modules added by other branches are
caught; modules in commands/, models/ and training/ without an entry stay where they are. Text
files are rewritten first (each under its old module name), then files move with `git mv`, then
pyproject.toml's package list is regenerated. A second run changes nothing. `--check` only
reports what would change (exit 1 if anything would).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# old module (relative to mlatui) -> new module (relative to mlatui); identical = stays
MOVES: dict[str, str] = {
    # the top level: entry points and the one error path
    "__init__": "__init__",
    "__main__": "__main__",
    "cli": "cli",
    "errors": "errors",
    # config/: what a run is asked to do, and its inputs and outputs checked up front
    "scenario": "config.scenario",
    "runconfig": "config.runconfig",
    "inputs": "config.inputs",
    "model_inputs": "config.model_inputs",
    "outputs": "config.outputs",
    # stream/: the event stream, its recordings, sources and sinks
    "events": "stream.events",
    "recorder": "stream.recorder",
    "recording_schema": "stream.recording_schema",
    "replay_source": "stream.replay_source",
    "follow_source": "stream.follow_source",
    "sources": "stream.sources",
    "runs": "stream.sinks",
    # host/: the process and the machine(s) it runs on
    "blas": "host.blas",
    "blas_redirect": "host.blas_redirect",
    "memory": "host.memory",
    "signals": "host.signals",
    "distributed": "host.distributed",
    # measure/: timing, the sampler, estimates, benchmark records
    "measure": "measure.timing",
    "sampler": "measure.sampler",
    "estimates": "measure.estimates",
    "acceptance": "measure.acceptance",
    "plans": "measure.plans",
    "records": "measure.records",
    "pooled": "measure.pooled",  # never flat: listed so `mlatui.measure.pooled` is left alone
    "bound": "measure.bound",  # never flat: listed so `mlatui.measure.bound` is left alone
    "multiplicity": "measure.multiplicity",  # never flat (session 7), as above
    "training.repetition": "measure.repetition",  # session 5: the decode guard shares it
    # store/: what mlatui remembers per device between runs
    "calibration": "store.calibration",
    "harness_bias": "store.harness_bias",
    # gate/: the MLA gate and how its thresholds read
    "mla": "gate.mla",
    "gate_policy": "gate.policy",  # branch typed: the one threshold parser and policy object
    "threshold_text": "gate.threshold_text",
    # models/: family configs, random-weight builds, sparse layers, the embedded model, loading
    "families": "models.families",
    "checkpoint": "models.checkpoint",
    "indexer": "models.indexer",
    "sparse_mla": "models.sparse_mla",
    "embedded": "models.embedded",
    "fit": "models.fit",
    "loading": "models.loading",
    "load_watch": "models.load_watch",
    "models": "models",
    "models.mlatui_mla": "models.mlatui_mla",
    # views/: pure folds of the event stream and every printer
    "dashboard_state": "views.dashboard_state",
    "dashboard_views": "views.dashboard_views",
    "export": "views.export",
    "report": "views.report",
    "report_decode": "views.report_decode",
    "compare": "views.compare",
    "compare_report": "views.compare_report",
    "key_figure": "views.key_figure",
    "step_series": "views.step_series",
    "verdict_strip": "views.verdict_strip",
    "run_meta": "views.run_meta",
    "run_tables": "views.run_tables",
    "mdtable": "views.mdtable",
    "loading_view": "views.loading_view",
    "progress": "views.progress",
    "progress_costs": "views.progress_costs",
    "progress_view": "views.progress_view",
    "keys": "views.keys",
    "rounding": "views.rounding",
    # bench/: standalone benchmarks
    "attnbench": "bench.attention",
    "indexer_bench": "bench.indexer",
    "commands._attention_scenario": "bench.attention_scenario",
    # run/: the engine, the arms, drafts, the speculative step
    "engine": "run.engine",
    "engine_dist": "run.engine_dist",
    "engine_header": "run.header",
    "arms": "run.arms",
    "draft": "run.drafts",
    "mtp": "run.mtp",
    "spec": "run.spec",
    "runtime": "run.runtime",
    "child": "run.child",
    "decode_stream": "run.decode_stream",
    "parity": "run.parity",
    "sharding": "run.sharding",
    "prompts": "run.prompts",
    "budget": "run.budget",
    "budget_run": "run.budget_probe",
    # run/phases/: the scenario's phases
    "phases": "run.phases.base",
    "decode": "run.phases.decode",
    "decode_blocks": "run.phases.decode_blocks",
    "decode_verdict": "run.phases.decode_verdict",
    "indexer_phase": "run.phases.indexer",
    "indexer_sites": "run.phases.indexer_sites",  # branch indexerphase: the on-model steps
    # commands/: one thin adapter per subcommand, and the options they share
    "argtypes": "commands.argtypes",
    "commands": "commands",
    "commands._bench_scenario": "commands.bench_scenario",
    "commands._gate_options": "commands.gate_options",
    "commands.bench": "commands.bench",
    "commands.bench_attention": "commands.bench_attention",
    "commands.bench_decode_parity": "commands.bench_decode_parity",
    "commands.bench_indexer": "commands.bench_indexer",
    "commands.bench_observer": "commands.bench_observer",
    "commands.calibrate": "commands.calibrate",
    "commands.compare": "commands.compare",
    "commands.demo": "commands.demo",
    "commands.launch": "commands.launch",
    "commands.replay": "commands.replay",
    "commands.thresholds": "commands.thresholds",
}
# packages that exist already: a module in them without an entry stays where it is
KEPT_PACKAGES = ("training", "commands", "models")

PACKAGES: dict[str, str] = {
    "config": "What a run is asked to do (scenarios, run configs) and its inputs and outputs, checked before anything loads.",
    "stream": "The event stream between the engine and everything that shows or stores it: events, recordings, sources, sinks.",
    "host": "The process and the machines it runs on: BLAS, memory, signals, the process group.",
    "measure": "Timing and statistics every comparison shares: sync points, the sampler, paired estimates, records.",
    "store": "What mlatui remembers per device between runs: calibrated crossovers and the harness's measured bias.",
    "gate": "The MLA gate: thresholds, the per-instance patch of installed mlx-lm, branch counters, how a threshold reads.",
    "views": "What is shown and printed, computed from the event stream alone (pure Python: no mlx, no textual).",
    "bench": "Standalone benchmarks: forced absorbed vs materialised attention, the sparse indexer kernels.",
    "run": "The run: the engine, the two arms, draft sources, the speculative step, the budget.",
    "run.phases": "The scenario's phases (sweep, decode and tune, indexer), each scheduled through the sampler.",
}

# package data that moves with its module: old dir -> new dir (relative to mlatui/)
DATA_DIRS = {"embedded": "models/embedded"}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".cfg", ".ini", ".txt", ".tcss", ".yml", ".yaml"}
TEXT_FILES = {".ci/run", ".importlinter"}
SKIP_PREFIXES = ("tests/__snapshots__/", "docs/data/", "docs/experiments/relayout.py")


class RelayoutError(Exception):
    pass


def current_modules() -> set[str]:
    out = set()
    for p in (ROOT / "mlatui").rglob("*.py"):
        rel = p.relative_to(ROOT / "mlatui").with_suffix("")
        parts = rel.parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.add(".".join(parts) if parts else "__init__")
    return out


def full_moves() -> dict[str, str]:
    moves = dict(MOVES)
    placed = set(MOVES.values())
    for pkg in KEPT_PACKAGES:
        for p in (ROOT / "mlatui" / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT / "mlatui").with_suffix("").parts
            mod = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
            if mod not in placed:
                moves.setdefault(mod, mod)
    return moves


def check_mapping(moves: dict[str, str]) -> None:
    known = set(moves) | set(moves.values()) | set(PACKAGES)
    flat = {m for m in current_modules() if "." not in m}
    unknown = sorted(flat - known)
    if unknown:
        raise RelayoutError(
            "no mapping for these flat modules of mlatui/ (add them to MOVES in "
            "docs/experiments/relayout.py): " + ", ".join(f"mlatui.{m}" for m in unknown)
        )
    targets: dict[str, str] = {}
    for old, new in moves.items():
        if new in targets and targets[new] != old:
            raise RelayoutError(f"two modules move to mlatui.{new}: {targets[new]} and {old}")
        targets[new] = old


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def move_files(moves: dict[str, str], dry: bool) -> list[str]:
    done = []
    for pkg, doc in PACKAGES.items():
        init = ROOT / "mlatui" / Path(*pkg.split(".")) / "__init__.py"
        if not init.exists():
            done.append(f"create mlatui/{pkg.replace('.', '/')}/__init__.py")
            if not dry:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(f'"""{doc}"""\n')
                git("add", str(init))
    for old, new in sorted(moves.items()):
        if old == new:
            continue
        src = ROOT / "mlatui" / (old.replace(".", "/") + ".py")
        dst = ROOT / "mlatui" / (new.replace(".", "/") + ".py")
        if src.exists() and dst.exists():
            raise RelayoutError(f"both {src.relative_to(ROOT)} and {dst.relative_to(ROOT)} exist")
        if src.exists():
            done.append(f"git mv {src.relative_to(ROOT)} {dst.relative_to(ROOT)}")
            if not dry:
                dst.parent.mkdir(parents=True, exist_ok=True)
                git("mv", str(src), str(dst))
    for old, new in DATA_DIRS.items():
        src, dst = ROOT / "mlatui" / old, ROOT / "mlatui" / new
        if src.is_dir() and any(src.iterdir()):
            if dst.exists():
                raise RelayoutError(
                    f"both {src.relative_to(ROOT)} and {dst.relative_to(ROOT)} exist"
                )
            done.append(f"git mv {src.relative_to(ROOT)} {dst.relative_to(ROOT)}")
            if not dry:
                dst.parent.mkdir(parents=True, exist_ok=True)
                git("mv", str(src), str(dst))
    return done


class Rewriter:
    """Rewrites references to old modules in text. Idempotent: a name that already starts with
    a new module or package is left alone (the old module `measure` and the new package
    `measure` share a name: what follows decides)."""

    def __init__(self, moves: dict[str, str]):
        self.old = {
            f"mlatui.{k}" if k != "__init__" else "mlatui": f"mlatui.{v}"
            for k, v in moves.items()
            if k != v
        }
        news = {f"mlatui.{v}" for v in moves.values() if v != "__init__"}
        news |= {f"mlatui.{p}" for p in PACKAGES}
        self.new = news
        self.submodules: dict[str, set[str]] = {}
        for n in news:
            head, _, tail = n.rpartition(".")
            self.submodules.setdefault(head, set()).add(tail)

    def _longest(self, name: str, pool) -> str | None:
        parts = name.split(".")
        for i in range(len(parts), 1, -1):
            cand = ".".join(parts[:i])
            if cand in pool:
                return cand
        return None

    def dotted(self, name: str) -> str:
        old = self._longest(name, self.old)
        if old is None:
            return name
        new = self._longest(name, self.new)
        if new is not None and len(new) > len(old):
            return name
        if name == old == new and (ROOT / Path(*name.split(".")) / "__init__.py").exists():
            return name  # the bare name of a new package that was an old module: moved already
        return self.old[old] + name[len(old) :]

    DOTTED = re.compile(r"(?<![\w./])mlatui(?:\.[A-Za-z_]\w*)+(?![\w])")
    PATH = re.compile(r"(?<![\w./])mlatui((?:/[A-Za-z_]\w*)+)\.py\b")
    FROM_PKG = re.compile(
        r"^(?P<indent>[ \t]*)from (?P<pkg>mlatui(?:\.\w+)*) import (?P<names>\([^)]*\)|[^\n#]*?)(?P<tail>[ \t]*(?:#[^\n]*)?)$",
        re.M,
    )
    RELATIVE = re.compile(r"^([ \t]*)from (\.+)(\w+(?:\.\w+)*)? import ", re.M)

    def from_imports(self, text: str) -> str:
        def repl(m: re.Match) -> str:
            pkg, raw = m["pkg"], m["names"]
            names = [n.strip() for n in raw.strip("()").replace("\n", " ").split(",") if n.strip()]
            entries = []
            for n in names:
                name, _, alias = (p.strip() for p in n.partition(" as "))
                entries.append((name, alias))
            # a new package importing its own submodules: already rewritten
            if pkg in self.new or pkg == "mlatui":
                subs = self.submodules.get(pkg, set())
                if pkg != "mlatui" and all(name in subs for name, _ in entries):
                    return m[0]
            out: list[str] = []
            rest: list[str] = []
            for name, alias in entries:
                full = f"{pkg}.{name}"
                if full in self.old and not (
                    pkg in self.new and name in self.submodules.get(pkg, set())
                ):
                    target = self.old[full]
                    head, _, tail = target.rpartition(".")
                    local = alias or name
                    out.append(
                        f"from {head} import {tail}" + (f" as {local}" if local != tail else "")
                    )
                else:
                    rest.append(f"{name} as {alias}" if alias else name)
            if not out:
                new_pkg = self.dotted(pkg)
                return (
                    m[0]
                    if new_pkg == pkg
                    else m[0].replace(f"from {pkg} import", f"from {new_pkg} import", 1)
                )
            ind = m["indent"]
            lines = [ind + line for line in out]
            if rest:
                lines.insert(0, f"{ind}from {self.dotted(pkg)} import {', '.join(rest)}")
            lines[-1] += m["tail"]
            return "\n".join(lines)

        return self.FROM_PKG.sub(repl, text)

    def relative(self, text: str, module: str | None) -> str:
        if module is None:
            return text

        def repl(m: re.Match) -> str:
            dots, rest = len(m[2]), m[3] or ""
            base = module.split(".")
            base = base[: len(base) - dots]
            absolute = ".".join(base + ([rest] if rest else []))
            return f"{m[1]}from {absolute} import "

        return self.RELATIVE.sub(repl, text)

    def paths(self, text: str) -> str:
        def repl(m: re.Match) -> str:
            mod = "mlatui" + m[1].replace("/", ".")
            new = self.dotted(mod)
            return new.replace(".", "/") + ".py"

        text = self.PATH.sub(repl, text)
        for old, new in DATA_DIRS.items():
            text = re.sub(rf"(?<![\w./])mlatui/{re.escape(old)}/", f"mlatui/{new}/", text)
        return text

    def __call__(self, text: str, module: str | None = None) -> str:
        text = self.relative(text, module)
        text = self.from_imports(text)
        text = self.DOTTED.sub(lambda m: self.dotted(m[0]), text)
        return self.paths(text)


def module_of(path: str) -> str | None:
    p = Path(path)
    if p.parts[0] != "mlatui" or p.suffix != ".py":
        return None
    parts = list(p.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] + ["__init__"]
    return ".".join(parts)


def text_files() -> list[str]:
    files = git("ls-files", "--cached", "--others", "--exclude-standard").splitlines()
    out = []
    for f in files:
        if f.startswith(SKIP_PREFIXES) or not (ROOT / f).is_file():
            continue
        if Path(f).suffix in TEXT_SUFFIXES or f in TEXT_FILES:
            out.append(f)
    return out


def update_pyproject(dry: bool) -> list[str]:
    path = ROOT / "pyproject.toml"
    text = path.read_text()
    pkgs = sorted(
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "mlatui").rglob("__init__.py")
        if "__pycache__" not in p.parts
    )
    extra = [p for p in ("mlatui.scenarios", "widgets") if p in text]
    listing = ", ".join(f'"{p}"' for p in pkgs + extra)
    new = re.sub(r"(?m)^packages = \[.*\]$", f"packages = [{listing}]", text)
    for old, dst in DATA_DIRS.items():
        owner = ".".join(["mlatui", *dst.split("/")[:-1]])
        leaf = dst.split("/")[-1]
        new = re.sub(
            rf'(?m)^(?:mlatui|"mlatui") = \["{re.escape(old)}/\*\*/\*"\]$',
            f'"{owner}" = ["{leaf}/**/*"]',
            new,
        )
    if new == text:
        return []
    if not dry:
        path.write_text(new)
    return ["rewrite pyproject.toml packages / package-data"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report what would change; exit 1 if any")
    args = ap.parse_args(argv)
    moves = full_moves()
    try:
        check_mapping(moves)
        rewrite = Rewriter(moves)
        planned = []
        # rewrite first (module names of each file are its old ones), then move
        for f in text_files():
            path = ROOT / f
            text = path.read_text()
            new = rewrite(text, module_of(f))
            if new != text:
                planned.append(f"rewrite {f}")
                if not args.check:
                    path.write_text(new)
        planned += move_files(moves, args.check)
        planned += update_pyproject(args.check)
    except RelayoutError as e:
        print(f"relayout: error: {e}", file=sys.stderr)
        return 2
    for line in planned:
        print(line)
    if args.check:
        return 1 if planned else 0
    print(f"relayout: {len(planned)} changes" if planned else "relayout: nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
