"""The store exporter and the span processor ``attach()`` puts in front of it.

``StoreSpanExporter`` follows the SDK's ``SpanExporter`` contract exactly: ``export`` returns SUCCESS or
FAILURE and never raises, ``shutdown`` may be called twice, ``force_flush`` returns a bool. It can sit behind
the SDK's own ``BatchSpanProcessor`` like any exporter.

``attach()`` does not use the SDK's ``BatchSpanProcessor``: measured, its queue of span objects cost 7.8 us a
span (the spans, each a dozen objects, wait in the queue and the garbage collector scans them over and over)
on top of ~12 us of conversion, when the whole budget for rollscope is 10 us. ``StoreSpanProcessor`` instead
reads the few fields the store keeps in ``on_end`` (``rows.SpanRecords``: column lists, the span freed
at once) and converts them a batch at a time, column-wise, on one background thread. It keeps every guarantee the
SDK's processor gives: a bounded queue whose overflow is counted (``spans_dropped`` in ``collector_stats``,
never silent), nothing raised into the job, ``force_flush(timeout_millis)`` that returns within its timeout
(False when the spans are not all in the store by then), ``shutdown()`` safe twice, and fork safety (a child
starts with an empty queue and its own thread; the parent's spans stay the parent's).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence

import pyarrow as pa
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from rollscope.collectors.content import ContentPolicy, Transcripts
from rollscope.collectors.rows import SpanColumns, SpanRecords, SpanRows, readable_spans_to_rows
from rollscope.store import arrow_memory
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
    "messages_exported",
    "messages_sampled_out",
)


# Bound methods to run in a forked child, held weakly, in the order registered. One process-wide hook runs
# them: ``os.register_at_fork`` cannot take a hook back, so a hook per object would stay for the life of the
# process, one more for every attach() in a process that attaches many times.
_after_fork: list[weakref.WeakMethod] = []
_after_fork_lock = threading.Lock()


def _reinit_after_fork(init) -> None:
    """Run ``init`` (a bound method) in a forked child, without keeping its object alive in the parent."""
    with _after_fork_lock:
        _after_fork[:] = [m for m in _after_fork if m() is not None]  # the dead go as the living come
        _after_fork.append(weakref.WeakMethod(init))


def _run_after_fork() -> None:
    global _after_fork_lock
    _after_fork_lock = threading.Lock()  # another thread may have held it when the parent forked
    for reinit in list(_after_fork):
        method = reinit()
        if method is not None:
            method()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_run_after_fork)


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
    With ``flush_thread=False`` the owner (``StoreSpanProcessor``) calls :meth:`tick` from its own thread.
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
        flush_thread: bool = True,
        content: ContentPolicy | None = None,
    ):
        self.store = store
        self.default_run_id = default_run_id
        self.resource_defaults = dict(resource_defaults or {})
        self.segment_rows = segment_rows
        self.segment_seconds = segment_seconds
        self.stats_seconds = stats_seconds
        self.compact_seconds = compact_seconds  # None: no background compaction (store.compaction)
        self.identity = dict(identity or {})
        self.content = content or ContentPolicy()
        self.stats = CollectorStats()
        self._flush_thread = flush_thread
        self._shutdown = False
        self._init_process_state()
        _reinit_after_fork(self._init_process_state)

    def _init_process_state(self) -> None:
        """Per process: a forked child gets its own writer name, empty buffers and flush thread."""
        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        # Plain encoding, as the receiver's group commit writes: these segments are small and frequent, and
        # measured on the TRL adapter's 820-span segment (71 columns) dictionaries cost 1.6 ms more a write
        # (4.8 ms against 3.3, zstd) for a file 13 % larger; compaction writes its merged files with dictionaries.
        self._spans = SegmentWriter(
            self.store, "spans", compact_seconds=self.compact_seconds, dictionary=False
        )
        self._stats_writer = SegmentWriter(
            self.store, "collector_stats", compact_seconds=self.compact_seconds, dictionary=False
        )
        self._messages = SegmentWriter(self.store, "messages", compact_seconds=self.compact_seconds)
        self._transcripts = Transcripts(self.content)
        self._buffer: dict[str | None, list[pa.Table]] = {}
        self._message_buffer: dict[str, list[pa.Table]] = {}
        self._buffered = 0
        self._oldest: float | None = None
        self._last_stats: dict[str, int] | None = None
        # The first counters are due ``stats_seconds`` from now (or at a flush), as OpenTelemetry's periodic
        # readers export after their first interval: at the first wake-up they would be zeros, and writing them
        # cost the TRL adapter's tiny run 1.9 ms of CPU half a second into training, beside the job.
        self._last_stats_time = time.monotonic()
        self._wake = threading.Event()
        self._thread = None
        if self._flush_thread:
            self._thread = threading.Thread(target=self._flush_loop, name="rollscope-flush", daemon=True)
            self._thread.start()

    # --- SpanExporter contract ----------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            self.stats.add("spans_failed", len(spans))
            return SpanExportResult.FAILURE
        try:
            rows = readable_spans_to_rows(
                spans, self.default_run_id, resource_defaults=self.resource_defaults
            )
        except Exception:  # the job must never see our failure
            _log_failure("rollscope: could not convert %d spans", len(spans))
            self.stats.add("spans_received", len(spans))
            self.stats.add("spans_failed", len(spans))
            return SpanExportResult.FAILURE
        # From here the spans are buffered: a failure to publish them is counted where it happens.
        return SpanExportResult.SUCCESS if self.add_rows(rows) else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._shutdown:
            return False
        ok = self._publish(timeout_millis / 1000)
        return self._write_stats(force=True) and ok

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True  # the flush thread stops; the SDK has already handed over its last batch
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._publish()
        self._write_stats(force=True)
        self._spans.close()  # this process stops compacting the runs it wrote (store.compaction)
        self._stats_writer.close()
        self._messages.close()

    # --- buffering and publishing -------------------------------------------------------------------------

    def add_rows(self, rows: SpanRows, since: float | None = None) -> bool:
        """Buffer converted spans (``SpanRows``, or what ``SpanColumns.to_rows`` gives; counted as received)
        and publish if a segment is due; False if any publish failed (those spans are counted as failed).
        Never raises. ``since``: when the oldest of them ended (``time.monotonic()``), if earlier than now:
        the age bound counts from then."""
        self.stats.add("spans_received", len(rows))
        try:
            tables = rows.tables()
        except Exception:
            _log_failure("rollscope: could not convert %d spans", len(rows))
            self.stats.add("spans_failed", len(rows))
            return False
        if rows.untyped:
            self.stats.add("attributes_kept_untyped", rows.untyped)
        messages = self._messages_of(rows)
        with self._lock:
            for run_id, table in tables.items():
                self._buffer.setdefault(run_id, []).append(table)
            for run_id, table in messages.items():
                self._message_buffer.setdefault(run_id, []).append(table)
            self._buffered += len(rows)
            now = time.monotonic()
            oldest = min(now, since) if since is not None else now
            if self._oldest is None or oldest < self._oldest:
                self._oldest = oldest
        return self._publish_if_due()

    def _messages_of(self, rows) -> dict[str, pa.Table]:
        """The batch's content as ``messages`` tables per run, under the capture policy (none when it is off).
        A failure here loses the content, never the spans."""
        try:
            sampler = self._transcripts.sampler
            dropped = sampler.dropped if sampler is not None else 0
            tables = self._transcripts.tables(rows.found)
            if sampler is not None and sampler.dropped > dropped:
                self.stats.add("messages_sampled_out", sampler.dropped - dropped)
            return tables
        except Exception:
            _log_failure("rollscope: could not read the content of %d spans", len(rows))
            return {}

    def idle(self) -> bool:
        """Nothing left to do until more spans come: nothing buffered, the counters as last written."""
        with self._lock:
            if self._buffered:
                return False
        return self.default_run_id is None or self.stats.snapshot() == self._last_stats

    def tick(self) -> None:
        """Publish if a segment is due and write the counters if they are: the flush thread's work."""
        self._publish_if_due()
        self._write_stats()

    def _publish_if_due(self) -> bool:
        with self._lock:  # the flush thread empties the buffer concurrently: read it whole, under the lock
            oldest, buffered = self._oldest, self._buffered
        age = time.monotonic() - oldest if oldest is not None else 0.0
        if buffered >= self.segment_rows or age >= self.segment_seconds:
            return self._publish()
        return True

    def _publish(self, timeout: float = -1) -> bool:
        """Publish everything buffered; on failure the spans are counted as failed, never raised.

        One publish at a time: a flush or shutdown that finds the buffer empty must still wait for the
        flush thread's write in flight, or the process could exit before those spans reach the store.
        False if the lock was not had within ``timeout`` seconds (then nothing was published by this call).
        """
        if not self._publish_lock.acquire(timeout=timeout):
            return False
        try:
            return self._publish_buffer()
        finally:
            self._publish_lock.release()

    def _publish_buffer(self) -> bool:
        with self._lock:
            buffer, self._buffer = self._buffer, {}
            messages, self._message_buffer = self._message_buffer, {}
            self._buffered, self._oldest = 0, None
        self._publish_messages(messages)  # first: a span in the store has its content there too
        ok = True
        for run_id, tables in buffer.items():
            rows = sum(t.num_rows for t in tables)
            if run_id is None:
                log.warning("rollscope: %d spans carry no rl.run.id and no default run id; dropped", rows)
                self.stats.add("spans_failed", rows)
                ok = False
                continue
            try:
                self._spans.publish(run_id, pa.concat_tables(tables, memory_pool=arrow_memory.pool()))
            except Exception:
                _log_failure("rollscope: could not publish %d spans to %s", rows, self.store)
                self.stats.add("spans_failed", rows)
                ok = False
                continue
            self.stats.add("spans_exported", rows)
            self.stats.add("segments_published")
        return ok

    def _publish_messages(self, buffer: dict[str, list[pa.Table]]) -> None:
        for run_id, tables in buffer.items():
            try:
                self._messages.publish(run_id, pa.concat_tables(tables, memory_pool=arrow_memory.pool()))
            except Exception:
                _log_failure(
                    "rollscope: could not publish the transcripts of run %s to %s", run_id, self.store
                )
                continue
            self.stats.add("messages_exported", sum(t.num_rows for t in tables))

    def _flush_loop(self) -> None:
        interval = max(0.05, min(self.segment_seconds, self.stats_seconds) / 4)
        while not self._shutdown:
            self._wake.wait(interval)
            if self._shutdown:
                return
            try:
                self.tick()
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


class StoreSpanProcessor(SpanProcessor):
    """Reads each finished span into a flat record and hands batches of them, as columns, to the exporter.

    Why not the SDK's ``BatchSpanProcessor``: see the module docstring. The queue holds at most
    ``max_queue_size`` records; a span that finds it full is dropped and counted in ``spans_dropped``. The
    background thread wakes every ``schedule_delay_millis`` or as soon as ``max_export_batch_size`` records
    wait; it converts them all once a full batch waits, their segment is due, or a flush asks
    (``_convert_due``), and lets the exporter publish the segment. The thread starts with the first span or
    flush, not in ``__init__``: a thread started just before the job's own work disturbs it (the TRL adapter's
    tiny run: TRL's full garbage collection when training starts, ~180 ms, took 4-6 ms longer when it came
    right after ``attach()`` started this thread; 50 ms later it did not), and a processor nothing reaches
    never needs one. For the same reasons it ends once nothing is left for it (queue empty, segments
    published, counters written: after a flush, or ``stats_seconds`` after the last span) and the next span
    or flush starts another: a job that instruments a trainer and trains with it once, or builds several in
    turn, keeps no thread waking twice a second for the rest of the process, each holding its exporter.
    """

    def __init__(
        self,
        exporter: StoreSpanExporter,
        *,
        max_queue_size: int = 65_536,
        max_export_batch_size: int = 8_192,
        schedule_delay_millis: float = 500.0,
    ):
        self._exporter = exporter
        self._max_queue = max_queue_size
        self._wake_at = min(max_export_batch_size, max_queue_size) - 1  # queued before a full batch's last
        self._delay = max(0.001, min(schedule_delay_millis / 1000, exporter.segment_seconds))
        self._shutdown = False
        self._init_process_state()
        _reinit_after_fork(self._init_process_state)

    def _init_process_state(self) -> None:
        """Per process: a forked child starts with an empty queue and its own thread."""
        self._lock = threading.Lock()
        self._queue = SpanRecords()
        self._columns: list[SpanColumns] = []  # queued beside the records (``on_end_columns``)
        self._queued = 0  # len(self._queue) plus the columns' spans, kept here: __len__ is a Python call
        self._first_queued = 0.0
        self._wake = threading.Event()
        self._flushed = threading.Condition()
        self._requested = 0  # force_flush tickets handed out, and the last one the thread completed
        self._completed = 0
        self._results: dict[int, bool] = {}
        self._thread: threading.Thread | None = None  # started by _start, when there is work for it
        self._ended_cpu_ns = 0  # CPU time of this process's threads of this processor that have ended

    def _start(self) -> bool:
        """Start the background thread if it is not running (not after shutdown); whether one now is."""
        with self._lock:
            if self._shutdown:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="rollscope-export", daemon=True)
                self._thread.start()
            return True

    @property
    def thread_cpu_s(self) -> float:
        """CPU seconds this processor's threads have used in this process, the running one's so far included:
        what converting and publishing the spans cost beside the job's own threads (the TRL adapter's
        ``stats``, and its benchmark, report it). Without per-thread clocks (macOS), the ended threads' only."""
        # a thread ends (its time moving to _ended_cpu_ns) under this lock: counted once, no gap
        with self._lock:
            total, thread = self._ended_cpu_ns, self._thread
            if thread is not None and thread.ident is not None:
                try:
                    total += time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
                except (AttributeError, OSError):
                    pass
        return total / 1e9

    # --- SpanProcessor contract ---------------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        """What the job's thread pays per span: its fields appended to column lists, under a lock."""
        try:
            with self._lock:
                queued = self._queued
                kept = queued < self._max_queue and not self._shutdown
                if kept:
                    self._queue.append(span)
                    self._queued = queued + 1
                    if not queued:
                        self._first_queued = time.monotonic()  # the segment's age counts from here
            if not kept:
                self._exporter.count_dropped(1)
                return
            if self._thread is None:
                self._start()
            if queued >= self._wake_at and not self._wake.is_set():
                self._wake.set()
        except Exception:  # the job must never see our failure
            _log_failure("rollscope: could not read a finished span")
            self._exporter.stats.add("spans_failed", 1)

    def on_end_columns(self, columns: SpanColumns) -> None:
        """Queue spans given column-wise (``SpanColumns``: a producer that never made SDK spans), under the
        same bound as ``on_end``: what does not fit is dropped and counted, nothing is raised."""
        try:
            n = len(columns)
            with self._lock:
                queued = self._queued
                kept = 0 if self._shutdown else max(0, min(n, self._max_queue - queued))
                if kept:
                    if not queued:
                        self._first_queued = time.monotonic()
                    self._columns.append(columns if kept == n else columns.head(kept))
                    self._queued = queued + kept
            if kept < n:
                self._exporter.count_dropped(n - kept)
            if kept and self._thread is None:
                self._start()
            if kept and queued + kept > self._wake_at and not self._wake.is_set():
                self._wake.set()
        except Exception:  # the job must never see our failure
            _log_failure("rollscope: could not queue %d spans", len(columns))
            self._exporter.stats.add("spans_failed", len(columns))

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """True once every span that ended before the call is in the store; False if that did not happen
        within ``timeout_millis`` (the spans are still published, later) or publishing failed."""
        if self._shutdown:
            return False
        with self._lock:
            quiet = self._thread is None and not self._queued
        if quiet and self._exporter.idle():  # the last thread ended with every span published, nothing since
            return True
        with self._flushed:  # the ticket first: a thread that sees one pending does not end (_retire_if_idle)
            self._requested += 1
            ticket = self._requested
        if not self._start():  # shut down meanwhile
            return False
        self._wake.set()
        with self._flushed:
            done = self._flushed.wait_for(lambda: self._completed >= ticket, max(0.0, timeout_millis / 1000))
            return done and self._results.get(ticket, True)

    def shutdown(self) -> None:
        """Publish what is queued, write the counters, stop; safe to call twice."""
        if self._shutdown:
            return
        with self._lock:
            self._shutdown = True  # spans ending from now on are counted as dropped
            thread = self._thread
        if thread is not None:
            self._wake.set()
            thread.join(timeout=30)
        else:  # never started: spans queued just before it would have been are converted here
            self._drain()
        self._exporter.shutdown()

    # --- the background thread ----------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._serve()
        finally:
            with self._lock:
                if self._thread is threading.current_thread():  # stopped (or failed); retiring left already
                    self._leave()

    def _leave(self) -> None:
        """This thread ends, under ``_lock``: its CPU time joins the ended threads', ``_start`` may start another."""
        self._ended_cpu_ns += time.thread_time_ns()
        self._thread = None

    def _serve(self) -> None:
        while True:
            self._wake.wait(self._delay)
            self._wake.clear()
            with self._flushed:
                ticket = self._requested  # every span of these flush requests is queued by now
            stopping = self._shutdown
            flushing = ticket > self._completed or stopping
            ok = self._drain() if flushing or self._convert_due() else True
            try:
                if flushing:
                    ok = self._exporter.force_flush() and ok
                else:
                    self._exporter.tick()
            except Exception:
                _log_failure("rollscope: background flush failed")
                ok = False
            if ticket > self._completed:
                with self._flushed:
                    for t in range(self._completed + 1, ticket + 1):
                        self._results[t] = ok
                    self._completed = ticket
                    self._flushed.notify_all()
                    if len(self._results) > 64:
                        self._results = {t: r for t, r in self._results.items() if t > ticket - 64}
            if stopping or self._retire_if_idle():
                return

    def _retire_if_idle(self) -> bool:
        """End the thread (True) if nothing is left for it: no span queued, no flush asked, the exporter idle.
        Decided under both locks, so a span or flush that comes meanwhile either keeps this thread or, finding
        none, starts the next (``_start``)."""
        if not self._exporter.idle():
            return False
        with self._lock, self._flushed:
            if self._queued or self._requested > self._completed or self._shutdown:
                return False
            self._leave()
            return True

    def _convert_due(self) -> bool:
        """Whether the queued records are converted at this wake-up: a full batch waits, or enough of them, or
        old enough ones, for their segment to be published. A conversion costs a fixed ~1 ms of Arrow assembly
        whatever its size (``SpanRows.tables``: 71 columns, one at a time), so records wait in the queue, as
        plain ints, strings and dicts, until their segment is due, rather than being converted at every
        wake-up: a job making a few hundred spans a second (the TRL adapter's tiny run: 820 in 1 s) converts
        once per segment, not twice a second. Segments are published when they were before: at the first
        wake-up after their oldest span is ``segment_seconds`` old, or after a flush."""
        with self._lock:
            queued, since = self._queued, self._first_queued
        if not queued:
            return False
        exporter = self._exporter
        if queued > self._wake_at or queued >= exporter.segment_rows:
            return True
        return time.monotonic() - since >= exporter.segment_seconds

    def _drain(self) -> bool:
        """Convert every queued span and buffer the rows in the exporter; False if publishing failed."""
        with self._lock:
            records, self._queue, self._queued = self._queue, SpanRecords(), 0
            columns, self._columns = self._columns, []
            since = self._first_queued
        batches: list = [records] if len(records) else []
        for block in columns:  # one producer's columns become one table: Arrow assembly is per column
            last = batches[-1] if batches else None
            if (
                isinstance(last, SpanColumns)
                and last.scope is block.scope
                and last.resource is block.resource
            ):
                last.extend(block)
            else:
                batches.append(block)
        exporter, ok = self._exporter, True
        for batch in batches:
            try:
                rows = batch.to_rows(exporter.default_run_id, resource_defaults=exporter.resource_defaults)
            except Exception:
                _log_failure("rollscope: could not convert %d spans", len(batch))
                exporter.stats.add("spans_received", len(batch))
                exporter.stats.add("spans_failed", len(batch))
                ok = False
                continue
            ok = exporter.add_rows(rows, since) and ok
        return ok
