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

Without a system OpenBLAS to preload, libmlx's gemm calls are pointed at the pip-installed one
(`scipy-openblas32`), so a fresh Linux box without root still gets a fast CPU BLAS. That wheel
prefixes its symbols (`scipy_cblas_sgemm`), so the linker can never bind libmlx's `cblas_sgemm`
to it; instead, right after `mlx.core` is imported, the GOT slots through which libmlx calls
`cblas_{s,d,c}gemm` are written with the addresses of the prefixed functions (same signatures:
32-bit ints, standard CBLAS enum values). LAPACK calls stay on the bundled reference library;
only the matmuls are hot. The dynamic-linker introspection this needs (glibc / Linux: the loaded
objects, which file holds an address, the relocation slots an ELF file has for a symbol) is here.

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
import functools
import importlib.abc
import importlib.util
import mmap
import os
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import NamedTuple

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
    with it in LD_PRELOAD (once; nothing has run yet), else (a test's probe) it is loaded
    RTLD_GLOBAL now, before mlx.core. The wheel prefixes its symbols, which no loader binds to
    libmlx's calls: its gemms are pointed at through libmlx's GOT once mlx.core loads
    (`install`)."""
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
    pip = pip_openblas()  # no system OpenBLAS: the pip wheel's, if installed
    if pip is not None:
        install(pip)
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
    try:
        path, slots = libmlx_slots(SYMBOL)
    except OSError as e:
        return None, str(e)
    if not slots:
        return None, f"libmlx ({path}) does not import {SYMBOL}"
    me = os.path.realpath(path)
    for slot in slots:
        target = which_file(ctypes.c_void_p.from_address(slot).value or 0)
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


def libmlx_slots(symbol: str) -> tuple[str, list[int]]:
    """The loaded libmlx's path and the run-time addresses of its relocation slots for
    `symbol`. OSError when libmlx is not loaded, or the file on disk is not the one loaded."""
    mlx = [o for o in loaded_objects() if os.path.basename(o[0]).startswith("libmlx")]
    if not mlx:
        raise OSError("mlx.core not imported: libmlx is not loaded")
    path, bias, l_ld = mlx[0]
    dyn_vaddr, slots = elf_slots(path, symbol)
    if bias + dyn_vaddr != l_ld:
        raise OSError(f"{path} on disk differs from the loaded libmlx")
    return path, [bias + slot for slot in slots]


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
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for name in GEMMS:
        target = ctypes.cast(getattr(lib, "scipy_" + name), ctypes.c_void_p).value
        _, slots = libmlx_slots(name)
        if not slots:
            raise ValueError(f"libmlx does not import {name}")
        for addr in slots:
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


RTLD_DI_LINKMAP = 2


class _LinkMap(ctypes.Structure):
    pass


_LinkMap._fields_ = [
    ("l_addr", ctypes.c_size_t),
    ("l_name", ctypes.c_char_p),
    ("l_ld", ctypes.c_void_p),
    ("l_next", ctypes.POINTER(_LinkMap)),
    ("l_prev", ctypes.POINTER(_LinkMap)),
]


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    libc.dladdr.restype = ctypes.c_int
    libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    libc.dlinfo.restype = ctypes.c_int
    return libc


def loaded_objects() -> list[tuple[str, int, int]]:
    """(path, load bias, address of its dynamic section) for every object the linker loaded."""
    libc = _libc()
    head = ctypes.POINTER(_LinkMap)()
    if libc.dlinfo(ctypes.CDLL(None)._handle, RTLD_DI_LINKMAP, ctypes.byref(head)) != 0:
        raise OSError("dlinfo(RTLD_DI_LINKMAP) failed")
    out, node = [], head
    while node:
        lm = node.contents
        out.append(((lm.l_name or b"").decode(errors="replace"), lm.l_addr, lm.l_ld or 0))
        node = lm.l_next
    return out


def which_file(addr: int) -> str | None:
    info = _DlInfo()
    if not addr or _libc().dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) == 0:
        return None
    if not info.dli_fname:
        return None
    fname: bytes = info.dli_fname
    name = fname.decode(errors="replace")
    return os.path.realpath(name) if os.path.exists(name) else name


def exports(path: str, symbol: str) -> bool:
    """Whether the already-loaded `path` (or its dependencies) defines `symbol`."""
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # never loads, never promotes
        getattr(lib, symbol)
        return True
    except (OSError, AttributeError):
        return False


def elf_slots(path: str, symbol: str) -> tuple[int, list[int]]:
    """From the ELF file: (vaddr of PT_DYNAMIC, link-time addresses of every relocation slot
    that the dynamic linker fills with `symbol`'s address). 64-bit little-endian only: the
    machines mlx ships Linux wheels for (x86_64, aarch64). Read once while the file is
    unchanged: a run's header asks for the BLAS in use several times (8 ms a read of libmlx)."""
    st = os.stat(path)
    dyn_vaddr, slots = _elf_slots(path, symbol, st.st_mtime_ns, st.st_size)
    return dyn_vaddr, list(slots)


@functools.lru_cache(maxsize=16)
def _elf_slots(path: str, symbol: str, mtime_ns: int, size: int) -> tuple[int, tuple[int, ...]]:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:6] != b"\x7fELF\x02\x01":
            raise ValueError(f"{path} is not a 64-bit little-endian ELF file")
        elf, dynamic = _segments(m, path)
        tags = _dynamic_tags(elf, dynamic)
        return dynamic.vaddr, tuple(_relocation_slots(elf, tags, symbol.encode()))


class _Segment(NamedTuple):
    vaddr: int
    offset: int
    size: int  # bytes in the file


@dataclass(frozen=True)
class _Elf:
    """An mmapped ELF file and its PT_LOAD segments."""

    m: mmap.mmap
    path: str
    loads: tuple[_Segment, ...]

    def unpack(self, fmt: str, at: int) -> tuple[int, ...]:
        return struct.unpack_from("<" + fmt, self.m, at)

    def offset(self, vaddr: int) -> int:
        """The file offset of a link-time address."""
        for v, o, size in self.loads:
            if v <= vaddr < v + size:
                return o + vaddr - v
        raise ValueError(f"address {vaddr:#x} not in a PT_LOAD of {self.path}")


def _segments(m: mmap.mmap, path: str) -> tuple[_Elf, _Segment]:
    """The file read as ELF, and its PT_DYNAMIC segment, from the program headers."""
    (phoff,) = struct.unpack_from("<Q", m, 32)
    phentsize, phnum = struct.unpack_from("<HH", m, 54)
    loads: list[_Segment] = []
    dynamic: _Segment | None = None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", m, phoff + i * phentsize
        )
        if p_type == 1:  # PT_LOAD
            loads.append(_Segment(p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = _Segment(p_vaddr, p_offset, p_filesz)
    if dynamic is None:
        raise ValueError(f"{path} has no dynamic section")
    return _Elf(m, path, tuple(loads)), dynamic


def _dynamic_tags(elf: _Elf, dynamic: _Segment) -> dict[int, int]:
    """The dynamic section's first value of each tag, up to DT_NULL."""
    tags: dict[int, int] = {}
    for at in range(dynamic.offset, dynamic.offset + dynamic.size, 16):
        tag, val = elf.unpack("qQ", at)
        if tag == 0:  # DT_NULL
            break
        tags.setdefault(tag, val)
    return tags


def _relocation_slots(elf: _Elf, tags: dict[int, int], want: bytes) -> list[int]:
    """Link-time addresses of the RELA, REL and PLT relocations whose symbol is named `want`."""
    strtab, symtab = elf.offset(tags[5]), elf.offset(tags[6])  # DT_STRTAB, DT_SYMTAB
    syment = tags.get(11, 24)  # DT_SYMENT
    names: dict[int, bool] = {}

    def is_symbol(idx: int) -> bool:
        if idx not in names:
            start = strtab + elf.unpack("I", symtab + idx * syment)[0]  # st_name
            names[idx] = elf.m[start : elf.m.find(b"\0", start)] == want
        return names[idx]

    tables = [(tags.get(7), tags.get(8, 0), True), (tags.get(17), tags.get(18, 0), False)]
    if 23 in tags:  # DT_JMPREL, of type DT_PLTREL (7 = RELA, 17 = REL)
        tables.append((tags[23], tags.get(2, 0), tags.get(20, 7) == 7))
    slots = []
    for start, size, rela in tables:
        if not start or not size:
            continue
        base = elf.offset(start)
        for at in range(base, base + size, 24 if rela else 16):
            r_offset, r_info = elf.unpack("QQ", at)
            idx = r_info >> 32
            if idx and is_symbol(idx):
                slots.append(r_offset)
    return slots
