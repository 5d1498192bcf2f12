import os

import pytest
import static_checks

# Every engine a test starts with a fresh cache folder probes the bandwidth limit: 32 MB keeps that
# at 0.2 s (past this box's 260 MB L3 it is 1040 MB, 3.5-5.8 s at load 14.5); its tests unset it.
os.environ.setdefault("MLATUI_PROBE_MB", "32")


@pytest.fixture
def tiny_checkpoint(tmp_path):
    """A tiny random deepseek_v3 checkpoint in mlx-lm format (config, safetensors, tokenizer)."""
    from tests.checkpoints import save_random_checkpoint

    return save_random_checkpoint(tmp_path / "tiny-dsv3", "deepseek_v3")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the static checkers now when their test is selected: they overlap the other tests.
    Under pytest-xdist the worker that runs the test starts them itself (the others run tests)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    if any(
        item.nodeid.endswith("test_mypy_lint_imports_and_ruff_find_nothing")
        for item in session.items
    ):
        session.config.stash[static_checks.STASH_KEY] = static_checks.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc in session.config.stash.get(static_checks.STASH_KEY, {}).values():
        if proc.poll() is None:  # a run stopped early (-x, Ctrl-C) leaves no checker behind
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def pr_form_tree(tmp_path_factory):
    """A folder whose mlx_lm is the installed one in the upstream fix's gate form (tests/pr_form.py)."""
    from tests.pr_form import write_pr_form_copy

    root = tmp_path_factory.mktemp("pr-form")
    write_pr_form_copy(root)
    return root
