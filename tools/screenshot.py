"""The README's screenshot: the dashboard at the end of a recording, saved as SVG by the app's own
screenshot action (the `s` key). No MLX needed.

    python tools/screenshot.py [RECORDING] [--out docs/demo.svg] [--size 160x48]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp

ROOT = Path(__file__).resolve().parents[1]


async def shoot(
    recording: Path, out: Path, size: tuple[int, int], timeout_s: float = 300.0
) -> Path:
    source = ReplaySource(recording, speed=1024.0)
    app = MlatuiApp(source, mode="replay", ui_hz=30, out_dir=out.parent)
    async with app.run_test(size=size) as pilot:
        end = time.monotonic() + timeout_s
        while not source.finished or app.dash.status == "running":
            if time.monotonic() > end:
                raise SystemExit(f"the replay did not finish within {timeout_s:.0f} s")
            await pilot.pause(0.2)
        await pilot.pause(1.0)  # the last drained events on screen
        app.save_screenshot(out.name, path=str(out.parent))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording", nargs="?", type=Path, default=ROOT / "scenarios" / "demo.jsonl")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "demo.svg")
    p.add_argument("--size", default="160x48", help="COLUMNSxROWS")
    args = p.parse_args()
    cols, rows = (int(v) for v in args.size.lower().split("x"))
    print(asyncio.run(shoot(args.recording, args.out, (cols, rows))))


if __name__ == "__main__":
    main()
