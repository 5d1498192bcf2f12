"""blas_in_use() names the library that provides the cblas_sgemm libmlx really calls, and
choose_blas() (the CLI's entry; never `import mlatui`) gives libmlx a fast one.

Every scenario runs in a fresh interpreter: the choice must happen before mlx.core is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlatui.host.blas import OPENBLAS_DIRS, describe
from mlatui.store import device_key

ROOT = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF/glibc only")

PROBE = """
import json, os, sys, time
{before}
import mlatui.host.blas as b
b.choose_blas()  # as the CLI's entry does
{preload}
import mlx.core as mx
out = {{"blas": b.blas_in_use(), "provider": b.cblas_provider(), "preloaded": b._preloaded}}
with open("/proc/self/maps") as f:
    out["mapped"] = sorted({{l.split()[-1] for l in f if "blas" in l.lower() and "/" in l}})
if {gflops}:
    a = mx.random.normal((512, 512)); mx.eval(a @ a)
    t, k = time.perf_counter(), 0
    while time.perf_counter() - t < 0.3:
        mx.eval(a @ a); k += 1
    out["gflops"] = 2 * 512**3 * k / (time.perf_counter() - t) / 1e9
print(json.dumps(out))
"""


def run_probe(code: str, env: dict[str, str], drop: tuple[str, ...] = ("MLATUI_BLAS",)) -> dict:
    """`code` in a fresh interpreter, with `drop` removed from this environment and `env` added;
    its last stdout line, as JSON."""
    full = {k: v for k, v in os.environ.items() if k not in drop} | env
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def probe(before: str = "", preload: str = "", gflops: bool = False, **env: str) -> dict:
    return run_probe(
        textwrap.dedent(PROBE).format(before=before, preload=preload, gflops=gflops), env
    )


def is_bundled(blas: str) -> bool:
    return blas.startswith("bundled reference BLAS (") and "mlx_cpu.libs" in blas


def system_openblas() -> str | None:
    for folder in OPENBLAS_DIRS:
        if os.path.exists(os.path.join(folder, "libblas.so.3")):
            return os.path.join(folder, "libblas.so.3")
    return None


def test_describe_labels_and_calibration_key_agree():
    cases = {
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3": "openblas",
        "/v/site-packages/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0": "refblas",
    }
    for path, key in cases.items():
        label = describe(path)
        assert path in label
        env = {"backend": "cpu", "device_name": "x", "blas": label}
        assert device_key(env).endswith("-" + key), (label, device_key(env))
    mac = {"backend": "cpu", "device_name": "Apple M3 Ultra", "blas": "accelerate"}
    assert device_key(mac) == "cpu-Apple_M3_Ultra-accelerate"  # a CPU calibration on a Mac
    bundled = describe("/v/site-packages/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0")
    assert bundled.startswith("bundled reference BLAS (") and "libopenblas0-pthread" in bundled


@linux_only
def test_unknown_without_mlx_even_when_an_openblas_is_mapped():
    pytest.importorskip("numpy")  # numpy's wheel maps libscipy_openblas64_
    code = "import numpy, mlatui.host.blas as b, sys; print(b.blas_in_use()); print('mlx.core' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "MLATUI_BLAS"} | {"MLATUI_BLAS": "reference"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    blas, imported = out.stdout.strip().splitlines()
    assert imported == "False"
    assert blas.startswith("unknown (") and "openblas" not in blas


@linux_only
def test_default_run_reports_what_libmlx_resolved():
    r = probe()
    path, how = r["provider"]
    assert how == "got"  # read from libmlx's relocated GOT slot, not guessed
    if system_openblas():
        assert r["preloaded"], "system OpenBLAS exists but choose_blas() did not load it"
    if r["preloaded"]:
        assert r["blas"] == f"openblas ({os.path.realpath(r['preloaded'])})"
    else:
        assert is_bundled(r["blas"]) and path in r["blas"]


@linux_only
def test_reference_with_numpy_openblas_mapped_says_bundled():
    pytest.importorskip("numpy")
    r = probe(before="import numpy", MLATUI_BLAS="reference")
    # numpy's OpenBLAS is mapped (the old name-based logic reported it) ...
    assert any("openblas" in p.lower() for p in r["mapped"]), r["mapped"]
    # ... but libmlx calls the wheel's reference BLAS.
    assert r["preloaded"] is None
    assert is_bundled(r["blas"]), r["blas"]
    assert not r["blas"].startswith("openblas")
    assert device_key({"backend": "cpu", "device_name": "x", "blas": r["blas"]}).endswith("refblas")


FAKE_BLAS = """
void cblas_sgemm(void) {}
%s
"""


@linux_only
@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
@pytest.mark.parametrize("openblas", [True, False])
def test_globally_preloaded_blas_wins_over_libmlx_dependencies(tmp_path, openblas):
    """A library loaded RTLD_GLOBAL before mlx.core provides libmlx's cblas_sgemm even though
    dlsym(libmlx handle) would find the bundled one first. (It is never called here.)"""
    src = tmp_path / "fake.c"
    extra = 'const char *openblas_get_config(void) { return "fake"; }' if openblas else ""
    src.write_text(FAKE_BLAS % extra)
    lib = tmp_path / "libfastblas.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    preload = f"import ctypes; ctypes.CDLL({str(lib)!r}, mode=ctypes.RTLD_GLOBAL)"
    r = probe(preload=preload, MLATUI_BLAS="reference")
    real = os.path.realpath(lib)
    assert r["provider"] == [real, "got"]
    assert r["blas"] == (f"openblas ({real})" if openblas else f"other BLAS ({real})")


@linux_only
def test_real_openblas_preload_is_reported_and_fast():
    """With MLATUI_TEST_OPENBLAS_DIR (e.g. an extracted libopenblas0-pthread .deb, with
    LD_LIBRARY_PATH reaching its libgfortran.so.5) or a system OpenBLAS: the preload is reported as openblas, MLATUI_BLAS=reference as bundled, and the
    reported one is the fast one."""
    folder = os.environ.get("MLATUI_TEST_OPENBLAS_DIR")
    if not folder:
        system = system_openblas()
        if not system:
            pytest.skip("no OpenBLAS (set MLATUI_TEST_OPENBLAS_DIR to an openblas-pthread dir)")
        folder = os.path.dirname(system)
    # MLATUI_BLAS=reference keeps the probe's first choose_blas() from loading another copy
    preload = (
        f"os.environ.pop('MLATUI_BLAS'); b.OPENBLAS_DIRS = ({folder!r},); b._preloaded = None\n"
        "assert b.choose_blas(reexec=False)"
    )
    fast = probe(preload=preload, gflops=True, MLATUI_BLAS="reference")
    slow = probe(gflops=True, MLATUI_BLAS="reference")
    expected = os.path.realpath(os.path.join(folder, "libblas.so.3"))
    assert fast["blas"] == f"openblas ({expected})"
    assert is_bundled(slow["blas"])
    assert fast["gflops"] > 3 * slow["gflops"], (fast["gflops"], slow["gflops"])


@linux_only
def test_pip_openblas_redirect_is_reported_correct_and_fast():
    """Without a system OpenBLAS (forced here with MLATUI_BLAS=pip), libmlx's gemm slots point
    at the scipy-openblas32 wheel: blas_in_use() names that file from the GOT, results match
    numpy, and it is faster than the bundled reference BLAS."""
    from mlatui.host.blas import pip_openblas

    lib = pip_openblas()
    if lib is None:
        pytest.skip("scipy-openblas32 is not installed")
    check = (
        "import numpy as np\n"
        "x = mx.random.normal((64, 33)); y = mx.random.normal((33, 17))\n"
        "out['err'] = float(np.abs(np.array(x @ y) - np.array(x) @ np.array(y)).max())\n"
        "out['mapped'] = out['mapped']\n"
    )
    code_probe = PROBE.replace("print(json.dumps(out))", check + "print(json.dumps(out))")
    full = {k: v for k, v in os.environ.items() if k != "MLATUI_BLAS"}
    runs = {}
    for mode in ("pip", "reference"):
        code = textwrap.dedent(code_probe).format(before="", preload="", gflops=True)
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=full | {"MLATUI_BLAS": mode},
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "warning" not in out.stderr, out.stderr
        runs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    real = os.path.realpath(lib)
    assert runs["pip"]["provider"] == [real, "got"]
    assert runs["pip"]["blas"] == f"openblas ({real})"
    assert runs["pip"]["err"] < 1e-4
    assert is_bundled(runs["reference"]["blas"])
    assert runs["pip"]["gflops"] > 2 * runs["reference"]["gflops"], runs


IDLE_PROBE = """
import json, time
from mlatui.host.blas import blas_threading, choose_blas
choose_blas()
import mlx.core as mx
a = mx.random.normal((512, 512)); mx.eval(a @ a)
idle = 0.0
for _ in range(5):
    mx.eval(a @ a)
    c0 = time.process_time(); time.sleep(0.3); idle += time.process_time() - c0
print(json.dumps({"idle_cpu_s": idle, "threading": blas_threading()}))
"""


def idle_probe(**env: str) -> dict:
    # without the suite's one thread (conftest.py): the idle workers are what this probes
    drop = ("MLATUI_BLAS", "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_NUM_THREADS")
    return run_probe(IDLE_PROBE, env, drop=drop)


@linux_only
@pytest.mark.parametrize("mode", ["", "pip"])
def test_openblas_idle_workers_sleep_unless_the_user_chose(mode):
    """OpenBLAS's workers spin ~0.1 s after each call by default (0.5 s of CPU over these five
    0.3 s sleeps on the 2-core box); mlatui's default makes them sleep at once, and says so. A
    timeout the user set is kept and named as theirs (that OpenBLAS spins for it is
    test_a_timeout_the_user_set_makes_the_workers_spin, slow: a spin yields to other work)."""
    from mlatui.host.blas import pip_openblas

    if mode == "pip" and pip_openblas() is None:
        pytest.skip("scipy-openblas32 is not installed")
    if mode == "" and not system_openblas() and pip_openblas() is None:
        pytest.skip("no OpenBLAS here")
    quiet = idle_probe(MLATUI_BLAS=mode)
    assert quiet["threading"].endswith(
        "idle workers sleep at once (OPENBLAS_THREAD_TIMEOUT=4, mlatui's default)"
    ), quiet
    assert quiet["idle_cpu_s"] < 0.1, quiet
    theirs = idle_probe(MLATUI_BLAS=mode, OPENBLAS_THREAD_TIMEOUT="28")
    assert "OPENBLAS_THREAD_TIMEOUT=28, from the environment" in theirs["threading"], theirs
    assert "spin 2^28 cycles" in theirs["threading"]


@linux_only
@pytest.mark.slow  # the spinning workers yield: on a busy host they burn less than 0.05 s
def test_a_timeout_the_user_set_makes_the_workers_spin():
    if not system_openblas():
        pytest.skip("no system OpenBLAS here")
    quiet = idle_probe(MLATUI_BLAS="")
    theirs = idle_probe(MLATUI_BLAS="", OPENBLAS_THREAD_TIMEOUT="28")
    assert theirs["idle_cpu_s"] > quiet["idle_cpu_s"] + 0.05, (quiet, theirs)  # OpenBLAS read it


@linux_only
def test_reference_blas_has_no_threading_to_report():
    r = idle_probe(MLATUI_BLAS="reference")
    assert r["threading"] == "n/a (not OpenBLAS)"


IMPORT_ONLY = """
import json, os, sys
import mlatui, mlatui.cli
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and "/" in l})
out = {"maps": maps, "mlx": "mlx.core" in sys.modules, "timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
       "finders": [type(f).__name__ for f in sys.meta_path]}
import mlx.core as mx
import mlatui.host.blas as b
out["blas"] = b.blas_in_use()
print(json.dumps(out))
"""


@linux_only
def test_importing_mlatui_loads_no_blas_and_rewrites_nothing():
    """A library import has no side effects: no BLAS mapped, no import hook left for mlx.core,
    no environment changed; libmlx then calls the BLAS it was linked with."""
    r = run_probe(IMPORT_ONLY, {}, drop=("MLATUI_BLAS", "OPENBLAS_THREAD_TIMEOUT", "LD_PRELOAD"))
    assert r["maps"] == [] and r["mlx"] is False, r
    assert "_AfterMlxCore" not in r["finders"] and r["timeout"] is None, r
    assert is_bundled(r["blas"]), r["blas"]


def test_the_suite_runs_on_the_fast_blas_its_conftest_chose():
    from mlatui.host.blas import blas_in_use, pip_openblas

    if not sys.platform.startswith("linux") or not (system_openblas() or pip_openblas()):
        pytest.skip("no OpenBLAS for this platform's suite")
    import mlx.core as mx

    mx.eval(mx.ones((8, 8)) @ mx.ones((8, 8)))
    assert blas_in_use().startswith("openblas ("), blas_in_use()


RUN_AGAIN = """
import json, os, sys
print("started", file=sys.stderr, flush=True)
import mlatui.host.blas as b
b.OPENBLAS_DIRS = ({folder!r},)  # where Debian's libopenblas0-pthread would be
chosen = b.choose_blas()
import mlx.core as mx
maps = sorted({{l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and "/" in l}})
print(json.dumps({{"chosen": chosen, "blas": b.blas_in_use(), "provider": b.cblas_provider(),
    "preload": os.environ.get("LD_PRELOAD", ""), "maps": maps}}))
"""


@linux_only
@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_a_system_openblas_is_preloaded_by_running_the_process_again(tmp_path):
    """No root and no system OpenBLAS here: a stand-in library (never called) in its place. The
    process runs itself again with it in LD_PRELOAD, so the loader, not mlatui, binds libmlx to
    it; MLATUI_BLAS=reference keeps the bundled one."""
    src = tmp_path / "fake.c"
    src.write_text(FAKE_BLAS % 'const char *openblas_get_config(void) { return "fake"; }')
    lib = tmp_path / "libblas.so.3"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    code = textwrap.dedent(RUN_AGAIN).format(folder=str(tmp_path))
    full = {k: v for k, v in os.environ.items() if k not in ("MLATUI_BLAS", "LD_PRELOAD")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("started") == 2  # the process ran again, once
    r = json.loads(done.stdout.strip().splitlines()[-1])
    real = os.path.realpath(lib)
    assert r["chosen"] == str(lib) and r["preload"].split()[0] == str(lib)
    assert r["provider"] == [real, "got"] and r["blas"] == f"openblas ({real})"
    again = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full | {"MLATUI_BLAS": "reference"},
        timeout=120,
    )
    assert again.returncode == 0 and again.stderr.count("started") == 1, again.stderr
    r = json.loads(again.stdout.strip().splitlines()[-1])
    assert r["chosen"] is None and r["preload"] == "" and is_bundled(r["blas"])
    assert real not in r["maps"]
