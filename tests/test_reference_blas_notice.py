"""On the reference BLAS the story cannot show (a width-2 step costs twice a plain one): the run
says so when it opens, and says nothing of it on a fast BLAS."""

from pathlib import Path
from types import SimpleNamespace

import mlx.nn as nn

import mlatui.host.blas as blas
from mlatui.config.scenario import load_scenario
from mlatui.run import engine_setup

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


def _opening(monkeypatch, provider: str) -> list[tuple[str, str]]:
    monkeypatch.setattr(blas, "blas_in_use", lambda: provider)
    loaded = SimpleNamespace(name="tiny", model=nn.Linear(2, 2), mtp_missing="", draft_notes=())
    plan = SimpleNamespace(scenario=load_scenario(str(TINY)), null=False, fill="prefill")
    report = SimpleNamespace(summary=lambda: "0 MLA modules")
    return engine_setup.opening_notices(loaded, plan, report, ([], []))  # type: ignore[arg-type]


def test_the_reference_blas_is_said_with_its_remedy(monkeypatch):
    said = _opening(monkeypatch, "bundled reference BLAS (/x/libblas.so; slow: ...)")
    assert ("warning", engine_setup.REFERENCE_BLAS_WARNING) in said
    assert "unset MLATUI_BLAS" in engine_setup.REFERENCE_BLAS_WARNING
    fast = _opening(monkeypatch, "openblas (/usr/lib/x86_64-linux-gnu/libopenblas.so.0)")
    assert ("warning", engine_setup.REFERENCE_BLAS_WARNING) not in fast
