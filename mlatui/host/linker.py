"""Dynamic-linker introspection (glibc / Linux): the loaded objects, which file holds an address,
and the relocation slots an ELF file has for a symbol. Nothing here imports mlx."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct

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
        loads: list[tuple[int, int, int]] = []
        dyn: tuple[int, int, int] | None = None
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
