"""`mlatui demo` ships a recording per kind of device and says which device made each."""

import argparse
import json
from pathlib import Path

import pytest

from mlatui.commands import demo
from mlatui.errors import UserError

SHIPPED = Path(__file__).parent.parent / "scenarios" / "demo.jsonl"


def _args(**kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    ns = parser.parse_args([])
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


def _gpu_copy(folder: Path) -> None:
    """The CPU recording's lines under a header that names an H200 (what a GPU run records)."""
    lines = SHIPPED.read_text().splitlines()
    header = json.loads(lines[0])
    header["device"] = {"name": "NVIDIA H200", "backend": "cuda", "memory_bytes": 150 << 30}
    (folder / "demo.jsonl").write_text(SHIPPED.read_text())
    (folder / "demo-gpu.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")


def test_the_list_names_the_device_of_each_shipped_recording(tmp_path, monkeypatch, capsys):
    assert demo.recording_device(SHIPPED).startswith("AMD EPYC · cpu · 2 cores · openblas")
    monkeypatch.setattr(demo, "shipped_dir", lambda: tmp_path)
    (tmp_path / "demo.jsonl").write_text(SHIPPED.read_text())
    listed = demo.list_recordings()
    assert "--device cpu: demo.jsonl: AMD EPYC · cpu" in listed
    assert "--device gpu: demo-gpu.jsonl: not shipped in this version" in listed
    # asking for a recording that is not shipped says so and what to do, in one line
    with pytest.raises(UserError, match="no GPU recording is shipped") as e:
        demo.run(_args(device="gpu"))
    assert "--list" in str(e.value) and "\n" not in str(e.value)
    _gpu_copy(tmp_path)
    assert "--device gpu: demo-gpu.jsonl: NVIDIA H200 · cuda" in demo.list_recordings()
    assert demo.run(_args(list=True)) == 0
    assert "NVIDIA H200" in capsys.readouterr().out
    assert demo.demo_recording("gpu") == tmp_path / "demo-gpu.jsonl"


def test_a_recording_without_a_readable_header_is_said_so(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text("not json\n")
    assert demo.recording_device(bad).startswith("unknown")
    bad.write_text(json.dumps({"type": "header"}) + "\n")
    assert demo.recording_device(bad) == "unknown (the header names no device)"


def test_live_takes_no_device(tmp_path):
    with pytest.raises(UserError, match="--device read a recording"):
        demo.run(_args(live=True, device="gpu", out_dir=tmp_path))
