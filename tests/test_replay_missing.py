"""`mlatui replay` on a path that is not there: one line that says where recordings are."""

from mlatui.cli import main
from mlatui.config.outputs import runs_dir


def test_replay_of_a_missing_file_says_where_recordings_are(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["replay", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(f"mlatui: error: {missing}: no such recording — ")
    assert str(runs_dir()) in err
    assert "mlatui demo" in err


def test_replay_dump_of_a_missing_file_is_refused_the_same_way(tmp_path, capsys):
    assert main(["replay", "--dump", str(tmp_path / "gone.jsonl.gz")]) == 2
    assert "no such recording — pass a .jsonl" in capsys.readouterr().err
