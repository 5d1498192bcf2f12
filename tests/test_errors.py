"""One error path: argparse types, one-line errors, the crash log, outputs claimed up front, write
failures kept and reported."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pytest
import ui_events
from platforms import TOO_LONG_NAME, linux_only, pipe_without_reader

from mlatui import errors
from mlatui.cli import main
from mlatui.commands import argtypes
from mlatui.config.outputs import claim_output, new_record_path
from mlatui.errors import UserError
from mlatui.stream.recorder import Recorder, read_recording

FIXTURES = Path(__file__).parent / "fixtures"
TINY = str(FIXTURES / "tiny.toml")


def one_error_line(captured) -> str:
    lines = [x for x in captured.err.splitlines() if x.strip()]
    assert lines and lines[-1].startswith("mlatui: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[-1]


# ---- argparse types -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["0", "-3", "abc", "1.5", "inf", ""])
def test_positive_int_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer >= 1"):
        argtypes.positive_int(text)


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "abc", "1e999"])
def test_finite_floats_refuse(text):
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        argtypes.positive_float(text)


@pytest.mark.parametrize("text", ["inf", "abc", "0", "-4", "1,,0", "infk", "1e3", "0.1k"])
def test_int_list_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.int_list(text)


def test_int_list_and_bits_accept():
    assert argtypes.int_list("1k, 2048,16K") == [1024, 2048, 16384]
    assert [argtypes.bit_width(b) for b in "234568"] == [2, 3, 4, 5, 6, 8]
    for bad in ("7", "1", "16", "four"):
        with pytest.raises(argparse.ArgumentTypeError, match="2, 3, 4, 5, 6, 8"):
            argtypes.bit_width(bad)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["bench", TINY, "--reps", "0"], "--reps: expected an integer >= 3"),
        (["bench", TINY, "--contexts", "inf"], "--contexts: 'inf'"),
        (["bench", TINY, "--widths", "-1"], "--widths: '-1'"),
        (["bench", TINY, "--seed", "x"], "--seed: expected an integer >= 0"),
        (["bench", "indexer", "--contexts", "abc"], "--contexts: 'abc'"),
        (["bench", "indexer", "--warmup", "-1"], "--warmup: expected an integer >= 0"),
        (["bench", "observer", "--ui-hz", "inf"], "--ui-hz: expected a finite number"),
        (["launch", "--ui-hz", "0"], "--ui-hz: expected a number > 0"),
        (["replay", "x.jsonl", "--ui-hz", "inf"], "--ui-hz: expected a finite number"),
        (["demo", "--speed", "-1"], "--speed: expected a number > 0"),
        (["calibrate", "--family", "deepseek_v3", "--bits", "7"], "--bits: expected one of"),
        (["thresholds"], "one of the arguments --model --config --family is required"),
        (["nosuchcommand"], "invalid choice"),
    ],
)
def test_every_command_refuses_bad_numbers_in_one_line(argv, needle, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured)
    assert needle in line and " — see `mlatui" in line
    assert captured.out == ""


# ---- the top-level handler and its crash log ------------------------------------------------


def _crash(monkeypatch):
    from mlatui.commands import thresholds

    def boom(args):
        raise RuntimeError("something broke\nacross lines")

    monkeypatch.setattr(thresholds, "run", boom)


def test_unexpected_exception_is_one_line_and_a_crash_log(monkeypatch, tmp_path, capsys):
    _crash(monkeypatch)
    monkeypatch.setenv(errors.CRASH_DIR_ENV, str(tmp_path / "crashes"))
    assert main(["thresholds", "--family", "deepseek_v3"]) == 1
    line = one_error_line(capsys.readouterr())
    assert "unexpected RuntimeError: something broke across lines" in line
    logs = list((tmp_path / "crashes").glob("crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in line
    text = logs[0].read_text()
    assert "Traceback" in text and "something broke" in text and "thresholds" in text


def test_crash_log_falls_back_to_the_temp_dir(monkeypatch, tmp_path, capsys):
    _crash(monkeypatch)
    monkeypatch.delenv(errors.CRASH_DIR_ENV, raising=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert main(["thresholds", "--family", "deepseek_v3"]) == 1
    line = one_error_line(capsys.readouterr())
    logs = list((tmp_path / "tmp").glob("mlatui-crashes-*/crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in line


# ---- scenario files: launch checks them by bench's path -----------------------------------


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "is a directory"),
        (b"\xff\xfe name", "not UTF-8"),
        (b"[[phase]]\n[[phase]]\n", "phase[0]: 'kind' is required (one of sweep, decode, tune"),
        (b"phase = [1, 2]\n", "phase[0]: expected a table, got 1"),
        (b"model = 3\n", "model: expected a table, got 3"),
        (b"[model]\nconfig = [1]\n", "model.config: expected a table, got [1]"),
    ],
)
@pytest.mark.parametrize("command", ["launch", "bench"])
def test_launch_and_bench_refuse_bad_scenarios_alike(command, content, needle, tmp_path, capsys):
    path = tmp_path / "s.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    argv = ["launch", "--scenario", str(path)] if command == "launch" else ["bench", str(path)]
    assert main(argv) == 2
    assert needle in one_error_line(capsys.readouterr())


@pytest.mark.parametrize("payload", ["[1, 2]", "null", "3", '"ranks"', '{"text_config": 4}'])
def test_thresholds_config_that_is_not_an_object(payload, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(payload)
    assert main(["thresholds", "--config", str(path)]) == 2
    assert "must be a JSON object" in one_error_line(capsys.readouterr())


def test_thresholds_geometry_where_absorbing_always_wins(tmp_path, capsys):
    path = tmp_path / "config.json"
    config = {"model_type": "x", "kv_lora_rank": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
    path.write_text(json.dumps(config))
    assert main(["thresholds", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "always absorbed" in out and "9223372036854775807" not in out
    assert main(["thresholds", "--config", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["always_absorbed"] and data["limit"] is None


# ---- outputs --------------------------------------------------------------------------------


def test_existing_output_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "run.jsonl"
    out.write_text("precious\n")
    with pytest.raises(UserError, match="already exists — pass --overwrite to replace it") as e:
        claim_output(out)
    assert "--force" not in str(e.value)  # the one flag that means "replace the file"
    assert out.read_text() == "precious\n"
    assert claim_output(out, overwrite=True) == out and out.read_text() == ""


@pytest.mark.parametrize(
    "where,needle",
    [
        ("{tmp}", "is a directory"),
        ("{tmp}/file/x.jsonl", "is not a folder"),
        pytest.param("/proc/x.jsonl", "cannot write there", marks=linux_only("/proc")),
        ("{tmp}/" + TOO_LONG_NAME, "cannot write there"),
        pytest.param("/dev/full", "not a regular file", marks=linux_only("/dev/full")),
        ("/dev/null", "not a regular file"),
    ],
)
def test_unusable_outputs_are_refused_up_front(where, needle, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match=needle):
        claim_output(where.format(tmp=tmp_path), overwrite=True)


def test_default_names_are_unique_and_created_exclusively(tmp_path):
    paths = {new_record_path("bench", tmp_path) for _ in range(50)}
    assert len(paths) == 50 and all(p.exists() for p in paths)
    assert all(f"-{os.getpid()}" in p.name for p in paths)


def test_data_dir_that_is_a_file_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "data"
    blocker.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    assert main(["bench", TINY, "--random-weights"]) == 2
    assert "the recordings folder" in one_error_line(capsys.readouterr())


def test_bench_refuses_to_overwrite_its_out(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    out.write_text("kept\n")
    assert main(["bench", TINY, "--random-weights", "--out", str(out)]) == 2
    assert "already exists" in one_error_line(capsys.readouterr())
    # --force is the memory estimate's flag only: it replaces nothing
    assert main(["bench", TINY, "--random-weights", "--out", str(out), "--force"]) == 2
    line = one_error_line(capsys.readouterr())
    assert "already exists — pass --overwrite" in line and "--force" not in line
    assert out.read_text() == "kept\n"


@pytest.fixture(
    params=[pytest.param("/dev/full", marks=linux_only("/dev/full")), "pipe without reader"]
)
def failing_file(request, tmp_path):
    """Where every write fails: /dev/full (Linux), or a pipe whose reader left (anywhere)."""
    if request.param == "/dev/full":
        yield request.param, None
        return
    path, reader = pipe_without_reader(tmp_path)
    yield str(path), reader
    reader.join(5)


def opened(failing_file, writer):
    """`writer` opened on the failing file, once any reader of it has left."""
    path, reader = failing_file
    out = writer(path)
    if reader is not None:
        reader.join(5)
    return out


def test_recorder_write_failure_is_kept_not_raised(failing_file):
    seen = []
    rec = opened(failing_file, lambda p: Recorder(p, on_error=seen.append))
    for e in ui_events.events()[:5]:
        rec(e)  # never raises into the run
    rec.close()
    assert rec.error and "write failed" in rec.error and len(seen) == 1


async def test_dashboard_reports_a_failed_recording_and_goes_on(tmp_path, failing_file):
    from mlatui.config.run_plan import RunConfig
    from mlatui.stream.sources import LiveSource
    from mlatui.widgets.app import MlatuiApp

    where = failing_file[0]  # a pipe's reader leaves as soon as the recorder opened it
    src = LiveSource(RunConfig(), engine=ui_events.fake_engine, record=where)
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        while not app._done:
            await pilot.pause(0.02)
        assert app.dash.status == "completed"  # the run was not killed
        assert any("write failed" in n.message for n in app._notifications)
    assert src.recording_error and where in src.recording_error


@pytest.mark.parametrize(
    "out_dir", [pytest.param("/proc/nope/x", marks=linux_only("/proc")), "{tmp}/afile/x"]
)
async def test_screenshot_to_an_unwritable_out_dir_is_a_notification(tmp_path, out_dir):
    from mlatui.stream.sources import ReplaySource
    from mlatui.widgets.app import MlatuiApp
    from tests.ui_settled import until

    (tmp_path / "afile").write_text("a file, not a folder\n")
    out_dir = out_dir.format(tmp=tmp_path)
    app = MlatuiApp(ReplaySource(FIXTURES / "ui_tiny_run.jsonl"), out_dir=out_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        await until(
            pilot, lambda: any("screenshot failed" in n.message for n in app._notifications)
        )
        assert app.is_running and app.unexpected is None


def test_a_failed_jsonl_sink_keeps_its_error(failing_file):
    from mlatui.config.outputs import JsonlSink

    sink = opened(failing_file, JsonlSink)
    sink.write({"a": 1})
    sink.close()
    assert sink.error and "write failed" in sink.error


def test_recording_from_a_killed_bench_is_still_readable_after_refusal(tmp_path):
    # a refused run must not leave a half-made file that a later replay trips over
    out = tmp_path / "never.jsonl"
    assert main(["bench", TINY, "--reps", "0", "--out", str(out)]) == 2
    assert not out.exists()
    with pytest.raises(Exception, match="no such recording"):
        read_recording(out)


class _FullAfter:
    """A file that fills up after `lines` writes (ENOSPC), like a disk that runs full."""

    def __init__(self, file, lines: int):
        self.file, self.left = file, lines

    def write(self, text: str) -> int:
        import errno

        if self.left <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.left -= 1
        return self.file.write(text)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_disk_full_mid_run_is_reported_and_the_exit_status_says_it(monkeypatch, tmp_path, capsys):
    original = Recorder.__init__

    def filling(self, path, on_error=None):
        original(self, path, on_error)
        self._file = _FullAfter(self._file, 5)

    monkeypatch.setattr(Recorder, "__init__", filling)
    out = tmp_path / "run.jsonl"
    assert main(["bench", TINY, "--random-weights", "--phases", "sweep", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    line = one_error_line(captured)
    assert "write failed after 5 lines" in line and "No space left" in line
    # the run went on: every context of the sweep is in the summary, though not in the file
    assert "| 128 | 2 |" in captured.out and "| 256 | 2 |" in captured.out
    assert len(out.read_text().splitlines()) == 5


def test_a_failed_record_write_is_one_line_that_names_the_flag(tmp_path):
    from mlatui.config.outputs import write_output
    from mlatui.errors import UserError

    good = tmp_path / "r.jsonl"
    write_output(good, '{"a": 1}\n')
    assert good.read_text() == '{"a": 1}\n'
    with pytest.raises(UserError) as e:
        write_output(tmp_path, "x")  # a folder, not a file
    assert str(e.value).startswith(f"cannot write --out {tmp_path}:") and "\n" not in str(e.value)
