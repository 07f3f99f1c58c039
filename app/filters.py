"""The sidebar's choices, the same for every page (``Filters``), and where the sidebar keeps them.

Its own module because every other part of the dashboard's frame reads it (the sidebar fills it, the page
frame hands it to a page, the cached calls read a run and its scope from it) and it depends on none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

FILTERS = "_rollscope_filters"


@dataclass(frozen=True)
class Filters:
    """The sidebar's choices, the same for every page."""

    store: str
    run_id: str
    runs: tuple[str, ...]
    steps: tuple[int, int] | None  # None: every step, including those still to come
    environment: str | None  # None: every environment
    live_s: int | None  # None: live refresh off
