"""`mlatui demo [--device cpu|gpu] [--list] [--live]`: replay a shipped recording with an
explanation (the one made on a CPU, or on a GPU), list them with the device that made each, or
run the default scenario live."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mlatui.config.scenario import shipped_dir

HELP = "show the dashboard on a shipped recording of the real engine (--live: run the default scenario)"
DEMO_FILE = "demo.jsonl"
# the shipped recordings, by the kind of device that made them (their headers say which one)
DEMO_FILES = {"cpu": DEMO_FILE, "gpu": "demo-gpu.jsonl"}


def epilog() -> str:
    from mlatui.views.keys import keys_epilog

    return keys_epilog(replay=True, demo=True)


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.replay import add_view_options

    parser.add_argument("--live", action="store_true", help="run the default scenario live instead")
    parser.add_argument(
        "--device",
        choices=tuple(DEMO_FILES),
        default="cpu",
        help="which shipped recording: the one made on a CPU (default) or on a GPU",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the shipped recordings and the device that made each, then exit",
    )
    add_view_options(parser)


def demo_recording(device: str = "cpu") -> Path:
    """The shipped recording made on `device` (cpu | gpu); it may be missing."""
    return shipped_dir() / DEMO_FILES[device]


def recording_device(path: Path) -> str:
    """The device a recording was made on, in words, from its header (its first line)."""
    try:
        with path.open(encoding="utf-8") as f:
            header: dict[str, Any] = json.loads(f.readline())
    except (OSError, ValueError):
        return "unknown (the recording's header cannot be read)"
    d = header.get("device") if isinstance(header, dict) else None
    if not isinstance(d, dict):
        return "unknown (the header names no device)"
    backend = str(d.get("backend", "?"))
    said = [str(d.get("name", "?")), backend]
    if backend == "cpu" and d.get("cpu_count"):
        said.append(f"{d['cpu_count']} cores")
    if d.get("blas"):
        said.append(str(d["blas"]).split(" (")[0])
    return " · ".join(said)


def list_recordings() -> str:
    lines = []
    for device, name in DEMO_FILES.items():
        path = demo_recording(device)
        made = recording_device(path) if path.is_file() else "not shipped in this version"
        lines.append(f"--device {device}: {name}: {made}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from mlatui.errors import UserError

    if getattr(args, "list", False):
        print(list_recordings())
        return 0
    device = getattr(args, "device", "cpu")
    if args.live:
        from mlatui.commands import launch

        replay_only = [
            flag
            for flag, on in (
                ("--dump", args.dump),
                ("--skip-bad", args.skip_bad),
                ("--device", device != "cpu"),
            )
            if on
        ]
        if replay_only:
            raise UserError(
                f"{' and '.join(replay_only)} read a recording; --live runs the engine",
                "drop --live to replay the shipped run, or run `mlatui bench "
                "scenarios/default.toml` for a headless live run",
            )
        parser = argparse.ArgumentParser()
        launch.configure(parser)
        ns = parser.parse_args(["--ui-hz", str(args.ui_hz)])
        ns.out_dir = args.out_dir
        return launch.run(ns)
    path = demo_recording(device)
    if not path.is_file():
        if device != "cpu":
            raise UserError(
                f"no {device.upper()} recording is shipped in this version ({path.name})",
                "`mlatui demo --list` shows those that are; `mlatui demo` replays the CPU one",
            )
        raise UserError(
            f"the demo recording {path} is missing; reinstall mlatui or run `mlatui demo --live`"
        )
    import sys

    print(f"mlatui: demo recorded on {recording_device(path)} ({path.name})", file=sys.stderr)
    from mlatui.commands.replay import play

    return play(path, args, "demo")
