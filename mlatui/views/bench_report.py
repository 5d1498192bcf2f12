"""What the headless benchmarks print on stdout, from their records alone (pure: a record file
prints the same tables again on any machine). A benchmark's record file is shown the way its
command showed it: `replay --dump` prints its table through the same printer, read from the
records alone; `replay` without --dump says in one line what the file is."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from mlatui.gate.policy import FormulaPolicy, Geometry, threshold_text
from mlatui.measure import records as forced
from mlatui.measure.bandwidth import LimitCheck, StepBytes
from mlatui.measure.records import (
    BRANCHES,
    BenchRecord,
    IndexerPart,
    IndexerRecord,
    crossover,
    interval_of,
)
from mlatui.stream.event_base import Interval
from mlatui.stream.phrases import check_word, ci_text, interval_text
from mlatui.stream.recorder import SKIP_HINT, RecordingError, RecordKind, open_recording, read_lines
from mlatui.stream.run_settings import BandwidthLimit
from mlatui.views.mdtable import env_line, fmt, num, table
from mlatui.views.units import above_limit, gb_s_text, limit_text, mb_text, mbu_text


def indexer_report(
    records: Sequence[IndexerRecord],
    skipped: Sequence[tuple[str, int]] = (),
    max_seconds: float | None = None,
) -> str:
    """`mlatui bench indexer`'s stdout up to the records' path: the settings line, the table, the
    verdict lines, each part's S = 1 note, and what the time limit left undecided."""
    first = records[0].settings
    out = [
        f"# mlatui bench indexer\n\n{env_line(records[0].env)}, dtype {first['dtype']}, "
        f"rounds {first['min_rounds']} (up to {first['max_rounds']} while the S=1 check is "
        f"inconclusive), warm-up {first['warmup']}; {first['order']}; medians over rounds, "
        f"{first['estimators'].removeprefix('median over rounds with ')}\n",
        summary_table(records),
        "",
    ]
    out += [f"- {line}" for line in verdict(records)]
    out += [
        f"- {r.bench} T={r.context}: {r.note}" for r in records if r.width == 1 and r.arm == "stock"
    ]
    out += [f"- {line}" for line in undecided_lines(records, skipped, max_seconds)]
    return "\n".join(out) + "\n"


def summary_table(records: Sequence[IndexerRecord]) -> str:
    """One row per (bench, context, S): each arm's median over rounds with its 95% CI, the paired
    stock/patched with its CI, patched S over patched S=1 (paired within rounds), the S=1 check."""
    by = {(r.bench, r.context, r.width, r.arm): r for r in records}
    rows = []
    for bench, context, width in sorted({(r.bench, r.context, r.width) for r in records}):
        s, p = by[(bench, context, width, "stock")], by[(bench, context, width, "patched")]
        rows.append(
            (
                bench,
                context,
                width,
                ci_text(s.median_ms, s.ci_low_ms, s.ci_high_ms, 3),
                ci_text(p.median_ms, p.ci_low_ms, p.ci_high_ms, 3),
                ci_text(s.ratio, s.ratio_low, s.ratio_high, 2 if width > 1 else 4),
                ci_text(p.vs_s1, p.vs_s1_low, p.vs_s1_high, 2) if width > 1 else "1",
                s.n_rounds,
                check_word(s.outcome),
            )
        )
    return table(
        (
            "bench",
            "context",
            "S",
            "stock ms (95% CI)",
            "patched ms (95% CI)",
            "stock/patched paired (95% CI)",
            "patched / patched S=1 (95% CI)",
            "rounds",
            "S=1 check",
        ),
        rows,
        cell=num,
    )


def verdict(records: Sequence[IndexerRecord]) -> list[str]:
    """The issue's bar, on contexts whose S=1 check is valid: patched S=2..4 within 1.5x of its
    S=1 (the CI's upper end decides), and stock S=2 grows with the context."""
    lines = []
    idx = {(r.context, r.width, r.arm): r for r in records if r.bench == IndexerPart.INDEXER}
    contexts = sorted({c for c, _, _ in idx})
    for c in contexts:
        one = idx.get((c, 1, "stock"))
        if one is None or not one.valid:
            outcome = one.outcome if one else "missing"
            lines.append(f"T={c}: excluded, S=1 check {outcome}")
            continue
        for w in (2, 3, 4):
            r = idx.get((c, w, "patched"))
            if r is None or r.vs_s1 is None or r.vs_s1_low is None or r.vs_s1_high is None:
                continue
            ok = "ok" if r.vs_s1_high <= 1.5 else ("OVER 1.5x" if r.vs_s1_low > 1.5 else "unsure")
            lines.append(
                f"T={c} S={w}: patched {ci_text(r.vs_s1, r.vs_s1_low, r.vs_s1_high, 2, '×')} of S=1 ({ok})"
            )
    s2 = [
        idx[(c, 2, "stock")]
        for c in contexts
        if (c, 2, "stock") in idx and idx[(c, 1, "stock")].valid
    ]
    if len(s2) > 1:
        grows = all(b.ci_low_ms > a.ci_high_ms for a, b in zip(s2, s2[1:], strict=False))
        trend = ", ".join(
            f"{r.context}: {ci_text(r.median_ms, r.ci_low_ms, r.ci_high_ms, 2)} ms" for r in s2
        )
        lines.append(
            f"stock S=2 by context: {trend} ({'grows' if grows else 'does NOT clearly grow'})"
        )
    return lines


def undecided_lines(
    records: Sequence[IndexerRecord],
    skipped: Sequence[tuple[str, int]],
    max_seconds: float | None,
) -> list[str]:
    """What the time limit left: the parts never run, the S = 1 checks it stopped undecided."""
    lines = []
    by_part: dict[str, list[int]] = {}
    for part, context in skipped:
        by_part.setdefault(part, []).append(context)
    for part, contexts in by_part.items():
        lines.append(
            f"time limit {max_seconds:g} s: {part} not run at T={', '.join(map(str, contexts))} "
            "(raise --max-seconds, or pass fewer --contexts)"
        )
    unsure = [
        r for r in records if r.width == 1 and r.arm == "stock" and r.outcome == "inconclusive"
    ]
    if unsure and max_seconds is not None:
        where = ", ".join(f"{r.bench} T={r.context} ({r.n_rounds} rounds)" for r in unsure)
        lines.append(f"S=1 check undecided at {where}: more rounds (--max-seconds) may decide it")
    return lines


def observer_table(rows: Sequence[dict[str, Any]]) -> str:
    """`mlatui bench observer`'s tables: each mode's verify-shaped step times against headless,
    then (where the rows have it) the spread of each mode's L = 1 quad ratios."""
    head = ["mode", "arm", "n", "median ms", "p95 ms", "median / headless", "p95 / headless"]
    verify = table(
        head,
        (
            [r["mode"], r["arm"], r["n"], fmt(r["median_ms"]), fmt(r["p95_ms"])]
            + [fmt(r["median_ratio"], 3), fmt(r["p95_ratio"], 3)]
            for r in rows
            if r.get("type", "summary") == "summary"
        ),
    )
    spread = [r for r in rows if r.get("type") == "l1_spread"]
    if not spread:
        return verify
    head = [
        "mode",
        "L = 1 quads",
        "quad ratio spread (p75 / p25 - 1)",
        "spread / headless [95% CI]",
    ]
    return (
        verify
        + "\n\nThe L = 1 check's samples: stock/patched quad ratios, whose spread decides how "
        "soon its CI is within tolerance.\n\n"
        + table(
            head,
            (
                [r["mode"], r["quads"], f"{fmt(r['spread_pct'], 1)}%"]
                + [interval_text(msgspec.convert(r["spread_ratio"], Interval | None), 2, "×")]
                for r in spread
            ),
        )
    )


def context_pair_header(env: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """`mlatui bench context-pair`'s first lines, printed before it measures."""
    short, long = settings["contexts"]
    fill_note = " (random latents: timing only)" if settings["fill"] == "random-latents" else ""
    return (
        f"# mlatui bench context-pair\n\n{env_line(env)}\n"
        f"model {settings['model']}, {settings['variant']} arm, contexts {short} and {long}"
        f"{fill_note}, widths {','.join(map(str, settings['widths']))}, "
        f"{settings['rounds']} rounds planned\n\n"
    )


def context_pair_report(records: Sequence[BenchRecord]) -> str:
    """Its table from the records (two per width, short context first) and what it measured."""
    settings = records[0].settings
    short, long = settings["contexts"]
    by = {(r.width, r.context): r.settings for r in records}
    rows = []
    for width in dict.fromkeys(r.width for r in records):
        s, lo = by[(width, short)], by[(width, long)]
        n = s["rounds_done"]
        quads = s.get("quads")  # the first records did not keep it
        growth = Interval(s["growth"], s["growth_low"], s["growth_high"], quads or n)
        rows.append(
            [
                width,
                interval_text(Interval(s["median_ms"], s["ci_low_ms"], s["ci_high_ms"], n), 2),
                interval_text(Interval(lo["median_ms"], lo["ci_low_ms"], lo["ci_high_ms"], n), 2),
                interval_text(growth),
                "–" if quads is None else quads,
                n,
            ]
        )
    head = ["L", f"{short} ms [95% CI]", f"{long} ms [95% CI]", f"{long} / {short} paired [95% CI]"]
    return (
        table([*head, "quads", "rounds"], rows, cell=num)
        + f"\n\nBoth lengths on one {settings['variant']} arm (one model, two caches, a worker "
        "thread each), alternated in every A B B A quad: the ratio is paired, so device drift "
        "between minutes cancels; step ms are medians over rounds of each round's mean.\n"
    )


def parity_header(
    env: Mapping[str, Any], settings: Mapping[str, Any], context: int, code: str = ""
) -> str:
    """`mlatui bench decode-parity`'s first lines, printed before it measures (`code`: where a
    source-tree arm's code came from)."""
    return (
        f"# mlatui bench decode-parity\n\n{env_line(env)}\n"
        f"model {settings['model']}{code}, draft {settings['draft']}, context {context}, "
        f"{settings['tokens']} tokens per block, {settings['rounds']} rounds, "
        f"temperature {settings['temperature']:g}\n\n"
    )


PARITY_WORDS = {"valid": "yes", "invalid": "NO", "inconclusive": "inconclusive"}


def parity_report(records: Sequence[BenchRecord]) -> str:
    """Its table from the records (mlatui's side and the other's, per setting) and what each
    side ran."""
    sides: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for r in records:
        sides.setdefault((r.settings["versus"], r.settings["depth"]), {})[r.arm] = r.settings
    rows = []
    for (other, depth), by_arm in sides.items():
        first = next(arm for arm in by_arm if arm != other)  # mlatui, or the A/A's first side
        s = by_arm[first]
        ratio = Interval(s["ratio"], s["ratio_low"], s["ratio_high"], max(s["rounds_done"], 1))
        rows.append(
            [
                "plain" if depth == 0 else f"depth {depth}",
                other if first == "mlatui" else f"{other} ({first} vs itself)",
                f"{s['tok_s']:.1f}",
                f"{by_arm[other]['tok_s']:.1f}",
                interval_text(ratio),
                s["rounds_done"],
                PARITY_WORDS[s["outcome"]] if other.startswith("mlx_lm") else "-",
            ]
        )
    head = ["decode", "versus", "mlatui tok/s", "other tok/s", "mlatui / other [95% CI]"]
    tolerance = records[0].settings["tolerance_pct"]
    return (
        table([*head, "rounds", f"within ±{tolerance:g}%"], rows, cell=num)
        + "\n\nmlatui: run_block on an arm worker thread, as the decode phases run it; mlx_lm: a "
        "direct generate_step / speculative_generate_step call on the main thread from a copy of "
        "the same cache (mlx_lm-thread: the same call from a second plain thread); sync-loop: one "
        "synced step per token (mlatui before pipelining)"
        + (
            "; mlx_lm-aa: the A/A, mlx_lm-thread against the same call on another plain thread, "
            "each from its own copy of the cache (the mlatui columns hold the first copy's): the "
            "harness's own spread"
            if any(r.settings["versus"] == "mlx_lm-aa" for r in records)
            else ""
        )
        + ".\n"
    )


BANDWIDTH_FIGURES = ("gb_s", "mbu", "mbu_published")


def forced_summary(records: Sequence[BenchRecord]) -> dict[int, dict[str, Any]]:
    """`bench attention` part (a)'s figures per context and width, read from its records alone
    (the bench prints its run from them; `replay --dump` prints a kept file the same way): each
    branch's step ms, the paired ratio and its verdict, the bytes a step reads, GB/s and MBU, the
    rounds, the measured crossover and the formula's. A width missing a branch is left out."""
    by: dict[int, dict[int, dict[str, BenchRecord]]] = {}
    for r in records:
        by.setdefault(r.context, {}).setdefault(r.width, {})[r.arm] = r
    summary: dict[int, dict[str, Any]] = {}
    for context, widths in by.items():
        cells = {w: _forced_cell(arms) for w, arms in widths.items() if _has_estimates(arms)}
        if not cells:
            continue
        first = next(iter(widths.values()))["absorbed"].settings
        geometry = Geometry.from_key(first["geometry"], int(first["heads"]))
        summary[context] = dict(
            widths=cells,
            rounds=first["rounds"],
            measured=crossover({w: c["ratio"] for w, c in cells.items()}),
            formula=FormulaPolicy().limit(geometry, context),
            limit=first.get("bandwidth_limit"),
        )
    return summary


def _has_estimates(arms: Mapping[str, BenchRecord]) -> bool:
    """Both branches, with the estimates the table prints (the first records kept raw samples
    only)."""
    return all(
        b in arms and {"step_ms", "ratio_absorbed_over_materialised"} <= set(arms[b].settings)
        for b in BRANCHES
    )


def _forced_cell(arms: Mapping[str, BenchRecord]) -> dict[str, Any]:
    settings = arms["absorbed"].settings
    ratio = interval_of(settings["ratio_absorbed_over_materialised"])
    cell: dict[str, Any] = {"ratio": ratio, "verdict": forced.verdict(ratio), "bandwidth": {}}
    for arm in BRANCHES:
        own = arms[arm].settings
        cell[arm] = interval_of(own["step_ms"])
        cell["bandwidth"][arm] = {
            name: interval_of(own[name]) for name in BANDWIDTH_FIGURES if own.get(name)
        }
    read = settings.get("step_bytes")
    if read:  # the weights and cache rows a step reads, at most
        cell["bytes"] = StepBytes.from_dict(read)
    return cell


def attention_report(summary: Mapping[int, Mapping[str, Any]], widths: Sequence[int]) -> str:
    """`mlatui bench attention`'s part (a): per cache length and width, the bytes the layer's
    step must read, each forced branch's step ms with its effective GB/s and MBU, and their
    paired ratio, then each length's measured crossover against the formula's (`summary` as
    `forced_summary` reads it from the records)."""
    limit = next((s.get("limit") for s in summary.values() if s.get("limit")), None)
    published = bool(limit and limit.get("published_gb_s"))
    held = _limits_held(summary, limit)
    rows = [
        (
            t,
            w,
            mb_text(cell["bytes"].total.high) if "bytes" in cell else "–",
            *_branch_cells(cell, "absorbed", published, held),
            *_branch_cells(cell, "materialised", published, held),
            interval_text(cell["ratio"]),
            cell["verdict"],
        )
        for t, s in summary.items()
        for w, cell in sorted(s["widths"].items())
    ]
    branch = ["ms", "GB/s", "MBU", *(["MBU (published)"] if published else [])]
    head = [
        "cache T",
        "L",
        "MB/step",
        *(f"absorbed {h}" for h in branch),
        *(f"materialised {h}" for h in branch),
        "absorbed/materialised",
        "faster",
    ]
    out = [
        "## (a) one attention layer, forced branch: medians over rounds [95% CI]\n\n"
        "Each round measures every width once per branch as an A B B A quad; absorbed/materialised "
        "is the per-round paired ratio (< 1: absorbed faster). MB/step: the bytes a step must "
        "read (the layer's weights, the latent and rope rows of the cache after its update); GB/s "
        "is that over the step's time, MBU that against the device's limit "
        f"({limit_text(msgspec.convert(limit, BandwidthLimit) if limit else None)}; "
        "MBU against the measured read)"
        + "".join(f"; MBU {held[name]}" for name in held if held[name])
        + ".\n",
        table(head, rows, cell=num),
        "",
    ]
    out += [_crossover_line(t, s, max(widths)) for t, s in summary.items()]
    return "\n".join(out) + "\n"


def _crossover_line(context: int, s: Mapping[str, Any], largest: int) -> str:
    """One cache length's measured crossover against the formula's (and the K/V the
    materialised branch builds on top of what it reads)."""
    measured = s["measured"]
    if measured is None:
        shown = "never"
    elif measured == largest:
        shown = f">= {measured} (largest width tried)"
    else:
        shown = str(measured)
    extra = next((c["bytes"].materialised_extra for c in s["widths"].values() if "bytes" in c), 0)
    rebuilt = (
        f"; the materialised branch also builds and reads back {mb_text(extra)} MB of K/V"
        if extra
        else ""
    )
    return (
        f"T={context}: measured crossover (largest L where absorbed is significantly faster, "
        f"{s['rounds']} rounds): {shown}; formula: {threshold_text(s['formula'])}{rebuilt}"
    )


def _limits_held(
    summary: Mapping[int, Mapping[str, Any]], limit: Mapping[str, Any] | None
) -> dict[str, str]:
    """Per MBU figure (`mbu`, `mbu_published`): "" where its limit holds, else what contradicts
    it (a step that read faster than the limit: `limit unknown: a step read …`)."""
    rates = [
        figures["gb_s"].median
        for s in summary.values()
        for cell in s["widths"].values()
        for figures in cell.get("bandwidth", {}).values()
        if figures.get("gb_s") is not None
    ]
    held = {}
    for name, key, said in (
        ("mbu", "measured_read_gb_s", "measured"),
        ("mbu_published", "published_gb_s", "published"),
    ):
        gb_s = limit.get(key) if limit else None
        check = LimitCheck(float(gb_s), max(rates)) if gb_s and rates else None
        held[name] = above_limit(check, said=said) if check and check.contradicted else ""
    return held


def _branch_cells(
    cell: Mapping[str, Any], arm: str, published: bool, held: Mapping[str, str]
) -> list[str]:
    figures = cell.get("bandwidth", {}).get(arm, {})
    mbu = [name for name in ("mbu", "mbu_published") if published or name == "mbu"]
    return [
        interval_text(cell[arm]),
        gb_s_text(figures.get("gb_s")),
        *("from cache?" if held[name] else mbu_text(figures.get(name)) for name in mbu),
    ]


NOISE_NOTE = (
    "A probe within noise was decided by the median of the paired ratio alone; more --reps "
    "narrow its CI."
)


def calibrate_report(lines: Sequence[Mapping[str, Any]]) -> str:
    """`mlatui calibrate`'s table from its record lines: per context the measured max absorbed L
    beside the formula's, how many probes the search took and which were within noise. Records
    without the geometry (the first ones) print no formula; without max_width no `>=`."""
    probes = [line for line in lines if line.get("type") == "probe"]
    rows = []
    noisy_any = False
    for found in (line for line in lines if line.get("type") == "crossover"):
        t, w, largest = found["context"], found["max_absorbed"], found.get("max_width")
        mine = [p for p in probes if p["context"] == t]
        ratios = {p["width"]: interval_of(p["ratio_absorbed_over_materialised"]) for p in mine}
        noisy = [width for width, r in ratios.items() if forced.within_noise(r)]
        noisy_any = noisy_any or bool(noisy)
        formula = "–"
        if "geometry" in found:
            geometry = Geometry.from_key(found["geometry"], int(found["heads"]))
            formula = threshold_text(FormulaPolicy().limit(geometry, t))
        rows.append(
            (
                t,
                f">= {w}" if largest is not None and w >= largest else w,
                formula,
                f"{len(mine)}",
                ", ".join(map(str, noisy)) if noisy else "none",
            )
        )
    head = ["cache T", "measured max absorbed L", "formula", "probes"]
    text = table([*head, "probes within noise (CI straddles 1)"], rows, cell=num) + "\n"
    return text + (NOISE_NOTE + "\n" if noisy_any else "")


@dataclass
class RecordFile:
    """A record file's lines as dicts, and what reading it left out (a last line cut short by a
    killed run; with `skip_bad`, lines that are not JSON objects)."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_record_file(path: Path, skip_bad: bool = False) -> RecordFile:
    """Every line of a record file as a dict; a bad line is a RecordingError naming it, or with
    `skip_bad` left out and counted; a last line without its newline is left out and said."""
    read = RecordFile()
    skipped: list[int] = []
    with open_recording(path) as f:
        for lineno, _, line in read_lines(path, f):
            try:
                value = json.loads(line)
                if not isinstance(value, dict):
                    raise ValueError(f"expected an object, got {type(value).__name__}")
            except ValueError as e:
                if not line.endswith(b"\n"):
                    read.notes.append(f"{path}:{lineno}: last line is cut short; left out")
                    break
                if not skip_bad:
                    raise RecordingError(
                        f"{path}:{lineno}: not a record ({e})", SKIP_HINT
                    ) from None
                skipped.append(lineno)
                continue
            read.lines.append(value)
    if skipped:
        lines = "line" if len(skipped) == 1 else "lines"
        read.notes.append(f"{path}: skipped {len(skipped)} bad {lines} (first: line {skipped[0]})")
    return read


def _records(lines: Sequence[dict[str, Any]], cls: type[BenchRecord]) -> list[Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return [cls(**{k: v for k, v in line.items() if k in names}) for line in lines]


def record_file_line(path: Path, kind: RecordKind, skip_bad: bool = False) -> str:
    """What the file is, in one line: its kind, the command that wrote it, what it holds."""
    lines = read_record_file(path, skip_bad).lines
    return f"{path}: {kind.what}, not a run recording ({_holds(kind, lines)})"


def _holds(kind: RecordKind, lines: Sequence[dict[str, Any]]) -> str:
    if kind is RecordKind.OBSERVER:
        runs = sum(1 for line in lines if line.get("type") == "mode_run")
        return f"{runs} mode runs{'' if _summary_rows(lines) else ', no summary: stopped early'}"
    if kind is RecordKind.CALIBRATE:
        first = lines[0]
        probes = sum(1 for line in lines if line.get("type") == "probe")
        found = [
            f"T={x['context']}: {x['max_absorbed']}" for x in lines if x.get("type") == "crossover"
        ]
        measured = "; ".join(found) if found else "none completed"
        return (
            f"{first.get('family')}, {first.get('dtype')}: {probes} probes; measured max absorbed "
            f"L {measured}"
        )
    contexts = ", ".join(str(c) for c in dict.fromkeys(line.get("context") for line in lines))
    return f"{len(lines)} records at T={contexts}"


def _summary_rows(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("type") in ("summary", "l1_spread")]


def record_file_dump(path: Path, kind: RecordKind, skip_bad: bool = False) -> str:
    """What `replay --dump` prints for a record file: the line that says what it is, then its
    command's table (or, where it has none, why), then what reading it left out."""
    read = read_record_file(path, skip_bad)
    said = f"{path}: {kind.what} ({_holds(kind, read.lines)})\n\n"
    return said + DUMPS[kind](read.lines) + "".join(f"note: {n}\n" for n in read.notes)


def _attention(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    summary = forced_summary(records)
    if not summary:
        return (
            "no table: these records keep raw samples only (written before part (a) kept its "
            "estimates in them); run `mlatui bench attention --part a` again for one\n"
        )
    first = records[0]
    s = first.settings
    bits = f"{s['bits']}-bit" if s.get("bits") else "unquantised"
    title = (
        f"# mlatui bench attention: {first.family} ({s.get('size')} geometry {s.get('geometry')}, "
        f"{s.get('dtype', 'float32')}, {bits})\n{env_line(first.env)}\n\n"
    )
    widths = sorted({r.width for r in records})
    return title + attention_report(summary, widths)


def _indexer(lines: Sequence[dict[str, Any]]) -> str:
    records: list[IndexerRecord] = _records(lines, IndexerRecord)
    if "min_rounds" not in records[0].settings:
        return (
            "no table: records of the first indexer bench (each cell's raw samples and their "
            "median, S = 1 checked by the difference of medians; no paired estimates); "
            "`mlatui bench indexer` measures with paired CIs\n"
        )
    return indexer_report(records)


def _context_pair(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    first = records[0]
    widths = list(dict.fromkeys(r.width for r in records))
    first.settings.setdefault("widths", widths)  # the first records did not keep them
    return context_pair_header(first.env, first.settings) + context_pair_report(records)


def _decode_parity(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    first = records[0]
    return parity_header(first.env, first.settings, first.context) + parity_report(records)


def _observer(lines: Sequence[dict[str, Any]]) -> str:
    rows = _summary_rows(lines)
    if not rows:
        return (
            "no table: the run stopped before its summary; each completed mode run's samples "
            "are in the file's mode_run lines\n"
        )
    return f"# mlatui bench observer (ui {rows[0].get('ui_hz')} Hz)\n\n" + (
        observer_table(rows) + "\n"
    )


DUMPS: dict[RecordKind, Callable[[Sequence[dict[str, Any]]], str]] = {
    RecordKind.ATTENTION: _attention,
    RecordKind.INDEXER: _indexer,
    RecordKind.CONTEXT_PAIR: _context_pair,
    RecordKind.DECODE_PARITY: _decode_parity,
    RecordKind.OBSERVER: _observer,
    RecordKind.CALIBRATE: calibrate_report,
}
