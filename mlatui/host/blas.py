"""Use a fast BLAS with the `mlx-cpu` wheel when one is installed, and say which one runs.

The wheel bundles netlib's reference BLAS (fp32 matmul ~5 GFLOP/s). A system OpenBLAS in the
global scope before libmlx loads (LD_PRELOAD, or RTLD_GLOBAL before `mlx.core` is imported) makes
libmlx resolve its `cblas_*` symbols there instead (measured 4 -> 155 GFLOP/s on a 2-core VM).
`choose_blas` does that for a process about to run MLX (the CLI's entry, not `import mlatui`).

`blas_in_use()` reports the library that really provides the `cblas_sgemm` libmlx calls: it
reads the address the dynamic linker stored in libmlx's GOT slot for that symbol and asks
`dladdr` which loaded file holds it. (`dlsym` on libmlx's handle is not enough: it searches
only libmlx's own dependency chain, while libmlx was relocated against the global scope
first, which is where a preloaded OpenBLAS lives.) Nothing here imports mlx.

OpenBLAS's idle workers spin (sched_yield) for about 2^28 cycles after every call. On a machine
with as many BLAS threads as cores, a spinning worker competes with the arm's own thread and with
anything else that wakes up (the dashboard, the terminal), and a descheduled worker holds up the
next GEMM: the L = 1 quads of a 2-core launch scattered twice as much as headless runs. Unless
the user set it, OPENBLAS_THREAD_TIMEOUT is set to 4 (2^4 cycles: idle workers sleep at once)
before any OpenBLAS loads; `blas_threading()` says what is in force, and every header records it.
"""

from __future__ import annotations

import ctypes
import os
import sys

from mlatui.host.blas_redirect import elf_slots, exports, loaded_objects, which_file

OPENBLAS_DIRS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread",
    "/usr/lib64/openblas-pthread",
    "/usr/lib/openblas-pthread",
)
SYMBOL = "cblas_sgemm"
CHOICE_ENV = "MLATUI_BLAS"
REEXEC_ENV = "MLATUI_BLAS_PRELOADED"  # set on the process run again with LD_PRELOAD
TIMEOUT_ENV = "OPENBLAS_THREAD_TIMEOUT"
QUIET_TIMEOUT = "4"
_preloaded: str | None = None
_timeout_from_user: bool | None = None


def quiet_idle_workers() -> None:
    """Make OpenBLAS's idle workers sleep at once, unless the user chose a timeout (OpenBLAS
    reads it when it loads, so this runs before any preload)."""
    global _timeout_from_user
    if _timeout_from_user is None:
        value = os.environ.get(TIMEOUT_ENV, "").strip()
        ours = value == QUIET_TIMEOUT and REEXEC_ENV in os.environ  # set before running again
        _timeout_from_user = bool(value) and not ours
        if not value:
            os.environ[TIMEOUT_ENV] = QUIET_TIMEOUT


def choose_blas(reexec: bool = True) -> str | None:
    """Choose the CPU BLAS of a process that is about to run MLX: the CLI's entry, the --isolate
    child, a training tool, the test session. `import mlatui` does none of this. Linux only;
    returns the library chosen, or None for the bundled one.

    MLATUI_BLAS: unset, a system OpenBLAS (Debian's libopenblas0-pthread, ...) or else the
    `scipy-openblas32` wheel; `pip` the wheel; a path, that library; `reference` the bundled one.
    A system library is given to the dynamic loader: with `reexec` the process runs itself again
    with it in LD_PRELOAD (once; nothing has run yet), else (the test session) it is loaded
    RTLD_GLOBAL now, before mlx.core. The wheel prefixes its symbols, which no loader binds to
    libmlx's calls: its gemms are pointed at through libmlx's GOT once mlx.core loads
    (host.blas_redirect)."""
    global _preloaded
    if _preloaded or not sys.platform.startswith("linux"):
        return _preloaded
    quiet_idle_workers()
    again = os.environ.get(REEXEC_ENV)
    if again and loaded(again):  # this process was run again with it in LD_PRELOAD
        _preloaded = again
        return again
    choice = os.environ.get(CHOICE_ENV, "").strip()
    if choice.lower() in ("reference", "bundled", "off"):
        return None
    if choice.lower() not in ("pip", "scipy-openblas"):
        system = choice if os.path.isabs(choice) else system_openblas()
        if system is not None:
            _preloaded = _preload(system, reexec)
            if _preloaded is not None or os.path.isabs(choice):
                return _preloaded
    from mlatui.host import blas_redirect  # no system OpenBLAS: the pip wheel's, if installed

    pip = blas_redirect.pip_openblas()
    if pip is not None:
        blas_redirect.install(pip)
        _preloaded = pip
    return _preloaded


def system_openblas() -> str | None:
    for folder in OPENBLAS_DIRS:
        blas = os.path.join(folder, "libblas.so.3")
        if os.path.exists(blas):
            return blas
    return None


def _preload(library: str, reexec: bool) -> str | None:
    """`library` (and its LAPACK beside it) in the global scope before libmlx binds to the
    bundled BLAS: already preloaded, preloaded by running this process again, or loaded now."""
    lapack = os.path.join(os.path.dirname(library), "liblapack.so.3")
    libraries = [library, *([lapack] if os.path.exists(lapack) else [])]
    if loaded(library):
        return library
    if reexec and os.environ.get(REEXEC_ENV) != library:  # once: the loader may refuse it
        preload = os.environ.get("LD_PRELOAD", "")
        env = {
            **os.environ,
            "LD_PRELOAD": " ".join([*libraries, *preload.split()]),
            REEXEC_ENV: library,
        }
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            os.execve(sys.executable, sys.orig_argv, env)
        except OSError:
            pass  # loaded below instead
    if "mlx.core" in sys.modules:
        return None  # libmlx is bound already
    try:
        for path in libraries:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    return library


def loaded(library: str) -> bool:
    real = os.path.realpath(library)
    return any(os.path.realpath(path) == real for path, _, _ in loaded_objects())


def blas_in_use() -> str:
    """The BLAS whose `cblas_sgemm` libmlx resolved, e.g. 'openblas (<path>)',
    'bundled reference BLAS (<path>; slow: ...)', 'other BLAS (<path>)', 'accelerate',
    or 'unknown (<why>)' when mlx.core is not loaded or the lookup fails. Never guesses."""
    if sys.platform == "darwin":
        return "accelerate"
    if not sys.platform.startswith("linux"):
        return f"unknown (unsupported platform {sys.platform})"
    try:
        provider, _how = cblas_provider()
    except Exception as e:  # noqa: BLE001 - a diagnostic string must never take the caller down
        return f"unknown (lookup failed: {type(e).__name__}: {e})"
    if provider is None:
        return f"unknown ({_how})"
    return describe(provider)


def blas_threading() -> str:
    """The OpenBLAS in use's thread count and idle-worker timeout, e.g. '2 threads; idle workers
    sleep at once (OPENBLAS_THREAD_TIMEOUT=4, mlatui's default)'; 'n/a (...)' for other BLAS."""
    if not sys.platform.startswith("linux"):
        return "n/a (not OpenBLAS)"
    try:
        provider, _how = cblas_provider()
    except Exception as e:  # noqa: BLE001 - a diagnostic string must never take the caller down
        return f"unknown (lookup failed: {type(e).__name__}: {e})"
    if provider is None or not describe(provider).startswith("openblas"):
        return "n/a (not OpenBLAS)"
    threads = "? threads"
    try:
        lib = ctypes.CDLL(provider, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        for name in ("openblas_get_num_threads", "scipy_openblas_get_num_threads"):
            if hasattr(lib, name):
                n = getattr(lib, name)()
                threads = f"{n} thread" + ("s" if n != 1 else "")
                break
    except OSError:
        pass
    from mlatui.host.blas_redirect import threads_note

    note = threads_note() if "scipy_openblas" in provider else None
    threads = f"{threads} ({note})" if note else threads
    value = os.environ.get(TIMEOUT_ENV)
    if value is None:
        return f"{threads}; idle workers spin (OpenBLAS's default timeout)"
    source = "from the environment" if _timeout_from_user else "mlatui's default"
    how = "sleep at once" if value == QUIET_TIMEOUT else f"spin 2^{value} cycles"
    return f"{threads}; idle workers {how} ({TIMEOUT_ENV}={value}, {source})"


def describe(path: str) -> str:
    """Label the library file that provides `cblas_sgemm` (calibration keys on 'openblas...')."""
    parts = path.split(os.sep)
    if "mlx_cpu.libs" in parts:
        return (
            f"bundled reference BLAS ({path}; slow: unset MLATUI_BLAS, or pip install "
            "scipy-openblas32, or apt-get install libopenblas0-pthread)"
        )
    if "openblas" in path.lower() or exports(path, "openblas_get_config"):
        return f"openblas ({path})"
    return f"other BLAS ({path})"


def cblas_provider() -> tuple[str | None, str]:
    """(file that provides the `cblas_sgemm` libmlx calls, how it was found) or (None, why not).

    'got': read from libmlx's relocated GOT slot (what libmlx actually calls).
    'lookup': slot not bound yet (lazy binding); the linker's order replayed: global scope
    (main program, RTLD_GLOBAL libraries) first, then libmlx's own dependencies."""
    mlx = [o for o in loaded_objects() if os.path.basename(o[0]).startswith("libmlx")]
    if not mlx:
        return None, "mlx.core not imported: libmlx is not loaded"
    path, bias, l_ld = mlx[0]
    me = os.path.realpath(path)
    dyn_vaddr, slots = elf_slots(path, SYMBOL)
    if bias + dyn_vaddr != l_ld:
        return None, f"{path} on disk differs from the loaded libmlx"
    if not slots:
        return None, f"libmlx ({path}) does not import {SYMBOL}"
    for slot in slots:
        target = which_file(ctypes.c_void_p.from_address(bias + slot).value or 0)
        if target and target != me:
            return target, "got"
    # Lazy binding, not called yet: the slot still points at libmlx's own PLT.
    try:
        addr = ctypes.cast(getattr(ctypes.CDLL(None), SYMBOL), ctypes.c_void_p).value
    except AttributeError:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            addr = ctypes.cast(getattr(lib, SYMBOL), ctypes.c_void_p).value
        except (OSError, AttributeError):
            return None, f"{SYMBOL} is not bound in libmlx and no loaded library defines it"
    target = which_file(addr or 0)
    return (target, "lookup") if target else (None, f"dladdr found no file for {SYMBOL}")
