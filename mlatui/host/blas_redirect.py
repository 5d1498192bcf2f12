"""Point libmlx's gemm calls at the pip-installed OpenBLAS (`scipy-openblas32`) when no system
OpenBLAS can be preloaded, so a fresh Linux box without root still gets a fast CPU BLAS.

That wheel prefixes its symbols (`scipy_cblas_sgemm`), so the linker can never bind libmlx's
`cblas_sgemm` to it the way it binds a preloaded system OpenBLAS. Instead, right after
`mlx.core` is imported, the GOT slots through which libmlx calls `cblas_{s,d,c}gemm` are written
with the addresses of the prefixed functions (same signatures: 32-bit ints, standard CBLAS enum
values). LAPACK calls stay on the bundled reference library; only the matmuls are hot.
`blas_in_use()` reads the same slots, so the header and every record name what really runs.
Nothing here imports mlx.

The wheel runs on one thread unless the user chose a count (OPENBLAS_NUM_THREADS,
GOTO_NUM_THREADS or OMP_NUM_THREADS): with two threads on a busy 2-core VM its sgemm calls
took 48-64 ms each (whole 4 ms scheduler ticks, up to 275 ms) at every size from 1x2048 @
2048x2048 to 256x2048 @ 2048x2048; on one thread the same calls took a median 2.0 ms (1 row) and
27 ms (256 rows), and Debian's OpenBLAS with two threads, run beside it, 2-3.6 ms and 28 ms.
A decode step makes dozens of those calls: two threads made a 30 ms step take 50-600 ms and left
every L = 1 check undecided.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

from mlatui.host import linker

GEMMS = ("cblas_sgemm", "cblas_dgemm", "cblas_cgemm")
THREAD_ENVS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
THREADS_NOTE = "mlatui's default for the pip wheel; OPENBLAS_NUM_THREADS overrides"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
PROT_READ, PROT_WRITE = 1, 2
_redirected: str | None = None
_one_thread = False


def pip_openblas() -> str | None:
    """The path of `scipy-openblas32`'s library if that wheel is installed (no import side
    effects: only its location is looked up)."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "lib", "libscipy_openblas.so")
        if os.path.exists(path):
            return path
    return None


def redirect_gemm(library: str) -> str:
    """Write libmlx's gemm GOT slots with `library`'s prefixed gemms. Returns the library path.
    Raises OSError/ValueError when libmlx is not loaded or a slot cannot be found."""
    global _redirected
    lib = ctypes.CDLL(library, mode=os.RTLD_LAZY)
    one_thread_unless_chosen(lib, os.environ)
    mlx = [o for o in linker.loaded_objects() if os.path.basename(o[0]).startswith("libmlx")]
    if not mlx:
        raise OSError("libmlx is not loaded")
    path, bias, l_ld = mlx[0]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for name in GEMMS:
        target = ctypes.cast(getattr(lib, "scipy_" + name), ctypes.c_void_p).value
        dyn_vaddr, slots = linker.elf_slots(path, name)
        if bias + dyn_vaddr != l_ld:
            raise ValueError(f"{path} on disk differs from the loaded libmlx")
        if not slots:
            raise ValueError(f"libmlx does not import {name}")
        for slot in slots:
            addr = bias + slot
            page = addr - addr % PAGE
            # a slot under RELRO is read-only after relocation: open its page for the write
            if libc.mprotect(page, PAGE, PROT_READ | PROT_WRITE) != 0:
                raise OSError(ctypes.get_errno(), f"mprotect of libmlx's GOT for {name}")
            ctypes.c_void_p.from_address(addr).value = target
    _redirected = os.path.realpath(library)
    return _redirected


def one_thread_unless_chosen(lib: ctypes.CDLL, env: Mapping[str, str]) -> bool:
    """Set the wheel's OpenBLAS to one thread unless a thread count is in `env`; True if set."""
    global _one_thread
    if any(env.get(name, "").strip() for name in THREAD_ENVS):
        return False
    lib.scipy_openblas_set_num_threads(1)
    _one_thread = True
    return True


def threads_note() -> str | None:
    """Why the wheel runs on one thread, when mlatui chose it (for the header's BLAS threading)."""
    return THREADS_NOTE if _one_thread else None


class _AfterMlxCore(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs `redirect_gemm` once, right after `mlx.core` finishes importing."""

    def __init__(self, library: str) -> None:
        self.library = library
        self.inner: importlib.abc.Loader | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "mlx.core":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return None
        self.inner, spec.loader = spec.loader, self
        return spec

    def _inner(self) -> importlib.abc.Loader:
        if self.inner is None:
            raise ImportError("mlx.core's loader was not found before it was used")
        return self.inner

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._inner().create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner().exec_module(module)
        try:
            redirect_gemm(self.library)
        except (OSError, ValueError, AttributeError) as e:
            # the bundled reference BLAS keeps working; blas_in_use() says which one runs
            print(f"mlatui: warning: could not use {self.library}: {e}", file=sys.stderr)


def install(library: str) -> None:
    """Arrange for the redirect to happen when mlx.core is imported (now if it already is)."""
    if "mlx.core" in sys.modules:
        redirect_gemm(library)
    else:
        sys.meta_path.insert(0, _AfterMlxCore(library))
