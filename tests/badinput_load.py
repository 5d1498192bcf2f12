"""More of the bad-input corpus (tests/badinput.py): recordings, model folders and memory.

Recordings: the fixture run with one event's field replaced by a wrong value (JSON-level
mutations), broken lines, and files that are not recordings (a directory, a FIFO, a device).
Model folders: `--model DIR` for folders that are not mlx-lm checkpoints. Memory: runs that
cannot fit (a full-size random DeepSeek-V3, contexts of millions of tokens in `bench attention`,
`bench indexer` and `calibrate`, a huge `hidden_size` or vocabulary): each must be refused with
the estimate before MLX tries to allocate (which ends in signal 11 without a word)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from badinput import ATTENTION, CALIBRATE, RECORDING, TINY, TINY_TEXT, Case, CaseClass

ROOT = Path(__file__).resolve().parents[1]

# ---- recordings -----------------------------------------------------------------------------

LINES = Path(RECORDING).read_text().splitlines()
DEEP = "[" * 10000 + "]" * 10000
HUGE_INT = "9" * 5000

# (event type, field, bad JSON values as text): the first event of that type gets the value
FIELDS = (
    ("header", "device", ("null", "[]", '"cpu"')),
    ("header", "scenario", ("null", "3", "[1]")),
    ("header", "schema_version", ("null", '"1"', "999", "-1", "1.5", HUGE_INT)),
    ("header", "thresholds", ('"formula"', "[]")),
    ("header", "geometry", ("[]", '{"kv_lora_rank": "512"}')),
    ("header", "settings", ('"x"',)),
    ("header", "model", ("5", "null")),
    ("header", "started_at", ("7",)),
    ("step", "ms", ('"12"', "null", "[1]", "1e999", DEEP)),
    ("step", "width", ('"2"', "2.5", "-1", HUGE_INT)),
    ("step", "context", ("true", '"128"')),
    ("step", "t", ("1e308", "1e999", "-1e308", '"now"')),
    ("step", "arm", ("3", '"third"')),
    ("validity", "valid", ('"yes"', "1", "null")),
    ("validity", "diff_pct", ('"1%"',)),
    ("phase_summary", "rows", ('{"context": 128}', '"rows"', "[1, 2]")),
    ("decode_result", "acceptance_by_position", ('"0.5"', '{"1": 0.5}')),
    ("decode_block", "accepted", ("7",)),
    ("memory", "mlx_active_bytes", ('"4MB"',)),
    ("progress", "total", ('"162"',)),
    ("run_end", "status", ("7", "null")),
    ("run_end", "invalid_contexts", ('"128"', "7")),
)

# (name, replacement for line 2 .. : a whole broken line)
BROKEN_LINES = (
    ("not-json", "{nope"),
    ("json-list", "[1, 2, 3]"),
    ("json-number", "42"),
    ("json-null", "null"),
    ("no-type", '{"t": 1.0}'),
    ("unknown-type", '{"type": "frobnicate", "t": 1.0}'),
    ("type-number", '{"type": 5, "t": 1.0}'),
    ("deep-nesting", DEEP),
    ("huge-integer", '{"type": "log", "t": ' + HUGE_INT + ', "level": "info", "message": "x"}'),
    ("nan-literal", '{"type": "log", "t": NaN, "level": "info", "message": "x"}'),
    ("not-utf8", "\udcff\udcfe"),
    ("nul-bytes", "\x00\x00\x00"),
    (
        "two-megabyte-line",
        '{"type": "log", "t": 1.0, "level": "info", "message": "' + "x" * (2 << 20) + '"}',
    ),
)

WHOLE_RECORDINGS: tuple[tuple[str, bytes], ...] = (
    ("empty", b""),
    ("blank-lines", b"\n\n\n"),
    ("header-missing", "\n".join(LINES[1:]).encode() + b"\n"),
    ("two-headers", "\n".join([LINES[0], *LINES]).encode() + b"\n"),
    ("binary", bytes(range(256)) * 8),
    ("a-scenario", Path(TINY).read_bytes()),
)


def _mutated(kind: str, field: str, value: str) -> bytes:
    out, done = [], False
    for line in LINES:
        event = json.loads(line)
        if not done and event.get("type") == kind:
            assert field in event, (kind, field)
            key = json.dumps(field)
            before = json.dumps({**event, field: None}, separators=(",", ":"))
            line = before.replace(f"{key}:null", f"{key}:{value}", 1)
            done = True
        out.append(line)
    assert done, kind
    return ("\n".join(out) + "\n").encode("utf-8", "surrogateescape")


def recording_cases() -> Iterator[Case]:
    n = 0
    for kind, field, values in FIELDS:
        for value in values:
            shown = value if len(value) < 20 else f"{value[:8]}..({len(value)} chars)"
            yield Case(
                f"recording/{kind}.{field}={shown}",
                CaseClass.RECORDING,
                ("replay", "{dir}/r.jsonl", "--dump"),
                files=(("r.jsonl", _mutated(kind, field, value)),),
                quick=n % 9 == 0,
                deliberate=(kind, field, value) == ("step", "t", "1e308"),  # gaps capped
            )
            n += 1
    for i, (name, line) in enumerate(BROKEN_LINES):
        body = "\n".join([LINES[0], LINES[1], line, *LINES[2:]]) + "\n"
        yield Case(
            f"recording/line/{name}",
            CaseClass.RECORDING,
            ("replay", "{dir}/r.jsonl", "--dump"),
            files=(("r.jsonl", body.encode("utf-8", "surrogateescape")),),
            quick=i % 5 == 0,
            deliberate=name == "two-megabyte-line",  # a long but valid log line
        )
    for i, (name, content) in enumerate(WHOLE_RECORDINGS):
        yield Case(
            f"recording/file/{name}",
            CaseClass.RECORDING,
            ("replay", "{dir}/r.jsonl", "--dump"),
            files=(("r.jsonl", content),),
            quick=i % 3 == 0,
        )
    specials = (
        ("fifo", ("replay", "{dir}/fifo.jsonl", "--dump"), frozenset({"fifo"})),
        ("fifo-ui", ("replay", "{dir}/fifo.jsonl"), frozenset({"fifo"})),
        ("dev-zero", ("replay", "/dev/zero", "--dump"), frozenset()),
        ("dev-null", ("replay", "/dev/null", "--dump"), frozenset()),
        ("dev-urandom-ui", ("replay", "/dev/urandom"), frozenset()),
        ("directory-ui", ("replay", "{dir}"), frozenset()),
        ("link-to-dev-zero", ("replay", "{dir}/zero.jsonl", "--dump"), frozenset({"zero-link"})),
        ("missing-ui", ("replay", "{dir}/none.jsonl"), frozenset()),
    )
    for name, argv, tags in specials:
        yield Case(f"recording/special/{name}", CaseClass.RECORDING, argv, quick=True, tags=tags)
    for name, argv in (
        ("demo --live --dump", ("demo", "--live", "--dump")),
        ("demo --live --skip-bad", ("demo", "--live", "--skip-bad")),
        ("replay --ui-hz inf", ("replay", RECORDING, "--ui-hz", "inf")),
        ("replay --speed 1e999", ("replay", RECORDING, "--speed", "1e999")),
    ):
        yield Case(f"recording/options/{name}", CaseClass.RECORDING, argv, quick=True)


# ---- model folders --------------------------------------------------------------------------

DSV3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "kv_lora_rank": 64,
    "q_lora_rank": None,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "vocab_size": 256,
    "n_routed_experts": None,
    "first_k_dense_replace": 1,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_position_embeddings": 4096,
}


def _config(**changes) -> bytes:
    return json.dumps({**DSV3, **changes}).encode()


# (name, files inside the folder; None: the folder is not created). `thresholds` reads only the
# config's geometry: a folder whose config has one gets its thresholds (deliberate).
GEOMETRY_ONLY = {"unknown-model-type", "no-weights", "garbage-safetensors", "layers-negative"}
FOLDERS: tuple[tuple[str, tuple[tuple[str, bytes | None], ...] | None], ...] = (
    ("missing", None),
    ("empty", (("m", None),)),
    ("a-file", (("m", b"not a folder\n"),)),
    ("config-not-json", (("m/config.json", b"{nope"),)),
    ("config-list", (("m/config.json", b"[1, 2]"),)),
    ("config-null", (("m/config.json", b"null"),)),
    ("config-not-utf8", (("m/config.json", b"\xff\xfe{}"),)),
    ("config-a-folder", (("m/config.json", None),)),
    ("config-deep", (("m/config.json", b"[" * 100000 + b"]" * 100000),)),
    ("unknown-model-type", (("m/config.json", _config(model_type="frobnicator")),)),
    ("no-model-type", (("m/config.json", b'{"hidden_size": 64}'),)),
    ("no-weights", (("m/config.json", _config()),)),
    ("garbage-safetensors", (("m/config.json", _config()), ("m/model.safetensors", b"x" * 64))),
    ("geometry-strings", (("m/config.json", _config(kv_lora_rank="64")),)),
    ("layers-negative", (("m/config.json", _config(num_hidden_layers=-1)),)),
)


def model_folder_cases() -> Iterator[Case]:
    commands = (
        ("bench", ("bench", TINY, "--model", "{dir}/m")),
        ("thresholds", ("thresholds", "--model", "{dir}/m")),
        ("launch", ("launch", "--scenario", TINY, "--model", "{dir}/m")),
        ("draft", ("bench", TINY, "--draft-model", "{dir}/m")),
    )
    for i, (name, files) in enumerate(FOLDERS):
        for c, (command, argv) in enumerate(commands):
            yield Case(
                f"model-folder/{command}/{name}",
                CaseClass.MODEL_FOLDER,
                argv,
                files=files or (),
                quick=(i + c) % 5 == 0,
                deliberate=command == "thresholds" and name in GEOMETRY_ONLY,
            )


# ---- memory ---------------------------------------------------------------------------------

FULL_ATTENTION = ("bench", "attention", "--family", "deepseek_v3")
INDEXER = ("bench", "indexer", "--layer-contexts", "none")
DRAFT_VOCAB = '[draft.config]\nmodel_type = "deepseek_v3"\nvocab_size = 512'
DRAFT_MODEL = TINY_TEXT.replace('source = "synthetic"', 'source = "draft-model"', 1)
HUGE_SCENARIOS = (
    ("hidden-size", TINY_TEXT.replace("hidden_size = 128", "hidden_size = 10000000", 1)),
    ("vocabulary", TINY_TEXT.replace("vocab_size = 512", "vocab_size = 2000000000", 1)),
    ("layers", TINY_TEXT.replace("num_hidden_layers = 2", "num_hidden_layers = 100000", 1)),
    ("contexts", TINY_TEXT.replace("contexts = [128, 256]", "contexts = [1000000000]", 1)),
    ("draft-vocabulary", DRAFT_MODEL.replace(DRAFT_VOCAB, DRAFT_VOCAB[:-3] + "2000000000", 1)),
    ("draft-hidden-size", DRAFT_MODEL.replace("hidden_size = 64", "hidden_size = 10000000", 1)),
    ("draft-larger-vocabulary", DRAFT_MODEL.replace(DRAFT_VOCAB, DRAFT_VOCAB[:-3] + "1024", 1)),
)
EMBEDDED_HUGE = (
    'name = "huge"\n[model]\nsource = "embedded"\n[[phase]]\nname = "sweep"\nkind = "sweep"\n'
    "contexts = [50000000]\nwidths = [1, 2]\nreps = 3\n"
)


def memory_cases() -> Iterator[Case]:
    argvs = (
        ("attention-a-4M", (*FULL_ATTENTION, "--part", "a", "--contexts", "4000000")),
        ("attention-both-4M", (*FULL_ATTENTION, "--contexts", "4000000")),
        ("attention-b-full-model", (*FULL_ATTENTION, "--part", "b", "--contexts", "1024")),
        ("attention-tiny-1e9", (*ATTENTION, "--part", "a", "--contexts", "1000000000")),
        ("indexer-100M", (*INDEXER, "--contexts", "100000000")),
        ("indexer-layer-10M", ("bench", "indexer", "--contexts", "10000000")),
        ("calibrate-4M", ("calibrate", "--family", "deepseek_v3", "--contexts", "4000000")),
        ("calibrate-tiny-1e9", (*CALIBRATE, "--contexts", "1000000000")),
        (
            "bench-full-deepseek-v3",
            ("bench", str(ROOT / "scenarios" / "deepseek-v3.toml"), "--random-weights"),
        ),
        ("bench-contexts-1e9", ("bench", TINY, "--random-weights", "--contexts", "1000000000")),
        (
            "observer-contexts-1e9",
            ("bench", "observer", "--scenario", "{dir}/s.toml", "--random-weights"),
        ),
    )
    huge = (("s.toml", HUGE_SCENARIOS[3][1].encode()),)
    for i, (name, argv) in enumerate(argvs):
        yield Case(
            f"memory/{name}",
            CaseClass.MEMORY,
            argv,
            files=huge if "{dir}/s.toml" in argv else (),
            quick=i % 3 == 0,
        )
    for i, (name, text) in enumerate(HUGE_SCENARIOS):
        assert text != TINY_TEXT, name
        yield Case(
            f"memory/scenario/{name}",
            CaseClass.MEMORY,
            ("bench", "{dir}/s.toml", "--random-weights"),
            files=(("s.toml", text.encode()),),
            quick=i % 2 == 0,
        )
    yield Case(
        "memory/scenario/embedded-50M",
        CaseClass.MEMORY,
        ("bench", "{dir}/s.toml"),
        files=(("s.toml", EMBEDDED_HUGE.encode()),),
        quick=True,
    )
    yield Case(
        "memory/model-folder/hidden-size",
        CaseClass.MEMORY,
        ("bench", TINY, "--model", "{dir}/m"),
        files=(
            ("m/config.json", _config(hidden_size=10_000_000, vocab_size=10_000_000)),
            ("m/model.safetensors", b"x" * 64),
        ),
        quick=True,
    )


def cases() -> list[Case]:
    return [*recording_cases(), *model_folder_cases(), *memory_cases()]
