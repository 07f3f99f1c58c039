"""The direct writer (fast mode): the plan's spans as Arrow columns, published through the store's writer.

The normal mode replays every span through ``attach()`` and the OpenTelemetry SDK in worker processes,
which is what a user's job does and what the tests of the collectors path rely on; it costs the SDK's ~20 us
a span. A benchmark store of tens of millions of spans does not need that path exercised again, so fast mode
builds the same rows without it: each simulated process gets the resource ``attach()`` would have given it
(``collectors.attaching.process_resource``); the step's span tables (turns and tool calls, most spans)
become Arrow arrays straight from their numpy columns, its few records go through the row builder the
exporter uses (``collectors.rows.SpanRows``), and segments are published by the store layer's
``SegmentWriter``. The rows are the ones the normal mode writes (``tests/test_simulator.py`` compares
them); only segment boundaries, writer names and ``process.pid`` differ. What the spans said goes the same
way: the step's messages are rendered column-wise into ``messages`` rows (``simulator.transcripts.table``,
the rows the exporter makes of the helpers' content arguments) and published before the spans they belong
to, as the exporter publishes them. The parent plans and keeps the
ground truth while one spawned writer process converts and publishes, so the two overlap on two cores.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

from rollscope.collectors.attaching import process_resource
from rollscope.collectors.rows import ResourceRow, SpanRows, resource_columns
from rollscope.simulator import transcripts
from rollscope.simulator.emit import attach_arguments
from rollscope.simulator.records import SpanTable, StepSpans, Strings
from rollscope.store.layout import SegmentWriter
from rollscope.store.schema import COLLECTOR_STATS_SCHEMA, SPAN_FIELDS, SPAN_SCHEMA

SEGMENT_ROWS = 250_000
_SCOPE = "rollscope"  # the tracer name attach()'s helpers use


class FastPool:
    """Stands in for ``emit.Pool``: same calls (``send``, ``finish``, ``emitted``), one writer process.

    The parent plans; the writer process (spawned, like the normal mode's workers) turns records into rows
    and publishes segments, so on two cores planning and writing overlap.
    """

    def __init__(self, store: str, run_id: str, assignment: list[list[dict]], settings: dict):
        self.store = Path(store)
        self.run_id = run_id
        self.processes = {p["key"]: p for procs in assignment for p in procs}
        resources = {
            key: ResourceRow.from_attributes(_resource_attributes(store, run_id, p, settings), run_id)
            for key, p in self.processes.items()
        }
        self.counts: Counter = Counter()
        ctx = multiprocessing.get_context("spawn")
        self._inbox = ctx.Queue(maxsize=4)
        self._outbox = ctx.Queue()
        self._worker = ctx.Process(
            target=_write, args=(str(store), run_id, resources, self._inbox, self._outbox), daemon=True
        )
        self._worker.start()

    @property
    def emitted(self) -> int:
        return sum(self.counts.values())

    def wait_ready(self, tick=None) -> None:
        pass

    def send(self, spans: StepSpans, tick=None) -> None:
        self._put(spans, tick)
        self.counts.update(spans.counts())

    def _put(self, item, tick) -> None:
        while True:
            self._check()
            try:
                self._inbox.put(item, timeout=0.2)
                return
            except queue.Full:
                if tick:
                    tick()

    def _check(self) -> None:
        try:
            status, payload = self._outbox.get_nowait()
        except queue.Empty:
            status, payload = None, None
        if status is None:
            if not self._worker.is_alive() and self._worker.exitcode not in (None, 0):
                raise RuntimeError(f"the fast-mode writer died with exit code {self._worker.exitcode}")
            return
        if status == "error":
            raise RuntimeError(f"the fast-mode writer failed:\n{payload}")
        self._outbox.put((status, payload))  # a result, read by finish()

    def finish(self, tick=None) -> dict[str, dict]:
        """Wait for the writer to publish the spans, then one ``collector_stats`` row per simulated process,
        as its exporter would (the writer writes those too: this process never converts to Arrow)."""
        self._put({"counts": dict(self.counts), "processes": self.processes, "pid": os.getpid()}, tick)
        while True:
            try:
                status, payload = self._outbox.get(timeout=0.2)
                break
            except queue.Empty:
                self._check()
                if tick:
                    tick()
        if status == "error":
            raise RuntimeError(f"the fast-mode writer failed:\n{payload}")
        self._worker.join()
        return payload

    def terminate(self) -> None:
        if self._worker.is_alive():
            self._worker.terminate()


def _publish_stats(store: str, run_id: str, finish: dict, segments: Counter) -> dict[str, dict]:
    """One ``collector_stats`` row per simulated process; returns each one's stats."""
    stats = {key: _stats(finish["counts"].get(key, 0), segments[key]) for key in finish["processes"]}
    rows = [
        {
            "time_ns": time.time_ns(),
            "pid": finish["pid"],
            "source": "exporter",
            "service_name": p["service_name"],
            "instance_id": p["instance_id"],
            "role": p["role"],
            **stats[key],
        }
        for key, p in finish["processes"].items()
    ]
    SegmentWriter(store, "collector_stats").publish(
        run_id, pa.Table.from_pylist(rows, schema=COLLECTOR_STATS_SCHEMA)
    )
    return stats


def _stats(n: int, segments: int) -> dict[str, int]:
    return {
        "spans_received": n,
        "spans_exported": n,
        "spans_dropped": 0,
        "spans_failed": 0,
        "attributes_kept_untyped": 0,
        "segments_published": segments,
    }


def _write(store: str, run_id: str, resources: dict[str, ResourceRow], inbox, outbox) -> None:
    """The writer process: steps' spans until the parent's closing counts; answers stats per process."""
    try:
        writer = _Writer(store, run_id, resources)
        while isinstance(batch := inbox.get(), StepSpans):
            writer.add(batch)
        writer.publish()
        writer.join()
        outbox.put(("ok", _publish_stats(store, run_id, batch, writer.segments)))
    except BaseException:
        outbox.put(("error", traceback.format_exc()))


class _Writer:
    """Tables into Arrow, records into one ``SpanRows``; every ``SEGMENT_ROWS`` rows, one segment written by
    a thread (Parquet releases the GIL), one write in flight."""

    def __init__(self, store: str, run_id: str, resources: dict[str, ResourceRow]):
        self.run_id = run_id
        self.resources = resources
        self.segments: Counter = Counter()
        self._writer = SegmentWriter(store, "spans")
        # text is not worth a dictionary (distinct values): plain encoding, as compaction rewrites it anyway
        self._messages_writer = SegmentWriter(store, "messages", dictionary=False)
        self._rows = SpanRows()
        self._tables: list[pa.Table] = []
        self._messages: list[pa.Table] = []
        self._table_rows = 0
        self._keys: set[str] = set()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def add(self, spans: StepSpans) -> None:
        for key, recs in spans.records.items():
            if recs:
                self._add(self.resources[key], recs)
        for table in spans.tables:
            self._tables.append(arrow_table(table, self.resources))
            self._table_rows += len(table)
        if spans.messages is not None and len(spans.messages):
            self._messages.append(transcripts.table(spans.messages))
        self._keys.update(spans.counts())
        if len(self._rows) + self._table_rows >= SEGMENT_ROWS:
            self.publish()

    def _add(self, resource: ResourceRow, recs: list[tuple]) -> None:
        names, starts, ends, trace_ids, span_ids, parents, attributes, errors = zip(*recs, strict=True)
        n = len(recs)
        fixed = {
            "trace_id": [t.to_bytes(16, "big") for t in trace_ids],
            "span_id": span_ids,
            "parent_span_id": parents,
            "name": names,
            "span_kind": ["internal"] * n,
            "start_ns": starts,
            "end_ns": ends,
            "status_code": ["unset" if e is None else "error" for e in errors],
            "status_message": errors,
            "scope_name": [_SCOPE] * n,
        }
        self._rows.extend([resource] * n, fixed, attributes)

    def publish(self) -> None:
        self.join()
        rows, self._rows = self._rows, SpanRows()
        tables, self._tables, self._table_rows = self._tables, [], 0
        messages, self._messages = self._messages, []
        keys, self._keys = self._keys, set()
        if len(rows):
            tables.extend(rows.tables().values())
        if not tables:
            return
        table = pa.concat_tables(tables)
        said = pa.concat_tables(messages) if messages else None
        self._thread = threading.Thread(target=self._publish, args=(table, said, keys), daemon=True)
        self._thread.start()

    def _publish(self, table: pa.Table, messages: pa.Table | None, keys: set[str]) -> None:
        try:
            if messages is not None:  # first: a span in the store has its content there too
                self._messages_writer.publish(self.run_id, messages)
            self._writer.publish(self.run_id, table)
            for key in keys:
                self.segments[key] += 1
        except BaseException as e:  # raised by the next join
            self._error = e

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error


def _resource_attributes(store: str, run_id: str, process: dict, settings: dict) -> dict:
    """The resource ``emit.Emitter``'s attach() call gives this process."""
    resource = process_resource(
        **attach_arguments(store, run_id, process, settings["algorithm"], settings["staleness_bound"])
    )
    return dict(resource.attributes)


def arrow_table(t: SpanTable, resources: dict[str, ResourceRow]) -> pa.Table:
    """A span table as store rows, column by column from its arrays: what ``SpanRows`` makes of the same
    spans as records (``tests/test_simulator.py`` compares the two)."""
    n = len(t)
    failed = t.error.present()
    trace = np.ascontiguousarray(t.trace_id.astype(">u8")).tobytes()
    columns: dict[str, pa.Array] = {
        "trace_id": pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(trace)]),
        "span_id": pa.array(t.span_id, pa.uint64()),
        "parent_span_id": pa.array(t.parent_span_id, pa.uint64(), mask=t.parent_span_id == 0),
        "name": _strings(t.name),
        "span_kind": _constant("internal", n),
        "start_ns": pa.array(t.start_ns, pa.int64()),
        "end_ns": pa.array(t.end_ns, pa.int64()),
        "status_code": _strings(Strings(failed.astype(np.int32), ["unset", "error"])),
        "status_message": _strings(t.error),
        "scope_name": _constant(_SCOPE, n),
    }
    columns.update(
        resource_columns([resources[p] for p in t.process], pa.array(t.key.astype(np.int32), pa.int32()))
    )
    fixed = {f.name for f in SPAN_FIELDS} | set(columns)
    for field in SPAN_SCHEMA:
        if field.name in fixed:
            continue
        values = t.attributes.get(field.name)
        if values is None:
            columns[field.name] = pa.nulls(n, field.type)
            continue
        if isinstance(values, Strings):
            columns[field.name] = _strings(values)
            continue
        valid = t.valid.get(field.name)
        columns[field.name] = pa.array(values, field.type, mask=None if valid is None else ~valid)
    return pa.Table.from_arrays([columns[name] for name in SPAN_SCHEMA.names], schema=SPAN_SCHEMA)


def _constant(value: str, n: int) -> pa.Array:
    return _strings(Strings.constant(value, n))


def _strings(column: Strings) -> pa.Array:
    """A string column from its codes: each distinct value converted once, then taken per row."""
    return pa.array(column.values, pa.string()).take(pa.array(column.codes))
