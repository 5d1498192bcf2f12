"""Fitting a line of labelled pieces into a width without cutting any: shorter forms first,
then the least important pieces leave (their detail is in a pane); a piece is never cut."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

SEPARATOR = " │ "


@dataclass(frozen=True)
class Piece:
    long: Text
    short: Text | None = None  # None: no shorter form
    priority: int = 1  # 1 is never dropped; higher numbers leave first


def piece(long: str | Text, short: str | Text | None = None, priority: int = 1, style: str = ""):
    def as_text(x):
        return x if isinstance(x, Text) else Text(x, style=style)

    return Piece(as_text(long), None if short is None else as_text(short), priority)


def _width(texts: list[Text], sep: str) -> int:
    return sum(t.cell_len for t in texts) + len(sep) * max(0, len(texts) - 1)


def fit(pieces: list[Piece], width: int, sep: str = SEPARATOR) -> list[Text]:
    """The chosen form of each kept piece, in order: all long if they fit; else shorten the
    least important first; else drop the least important (never priority 1)."""
    forms = [p.long for p in pieces]
    keep = list(range(len(pieces)))
    order = sorted(range(len(pieces)), key=lambda i: (-pieces[i].priority, -i))

    def chosen() -> list[Text]:
        return [forms[i] for i in keep]

    if _width(chosen(), sep) <= width:
        return chosen()
    for i in order:
        short = pieces[i].short
        if short is not None:
            forms[i] = short
            if _width(chosen(), sep) <= width:
                return chosen()
    for i in order:
        if pieces[i].priority > 1:
            keep.remove(i)
            if _width(chosen(), sep) <= width:
                return chosen()
    return chosen()


def join(texts: list[Text], sep: str = SEPARATOR) -> Text:
    out = Text()
    for i, t in enumerate(texts):
        if i:
            out.append(sep, style="dim")
        out.append_text(t)
    return out


def wrap_parts(parts: list[Text], width: int, first_indent: int, sep: str = " · ") -> list[Text]:
    """Parts on as many lines as they need, broken between parts; lines after the first are
    indented by `first_indent` so they line up under the first part."""
    lines: list[Text] = [Text()]
    used, fresh = first_indent, True
    for p in parts:
        if not fresh and used + len(sep) + p.cell_len > width:
            lines.append(Text(" " * first_indent))
            used, fresh = first_indent, True
        if not fresh:
            lines[-1].append(sep)
            used += len(sep)
        lines[-1].append_text(p)
        used += p.cell_len
        fresh = False
    return lines
