"""The Arrow memory pool the span path allocates from: spans turned into columns, and segments written.

Why not pyarrow's default pool (mimalloc in its Linux wheels): the first conversion on a new thread of a
process where torch has trained took 17-348 ms of CPU from it in four runs of six, and 2 ms when repeated at
once; from jemalloc or the system allocator, 3-5 ms (the same 820 spans; measured with pyarrow 26 on the tiny
GRPO run of ``benchmarks.trl_overhead``). That conversion is what the TRL adapter's end-of-training flush
waits for, on the training thread: from mimalloc the flush took 9-90 ms (median 47 ms of six runs), from
jemalloc 11-18 ms. The writers (the exporter, the receiver's group commit) convert on threads of their own,
so they take a pool of their own; this also keeps rollscope's Arrow memory apart from the job's
(``pool().bytes_allocated()``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def pool() -> pa.MemoryPool:
    """jemalloc where pyarrow was built with it (its Linux and macOS wheels), else the system allocator."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.system_memory_pool()
