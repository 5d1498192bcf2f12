"""Test-only event streams for the UI and the sources (a stand-in until the engine's recorded
fixture exists). Deterministic: the numbers are arbitrary, never shown as measurements."""

from __future__ import annotations

import threading
import time

from mlatui.config.phase_kind import PhaseKind
from mlatui.config.scenario import Phase, ScenarioRecord
from mlatui.stream.event_base import Interval
from mlatui.stream.events import (
    SCHEMA_VERSION,
    DecodeBlock,
    DecodeResult,
    DeviceInfo,
    ErrorEvent,
    LogMessage,
    MemorySample,
    PhaseStart,
    PhaseSummary,
    Progress,
    RunEnd,
    RunHeader,
    Step,
    Thresholds,
    Validity,
)
from mlatui.stream.phase_rows import SweepRow

CONTEXTS = (256, 512, 1024, 2048)
INVALID = 1024


def header(synthetic: bool = True) -> RunHeader:
    return RunHeader(
        schema_version=SCHEMA_VERSION,
        mlatui_version="0.1.0",
        mlx_version="0.32.4",
        mlx_lm_version="0.32.2",
        python_version="3.12",
        platform="linux",
        device=DeviceInfo(
            name="cpu", architecture="x86_64", memory_bytes=24 << 30, blas="openblas", backend="cpu"
        ),
        model="random:deepseek_v3",
        model_type="deepseek_v3",
        geometry={
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "num_heads": 4,
            "num_layers": 2,
        },
        thresholds=Thresholds(policy="formula", formula_inf=170, formula_at={2048: 160}),
        scenario=ScenarioRecord(
            name="ui-test",
            path="tests/ui_events.py",
            phases=(
                Phase("sweep", PhaseKind.SWEEP, CONTEXTS),
                Phase("decode", PhaseKind.DECODE, CONTEXTS, depths=(2,)),
            ),
        ),
        draft="none",
        synthetic_acceptance=synthetic,
        started_at="2026-11-30T00:00:00",
    )


def events(error: bool = False) -> list:
    out = [header()]
    t = 0.0
    steps = len(CONTEXTS) * 3 * 2 * 2
    out.append(PhaseStart(t, "sweep", "sweep", 0, 2, steps, CONTEXTS))
    done = 0
    for c in CONTEXTS:
        for width in (1, 2, 3):
            for rep in range(2):
                for arm in ("stock", "patched", "patched", "stock")[rep * 2 : rep * 2 + 2]:
                    t += 0.05
                    base = 1.0 + c / 1000
                    ms = (
                        base * (1 + 0.1 * (width - 1))
                        if arm == "patched" or width == 1
                        else base + width * c / 500
                    )
                    if c == INVALID and width == 1 and arm == "stock":
                        ms *= 1.2
                    absorbed = 2 if (width == 1 or arm == "patched") else 0
                    out.append(
                        Step(t, "sweep", arm, c, width, rep, round(ms, 4), absorbed, 2 - absorbed)
                    )
                    done += 1
        out.append(Progress(t, "sweep", done, steps, round((steps - done) * 0.05, 2)))
        s1 = 1.0 + c / 1000
        p1 = s1 * (1.2 if c == INVALID else 1.0)
        pct = (s1 - p1) / p1 * 100 if c != INVALID else 20.0
        out.append(
            Validity(
                t,
                "sweep",
                c,
                round(p1 if c == INVALID else s1, 4),
                round(s1, 4),
                round(pct, 2),
                2.0,
                c != INVALID,
                "invalid" if c == INVALID else "valid",
            )
        )
        out.append(
            MemorySample(
                t,
                100 << 20,
                10 << 20,
                120 << 20,
                None,
                (300 + c // 10) << 20,
                20 << 30,
                24 << 30,
                0,
            )
        )
    out.append(
        PhaseSummary(
            t,
            "sweep",
            "sweep",
            (SweepRow(context=256, width=1, arm="stock", median_ms=1.0),),
            "patched flat",
        )
    )
    out.append(LogMessage(t, "warning", "test warning"))
    out.append(PhaseStart(t, "decode", "decode", 1, 2, 20))
    for i in range(10):
        for arm in ("stock", "patched"):
            t += 0.05
            acc = (1, 1, 0) if i % 2 else (1, 0)
            out.append(
                DecodeBlock(
                    t,
                    "decode",
                    arm,
                    512,
                    3,
                    i,
                    sum(acc) + 1,
                    0.5 + (4.0 if arm == "stock" else 1.5),
                    drafted=(3,),
                    accepted=(sum(acc),),
                    emitted=(sum(acc) + 1,),
                    acceptance_rule="exact-match",
                )
            )
        out.append(Progress(t, "decode", 2 * (i + 1), 20, round((9 - i) * 0.1, 2)))
        if error and i == 4:
            out.append(ErrorEvent(t, "RuntimeError: boom in arm", "patched"))
            out.append(RunEnd(t, "error"))
            return out
    for arm, spec in (("stock", 80.0), ("patched", 210.0)):
        out.append(DecodeResult(t, "decode", arm, 512, 0, 100, 1.0, _tok_s(150.0)))
        out.append(DecodeResult(t, "decode", arm, 512, 3, 100, 1.0, _tok_s(spec), (0.9, 0.5, 0.2)))
    out.append(RunEnd(t + 0.01, "completed"))
    return out


def write_recording(path, evts=None) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for e in evts or events():
            f.write(e.to_json() + "\n")
    return str(path)


def fake_engine(config, emit, stop: threading.Event, delay_s: float = 0.002) -> str:
    """Emits the test stream like the engine would, on the caller's thread, honouring `stop`."""
    evts = events(error=bool(config.overrides.get("error")))
    delay_s = float(config.overrides.get("delay_s", delay_s))
    for e in evts:
        if stop.is_set() and not isinstance(e, RunHeader):
            emit(RunEnd(getattr(e, "t", 0.0), "interrupted"))
            return "interrupted"
        if config.overrides.get("raise_at") == e.type:
            raise RuntimeError("injected engine failure")
        emit(e)
        time.sleep(delay_s)
    return "error" if config.overrides.get("error") else "completed"


def _tok_s(median: float) -> Interval:
    """A tok/s figure without its interval (as the first recordings kept it)."""
    return Interval(median, median, median, 0)
