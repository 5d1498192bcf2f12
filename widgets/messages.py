"""Messages the dashboard posts to itself (never from measurement threads)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class RunFinished(Message):
    """The source has handed out its last event."""

    status: str


@dataclass
class RunFailed(Message):
    """An ErrorEvent arrived: the message is shown and the arms have stopped."""

    message: str


@dataclass
class Exported(Message):
    paths: list[str]
