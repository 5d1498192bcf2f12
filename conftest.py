"""Test tiers for every test directory (tests/, tools/train/tests/).

`slow` tests (long benchmarks, full corpora) run only when a `-m` expression names them, so
`pytest -m "not system"` keeps them out as the plain `pytest` does."""

import mlatui  # noqa: F401, I001  (preloads the fast BLAS before mlx)
import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skipped = [item for item in items if item.get_closest_marker("slow")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
