"""Test tiers for every test directory (tests/, tools/train/tests/).

- `slow` tests (long benchmarks, full corpora) run only when a `-m` expression names them, so
  `pytest -m "not system"` keeps them out as the plain `pytest` does.
- `system` tests start a tool, a child process, a whole engine run, a model load or a long
  session of the whole app; the modules below are marked as a whole, and a test elsewhere can
  carry `@pytest.mark.system` itself. `pytest -m "not system"` is the quick loop for development.
- With pytest-xdist installed (the dev extra), the whole suite (`pytest` with no paths) runs on
  three workers, a test file per worker at a time (module fixtures stay shared). Many tests wait
  on child processes, timers and the app's pauses: two workers leave fewer than two runnable
  processes most of the time, so a third keeps both cores of a 2-core box busy for the same CPU
  seconds. Paths on the command line, `-n N` or `-p no:xdist` choose otherwise."""

import compileall
import os
import re
import threading
from pathlib import Path

import pytest

from mlatui.host.blas import THREAD_ENVS, choose_blas
from mlatui.store import CACHE_ENV

# One OpenBLAS thread in every test process and every command a test starts, unless the user chose
# a count: three workers and their children share two cores, and a two-thread sgemm waits a
# scheduler tick for its second thread whenever both cores are busy (the toy trainer's resume test
# beside a cold mypy: 14.7 s on two threads, 3.2 s on one, the same 2 s of CPU). OpenBLAS reads it
# as it loads, below.
if not any(os.environ.get(name, "").strip() for name in THREAD_ENVS):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

# every test process (xdist's workers too) on the fast CPU BLAS before a test loads MLX: importing
# mlatui chooses none, and pytest is not run again under LD_PRELOAD
choose_blas(reexec=False)

WORKERS = 3


@pytest.fixture(scope="session", autouse=True)
def user_folders_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Recordings (runs/) and crash logs of every test and of the commands it starts land in a
    temporary folder, never in the user's own (platformdirs reads these variables on Linux), and
    so does mlatui's cache (the harness bias, bandwidth probes and crossovers a run keeps per
    device): a test reads only what this session wrote, never a figure an earlier suite or the
    user's own runs left. XDG_CACHE_HOME stays: pip and the mlx-vlm wheels (tests/vlm_sources.py)
    use the real cache."""
    home = tmp_path_factory.mktemp("user-folders")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(home / "data"))
        mp.setenv("XDG_STATE_HOME", str(home / "state"))
        mp.setenv(CACHE_ENV, str(home / "cache"))
        yield


ROOT = Path(__file__).resolve().parent
NOT_IMPORTED_PLAIN = re.compile(r"(^|/)(test_\w+|conftest)\.py$")  # pytest rewrites these itself


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the checkout's sources once, before any worker starts: every test process and
    each of the ~100 commands the tests start imports mlatui from here, and where Python writes
    no bytecode itself (PYTHONDONTWRITEBYTECODE) each would compile every module it imports
    (about 0.1 CPU-s a command). Files already compiled and unchanged are skipped; pytest's
    rewritten test modules are its own."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    for name in ("mlatui", "widgets", "tools"):  # mlatui/widgets is a link, which compileall skips
        compileall.compile_dir(ROOT / name, quiet=2, rx=NOT_IMPORTED_PLAIN)
    compileall.compile_dir(ROOT / "tests", maxlevels=0, quiet=2, rx=NOT_IMPORTED_PLAIN)
    if getattr(config.option, "numprocesses", None):
        threading.Thread(target=_rewrite_tests, args=(config,), daemon=True).start()


def _rewrite_tests(config: pytest.Config) -> None:
    """Under pytest-xdist every worker imports every test module, and pytest rewrites each one's
    asserts on import (3.3-5 CPU-s a worker) unless it finds the rewritten module cached, which
    it writes only where Python writes bytecode. Written here while the workers start, in the
    order they collect, each worker finds most modules done. pytest's own rewrite and cache
    format (private: where a pytest changes it, the workers rewrite each module themselves)."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        modules = [*ROOT.glob("tests/test_*.py"), *ROOT.glob("tools/train/tests/test_*.py")]
        for source in sorted(modules):
            cache = rewrite.get_cache_dir(source)
            pyc = cache / (source.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc) is None and rewrite.try_makedirs(cache):
                source_stat, code = rewrite._rewrite_test(source, config)
                rewrite._write_pyc(state, code, source_stat, pyc)
    except Exception:  # a speed-up only: the workers rewrite what is not written
        return


@pytest.hookimpl(tryfirst=True)  # before xdist's own reading of -n
def pytest_cmdline_main(config: pytest.Config) -> None:
    whole_suite = config.args_source is pytest.Config.ArgsSource.TESTPATHS
    if (
        whole_suite
        and config.pluginmanager.hasplugin("xdist")
        and config.getoption("numprocesses", None) is None
        and not config.getoption("collectonly")
        and not config.getoption("usepdb")
        and "PYTEST_XDIST_WORKER" not in os.environ
    ):
        config.option.numprocesses = WORKERS
        config.option.dist = "loadfile"
        # files in the order below, not xdist's most-tests-first: that order sends the
        # one-test static checks (mypy from cold: a minute) and the few-test child-process files
        # last, where they run alone on one worker while the other has nothing left
        config.option.loadscopereorder = False


SYSTEM_MODULES = {
    # child processes: the CLI, signals, mlx.launch, pip, the static checkers
    "test_badinput", "test_blas", "test_context_pair", "test_distributed", "test_docs_commands",
    "test_fit_bench", "test_import_contracts", "test_import_hygiene", "test_mla_commands",
    "test_packaging", "test_signal_matrix", "test_signals", "test_static_checks",
    # whole engine runs, real model loads, training
    "test_bound_engine", "test_budget", "test_budget_device", "test_budget_slices", "test_decode",
    "test_decode_engine", "test_draft_kinds", "test_embedded", "test_engine", "test_errors",
    "test_fit", "test_gate_policy", "test_indexer_phase", "test_loading", "test_looping_guard",
    "test_mtp_extract", "test_mtp_missing", "test_null", "test_pooled_engine", "test_recopy",
    "test_rewind", "test_runtime_arms", "test_runtime_matrix", "test_sources", "test_training",
    "test_vlm_bench", "test_vlm_indexer", "test_vlm_loading", "test_vlm_parity",
    # the whole app driven through long Pilot sessions and screenshots
    "test_help", "test_ui_app", "test_ui_snapshot",
}  # fmt: skip
# Under pytest-xdist, files that cost the most CPU run first (so that the workers end together):
# the static checks, whose test mostly waits on mypy, then the rest by CPU seconds measured on
# the 2-core box. Files not named keep their collection order after these.
HEAVY_FIRST = (
    "test_static_checks", "test_training", "test_distributed", "test_signals", "test_decode_engine",
    "test_looping_guard", "test_engine", "test_badinput", "test_ui_app", "test_indexer_phase",
    "test_mla_commands", "test_budget", "test_ui_snapshot", "test_sampler", "test_bench_stdout",
    "test_signal_matrix", "test_null", "test_sources", "test_ui_layout", "test_decode",
    "test_recordings", "test_budget_device", "test_vlm_bench", "test_mla", "test_embedded",
    "test_runtime_arms", "test_more_rounds", "test_vlm_parity", "test_mtp_extract",
    "test_arm_source", "test_packaging",
)  # fmt: skip
# single system tests in otherwise quick modules
SYSTEM_TESTS = {
    "test_a_20mb_recording_replays_with_dump_in_bounded_memory",
    "test_compare_never_imports_mlx_and_its_core_never_imports_textual",
    "test_compare_runs_where_mlx_cannot_be_imported",
    "test_fresh_copies_every_round_turn_a_placement_constant_into_scatter_the_ci_covers",
    "test_short_live_run_on_a_tiny_model",
    "test_swapping_the_caches_gives_every_buffer_to_both_arms_and_the_ci_covers_the_truth",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the markers added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SYSTEM_MODULES:
            item.add_marker(pytest.mark.system)
        elif name in SYSTEM_TESTS:
            item.add_marker(pytest.mark.system)
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}

    def heavy_first(item: pytest.Item) -> int:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        return rank.get(module, len(rank))

    if "PYTEST_XDIST_WORKER" in os.environ:  # a single process runs them all anyway
        items.sort(key=heavy_first)  # stable: a file's tests keep their order


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_deselect_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests leave the run last: the snapshot plugin has seen them collected, so it does not
    count their stored snapshots as unused."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skipped = [item for item in items if item.get_closest_marker("slow")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
