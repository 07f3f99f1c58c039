"""Fast mode: the plan's records turned into Arrow columns directly and written through the store's writer.

The normal mode replays every record through ``attach()`` and the OpenTelemetry SDK in worker processes,
which is what a user's job does and what the tests of the collectors path rely on; it costs the SDK's ~20 us
a span. A benchmark store of tens of millions of spans does not need that path exercised again, so fast mode
builds the same rows without it: each simulated process gets the resource ``attach()`` would have given it
(``collectors.wiring.process_resource``), records go through the same row builder the exporter uses
(``collectors.rows.SpanRows``) and segments are published by the store layer's ``SegmentWriter``. The rows
are the ones the normal mode writes (``tests/test_simulator.py`` compares their digests); only segment
boundaries, writer names and ``process.pid`` differ. The Parquet write runs on a second thread (it releases
the GIL), so planning goes on meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from rollscope.collectors.rows import ResourceRow, SpanRows
from rollscope.collectors.wiring import process_resource
from rollscope.store.layout import SegmentWriter
from rollscope.store.schema import COLLECTOR_STATS_SCHEMA

SEGMENT_ROWS = 250_000
_SCOPE = "rollscope"  # the tracer name attach()'s helpers use


class FastPool:
    """Stands in for ``emit.Pool``: same calls (``send``, ``finish``, ``emitted``), no worker processes."""

    def __init__(self, store: str, run_id: str, assignment: list[list[dict]], settings: dict):
        self.store = Path(store)
        self.run_id = run_id
        self.processes = {p["key"]: p for procs in assignment for p in procs}
        self.resources = {
            key: ResourceRow.from_attributes(_resource_attributes(store, run_id, p, settings), run_id)
            for key, p in self.processes.items()
        }
        self.counts: Counter = Counter()
        self.segments: Counter = Counter()
        self._writer = SegmentWriter(self.store, "spans")
        self._rows = SpanRows()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._pending: list[str] = []  # process keys of the rows being written

    @property
    def emitted(self) -> int:
        return sum(self.counts.values())

    def wait_ready(self, tick=None) -> None:
        pass

    def send(self, records: dict[str, list[tuple]], tick=None) -> None:
        for key, recs in records.items():
            if recs:
                self._add(self.resources[key], recs)
                self.counts[key] += len(recs)
                self._pending.append(key)
        if len(self._rows) >= SEGMENT_ROWS:
            self._publish()

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

    def _publish(self) -> None:
        """Convert on this thread, write on the writer thread (one write in flight)."""
        self._join()
        rows, self._rows = self._rows, SpanRows()
        keys, self._pending = set(self._pending), []
        if not len(rows):
            return
        (table,) = rows.tables().values()
        self._thread = threading.Thread(target=self._write, args=(table, keys), daemon=True)
        self._thread.start()

    def _write(self, table: pa.Table, keys: set[str]) -> None:
        try:
            self._writer.publish(self.run_id, table)
            for key in keys:
                self.segments[key] += 1
        except BaseException as e:  # raised on the planning thread by the next _join
            self._error = e

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def finish(self, tick=None) -> dict[str, dict]:
        """Write what is left and one ``collector_stats`` row per simulated process, as its exporter would."""
        self._publish()
        self._join()
        stats = {key: self._stats(key) for key in self.processes}
        rows = [
            {
                "time_ns": time.time_ns(),
                "pid": os.getpid(),
                "source": "exporter",
                "service_name": p["service_name"],
                "instance_id": p["instance_id"],
                "role": p["role"],
                **stats[key],
            }
            for key, p in self.processes.items()
        ]
        SegmentWriter(self.store, "collector_stats").publish(
            self.run_id, pa.Table.from_pylist(rows, schema=COLLECTOR_STATS_SCHEMA)
        )
        return stats

    def _stats(self, key: str) -> dict[str, int]:
        n = self.counts[key]
        return {
            "spans_received": n,
            "spans_exported": n,
            "spans_dropped": 0,
            "spans_failed": 0,
            "attributes_kept_untyped": 0,
            "segments_published": self.segments[key],
        }

    def terminate(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _resource_attributes(store: str, run_id: str, process: dict, settings: dict) -> dict:
    """The resource ``emit.Emitter``'s attach() call gives this process."""
    resource = process_resource(
        store=store,
        run_id=run_id,
        role=process["role"],
        devices=process["devices"],
        service_name=process["service_name"],
        model_name=process["model_name"],
        model_parameters=process["model_parameters"],
        algorithm=settings["algorithm"],
        staleness_bound=settings["staleness_bound"],
        resource_attributes={"service.instance.id": process["instance_id"]},
    )
    return dict(resource.attributes)
