"""Use a fast system BLAS with the `mlx-cpu` wheel when one is installed, and say which one runs.

The wheel bundles netlib's reference BLAS (fp32 matmul ~5 GFLOP/s). Loading a system
OpenBLAS with RTLD_GLOBAL *before* `mlx.core` is imported makes libmlx resolve its
`cblas_*` symbols there instead (measured 4 -> 155 GFLOP/s on a 2-core VM).

`blas_in_use()` reports the library that really provides the `cblas_sgemm` libmlx calls: it
reads the address the dynamic linker stored in libmlx's GOT slot for that symbol and asks
`dladdr` which loaded file holds it. (`dlsym` on libmlx's handle is not enough: it searches
only libmlx's own dependency chain, while libmlx was relocated against the global scope
first, which is where a preloaded OpenBLAS lives.) Nothing here imports mlx.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import sys

OPENBLAS_DIRS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread",
    "/usr/lib64/openblas-pthread",
    "/usr/lib/openblas-pthread",
)
SYMBOL = "cblas_sgemm"
_preloaded: str | None = None


def preload_fast_blas() -> str | None:
    """Preload OpenBLAS if present and mlx is not imported yet. Returns the path or None."""
    global _preloaded
    if _preloaded or not sys.platform.startswith("linux"):
        return _preloaded
    if os.environ.get("MLATUI_BLAS", "").lower() in ("reference", "bundled", "off"):
        return None
    if "mlx.core" in sys.modules:
        return None
    if os.environ.get("MLATUI_BLAS", "").lower() in ("pip", "scipy-openblas"):
        folders: tuple[str, ...] = ()
    else:
        folders = OPENBLAS_DIRS
    for folder in folders:
        blas = os.path.join(folder, "libblas.so.3")
        if os.path.exists(blas):
            try:
                ctypes.CDLL(blas, mode=ctypes.RTLD_GLOBAL)
                lapack = os.path.join(folder, "liblapack.so.3")
                if os.path.exists(lapack):
                    ctypes.CDLL(lapack, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            _preloaded = blas
            return blas
    from mlatui.host import blas_redirect  # no system OpenBLAS: the pip wheel's, if installed

    pip = blas_redirect.pip_openblas()
    if pip is not None:
        blas_redirect.install(pip)
        _preloaded = pip
    return _preloaded


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


def describe(path: str) -> str:
    """Label the library file that provides `cblas_sgemm` (calibration keys on 'openblas...')."""
    parts = path.split(os.sep)
    if "mlx_cpu.libs" in parts:
        return (
            f"bundled reference BLAS ({path}; slow: unset MLATUI_BLAS, or pip install "
            "scipy-openblas32, or apt-get install libopenblas0-pthread)"
        )
    if "openblas" in path.lower() or _exports(path, "openblas_get_config"):
        return f"openblas ({path})"
    return f"other BLAS ({path})"


# ---- dynamic-linker introspection (glibc / Linux) ---------------------------------------------

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


def _loaded_objects() -> list[tuple[str, int, int]]:
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


def _which_file(addr: int) -> str | None:
    info = _DlInfo()
    if not addr or _libc().dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) == 0:
        return None
    if not info.dli_fname:
        return None
    name = info.dli_fname.decode(errors="replace")
    return os.path.realpath(name) if os.path.exists(name) else name


def _exports(path: str, symbol: str) -> bool:
    """Whether the already-loaded `path` (or its dependencies) defines `symbol`."""
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # never loads, never promotes
        getattr(lib, symbol)
        return True
    except (OSError, AttributeError):
        return False


def _elf_slots(path: str, symbol: str) -> tuple[int, list[int]]:
    """From the ELF file: (vaddr of PT_DYNAMIC, link-time addresses of every relocation slot
    that the dynamic linker fills with `symbol`'s address)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:4] != b"\x7fELF":
            raise ValueError(f"{path} is not ELF")
        is64, e = m[4] == 2, "<" if m[5] == 1 else ">"
        if is64:
            phoff, phentsize, phnum = (
                struct.unpack_from(e + "Q", m, 32)[0],
                *struct.unpack_from(e + "HH", m, 54),
            )
        else:
            phoff, phentsize, phnum = (
                struct.unpack_from(e + "I", m, 28)[0],
                *struct.unpack_from(e + "HH", m, 42),
            )
        loads, dyn = [], None
        for i in range(phnum):
            at = phoff + i * phentsize
            if is64:
                p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(e + "IIQQQQ", m, at)
            else:
                p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(e + "IIIII", m, at)
            if p_type == 1:  # PT_LOAD
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:  # PT_DYNAMIC
                dyn = (p_vaddr, p_offset, p_filesz)
        if dyn is None:
            raise ValueError(f"{path} has no dynamic section")

        def off(vaddr: int) -> int:
            for v, o, size in loads:
                if v <= vaddr < v + size:
                    return o + vaddr - v
            raise ValueError(f"address {vaddr:#x} not in a PT_LOAD of {path}")

        tags: dict[int, int] = {}
        dfmt = e + ("qQ" if is64 else "iI")
        step = struct.calcsize(dfmt)
        for at in range(dyn[1], dyn[1] + dyn[2], step):
            tag, val = struct.unpack_from(dfmt, m, at)
            if tag == 0:  # DT_NULL
                break
            tags.setdefault(tag, val)
        strtab, symtab = off(tags[5]), off(tags[6])  # DT_STRTAB, DT_SYMTAB
        syment = tags.get(11, 24 if is64 else 16)  # DT_SYMENT
        want, names = symbol.encode(), {}

        def is_symbol(idx: int) -> bool:
            if idx not in names:
                st_name = struct.unpack_from(e + "I", m, symtab + idx * syment)[0]
                start = strtab + st_name
                names[idx] = m[start : m.find(b"\0", start)] == want
            return names[idx]

        tables = [(tags.get(7), tags.get(8, 0), True), (tags.get(17), tags.get(18, 0), False)]
        if 23 in tags:  # DT_JMPREL, of type DT_PLTREL (7 = RELA, 17 = REL)
            tables.append((tags[23], tags.get(2, 0), tags.get(20, 7) == 7))
        slots = []
        for start, size, rela in tables:
            if not start or not size:
                continue
            fmt = e + ("QQ" if is64 else "II")
            ent = (3 if rela else 2) * (8 if is64 else 4)
            base = off(start)
            for at in range(base, base + size, ent):
                r_offset, r_info = struct.unpack_from(fmt, m, at)
                idx = r_info >> 32 if is64 else r_info >> 8
                if idx and is_symbol(idx):
                    slots.append(r_offset)
        return dyn[0], slots


def cblas_provider() -> tuple[str | None, str]:
    """(file that provides the `cblas_sgemm` libmlx calls, how it was found) or (None, why not).

    'got': read from libmlx's relocated GOT slot (what libmlx actually calls).
    'lookup': slot not bound yet (lazy binding); the linker's order replayed: global scope
    (main program, RTLD_GLOBAL libraries) first, then libmlx's own dependencies."""
    mlx = [o for o in _loaded_objects() if os.path.basename(o[0]).startswith("libmlx")]
    if not mlx:
        return None, "mlx.core not imported: libmlx is not loaded"
    path, bias, l_ld = mlx[0]
    me = os.path.realpath(path)
    dyn_vaddr, slots = _elf_slots(path, SYMBOL)
    if bias + dyn_vaddr != l_ld:
        return None, f"{path} on disk differs from the loaded libmlx"
    if not slots:
        return None, f"libmlx ({path}) does not import {SYMBOL}"
    for slot in slots:
        target = _which_file(ctypes.c_void_p.from_address(bias + slot).value or 0)
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
    target = _which_file(addr or 0)
    return (target, "lookup") if target else (None, f"dladdr found no file for {SYMBOL}")
