"""The span exporter into the store, and the batch processor it rides on.

It follows the SDK's ``SpanExporter`` contract exactly: ``export`` returns SUCCESS or FAILURE and never
raises, ``shutdown`` may be called twice, ``force_flush`` returns a bool. Batching and queueing stay in the
SDK's ``BatchSpanProcessor``; this module only sizes it for RL rates (the SDK's defaults drop about half the
spans of a tight loop) and counts what it drops, so losses land in ``collector_stats`` instead of a log line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence

import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rollscope.collectors.rows import readable_spans_to_rows
from rollscope.store.layout import SegmentWriter
from rollscope.store.schema import COLLECTOR_STATS_SCHEMA

log = logging.getLogger("rollscope.exporter")
_LOG_EVERY_S = 30.0
_last_logged: dict[str, float] = {}


def _log_failure(message: str, *args) -> None:
    """Log a failure with its traceback at most every 30 s per message: a full disk must not flood the job."""
    now = time.monotonic()
    if now - _last_logged.get(message, -_LOG_EVERY_S) >= _LOG_EVERY_S:
        _last_logged[message] = now
        log.warning(message, *args, exc_info=True)


_STAT_NAMES = (
    "spans_received",
    "spans_exported",
    "spans_dropped",
    "spans_failed",
    "attributes_kept_untyped",
    "segments_published",
)


class CollectorStats:
    """Cumulative counters of one process, written to the store's ``collector_stats`` dataset."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(_STAT_NAMES, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)


class StoreSpanExporter(SpanExporter):
    """Buffers finished spans per run and publishes them as store segments.

    Spans are published once ``segment_rows`` are buffered or the oldest has waited ``segment_seconds``:
    large enough segments keep readers fast, the age bound keeps a live dashboard within seconds of the job.
    """

    def __init__(
        self,
        store,
        *,
        default_run_id: str | None = None,
        resource_defaults: Mapping[str, object] | None = None,
        segment_rows: int = 50_000,
        segment_seconds: float = 2.0,
        stats_seconds: float = 10.0,
        compact_seconds: float | None = None,
        identity: Mapping[str, object] | None = None,
    ):
        self.store = store
        self.default_run_id = default_run_id
        self.resource_defaults = dict(resource_defaults or {})
        self.segment_rows = segment_rows
        self.segment_seconds = segment_seconds
        self.stats_seconds = stats_seconds
        self.compact_seconds = compact_seconds  # None: no background compaction (store.compaction)
        self.identity = dict(identity or {})
        self.stats = CollectorStats()
        self._lock = threading.RLock()
        self._shutdown = False
        self._init_process_state()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._init_process_state)

    def _init_process_state(self) -> None:
        """Per process: a forked child gets its own writer name, empty buffers and flush thread."""
        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        self._spans = SegmentWriter(self.store, "spans", compact_seconds=self.compact_seconds)
        self._stats_writer = SegmentWriter(
            self.store, "collector_stats", compact_seconds=self.compact_seconds
        )
        self._buffer: dict[str | None, list[pa.Table]] = {}
        self._buffered = 0
        self._oldest: float | None = None
        self._last_stats: dict[str, int] | None = None
        self._last_stats_time = 0.0
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._flush_loop, name="rollscope-flush", daemon=True)
        self._thread.start()

    # --- SpanExporter contract ----------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            self.stats.add("spans_failed", len(spans))
            return SpanExportResult.FAILURE
        try:
            self.stats.add("spans_received", len(spans))
            self._add(spans)
            return SpanExportResult.SUCCESS if self._publish_if_due() else SpanExportResult.FAILURE
        except Exception:  # the job must never see our failure
            _log_failure("rollscope: could not export %d spans", len(spans))
            self.stats.add("spans_failed", len(spans))
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._shutdown:
            return False
        ok = self._publish()
        return self._write_stats(force=True) and ok

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True  # the flush thread stops; the SDK has already handed over its last batch
        self._wake.set()
        self._thread.join(timeout=30)
        self._publish()
        self._write_stats(force=True)
        self._spans.close()  # this process stops compacting the runs it wrote (store.compaction)
        self._stats_writer.close()

    # --- buffering and publishing -------------------------------------------------------------------------

    def _add(self, spans: Sequence[ReadableSpan]) -> None:
        rows = readable_spans_to_rows(spans, self.default_run_id, resource_defaults=self.resource_defaults)
        tables = rows.tables()
        if rows.untyped:
            self.stats.add("attributes_kept_untyped", rows.untyped)
        with self._lock:
            for run_id, table in tables.items():
                self._buffer.setdefault(run_id, []).append(table)
            self._buffered += len(rows)
            if self._oldest is None:
                self._oldest = time.monotonic()

    def _publish_if_due(self) -> bool:
        age = time.monotonic() - self._oldest if self._oldest is not None else 0.0
        if self._buffered >= self.segment_rows or age >= self.segment_seconds:
            return self._publish()
        return True

    def _publish(self) -> bool:
        """Publish everything buffered; on failure the spans are counted as failed, never raised.

        One publish at a time: a flush or shutdown that finds the buffer empty must still wait for the
        flush thread's write in flight, or the process could exit before those spans reach the store.
        """
        with self._publish_lock:
            return self._publish_buffer()

    def _publish_buffer(self) -> bool:
        with self._lock:
            buffer, self._buffer = self._buffer, {}
            self._buffered, self._oldest = 0, None
        ok = True
        for run_id, tables in buffer.items():
            rows = sum(t.num_rows for t in tables)
            if run_id is None:
                log.warning("rollscope: %d spans carry no rl.run.id and no default run id; dropped", rows)
                self.stats.add("spans_failed", rows)
                ok = False
                continue
            try:
                self._spans.publish(run_id, pa.concat_tables(tables))
            except Exception:
                _log_failure("rollscope: could not publish %d spans to %s", rows, self.store)
                self.stats.add("spans_failed", rows)
                ok = False
                continue
            self.stats.add("spans_exported", rows)
            self.stats.add("segments_published")
        return ok

    def _flush_loop(self) -> None:
        interval = max(0.05, min(self.segment_seconds, self.stats_seconds) / 4)
        while not self._shutdown:
            self._wake.wait(interval)
            if self._shutdown:
                return
            try:
                self._publish_if_due()
                self._write_stats()
            except Exception:
                _log_failure("rollscope: background flush failed")

    def count_dropped(self, n: int) -> None:
        self.stats.add("spans_dropped", n)

    def _write_stats(self, force: bool = False) -> bool:
        snapshot = self.stats.snapshot()
        now = time.monotonic()
        due = force or now - self._last_stats_time >= self.stats_seconds
        if not due or snapshot == self._last_stats or self.default_run_id is None:
            return True
        row = {
            "time_ns": time.time_ns(),
            "pid": os.getpid(),
            "source": "exporter",
            **{k: self.identity.get(k) for k in ("service_name", "instance_id", "role")},
            **snapshot,
        }
        try:
            table = pa.Table.from_pylist([row], schema=COLLECTOR_STATS_SCHEMA)
            self._stats_writer.publish(self.default_run_id, table)
        except Exception:
            _log_failure("rollscope: could not write collector stats")
            return False
        self._last_stats, self._last_stats_time = snapshot, now
        return True


class _CountingMetrics:
    """Wraps the SDK processor's metrics hook so every queue-full drop is also counted in the store."""

    def __init__(self, inner, exporter: StoreSpanExporter):
        self._inner = inner
        self._exporter = exporter

    def drop_items(self, count: int, error_type: str = "queue_full") -> None:
        self._exporter.count_dropped(count)
        self._inner.drop_items(count, error_type)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class StoreSpanProcessor(BatchSpanProcessor):
    """The SDK's BatchSpanProcessor, sized for RL span rates, counting what it drops."""

    def __init__(
        self,
        exporter: StoreSpanExporter,
        *,
        max_queue_size: int,
        max_export_batch_size: int,
        schedule_delay_millis: float,
    ):
        super().__init__(
            exporter,
            max_queue_size=max_queue_size,
            max_export_batch_size=max_export_batch_size,
            schedule_delay_millis=schedule_delay_millis,
        )
        self._store_exporter = exporter
        batch = getattr(self, "_batch_processor", None)
        if batch is not None and hasattr(batch, "_metrics"):
            batch._metrics = _CountingMetrics(batch._metrics, exporter)
        else:  # an SDK without the hook: drops are still logged by the SDK, just not counted
            log.warning("rollscope: this opentelemetry-sdk hides its drop counter; drops will not be counted")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Hand the queue to the exporter, then publish its buffer: flushed spans are readable on return."""
        queued = super().force_flush(timeout_millis)
        return self._store_exporter.force_flush(timeout_millis) and queued
