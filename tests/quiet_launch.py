"""`mlx.launch` as installed, for tests that send its ranks no input: run as
`python tests/quiet_launch.py -n 2 --backend ring ...`, exactly as the `mlx.launch` script.

mlx.launch's thread per rank waits in `select(outputs, [rank's stdin], [], 1.0)`; a pipe with
room is always writable, so that select returns at once and the thread spins whether or not it
has input to pass on, and its main loop polls its own stdin, which returns at once at end of file
(/dev/null under pytest-xdist): under mlx.launch the parity launch's launcher takes 6.1 CPU-s,
each rank 2.9. Here those selects see neither stdin: the ranks' output is relayed as mlx.launch
relays it, no input reaches them, and a rank's exit or a stop is seen within the select's
timeout."""

from __future__ import annotations

import select
import sys

from mlx._distributed_utils import launch


def select_output(rlist, wlist, xlist, timeout=None):
    """select() without the write side, and without this launcher's own stdin."""
    rlist = [fd for fd in rlist if fd != sys.stdin.fileno()]
    readable, _, exceptional = select.select(rlist, [], xlist, timeout)
    return readable, [], exceptional


if __name__ == "__main__":
    launch.select = select_output
    sys.argv[0] = "mlx.launch"
    sys.exit(launch.main())
