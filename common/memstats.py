"""Where a process's resident memory sits, by allocator: what a heap that looks flat while RSS grows needs.

``sample()`` reads the kernel's view (``/proc/self/smaps``: anonymous mappings, the brk heap, file-backed
pages), glibc's (``mallinfo2``: bytes in use and free in its arenas, and in mmapped chunks) and Python's
(blocks its allocator holds, bytes tracemalloc traces). Growth in glibc's free bytes is fragmentation; in
anonymous mappings with a flat Python heap, Python arenas held by a few live objects, or a native library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@dataclass(frozen=True, slots=True)
class MemSample:
    at: float
    rss_kib: int
    anon_kib: int  # anonymous mappings other than the brk heap (Python's arenas, thread stacks, mmapped chunks)
    brk_heap_kib: int
    file_kib: int
    malloc_in_use: int | None  # glibc: bytes handed out
    malloc_free: int | None  # glibc: bytes free inside its arenas (fragments it has not given back)
    malloc_mmapped: int | None
    python_blocks: int
    traced_bytes: int | None


def _mallinfo() -> tuple[int, int, int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None  # not glibc, or older than 2.33
    fn.restype = _MallInfo2
    info = fn()
    return info.uordblks + info.hblkhd, info.fordblks, info.hblkhd


def _smaps(path: Path = Path("/proc/self/smaps")) -> tuple[int, int, int, int]:
    rss = anon = heap = file = 0
    kind = "anon"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0, 0, 0, 0
    for line in lines:
        head = line.split(maxsplit=6)
        if head and "-" in head[0] and len(head) >= 5:
            name = head[5] if len(head) > 5 else ""
            kind = "heap" if name == "[heap]" else "anon" if not name or name.startswith("[") else "file"
        elif line.startswith("Rss:"):
            kib = int(line.split()[1])
            rss += kib
            if kind == "heap":
                heap += kib
            elif kind == "anon":
                anon += kib
            else:
                file += kib
    return rss, anon, heap, file


def sample() -> MemSample:
    rss, anon, heap, file = _smaps()
    malloc = _mallinfo()
    return MemSample(
        at=time.time(),
        rss_kib=rss,
        anon_kib=anon,
        brk_heap_kib=heap,
        file_kib=file,
        malloc_in_use=malloc[0] if malloc else None,
        malloc_free=malloc[1] if malloc else None,
        malloc_mmapped=malloc[2] if malloc else None,
        python_blocks=sys.getallocatedblocks(),
        traced_bytes=tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None,
    )
