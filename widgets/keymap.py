"""Textual bindings and command-palette entries generated from a key table
(mlatui.views.keys): the keys, the palette and the help never list different things."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

from mlatui.views.keys import Key

# keys sharing one compact footer hint (`+ -`, `← →`)
FOOTER_GROUPS = {name: Binding.Group(name, compact=True) for name in ("speed", "seek")}


def bindings(keys: Iterable[Key]) -> list[BindingType]:
    return [
        Binding(
            k.keys,
            k.action,
            k.label or k.title or k.description,
            show=bool(k.label),
            key_display=k.key if k.bind else None,
            priority=k.priority,
            id=k.id,
            group=FOOTER_GROUPS.get(k.footer_group),
        )
        for k in keys
        if not k.builtin
    ]


def palette_commands(
    keys: Iterable[Key], run: Callable[[str], object], works: Callable[[Key], bool]
) -> list[SystemCommand]:
    """One palette entry per titled key that works here, naming its key."""
    return [
        SystemCommand(k.title, f"{k.description} · key {k.key}", lambda a=k.action: run(a))
        for k in keys
        if k.title and works(k)
    ]
