"""The footer, fitted to the width: whole key hints only, the least important leave first
(`?` help and `q` quit never do; `?` lists everything)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

from mlatui.views.keys import KEYS

# action -> rank (0 always shown; higher leaves first), from the key table; unlisted rank 3
RANKS = {k.action: k.rank for k in KEYS}


@dataclass(frozen=True)
class Hint:
    keys: tuple[str, ...]  # what the footer prints for each key
    description: str
    rank: int

    @property
    def cells(self) -> int:
        """Width in the compact footer: keys, a space, the description, a gap."""
        grouped = len(self.keys) > 1
        return sum(map(len, self.keys)) + 1 + len(self.description) + 1 + (1 if grouped else 0)


def fit_hints(hints: list[Hint], width: int) -> list[int]:
    """Indices of the hints to show, in order: drop the highest rank (the later first) until
    the rest fit; rank 0 always stays."""
    keep = list(range(len(hints)))
    order = sorted(keep, key=lambda i: (hints[i].rank, i), reverse=True)
    for i in order:
        if sum(hints[j].cells for j in keep) <= width:
            break
        if hints[i].rank > 0:
            keep.remove(i)
    return keep


class KeyFooter(Footer):
    """Textual's footer (clickable keys, grouped hints) showing the hints that fit."""

    def on_resize(self) -> None:
        self.call_after_refresh(self.recompose)

    def compose(self):
        if not self._bindings_ready:
            return
        entries = self._entries()
        palette = None
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        hints = [e[0] for e in entries]
        if palette is not None:
            _, b, _, _ = palette
            hints.append(
                Hint((self.app.get_key_display(b),), b.description, RANKS["command_palette"])
            )
        for i in fit_hints(hints, self.size.width - 2):  # the palette key has a border
            if i == len(entries) and palette is not None:
                yield self._palette_key(palette)
            else:
                yield from self._entry_keys(*entries[i])

    def _entries(self) -> list[tuple[Hint, list, bool]]:
        """(hint, [(binding, enabled, tooltip)], grouped) per shown action or group of them."""
        shown: dict[str, list] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                shown.setdefault(binding.action, []).append((binding, enabled, tooltip))
        entries = []
        for group_key, items in _grouped(shown):
            first = items[0][0]
            keys = tuple(self.app.get_key_display(b) for b, _, _ in items)
            desc = first.group.description if group_key and len(items) > 1 else first.description
            rank = min(RANKS.get(b.action, 3) for b, _, _ in items)
            entries.append((Hint(keys, desc, rank), items, bool(group_key and len(items) > 1)))
        return entries

    def _palette_key(self, palette) -> FooterKey:
        _, b, enabled, _ = palette
        return FooterKey(
            b.key,
            self.app.get_key_display(b),
            b.description,
            b.action,
            classes="-command-palette",
            disabled=not enabled,
            tooltip=b.tooltip or b.description,
        )

    def _entry_keys(self, hint: Hint, items: list, grouped: bool):
        """One hint's keys: a group's keys together under its description, or one key."""
        if grouped:
            with KeyGroup(classes="-compact"):
                for b, enabled, tooltip in items:
                    yield FooterKey(
                        b.key,
                        self.app.get_key_display(b),
                        "",
                        b.action,
                        disabled=not enabled,
                        tooltip=tooltip or b.description,
                        classes="-grouped",
                    ).data_bind(compact=Footer.compact)
            yield FooterLabel(hint.description)
        else:
            b, enabled, tooltip = items[0]
            yield FooterKey(
                b.key,
                self.app.get_key_display(b),
                b.description,
                b.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)


def _grouped(shown: dict[str, list]):
    """(group or None, [(binding, enabled, tooltip)]) in binding order, one binding per action,
    consecutive actions of one group together."""
    out: list[tuple[object, list]] = []
    for items in shown.values():
        entry = items[0]
        group = entry[0].group
        if group is not None and out and out[-1][0] is group:
            out[-1][1].append(entry)
        else:
            out.append((group, [entry]))
    return out
