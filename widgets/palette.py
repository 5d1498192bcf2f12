"""The plots' series: a marker shape per series, so no series needs its colour to be told apart,
and colours from the Okabe-Ito palette (safe for the common colour-vision deficiencies): on a
dark theme orange and sky blue, on a light one vermillion and blue, which keep their contrast
on a white background."""

from __future__ import annotations

from dataclasses import dataclass

RGB = tuple[int, int, int]

ORANGE: RGB = (230, 159, 0)
SKY_BLUE: RGB = (86, 180, 233)
BLUISH_GREEN: RGB = (0, 158, 115)
YELLOW: RGB = (240, 228, 66)
BLUE: RGB = (0, 114, 178)
VERMILLION: RGB = (213, 94, 0)
REDDISH_PURPLE: RGB = (204, 121, 167)
GREY: RGB = (128, 128, 128)

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
