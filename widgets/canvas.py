"""A character grid with a braille layer for lines: the drawing surface of the figures."""

from __future__ import annotations

from rich.text import Text

# braille dot bits by (dx, dy) inside a 2 x 4 cell, dy from the top
BRAILLE_BITS = {
    (0, 0): 0x01,
    (0, 1): 0x02,
    (0, 2): 0x04,
    (1, 0): 0x08,
    (1, 1): 0x10,
    (1, 2): 0x20,
    (0, 3): 0x40,
    (1, 3): 0x80,
}


class Canvas:
    """rows x cols cells; row 0 is the top. Cells hold a character and a style; the braille
    layer sits under them (a cell set with `put` hides its dots)."""

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.chars = [[" "] * cols for _ in range(rows)]
        self.styles = [[""] * cols for _ in range(rows)]
        self.dots: dict[tuple[int, int], tuple[int, str]] = {}

    def put(self, row: int, col: int, char: str, style: str = "") -> None:
        if 0 <= row < self.rows and 0 <= col < self.cols:
            self.chars[row][col] = char
            self.styles[row][col] = style
            self.dots.pop((row, col), None)

    def dot(self, x: int, y: int, style: str) -> None:
        """One braille dot at sub-cell (x, y): x in 0 .. 2*cols-1, y in 0 .. 4*rows-1 from top."""
        row, col = y // 4, x // 2
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            return
        bits, _ = self.dots.get((row, col), (0, style))
        self.dots[(row, col)] = (bits | BRAILLE_BITS[(x % 2, y % 4)], style)

    def line(self, x0: int, y0: int, x1: int, y1: int, style: str) -> None:
        """Bresenham between two sub-cell points."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            self.dot(x0, y0, style)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def row_text(self, row: int) -> Text:
        t = Text()
        for col in range(self.cols):
            if (row, col) in self.dots and self.chars[row][col] == " ":
                bits, style = self.dots[(row, col)]
                t.append(chr(0x2800 + bits), style=style)
            else:
                t.append(self.chars[row][col], style=self.styles[row][col])
        return t
