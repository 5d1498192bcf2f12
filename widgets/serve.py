"""A recording's dashboard in a web browser: textual-serve runs one replay per browser tab."""

from __future__ import annotations

import logging
from collections.abc import Callable

from textual_serve.server import Server


def serve(
    command: str, *, host: str, port: int, title: str, public_url: str, greet: Callable[[str], None]
) -> None:
    """Serve `command` (a replay) on host:port until Ctrl+C; `greet` gets the public URL once the
    server listens."""

    class ReplayServer(Server):
        async def on_startup(self, app) -> None:
            greet(self.public_url)

    for name in ("textual-serve", "aiohttp.access"):  # no line per connection or request
        logging.getLogger(name).setLevel(logging.WARNING)
    ReplayServer(command, host=host, port=port, title=title, public_url=public_url).serve()
