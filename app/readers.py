"""One reader per run shown, shared by every browser session (``LiveStore``), and its live refresh.

One ``queries.Reader`` per run shown serves every session (``st.cache_resource``, one ``LiveStore`` per
store), reading the run's derived tables from the store; a live refresh catches the run's derived state up
with the segments published since the last one, on a thread of its own, so pages never wait for it. Kept apart
from the result cache (``app.calls``) because it holds the connections and their refresh, which the cache and
the SQL explorer both read.
"""

from __future__ import annotations

import threading
import time

import streamlit as st

from rollscope.app import memory
from rollscope.queries import analyses

memory.limit_arenas()  # before the threads that draw pages exist (app/memory.py)


MIN_REFRESH_S = 1.0  # sessions refreshing the same store more often than this share one refresh


class LiveStore:
    """One Reader per run shown, shared by every session; each reader's ``version`` changes with its data.

    Only the runs a page asks about are opened (a store of a hundred runs costs the one on screen; Compare
    opens the two compared), each reading its derived tables from the store. Results are cached per run
    version (``Reader.version``: new whenever the run's segments or derived state change), so a finished run
    stays cached while another run of the store writes. New data is taken in no more often than the figures of the previous change took to
    compute: on a store where recomputing takes longer than the live interval, the dashboard spends at most
    half its time computing and stays responsive.
    """

    def __init__(self, path: str):
        self.path = path
        self.checked_at = self.changed_at = time.time()
        self.busy_s = 0.0  # seconds spent computing figures since the last change
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()  # opening a run may derive it: not under the refresh's lock
        self._readers: dict[str, object] = {}
        self._memos: dict[str, tuple[tuple, analyses.Memo]] = {}
        self._memos_lock = threading.Lock()  # not the refresh's: a refresh must not hold up the figures
        self._refresher: threading.Thread | None = None  # the catch-up in progress, if any
        self._failed: Exception | None = None  # its error, for the next page to show

    def reader(self, run_id: str):
        """The run's Reader, opened (and its derived state caught up) on first use."""
        reader = self._readers.get(run_id)
        if reader is not None:
            return reader
        with self._open_lock:
            if run_id not in self._readers:
                from rollscope.queries.reader import Reader

                reader = Reader(self.path, run_id=run_id)
                reader.wait = False  # later refreshes read the last published state while another derives
                self._readers[run_id] = reader
            return self._readers[run_id]

    def refresh(self) -> None:
        """Take in the segments published since the last refresh, for the runs open, on a thread of its own
        (rate-limited as above, one at a time). A page never waits for a catch-up, which on a long live run
        takes seconds (its derived state is brought up to date): it draws what was read so far, and the live
        tick after the catch-up draws what it took in. The last catch-up's error is raised here, on a page's
        thread, so the page shows it, until a later catch-up succeeds."""
        with self._lock:
            failed, now = self._failed, time.time()
            due = now - self.checked_at >= MIN_REFRESH_S and now - self.changed_at >= self.busy_s
            if due and not self.refreshing:
                self.checked_at = now
                self._refresher = threading.Thread(
                    target=self._catch_up, args=(now,), name="rollscope-refresh", daemon=True
                )
                self._refresher.start()
        if failed is not None:
            raise failed

    @property
    def refreshing(self) -> bool:
        """Whether a catch-up started by ``refresh`` is still running."""
        return self._refresher is not None and self._refresher.is_alive()

    def _catch_up(self, started: float) -> None:
        try:
            for reader in list(self._readers.values()):
                before = reader.version
                reader.refresh()
                if reader.version != before:  # the reader says what changed; the app lists nothing itself
                    with self._lock:
                        self.changed_at, self.busy_s = started, 0.0
        except Exception as e:  # the pages show it (refresh)
            self._failed = e
        else:
            self._failed = None

    def is_open(self, run_id: str) -> bool:
        return run_id in self._readers

    def version(self, run_id: str) -> int:
        """The version of ``run_id``'s data this store's reader reads (``Reader.version``)."""
        return self.reader(run_id).version

    def memo(self, run_id: str, generation: str) -> analyses.Memo:
        """The analyses computed so far on ``run_id``'s current segments, kept until they change or the
        result cache is cleared (a new ``generation``)."""
        reader = self.reader(run_id)
        with self._memos_lock:
            key = (reader.version, generation)
            kept = self._memos.get(run_id)
            if kept is None or kept[0] != key:
                kept = self._memos[run_id] = (key, analyses.Memo(reader.cursor))
            return kept[1]

    def computed(self, seconds: float) -> None:
        with self._lock:
            self.busy_s += seconds

    def cursor(self, run_id: str):
        return self.reader(run_id).cursor()

    def segment_count(self) -> int:
        """Span segments read, over the runs open."""
        return sum(r.segment_count() for r in list(self._readers.values()))


@st.cache_resource(show_spinner="Loading the store…", max_entries=8)
def live_store(path: str) -> LiveStore:
    return LiveStore(path)
