"""Group commit: where accepted spans wait, for at most a short window, before one durable segment holds them.

The receiver answers 200 only once a request's spans are in a segment published with fsync (file and
directory), so ``kill -9`` or a power cut never loses an acknowledged span. Publishing each request alone
would cost an fsync and a Parquet file per request; instead requests that arrive within ``window`` seconds of
each other, or while the previous commit is being written, share one segment per run. A window also waits
(up to ``window`` again) for requests whose bodies are in and being decoded (``expect``): each segment costs
a few milliseconds of CPU whatever its size (Parquet's per-column work, Arrow's per-column assembly), so a
commit that left behind a request arriving a millisecond later would pay them once more for it.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rollscope.collectors.content import ContentPolicy, Transcripts
from rollscope.collectors.otlp import Decoded
from rollscope.collectors.rows import SpanRows
from rollscope.store.layout import SegmentWriter

log = logging.getLogger("rollscope.receiver")

Done = Callable[[BaseException | None], None]


class GroupCommit:
    """Requests' spans added to one ``SpanRows`` per run; one thread publishes them and calls each back."""

    def __init__(
        self,
        store: Path | str,
        *,
        window: float = 0.05,
        max_rows: int = 200_000,
        compact_seconds: float | None = None,
        content: ContentPolicy | None = None,
    ):
        self.store = Path(store)
        self.window = window
        self.max_rows = max_rows
        self.segments_published = 0
        self.segments_by_run: dict[str, int] = {}
        self.untyped_by_run: dict[str, int] = {}
        self.messages_by_run: dict[str, int] = {}
        self._writer = SegmentWriter(
            self.store, "spans", durable=True, compact_seconds=compact_seconds, dictionary=False
        )
        self._messages = SegmentWriter(self.store, "messages", durable=True, compact_seconds=compact_seconds)
        self._transcripts = Transcripts(content or ContentPolicy())
        self._rows: dict[str, SpanRows] = {}
        self._waiting: list[tuple[Done, set[str]]] = []  # each request's callback and the runs it added to
        self._expected = 0  # requests announced by expect() and not yet submitted (or given up)
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="rollscope-commit", daemon=True)
        # One empty segment to memory: the first Parquet write imports pandas (~0.2 s), not a request.
        self._writer.write(SpanRows().tables()[None], io.BytesIO())
        self._thread.start()

    def expect(self) -> None:
        """A request's body is in and its spans are on their way (``submit``, or ``unexpect`` if it fails):
        an open window waits for them rather than commit without them."""
        with self._cond:
            self._expected += 1

    def unexpect(self) -> None:
        """An expected request will not be submitted (malformed, refused, nothing to store)."""
        with self._cond:
            self._expected -= 1
            if not self._expected and self._waiting:
                self._cond.notify()

    def submit(self, decoded: Decoded, done: Done, *, expected: bool = False) -> None:
        """Add a request's spans to the open batch; ``done(None)`` is called from the commit thread once
        they are durable, ``done(error)`` if publishing failed. ``expected``: announced by ``expect()``."""
        with self._cond:
            if expected:
                self._expected -= 1
            if self._closed:
                raise RuntimeError("the receiver is shutting down")
            decoded.add_to(self._rows_of)
            self._waiting.append((done, {part.resource.run_id for part in decoded.parts}))
            # Wake the commit thread only when it waits for a first request, for the last expected one, or
            # the batch is full: during a window it sleeps until the window ends anyway, and a wake-up per
            # request costs it a thread switch and a re-check each time.
            if len(self._waiting) == 1 or not self._expected or self._pending() >= self.max_rows:
                self._cond.notify()

    def _rows_of(self, run_id: str) -> SpanRows:
        rows = self._rows.get(run_id)
        if rows is None:
            rows = self._rows[run_id] = SpanRows()
        return rows

    def close(self) -> None:
        """Commit what is queued, then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self._writer.close()
        self._messages.close()

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            rows, waiting = batch
            errors = self._commit(rows)
            for done, runs in waiting:
                done(next((errors[r] for r in runs if r in errors), None))

    def _next_batch(self) -> tuple[dict[str, SpanRows], list] | None:
        """Wait for a first request, then up to ``window`` seconds for others to join it, and up to
        ``window`` more for expected ones still being decoded."""
        with self._cond:
            while not self._waiting and not self._closed:
                self._cond.wait()
            if not self._waiting:
                return None
            now = time.monotonic()
            deadline, latest = now + self.window, now + 2 * self.window
            while (
                not self._closed
                and self._pending() < self.max_rows
                and (left := (deadline if not self._expected else latest) - time.monotonic()) > 0
            ):
                self._cond.wait(left)
            batch = (self._rows, self._waiting)
            self._rows, self._waiting = {}, []
            return batch

    def _pending(self) -> int:
        return sum(len(rows) for rows in self._rows.values())

    def _publish_messages(self, rows: SpanRows) -> None:
        """The batch's content (``messages``, under the capture policy). A failure loses the content, logged,
        never the spans or the requests' answers: a client retrying would send the same content again."""
        try:
            for run_id, table in self._transcripts.tables(rows.found).items():
                self._messages.publish(run_id, table)
                self.messages_by_run[run_id] = self.messages_by_run.get(run_id, 0) + table.num_rows
        except Exception:
            log.exception("rollscope collect: could not write the transcripts of %d spans", len(rows))

    def _commit(self, batch: dict[str, SpanRows]) -> dict[str, BaseException]:
        """Publish one segment per run (its messages first, when its spans carried content); a run that fails
        fails only the requests that added to it."""
        errors = {}
        for run_id, rows in batch.items():
            try:
                tables = rows.tables()
                self._publish_messages(rows)
                for table in tables.values():
                    self._writer.publish(run_id, table)
            except Exception as e:  # those requests answer 503 and their clients retry
                log.exception(
                    "rollscope collect: could not publish spans of run %s to %s", run_id, self.store
                )
                errors[run_id] = e
                continue
            self.segments_published += 1
            self.segments_by_run[run_id] = self.segments_by_run.get(run_id, 0) + 1
            self.untyped_by_run[run_id] = self.untyped_by_run.get(run_id, 0) + rows.untyped
        return errors
