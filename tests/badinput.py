"""A corpus of bad input, by class, for the one-error-path test (tests/test_badinput.py).

`cases()` yields Case values: the CLI arguments (with `{dir}` standing for a scratch folder), the
environment to set, and the files to create there. Every case must end in a one-line
`mlatui: error: ...` and a non-zero exit, before any model loads, except the few marked
`deliberate` (odd but usable input, e.g. a recorded time of 1e308 s): those must succeed cleanly. Classes: scenario
files, CLI numbers and words, output paths, environment; recordings, model folders and memory are
in tests/badinput_load.py.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from platforms import TOO_LONG_NAME

FIXTURES = Path(__file__).parent / "fixtures"
TINY = str(FIXTURES / "tiny.toml")
RECORDING = str(FIXTURES / "ui_tiny_run.jsonl")
BAD_NUMBERS = ("inf", "-inf", "nan", "abc", "0", "-1", "1e999", "")


class CaseClass(Enum):
    SCENARIO = "scenario"
    CLI = "cli"
    OUTPUT = "output"
    ENVIRONMENT = "environment"
    RECORDING = "recording"
    MODEL_FOLDER = "model-folder"
    MEMORY = "memory"


@dataclass(frozen=True)
class Case:
    name: str
    kind: CaseClass
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, bytes | None], ...] = ()  # relative path -> bytes (None: a folder)
    unchanged: tuple[str, ...] = ()  # files that must be left as they were
    quick: bool = False  # part of the default (fast) run
    deliberate: bool = False  # a deliberate result (exit 0, no error), not a refusal
    tags: frozenset[str] = field(default_factory=frozenset)

    def materialise(self, folder: Path) -> tuple[list[str], dict[str, str]]:
        for rel, content in self.files:
            path = folder / rel
            if content is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
        if "fifo" in self.tags:
            os.mkfifo(folder / "fifo.jsonl")
        if "zero-link" in self.tags:
            (folder / "zero.jsonl").symlink_to("/dev/zero")
        argv = [a.replace("{dir}", str(folder)) for a in self.argv]
        env = {k: v.replace("{dir}", str(folder)) for k, v in self.env}
        return argv, env


# ---- scenario files -------------------------------------------------------------------------

TINY_TEXT = Path(TINY).read_text()

# (name, old text in tiny.toml, new text)
MUTATIONS = (
    ("contexts-word", "contexts = [128, 256]", 'contexts = ["abc"]'),
    ("contexts-zero", "contexts = [128, 256]", "contexts = [0]"),
    ("contexts-negative", "contexts = [128, 256]", "contexts = [-5]"),
    ("contexts-empty", "contexts = [128, 256]", "contexts = []"),
    ("contexts-float", "contexts = [128, 256]", "contexts = [128.5]"),
    ("contexts-inf", "contexts = [128, 256]", "contexts = [inf]"),
    ("contexts-string", "contexts = [128, 256]", 'contexts = "128"'),
    ("contexts-bool", "contexts = [128, 256]", "contexts = [true]"),
    ("contexts-tiny", "contexts = [128, 256]", "contexts = [8]"),
    ("contexts-beyond-int64", "contexts = [128, 256]", "contexts = [99999999999999999999999]"),
    ("contexts-5000-digits", "contexts = [128, 256]", "contexts = [" + "9" * 5000 + "]"),
    ("contexts-missing", "contexts = [128, 256]\n", ""),
    ("reps-zero", "reps = 3", "reps = 0"),
    ("reps-string", "reps = 3", 'reps = "3"'),
    ("reps-float", "reps = 3", "reps = 3.5"),
    ("reps-huge", "reps = 3", "reps = 18446744073709551616"),
    ("max-rounds-below-reps", "max_rounds = 4", "max_rounds = 1"),
    ("widths-zero", "widths = [1, 2, 3]", "widths = [0]"),
    ("widths-word", "widths = [1, 2, 3]", 'widths = ["a"]'),
    ("widths-empty", "widths = [1, 2, 3]", "widths = []"),
    ("warmup-zero", "warmup = 1\n\n[[phase]]", "warmup = 0\n\n[[phase]]"),
    ("kind-unknown", 'kind = "sweep"', 'kind = "nope"'),
    ("kind-number", 'kind = "sweep"', "kind = 3"),
    ("depths-empty", "depths = [1, 2]", "depths = []"),
    ("depths-zero", "depths = [1, 2]", "depths = [0]"),
    ("decode-two-depths", 'kind = "tune"', 'kind = "decode"'),
    ("tokens-one", "tokens = 12", "tokens = 1"),
    ("tokens-string", "tokens = 12", 'tokens = "12"'),
    ("seed-negative", "seed = 0", "seed = -1"),
    ("seed-word", "seed = 0", 'seed = "zero"'),
    ("source-unknown", 'source = "random"', 'source = "nowhere"'),
    ("source-number", 'source = "random"', "source = 3"),
    ("family-missing", 'family = "deepseek_v3"\n', ""),
    ("dtype-unknown", 'dtype = "float32"', 'dtype = "int8"'),
    ("bits-seven", 'dtype = "float32"', 'dtype = "float32"\nbits = 7'),
    ("fill-unknown", 'dtype = "float32"', 'dtype = "float32"\nfill = "zeros"'),
    ("model-unknown-key", "[model]\n", "[model]\nwheels = 4\n"),
    ("draft-source-unknown", 'source = "synthetic"', 'source = "oracle"'),
    ("acceptance-above-one", "acceptance = 0.75", "acceptance = 1.5"),
    ("acceptance-nan", "acceptance = 0.75", "acceptance = nan"),
    ("acceptance-word", "acceptance = 0.75", 'acceptance = "high"'),
    ("phase-unknown-key", 'name = "sweep"', 'name = "sweep"\nspeed = 9'),
    ("top-unknown-key", 'name = "tiny"', 'name = "tiny"\ncolour = "blue"'),
    ("threshold-word", 'name = "tiny"', 'name = "tiny"\nthreshold = "abc"'),
    ("threshold-zero", 'name = "tiny"', 'name = "tiny"\nthreshold = 0'),
    ("indexer-unknown", 'name = "tiny"', 'name = "tiny"\nindexer = "fast"'),
    ("null-word", 'name = "tiny"', 'name = "tiny"\nnull = "yes"'),
    ("model-not-a-table", "[model]\n", "model = 3\n[modelx]\n"),
)


def _random_bytes(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


WHOLE_FILES: tuple[tuple[str, bytes | None], ...] = (
    ("directory", None),
    ("not-utf8", b"\xff\xfe name = 1\n"),
    ("latin1", 'name = "caf\xe9"\n'.encode("latin-1")),
    ("binary", _random_bytes(512, 0)),
    ("empty", b""),
    ("comments-only", b"# nothing here\n"),
    ("invalid-toml", b"name = \n"),
    ("unclosed-table", b"[model\n"),
    ("phase-ints", b"phase = [1, 2]\n"),
    ("phase-string", b'phase = "sweep"\n'),
    ("phase-single-table", b'[phase]\nkind = "sweep"\ncontexts = [128]\n'),
    ("phase-empty-tables", b"[[phase]]\n[[phase]]\n"),
    ("draft-string", b'draft = "x"\n[[phase]]\nkind = "sweep"\ncontexts = [128]\n'),
    ("model-config-list", b"[model]\nconfig = [1, 2]\n"),
    ("two-megabytes", b"# " + b"x" * (2 << 20) + b"\n"),
    ("deep-arrays", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n"),
)


def scenario_cases() -> Iterator[Case]:
    commands = (
        ("bench", lambda path: ("bench", path, "--random-weights")),
        ("launch", lambda path: ("launch", "--scenario", path, "--random-weights")),
        ("observer", lambda path: ("bench", "observer", "--scenario", path, "--random-weights")),
    )
    for i, (name, old, new) in enumerate(MUTATIONS):
        assert old in TINY_TEXT, name
        content = TINY_TEXT.replace(old, new, 1).encode()
        for c, (command, argv) in enumerate(commands):
            yield Case(
                f"scenario/{command}/{name}",
                CaseClass.SCENARIO,
                argv("{dir}/s.toml"),
                files=(("s.toml", content),),
                quick=(i + c) % 8 == 0,
            )
    for i, (name, content) in enumerate(WHOLE_FILES):
        for c, (command, argv) in enumerate(commands):
            yield Case(
                f"scenario/{command}/{name}",
                CaseClass.SCENARIO,
                argv("{dir}/s.toml"),
                files=(("s.toml", content),),
                quick=(i + c) % 4 == 0,
            )
    yield Case(
        "scenario/bench/missing", CaseClass.SCENARIO, ("bench", "{dir}/none.toml"), quick=True
    )
    yield Case("scenario/bench/fifo-like", CaseClass.SCENARIO, ("bench", "/dev/null/x.toml"))
    yield Case("scenario/launch/device", CaseClass.SCENARIO, ("launch", "--scenario", "/dev/zero"))


# ---- CLI numbers and words ------------------------------------------------------------------

BENCH = ("bench", TINY, "--random-weights")
ATTENTION = ("bench", "attention", "--family", "deepseek_v3", "--size", "tiny")
INDEXER = ("bench", "indexer")
OBSERVER = ("bench", "observer", "--scenario", TINY)
CALIBRATE = ("calibrate", "--family", "deepseek_v3", "--size", "tiny")
LAUNCH = ("launch", "--scenario", TINY)
REPLAY = ("replay", RECORDING, "--dump")

# (command, option, bad values)
OPTIONS = (
    (BENCH, "--reps", ("0", "2", "-1", "abc", "inf", "1e3")),
    (BENCH, "--tokens", ("0", "3", "abc", "inf")),
    (BENCH, "--contexts", ("inf", "abc", "0", "-8", "", "1,,x", "infk", "1e9")),
    (BENCH, "--widths", ("0", "abc", "inf", "-2")),
    (BENCH, "--max-rounds", ("1", "abc", "nan")),
    (BENCH, "--seed", ("-1", "abc", "1.5")),
    (BENCH, "--threshold", ("0", "abc", "-3", "inf", "1.5")),
    (BENCH, "--indexer", ("fast",)),
    (BENCH, "--format", ("xml",)),
    (BENCH, "--arm-threads", ("many",)),
    (BENCH, "--fill", ("zeros",)),
    (BENCH, "--phases", ("nosuch",)),
    (ATTENTION, "--contexts", ("inf", "abc", "0", "-1", "8")),
    (ATTENTION, "--widths", ("0", "abc", "inf")),
    (ATTENTION, "--model-widths", ("0", "x")),
    (ATTENTION, "--layers", ("0", "-1", "abc", "inf")),
    (ATTENTION, "--reps", ("0", "1", "2", "abc", "inf")),
    (ATTENTION, "--bits", ("1", "7", "16", "abc", "4.0")),
    (ATTENTION, "--dtype", ("int8",)),
    (ATTENTION, "--part", ("c",)),
    (ATTENTION, "--family", ("llama", "")),
    (INDEXER, "--contexts", ("inf", "abc", "0", "100")),
    (INDEXER, "--widths", ("0", "abc")),
    (INDEXER, "--layer-contexts", ("abc", "-1")),
    (INDEXER, "--rounds", ("0", "1", "abc")),
    (INDEXER, "--max-rounds", ("1", "abc")),
    (INDEXER, "--warmup", ("-1", "abc")),
    (INDEXER, "--seed", ("-1",)),
    (INDEXER, "--dtype", ("int8",)),
    (OBSERVER, "--rounds", ("0", "-1", "abc")),
    (OBSERVER, "--ui-hz", BAD_NUMBERS),
    (CALIBRATE, "--contexts", ("inf", "abc", "0", "-1")),
    (CALIBRATE, "--max-width", ("1", "0", "abc", "inf")),
    (CALIBRATE, "--reps", ("0", "1", "abc")),
    (CALIBRATE, "--bits", ("7", "abc")),
    (CALIBRATE, "--family", ("llama",)),
    (("thresholds",), "--family", ("llama",)),
    (("thresholds",), "--model", ("{dir}/nothing",)),
    (LAUNCH, "--ui-hz", BAD_NUMBERS),
    (LAUNCH, "--threshold", ("0", "abc")),
    (LAUNCH, "--indexer", ("fast",)),
    (LAUNCH, "--fill", ("random-latents",)),  # timing-only fill without --random-weights
    (REPLAY, "--ui-hz", BAD_NUMBERS),
    (REPLAY, "--speed", BAD_NUMBERS),
    (("demo", "--dump"), "--ui-hz", ("inf", "0")),
    (("demo", "--dump"), "--speed", ("0", "nan")),
)

WORDS = (
    ("no-command", ()),
    ("unknown-command", ("frobnicate",)),
    ("bench-no-target", ("bench",)),
    ("bench-unknown-target", ("bench", "nosuch")),
    ("thresholds-no-source", ("thresholds",)),
    ("attention-no-family", ("bench", "attention")),
    ("unknown-option", ("launch", "--colour", "blue")),
    ("replay-missing", ("replay", "{dir}/none.jsonl")),
    ("replay-directory", ("replay", "{dir}", "--dump")),
    ("replay-device", ("replay", "/dev/zero", "--dump")),
)

CONFIGS = (
    ("list", b"[1, 2]"),
    ("null", b"null"),
    ("number", b"3"),
    ("string", b'"ranks"'),
    ("text-config-number", b'{"text_config": 4}'),
    ("geometry-strings", b'{"kv_lora_rank": "512", "qk_nope_head_dim": 128, "v_head_dim": 128}'),
    ("geometry-zero", b'{"kv_lora_rank": 0, "qk_nope_head_dim": 128, "v_head_dim": 128}'),
    ("not-mla", b'{"model_type": "llama", "hidden_size": 64}'),
    ("not-json", b"{nope"),
    ("not-utf8", b"\xff\xfe{}"),
    ("deep", b"[" * 100000 + b"]" * 100000),
)


def cli_cases() -> Iterator[Case]:
    for o, (command, option, values) in enumerate(OPTIONS):
        for i, value in enumerate(values):
            yield Case(
                f"cli/{' '.join(command[:2])}/{option}={value!r}",
                CaseClass.CLI,
                (*command, option, value),
                quick=i == 0 and o % 2 == 0,
            )
    for i, (name, argv) in enumerate(WORDS):
        yield Case(f"cli/{name}", CaseClass.CLI, argv, quick=i % 2 == 0)
    for i, (name, content) in enumerate(CONFIGS):
        yield Case(
            f"cli/thresholds --config/{name}",
            CaseClass.CLI,
            ("thresholds", "--config", "{dir}/config.json"),
            files=(("config.json", content),),
            quick=i % 5 == 0,
        )
    yield Case(
        "cli/thresholds --config/directory",
        CaseClass.CLI,
        ("thresholds", "--config", "{dir}/cfg"),
        files=(("cfg", None),),
    )


# ---- output paths ---------------------------------------------------------------------------

PRECIOUS = b"an earlier run\n"
TOO_LONG = "{dir}/" + TOO_LONG_NAME
TARGETS = (
    ("directory", "{dir}", ()),
    ("proc", "/proc/x.jsonl", ()),
    ("sys", "/sys/x.jsonl", ()),
    ("under-a-file", "{dir}/afile/x.jsonl", ()),
    ("dev-full", "/dev/full", ()),
    ("existing", "{dir}/existing.jsonl", ("existing.jsonl",)),
    ("dev-null", "/dev/null", ()),
    ("name-too-long", TOO_LONG + ".jsonl", ()),
)
# /proc, /sys and /dev/full exist on Linux only (macOS has a read-only root and no /dev/full):
# cases naming them run there only; dev-null and name-too-long are their portable twins
LINUX_ONLY_TARGETS = {"proc", "sys", "dev-full"}
LINUX_ONLY = "linux-only"
WRITERS = (
    ("bench --out", (*BENCH, "--out")),
    ("launch --record", ("launch", "--scenario", TINY, "--random-weights", "--record")),
    ("attention --out", (*ATTENTION, "--part", "a", "--contexts", "64", "--out")),
    ("attention-both --out", (*ATTENTION, "--contexts", "64", "--reps", "3", "--out")),
    ("indexer --out", (*INDEXER, "--contexts", "2100", "--out")),
    ("calibrate --out", (*CALIBRATE, "--contexts", "64", "--out")),
    ("observer --out", (*OBSERVER, "--random-weights", "--out")),
)


def output_cases() -> Iterator[Case]:
    files = (("afile", b"a file, not a folder\n"), ("existing.jsonl", PRECIOUS))
    for w, (writer, argv) in enumerate(WRITERS):
        for t, (target, path, unchanged) in enumerate(TARGETS):
            yield Case(
                f"output/{writer}/{target}",
                CaseClass.OUTPUT,
                (*argv, path),
                env=(("MLATUI_CACHE_DIR", "{dir}/cache"),),
                files=files,
                unchanged=unchanged,
                quick=(w + t) % 6 == 0,
                tags=frozenset({LINUX_ONLY} if target in LINUX_ONLY_TARGETS else ()),
            )
    for name, path in (("a-file", "{dir}/afile"), ("proc", "/proc/x"), ("too-long", TOO_LONG)):
        yield Case(
            f"output/launch --out-dir/{name}",
            CaseClass.OUTPUT,
            (*LAUNCH, "--random-weights", "--out-dir", path),
            files=files,
            quick=True,
            tags=frozenset({LINUX_ONLY} if name == "proc" else ()),
        )


# ---- environment ----------------------------------------------------------------------------


def environment_cases() -> Iterator[Case]:
    places = (("a-file", "{dir}/afile"), ("proc", "/proc/mlatui"), ("too-long", TOO_LONG))
    commands = (
        ("bench", ("XDG_DATA_HOME",), BENCH),
        ("launch", ("XDG_DATA_HOME",), (*LAUNCH, "--random-weights")),
        ("attention-b", ("XDG_DATA_HOME",), (*ATTENTION, "--part", "b", "--contexts", "64")),
        ("calibrate-runs", ("XDG_DATA_HOME",), (*CALIBRATE, "--contexts", "64")),
        (
            "calibrate-store",
            ("XDG_CACHE_HOME",),
            (*CALIBRATE, "--contexts", "64", "--out", "{dir}/probes.jsonl"),
        ),
    )
    for c, (name, variables, argv) in enumerate(commands):
        for p, (place, value) in enumerate(places):
            yield Case(
                f"environment/{name}/{'+'.join(variables)}={place}",
                CaseClass.ENVIRONMENT,
                argv,
                env=tuple((v, value) for v in variables),
                files=(("afile", b"a file, not a folder\n"),),
                quick=(c + p) % 2 == 0,
                tags=frozenset({"no-cache-override"} if name == "calibrate-store" else ()).union(
                    {LINUX_ONLY} if place == "proc" else ()
                ),
            )


def cases() -> list[Case]:
    import badinput_load

    out = [
        *scenario_cases(),
        *cli_cases(),
        *output_cases(),
        *environment_cases(),
        *badinput_load.cases(),
    ]
    names = [c.name for c in out]
    assert len(names) == len(set(names)), "case names must be unique"
    if sys.platform != "linux":
        out = [c for c in out if LINUX_ONLY not in c.tags]
    return out
