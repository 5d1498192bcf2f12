"""Model loading as a phase: LoadStart before any weight is read, progress as it reads, an exact
last event; the recorder writes them after the header."""

import time
from pathlib import Path

from mlatui.models.loading import LoadWatch, Watched, files_read, watcher
from mlatui.stream.events import LoadProgress, LoadStart
from mlatui.stream.recorder import Recorder, read_recording

DEMO = Path(__file__).parent.parent / "scenarios" / "demo.jsonl"


def test_checkpoint_load_reports_files_and_bytes_before_and_after(tiny_checkpoint, monkeypatch):
    import mlx_lm

    from mlatui.models.loading import load_checkpoint

    seen: list = []
    real = mlx_lm.load

    def load(*a, **kw):
        seen.append("mlx_lm.load called")
        return real(*a, **kw)

    monkeypatch.setattr(mlx_lm, "load", load)
    t0 = time.monotonic()
    load_checkpoint(str(tiny_checkpoint), watch=watcher(seen.append, lambda: time.monotonic() - t0))
    size = (tiny_checkpoint / "model.safetensors").stat().st_size
    start = seen[0]
    assert isinstance(start, LoadStart) and seen[1] == "mlx_lm.load called"
    assert (start.what, start.source, start.kind) == ("model", str(tiny_checkpoint), "checkpoint")
    assert (start.files, start.total_bytes, start.file_bytes) == (1, size, (size,))
    last = seen[-1]
    assert isinstance(last, LoadProgress) and last.done
    assert (last.bytes_read, last.files_read, last.measure) == (size, 1, "exact")


def test_the_watcher_samples_a_counter_while_the_load_runs(tmp_path):
    for name, n in (("a.safetensors", 100), ("b.safetensors", 300)):
        (tmp_path / name).write_bytes(b"\0" * n)
    reads = iter([1000, 1000, 1150, 1150, 1150, 1400, 1400] + [1500] * 1000)
    events: list = []
    files = sorted(tmp_path.glob("*.safetensors"))
    watch = LoadWatch(
        events.append,
        time.monotonic,
        Watched("model", str(tmp_path), files=files),
        counter=(lambda: next(reads), "process read bytes"),
        interval_s=0.005,
    )
    with watch:
        time.sleep(0.3)
    progress = [e for e in events if isinstance(e, LoadProgress)]
    mid = [(e.bytes_read, e.files_read) for e in progress if not e.done]
    assert (150, 1) in mid and (400, 2) in mid  # capped at the total; files by cumulative size
    assert all(e.measure == "process read bytes" for e in progress if not e.done)
    assert progress[-1].done and progress[-1].measure == "exact"
    assert files_read([100, 300], 99) == 0 and files_read([100, 300], 399) == 1


def test_a_failed_load_ends_its_phase_without_claiming_every_byte(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"\0" * 10)
    events: list = []
    watch = LoadWatch(
        events.append,
        time.monotonic,
        Watched("model", "x", files=[tmp_path / "a.safetensors"]),
        counter=(lambda: 0, "process read bytes"),
    )
    try:
        with watch:
            raise OSError("disk went away")
    except OSError:
        pass
    assert events[-1].done and events[-1].bytes_read == 0 and events[-1].measure == ""


def test_the_recorder_writes_loading_events_after_the_header(tmp_path):
    header = read_recording(DEMO).header
    path = tmp_path / "run.jsonl"
    with Recorder(path) as rec:
        rec(LoadStart(0.0, "model", "embedded", "checkpoint", 2, 10))
        rec(LoadProgress(0.5, "model", 10, 2, "exact", True))
        rec(header)
    back = read_recording(path)
    assert back.header == header
    assert [e.type for e in back.events] == ["load_start", "load_progress"]
    assert rec.lines == 3
