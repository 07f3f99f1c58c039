"""The dashboard process's heap: a few malloc arenas, and freed memory handed back after every page run.

A page's figures are transient: it builds frames and Plotly figures from query results, draws them, and frees
them; what stays is the results cache. On glibc, memory freed by a thread stays in that thread's malloc arena
(one per thread that ever allocated under contention, up to eight per core) until the arena's top is free, so
a dashboard process kept the high-water mark of every page it had drawn: with every page of a 30M-span run
drawn once, 0.73 GiB where no page alone needs more than 0.5 (``benchmarks/scale.py``'s "dashboard peak RSS",
which grew with the run). Streamlit's script threads, the pages' ``threads.at_once`` pools, the analyses'
``together`` pools and DuckDB's threads share ``ARENAS`` arenas instead, and ``release`` returns what a page
freed to the system once it has drawn, so the process holds its caches plus the one page being drawn.

Both are glibc calls (``mallopt``, ``malloc_trim``); elsewhere (macOS, musl) they are skipped and nothing
changes but the memory held.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

# malloc arenas the process's threads share: one per core, not glibc's eight per core (DuckDB's threads, one
# per core, each still find an arena free most of the time)
ARENAS = max(2, os.cpu_count() or 2)
_M_ARENA_MAX = -8  # glibc's mallopt parameter number for the arena limit (malloc.h)


@cache
def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap the malloc arenas threads created from now on share (glibc); whether the cap was set."""
    libc = _libc()
    return bool(libc is not None and hasattr(libc, "mallopt") and libc.mallopt(_M_ARENA_MAX, arenas))


def release() -> bool:
    """Hand the heap's free memory back to the system (glibc's ``malloc_trim``); whether any was."""
    libc = _libc()
    return bool(libc is not None and hasattr(libc, "malloc_trim") and libc.malloc_trim(0))
