"""The dashboard process hands back what a page freed (app/memory.py), so its memory is its caches plus the
page being drawn, not the high-water mark of every page it has drawn."""

import sys
import threading

import pytest

from rollscope.app import memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or memory._libc() is None
    or not hasattr(memory._libc(), "malloc_trim"),
    reason="glibc's malloc_trim (elsewhere release() does nothing)",
)


def resident_bytes() -> int:
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmRSS"))


def test_memory_a_drawing_thread_freed_goes_back_to_the_system():
    kept = []

    def draw():  # a page's frames and figures: many blocks built, drawn, freed; one result kept after them
        # 200 MB through malloc (blocks over pymalloc's 512 B)
        blocks = [bytearray(4096) for _ in range(50_000)]
        # allocated last, it pins the heap's top: free() alone gives nothing back
        kept.append(bytearray(4096))
        del blocks

    thread = threading.Thread(target=draw)
    thread.start()
    thread.join()
    held = resident_bytes()
    assert memory.release()
    assert held - resident_bytes() > 100 * 2**20
    assert len(kept) == 1
