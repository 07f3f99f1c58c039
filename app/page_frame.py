"""The frame every page is drawn in: its title and purpose, clear empty states, errors and the live refresh.

``page`` stops a page with a message when the store holds no runs; ``live`` runs the page's body in a fragment
that re-reads new segments and redraws; a section with nothing for the selection raises ``NothingToShow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from rollscope.app import memory
from rollscope.app.filters import FILTERS, Filters
from rollscope.app.readers import LiveStore, live_store
from rollscope.app.sidebar import store_path
from rollscope.errors import RollscopeError
from rollscope.store import layout


class NothingToShow(Exception):  # noqa: N818 (not an error: a page with no data for this selection yet)
    """Raised by a page section when the selection has nothing for it; the page shows the message instead."""


def page(title: str, what: str) -> Filters:
    """The page's title and one-line purpose, then its filters; stops with a message when there are none."""
    st.title(title)
    st.caption(what)
    filters = st.session_state.get(FILTERS)
    if filters is None:
        _explain_no_runs(store_path())
        st.stop()
    return filters


def _explain_no_runs(path: Path) -> None:
    if not path.exists():
        st.error(f"No store at `{path}`: nothing has been written there yet.")
    elif not path.is_dir():
        st.error(f"`{path}` is a file, not a rollscope store directory.")
        return
    else:
        st.info(f"The store at `{path}` holds no runs yet.")
    st.caption(
        "Start a job with `attach(store=...)` or `rollscope simulate`; this page checks every few seconds."
    )
    _wait_for_runs(str(path))


@st.fragment(run_every=2)
def _wait_for_runs(path: str) -> None:
    if Path(path).is_dir() and layout.run_ids(path):
        st.rerun()


def live(body: Callable[[Filters], None], filters: Filters) -> None:
    """Run ``body`` in a fragment that re-reads new segments and redraws every ``live_s`` seconds."""

    @st.fragment(run_every=filters.live_s)
    def refreshed() -> None:
        store = live_store(filters.store)
        try:
            store.refresh()  # a catch-up's error shows here, as the page's own would
            body(filters)
        except NothingToShow as message:
            st.info(str(message))
        except RollscopeError as e:
            st.error(f"**{e.title}**: {e}")
            return
        finally:
            memory.release()  # what drawing the page freed goes back to the system (app/memory.py)
        if filters.live_s:
            st.caption(_live_line(store, filters.live_s))

    refreshed()


def _live_line(store: LiveStore, every_s: int) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(store.checked_at))
    line = f"Live: {store.segment_count():,} segments read, checked {stamp}, every {every_s} s."
    if store.refreshing and time.time() - store.checked_at >= 1.0:  # a catch-up, not a listing
        line += " Taking in new segments: the figures update when that is done."
    if store.busy_s > every_s:
        line += (
            f" Recomputing takes about {store.busy_s:.0f} s here, so new data is taken in at most that often."
        )
    return line


def show_error(error: RollscopeError) -> None:
    st.error(f"**{error.title}**: {error}")
