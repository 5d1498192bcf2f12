"""Bandwidth figures as every printer writes them: effective GB/s and MBU with their CIs, and
the device's limit (measured by the probe, published by the vendor). Pure Python."""

from __future__ import annotations

from mlatui.measure.bandwidth import LimitCheck
from mlatui.stream.interval import Interval
from mlatui.stream.run_settings import BandwidthLimit
from mlatui.views.rounding import Ci, sig
from mlatui.views.units import percent_text


def gb_s_text(rate: Interval | None) -> str:
    """`41.2 [39.8, 42.0]` GB/s (no unit: the column says it)."""
    return "–" if rate is None else Ci.of(rate).text()


def mbu_text(mbu: Interval | None) -> str:
    """A utilisation fraction as a percentage, `5.2% [4.9, 5.4]`."""
    return "–" if mbu is None else Ci.of(mbu.scaled(100)).text("%")


def mb_text(nbytes: int) -> str:
    return sig(nbytes / 1e6, 3)


def limit_text(bandwidth: BandwidthLimit | None) -> str:
    """`measured 2.09 GB/s read, 0.93 GB/s copy; published 3350 GB/s (NVIDIA H100 SXM)`."""
    if bandwidth is None:
        return "limit unknown"
    out = (
        f"measured {sig(bandwidth.measured_read_gb_s)} GB/s read, "
        f"{sig(bandwidth.measured_copy_gb_s)} GB/s copy"
    )
    if bandwidth.published_gb_s:
        out += f"; published {sig(bandwidth.published_gb_s, 4)} GB/s ({bandwidth.published_name})"
    return out


def limit_short(bandwidth: BandwidthLimit | None) -> str:
    """The header's short form: `mem 2.09 GB/s meas.` (`/ 3350 pub.` where known)."""
    if bandwidth is None:
        return ""
    out = f"mem {sig(bandwidth.measured_read_gb_s)} GB/s meas."
    if bandwidth.published_gb_s:
        out += f" / {sig(bandwidth.published_gb_s, 4)} pub."
    return out


def above_limit(check: LimitCheck, narrow: bool = False, said: str = "measured") -> str:
    """MBU where a step read faster than memory bandwidth: `a step read 3.91 GB/s > 1.81 GB/s
    measured: served from cache?` (narrow: `from cache? (read 3.91 > 1.81 GB/s)`)."""
    reached, limit = sig(check.reached_gb_s, 3), sig(check.limit_gb_s, 3)
    if narrow:
        return f"from cache? (read {reached} > {limit} GB/s)"
    return f"a step read {reached} GB/s > {limit} GB/s {said}: served from cache?"


def mbu_cell(mbu: Ci | None, most: Ci | None, rate: Ci | None = None) -> str:
    """A sweep row's MBU: `5.2% [4.9, 5.4]`, with `.. 7.6%` (the most bytes' median) where the
    routing range makes the two differ, and the effective rate's median: `· 174 GB/s`; a rate
    without an MBU (no limit, or one the run contradicted): `limit unknown · 174 GB/s`."""
    if mbu is None:
        return "–" if rate is None else f"limit unknown · {sig(rate.median, 3)} GB/s"
    text = _percent(mbu).text("%")
    if most is not None and most.median > mbu.median * 1.001:
        text += f" .. {percent_text(most.median * 100)}"
    return text + (f" · {sig(rate.median, 3)} GB/s" if rate is not None else "")


def _percent(c: Ci) -> Ci:
    return Ci(
        c.median * 100,
        None if c.low is None else c.low * 100,
        None if c.high is None else c.high * 100,
    )
