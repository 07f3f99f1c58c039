"""A page's independent figures computed at once on a few threads of its session (``at_once``, ``Figures``).

Apart from the cached calls (``app.calls``) it runs: this is a matter of threads and Streamlit's script
context, not of what is computed or cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
AT_ONCE_THREADS = 4  # a page's independent figures computed together (DuckDB releases the GIL)


def at_once(calls: dict[str, Callable[[], T]]) -> Figures:
    """Each of ``calls`` (a page's ``analysis`` / ``call`` figures, independent of each other) started at once on
    a few threads of the page's session, so the page draws the first while the others compute. A page's
    figures are small queries over per-step tables (parse, bind and plan on the calling thread, then a short
    scan), which one after another leave a core idle; a chart's Python work overlaps them too. Figures two
    calls share are computed once (``analyses.Memo``). A figure's error is raised where it is read."""
    from concurrent.futures import ThreadPoolExecutor

    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

    context = get_script_run_ctx()

    def one(call: Callable[[], T]) -> T:
        add_script_run_ctx(ctx=context)  # the cache and spinner belong to the page's session
        return call()

    pool = ThreadPoolExecutor(
        max_workers=max(1, min(len(calls), AT_ONCE_THREADS)), thread_name_prefix="rollscope-page"
    )
    try:
        return Figures({name: pool.submit(one, call) for name, call in calls.items()})
    finally:
        pool.shutdown(wait=False)  # the threads end once the figures are computed


class Figures:
    """A page's figures being computed (``at_once``). ``figures[name]`` waits for that one; ``next(figures)``
    gives ``(name, result)`` of the next in the order asked, and iterating the rest, so a page can draw each
    section as soon as its own figures are ready, in its own order."""

    def __init__(self, futures: dict) -> None:
        self._futures = futures
        self._order = iter(futures)

    def __getitem__(self, name):
        return self._futures[name].result()

    def __contains__(self, name) -> bool:  # whether it was asked for (without it, ``in`` would iterate)
        return name in self._futures

    def __iter__(self) -> Figures:
        return self

    def __next__(self) -> tuple:
        name = next(self._order)
        return name, self[name]
