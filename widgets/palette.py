"""The dashboard's colours, all from the Okabe-Ito palette (safe for the common colour-vision
deficiencies), by theme.

- Series: a marker shape per series, so no series needs its colour to be told apart; on a dark
  theme orange and sky blue, on a light one vermillion and blue, which keep their contrast on a
  white background.
- Status (a verdict, a speedup's CI against 1, an L = 1 check, memory pressure): blue for good,
  vermillion for bad, yellow (dark orange on a light theme) for undecided, bluish green for
  valid by the pooled check; never red against green, and always beside the word or glyph that
  says it (`wins`, `rejected`, ✓, ✗, ?, ✓p). On dark themes the hues are lightened, on light
  ones darkened, so each reads at 4.5:1 or more on the theme's background."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mlatui.views.verdict_strip import Tone

RGB = tuple[int, int, int]

ORANGE: RGB = (230, 159, 0)
SKY_BLUE: RGB = (86, 180, 233)
BLUISH_GREEN: RGB = (0, 158, 115)
YELLOW: RGB = (240, 228, 66)
BLUE: RGB = (0, 114, 178)
VERMILLION: RGB = (213, 94, 0)
REDDISH_PURPLE: RGB = (204, 121, 167)
GREY: RGB = (128, 128, 128)
GREY_TEXT = "grey42"  # text of a context left out of every verdict

# series in the order the figures list them: stock, patched (an A/A run: A and B of each pass)
DARK = (ORANGE, SKY_BLUE, YELLOW, BLUISH_GREEN)
LIGHT = (VERMILLION, BLUE, REDDISH_PURPLE, BLUISH_GREEN)


@dataclass(frozen=True)
class SeriesLook:
    colour: RGB
    filled: str  # a measured point whose L = 1 check passed
    hollow: str  # L = 1 check inconclusive
    small: str  # L = 1 check pending

    @property
    def style(self) -> str:
        """The colour as a rich style."""
        return hex_colour(self.colour)


SHAPES = (("●", "○", "•"), ("▲", "△", "▴"), ("■", "□", "▪"), ("◆", "◇", "◆"))


def series_look(index: int, dark: bool = True) -> SeriesLook:
    colours = DARK if dark else LIGHT
    filled, hollow, small = SHAPES[index % len(SHAPES)]
    return SeriesLook(colours[index % len(colours)], filled, hollow, small)


def hex_colour(rgb: RGB) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


class Status(enum.StrEnum):
    GOOD = "good"  # a speedup whose CI lies above 1, a check that passed, the ★, memory ok
    BAD = "bad"  # a CI below 1, a failed check, a bound rejection, an error, memory at its limit
    WARN = "warn"  # undecided: a CI that contains 1, an inconclusive check, memory near its limit
    POOLED = "pooled"  # ✓p: valid by the pooled check, never shown as plain valid


STATUS_DARK: dict[Status, RGB] = {
    Status.GOOD: SKY_BLUE,
    Status.BAD: (245, 130, 65),  # vermillion, lightened
    Status.WARN: YELLOW,
    Status.POOLED: (40, 190, 150),  # bluish green, lightened
}
STATUS_LIGHT: dict[Status, RGB] = {
    Status.GOOD: (0, 95, 150),  # blue, darkened
    Status.BAD: (160, 60, 0),  # vermillion, darkened
    Status.WARN: (130, 84, 0),  # orange, darkened
    Status.POOLED: (0, 110, 80),  # bluish green, darkened
}
STATUS_WORDS = {  # what the `?` Symbols page calls each colour
    Status.GOOD: "blue",
    Status.BAD: "vermillion",
    Status.WARN: "yellow (dark orange on a light theme)",
    Status.POOLED: "bluish green",
}


def status_colour(status: Status, dark: bool = True) -> RGB:
    return (STATUS_DARK if dark else STATUS_LIGHT)[status]


def status_style(status: Status, dark: bool = True, bold: bool = False) -> str:
    """The status's colour as a rich style (`bold #56b4e9`)."""
    return ("bold " if bold else "") + hex_colour(status_colour(status, dark))


TONE_STATUS = {Tone.GOOD: Status.GOOD, Tone.BAD: Status.BAD, Tone.WARN: Status.WARN}


def tone_style(tone: Tone, dark: bool = True) -> str:
    """A verdict part's style: good, bad and undecided in their status colours (bold where they
    decide something), the rest plain."""
    status = TONE_STATUS.get(tone)
    return "" if status is None else status_style(status, dark, bold=status is not Status.WARN)
