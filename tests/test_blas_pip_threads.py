"""The pip OpenBLAS wheel runs on one thread unless the user chose a count, and says so."""

import sys

import pytest

from mlatui.host import blas
from mlatui.host.blas import one_thread_unless_chosen, pip_openblas
from tests.test_blas import run_probe


class _Lib:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def scipy_openblas_set_num_threads(self, n: int) -> None:
        self.calls.append(n)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, [1]),
        ({"OPENBLAS_NUM_THREADS": " "}, [1]),
        ({"OPENBLAS_NUM_THREADS": "2"}, []),
        ({"GOTO_NUM_THREADS": "4"}, []),
        ({"OMP_NUM_THREADS": "3"}, []),
    ],
)
def test_one_thread_unless_the_user_chose_a_count(monkeypatch, env, expected):
    monkeypatch.setattr(blas, "_one_thread", False)
    lib = _Lib()
    assert one_thread_unless_chosen(lib, env) is bool(expected)  # type: ignore[arg-type]
    assert lib.calls == expected
    assert (blas.threads_note() is not None) is bool(expected)


PROBE = """
import json
from mlatui.host import blas
blas.choose_blas()
import mlx.core as mx
mx.eval(mx.ones((8, 8)) @ mx.ones((8, 8)))
print(json.dumps({"blas": blas.blas_in_use(), "threading": blas.blas_threading()}))
"""


def probe(**env: str) -> dict:
    drop = ("MLATUI_BLAS", *blas.THREAD_ENVS)
    return run_probe(PROBE, {"MLATUI_BLAS": "pip", **env}, drop)


@pytest.mark.system
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF/glibc only")
def test_pip_wheel_threads_in_the_header():
    if pip_openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    ours = probe()
    assert "scipy_openblas" in ours["blas"], ours
    assert ours["threading"].startswith(f"1 thread ({blas.THREADS_NOTE});"), ours
    theirs = probe(OPENBLAS_NUM_THREADS="2")
    assert theirs["threading"].startswith("2 threads;"), theirs
