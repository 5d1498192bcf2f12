"""What a timed call costs, from what the run has measured so far (pure; used by mlatui.measure.progress).

Every prediction is a (low, mid, high) triple in milliseconds of measured compute. A cell that was
measured is its mean. A context not yet measured is extrapolated along the context axis from the
contexts that were: linear in T (fit on what is seen); from one context the honest range is
"does not grow" .. "grows in proportion to T", and the point is their middle, except for a wide
step, whose extra cost over L = 1 is taken to grow in proportion to T. A decode block not
yet measured is built from the synced steps of the same context (plain: one L = 1 step per token;
depth d: tokens / (tokens per verify step) verify steps at L = d + 1, plus d drafted tokens each),
with prior acceptance and draft costs until blocks are seen.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.measure.plans import Setting

Cost = tuple[float, float, float]  # (low, mid, high)

PRIOR_ACCEPT = 0.5  # per draft position, until a block of that depth is seen
PRIOR_DRAFT_SHARE = 0.25  # a drafted token, as a share of the target's L = 1 step, until seen


def extrapolate(points: Sequence[tuple[float, float]], x: float) -> Cost | None:
    """y at x from measured (x, y) points: interpolated inside them; outside, a least-squares line
    (slope >= 0, intercept >= 0) with the proportional growth from the nearest point as the high
    end. One point: constant .. proportional."""
    pts = sorted(points)
    if not pts:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1:
            y = y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            return (y, y, y)
    if len(pts) == 1 or x < pts[0][0]:
        x0, y0 = pts[0] if x < pts[0][0] else pts[-1]
        prop = y0 * x / x0 if x0 > 0 else y0
        lo, hi = sorted((y0, prop))
        if len(pts) > 1:  # below the smallest context: the line through the first two
            line = _line(pts)
            mid = max(0.0, line[0] + line[1] * x)
            return (min(lo, mid), mid, max(hi, mid))
        return (lo, (lo + hi) / 2, hi)
    a, b = _line(pts)
    mid = a + b * x
    x_top, y_top = pts[-1]
    prop = y_top * x / x_top if x_top > 0 else y_top
    return (mid, mid, max(mid, prop))


def _line(pts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = max(0.0, sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx) if sxx else 0.0
    a = my - b * mx
    if a < 0:  # through the origin instead
        b = sum(p[0] * p[1] for p in pts) / sum(p[0] ** 2 for p in pts)
        a = 0.0
    return a, b


def scale(c: Cost, k: float) -> Cost:
    return (c[0] * k, c[1] * k, c[2] * k)


def add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class CostTable:
    """Mean ms per (arm, context, width) for synced steps and per token for decode blocks, with
    each setting's (draft kind and depth) tokens per verify step and draft share once blocks
    show them: an MTP head and a draft model accept and cost differently."""

    def __init__(self) -> None:
        self.steps: dict[tuple[str, int, int], list[float]] = {}  # -> [sum ms, n]
        self.blocks: dict[
            tuple[str, int, Setting], list[float]
        ] = {}  # (arm, ctx, setting) -> [ms, tokens]
        self.verify_steps: dict[Setting, list[int]] = {}  # -> [tokens emitted, verify steps]

    def add_step(self, arm: str, context: int, width: int, ms: float) -> None:
        cell = self.steps.setdefault((arm, context, width), [0.0, 0])
        cell[0] += ms
        cell[1] += 1

    def add_block(
        self, arm: str, context: int, setting: Setting, tokens: int, ms: float, verifies: int
    ) -> None:
        if setting.depth == 0:
            setting = Setting()  # plain decode is one setting whatever draft kinds there are
        cell = self.blocks.setdefault((arm, context, setting), [0.0, 0])
        cell[0] += ms
        cell[1] += tokens
        if setting.depth and verifies:
            v = self.verify_steps.setdefault(setting, [0, 0])
            v[0] += tokens
            v[1] += verifies

    @property
    def empty(self) -> bool:
        return not self.steps and not self.blocks

    def step(self, arm: str, context: int, width: int) -> Cost | None:
        cell = self.steps.get((arm, context, width))
        if cell:
            m = cell[0] / cell[1]
            return (m, m, m)
        points = [(c, s / n) for (a, c, w), (s, n) in self.steps.items() if a == arm and w == width]
        if len(points) == 1 and width > 1 and context > points[0][0]:
            got = self._wider_from_one(arm, context, *points[0])
            if got is not None:
                return got
        if points:
            return extrapolate(points, context)
        lower = sorted({w for (a, _, w) in self.steps if a == arm and w < width}, reverse=True)
        return self.step(arm, context, lower[0]) if lower else None

    def _wider_from_one(self, arm: str, context: int, c0: int, y0: float) -> Cost | None:
        """A wide step measured at one shorter context only: its cost over the L = 1 step's is
        the queries' extra work, which (the stock arm's re-expansion of the whole cache, the
        attention of the extra queries) grows in proportion to the context; the L = 1 step is
        extrapolated as any other. A slow device's probe measures one length: without this the
        stock arm's verify steps at 4x the length were forecast at ~60% of their cost."""
        cell = self.steps.get((arm, c0, 1))
        one = self.step(arm, context, 1)
        if not cell or one is None:
            return None
        extra = max(0.0, y0 - cell[0] / cell[1])
        grown = extra * context / c0
        return (one[0] + extra, one[1] + grown, max(one[2] + grown, y0 * context / c0))

    def tokens_per_verify(self, setting: Setting) -> float:
        seen = self.verify_steps.get(setting)
        if seen and seen[1]:
            return seen[0] / seen[1]
        return 1 + sum(PRIOR_ACCEPT**i for i in range(1, setting.depth + 1))

    def block(self, arm: str, context: int, setting: Setting, tokens: int) -> Cost | None:
        if setting.depth == 0:
            setting = Setting()
        depth = setting.depth
        cell = self.blocks.get((arm, context, setting))
        if cell and cell[1]:
            m = cell[0] / cell[1] * tokens
            return (m, m, m)
        points = [
            (c, ms / n)
            for (a, c, st), (ms, n) in self.blocks.items()
            if a == arm and st == setting and n
        ]
        if points:
            got = extrapolate(points, context)
            return scale(got, tokens) if got else None
        one = self.step(arm, context, 1)
        if one is None:
            return None
        if depth == 0:
            return scale(one, tokens)
        verify = self.step(arm, context, depth + 1) or one
        per_verify = add(verify, scale(one, depth * self._draft_share(arm, setting)))
        return scale(per_verify, tokens / self.tokens_per_verify(setting))

    def _draft_share(self, arm: str, setting: Setting) -> float:
        """A drafted token's cost as a share of the L = 1 step: from a measured block of this
        setting at any context (what its verify steps do not explain), else the prior."""
        d = setting.depth
        for (a, c, st), (ms, n) in self.blocks.items():
            if a != arm or st != setting or not n:
                continue
            one, verify = self.step(a, c, 1), self.step(a, c, d + 1)
            if one is None or verify is None or one[1] <= 0:
                continue
            per_verify = ms / n * self.tokens_per_verify(st)
            return max(0.0, (per_verify - verify[1]) / (d * one[1]))
        return PRIOR_DRAFT_SHARE
