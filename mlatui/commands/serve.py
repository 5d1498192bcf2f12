"""`mlatui serve [FILE]`: a recording's dashboard in a web browser, through textual-serve.

Every browser tab starts its own app process, so serve only ever replays a recording (the
shipped demo when no FILE is given): there is no way to ask it for a live run, which would load
a model per tab. It binds to 127.0.0.1 unless told otherwise; textual-serve has no
authentication."""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
from pathlib import Path

from mlatui.commands.argtypes import int_at_least, positive_float

HELP = "show a recording's dashboard in a web browser (one replay per tab; needs mlatui[serve])"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")  # every address: the page needs a name browsers can reach


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        help="a JSONL recording (default: the shipped demo, with its explanation)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)"
    )
    parser.add_argument(
        "--port",
        type=int_at_least(0),
        default=8000,
        help="port to listen on (default 8000; 0: any free port)",
    )
    parser.add_argument(
        "--public-url",
        default=None,
        help="the URL browsers reach the server at, behind a proxy (https gives wss)",
    )
    parser.add_argument(
        "--speed", type=positive_float, default=1.0, help="replay speed factor (default 1)"
    )


def free_port(host: str, port: int) -> int:
    """`port` when it can be bound on `host` (0: one the system picks), checked before serving."""
    from mlatui.errors import UserError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise UserError(
                f"cannot listen on {host}:{port} ({e.strerror})",
                "pass another --port (0: any free port) or --host",
            ) from e
        return int(s.getsockname()[1])


def replay_command(file: str | None, speed: float) -> tuple[list[str], str]:
    """(the command each browser tab runs, what it shows): `replay FILE` or the demo; checked
    here, before the server starts, so a bad path is one line and not a page per tab."""
    from mlatui.commands.demo import demo_recording
    from mlatui.errors import UserError

    what = ["demo"] if file is None else ["replay", str(Path(file).resolve())]
    path = demo_recording() if file is None else Path(file)
    if file is not None:
        from mlatui.commands.replay import refuse_missing

        refuse_missing(file)
    elif not path.is_file():
        raise UserError(f"the demo recording {path} is missing; reinstall mlatui or pass a FILE")
    from mlatui.stream.recorder import iter_recording

    next(iter_recording(path))  # its header, checked: not a recording is one line, exit 2
    command = [sys.executable, "-m", "mlatui", *what, "--speed", f"{speed:g}"]
    return command, path.name


def run(args: argparse.Namespace) -> int:
    from mlatui.errors import UserError

    command, shown = replay_command(args.file, args.speed)
    try:
        from mlatui.widgets.serve import serve
    except ImportError as e:
        raise UserError(
            "mlatui serve needs textual-serve, which is not installed",
            "pip install 'mlatui[serve]'",
        ) from e
    port = free_port(args.host, args.port)
    public_url = args.public_url
    if public_url is None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        public_url = f"http://{host}:{port}"

    def greet(url: str) -> None:
        print(
            f"mlatui: serving {shown} at {url} (one replay per browser tab; Ctrl+C stops)",
            flush=True,
        )
        if args.host not in LOOPBACK:
            reach = (
                " pass --public-url http://NAME:PORT so other machines' browsers find it;"
                if args.public_url is None and args.host in WILDCARD
                else ""
            )
            print(
                f"mlatui: warning: listening on {args.host}:{reach} anyone who reaches it "
                "can open replays (there is no authentication)",
                file=sys.stderr,
                flush=True,
            )

    serve(
        shlex.join(command),
        host=args.host,
        port=port,
        title=f"mlatui {shown}",
        public_url=public_url,
        greet=greet,
    )
    return 0
