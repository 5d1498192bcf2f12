"""Argparse types for every command's numbers, and a parser whose errors are one line.

Each type raises argparse.ArgumentTypeError with what was wrong and an example, so a bad value
is refused before anything loads: `mlatui: error: --reps: expected an integer >= 3, got '0' —
see `mlatui bench attention --help``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

from mlatui.errors import UserError

BIT_WIDTHS = (2, 3, 4, 5, 6, 8)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors turned into a UserError (one line, exit status 2) instead of the
    usage block and a SystemExit."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        raise UserError(message, f"see `{self.prog} --help`")


def _named(fn: Callable, name: str) -> Callable:
    fn.__name__ = name  # argparse names the type in its own fallback messages
    return fn


def int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An integer >= minimum (`why` says where the minimum comes from)."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except (TypeError, ValueError):
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}{why}, got {text!r}")
        return value

    return _named(parse, f"int>={minimum}")


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def _float(text: str) -> float:
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


finite_float = _named(_float, "finite float")


def _positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


positive_float = _named(_positive_float, "positive float")


def _bit_width(text: str) -> int:
    try:
        bits = int(str(text).strip())
    except (TypeError, ValueError):
        bits = None
    if bits not in BIT_WIDTHS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(map(str, BIT_WIDTHS))} (weight quantisation bits), "
            f"got {text!r}"
        )
    return bits


bit_width = _named(_bit_width, "bit width")


def parse_int_list(text: str) -> list[int]:
    """Comma-separated positive integers; `k` multiplies by 1024 (1k,8k). ValueError otherwise."""
    out = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        try:
            if item.lower().endswith("k"):
                value = float(item[:-1]) * 1024
                if not math.isfinite(value) or value != int(value):
                    raise ValueError(item)
                out.append(int(value))
            else:
                out.append(int(item))
        except (ValueError, OverflowError):
            raise ValueError(
                f"{text!r}: expected comma-separated integers, e.g. 1024,8192 or 1k,8k"
            ) from None
    if not out or min(out) < 1:
        raise ValueError(f"{text!r}: expected positive integers, e.g. 1024,8192 or 1k,8k")
    return out


def _int_list(text: str) -> list[int]:
    try:
        return parse_int_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


int_list = _named(_int_list, "integer list")


def int_list_or_none(text: str) -> list[int]:
    """An int list, or `none` (an empty list: skip that part)."""
    if str(text).strip().lower() in ("none", ""):
        return []
    return _int_list(text)
