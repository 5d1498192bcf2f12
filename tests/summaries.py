"""The one summary printer (mlatui.views.export) for tests that hold events or a dashboard
state: the same text `bench`, `replay --dump` and the `e` export print for them."""

from __future__ import annotations

from mlatui.views import export
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.summary import RunSummary, summarize, summarize_events


def summary_of(run) -> RunSummary:
    """A run's summary from its events, or from a dashboard state folded already."""
    return summarize(run) if isinstance(run, DashboardState) else summarize_events(run)


def markdown(run) -> str:
    return export.summary_markdown(summary_of(run))


def csv(run) -> str:
    return export.summary_csv(summary_of(run))


def csv_rows(run) -> list[dict]:
    return export.csv_rows(summary_of(run))
