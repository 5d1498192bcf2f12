"""Time `mlatui launch` as a user sees it: in a pseudo-terminal, from the command to the recording's
run_end, then press q. Usage: python time_launch.py VENV_BIN RECORD [extra launch args...]

Prints the seconds to the first timed step after the run header, the seconds to run_end, and the
verdict line of the recording (`replay --dump`)."""

import json
import os
import pty
import select
import subprocess
import sys
import time

bin_dir, record, *extra = sys.argv[1:]
start = time.monotonic()
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"
    os.environ["COLUMNS"], os.environ["LINES"] = "160", "50"
    os.execv(f"{bin_dir}/mlatui", [f"{bin_dir}/mlatui", "launch", "--record", record, *extra])
first_step = end = header = first_point = None
while True:
    r, _, _ = select.select([fd], [], [], 0.5)
    if r:
        try:
            os.read(fd, 65536)
        except OSError:
            break
    if os.path.exists(record):
        with open(record) as f:
            for line in f:
                e = json.loads(line)
                t = time.monotonic() - start
                if e["type"] == "header" and header is None:
                    header = t
                if e["type"] == "step" and first_step is None:
                    first_step = t
                if e["type"] == "estimate" and first_point is None and e.get("phase") == "sweep":
                    first_point = t
                if e["type"] == "run_end" and end is None:
                    end = t
    if end is not None:
        time.sleep(1.0)
        os.write(fd, b"q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # keep draining the terminal until the app exits
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    break
            if os.waitpid(pid, os.WNOHANG)[0]:
                pid = 0
                break
        else:
            print("launch did not quit on q within 20 s", file=sys.stderr)
            os.kill(pid, 15)
        break
    if time.monotonic() - start > 900:
        os.write(fd, b"q")
        break
if pid:
    os.waitpid(pid, 0)
dump = subprocess.run(
    [f"{bin_dir}/mlatui", "replay", record, "--dump"], capture_output=True, text=True
).stdout
verdict = next((x for x in dump.splitlines() if x.startswith("**Verdict:**")), "")
print(
    json.dumps(
        {
            "header_s": header,
            "first_step_s": first_step,
            "first_key_point_s": first_point,
            "run_end_s": end,
            "verdict": verdict,
        }
    )
)
