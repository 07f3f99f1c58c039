"""Turning finished spans into store rows: the one mapping the exporter and the OTLP receiver share.

A span means the same thing whichever way it came in: convention attributes land in their typed column,
everything else is kept as JSON in ``attributes`` / ``resource_attributes``. A value of the wrong type is
coerced when that loses nothing (``"3"`` into an int column) and otherwise kept, untyped, in the JSON column:
ingestion never fails on an attribute.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.trace import SpanKind, StatusCode

from rollscope import semconv
from rollscope.collectors.content import EVENT, Found
from rollscope.store.arrow_memory import pool
from rollscope.store.schema import SPAN_FIELDS, SPAN_SCHEMA

_CONVENTIONS = semconv.by_name()
_SPAN_COLUMNS = {name: a.column for name, a in _CONVENTIONS.items() if a.where != "resource"}
_RESOURCE_COLUMNS = {a.name: a.column for a in semconv.RESOURCE_ATTRIBUTES}
_ALIASES = {alias for a in semconv.ALL_ATTRIBUTES for alias in a.aliases}
_TYPES = {field.name: field.type for field in SPAN_SCHEMA}
_RESOURCE_COLUMN_NAMES = tuple(c for c in _RESOURCE_COLUMNS.values() if c != "run_id")
_SPAN_ONLY = tuple(dict.fromkeys(_SPAN_COLUMNS.values()))
_ATTRIBUTE_OF_COLUMN = {a.column: a.name for a in semconv.ALL_ATTRIBUTES}
_POOL = pool()  # every array made here comes from it: see rollscope.store.arrow_memory
_CONTENT_EVENTS = {*semconv.CONTENT_EVENTS, semconv.CONTENT_DETAILS_EVENT}


@dataclass(frozen=True)
class ResourceRow:
    """A resource's columns, computed once per resource rather than once per span."""

    run_id: str | None
    values: tuple  # aligned with _RESOURCE_COLUMN_NAMES
    extras: str | None

    @classmethod
    def from_attributes(
        cls, attributes: Mapping[str, object], default_run_id: str | None = None
    ) -> ResourceRow:
        """Values coerced to their column's type; one that cannot be is kept in ``resource_attributes``
        (a sender's ``rl.compute.devices="eight"`` must not fail a batch it shares with others)."""
        extras = {k: v for k, v in attributes.items() if k not in _RESOURCE_COLUMNS}
        values = []
        for column in _RESOURCE_COLUMN_NAMES:
            name = _ATTRIBUTE_OF_COLUMN[column]
            raw = attributes.get(name)
            value = coerce(raw, _TYPES[column])
            if raw is not None and value is None:
                extras[name] = raw
            values.append(value)
        run_id = attributes.get(semconv.RUN_ID) or default_run_id
        return cls(
            run_id=str(run_id) if run_id is not None else None,
            values=tuple(values),
            extras=dumps(extras) if extras else None,
        )


class SpanRows:
    """Column buffers for one batch of spans, turned into one Arrow table per run.

    Convention columns are kept sparse (row numbers and values) because most spans carry a handful of the
    ~50 conventions; the dense columns are assembled in Arrow, not in Python, which keeps the per-span cost
    of the exporter and the receiver to a few microseconds.
    """

    def __init__(self) -> None:
        self._fixed: dict[str, list] = {f.name: [] for f in SPAN_FIELDS}
        self._resources: list[ResourceRow] = []
        self._resource_ids: dict[int, int] = {}
        self._resource_of_row: list[int] = []
        # row numbers as int64 arrays: a batch's rows are copied in as bytes, never made into Python ints
        self._sparse: dict[str, tuple[array, list]] = {c: (array("q"), []) for c in _SPAN_ONLY}
        self._extras: dict[int, dict] = {}
        self._events: tuple[list[int], list[str]] = ([], [])
        self._content: dict[int, list[tuple[str, object]]] = {}  # row: content entries (collectors.content)
        self.found: Found | None = (
            None  # set by tables(): this batch's spans and content, for the transcripts
        )
        self.untyped = 0  # convention attributes kept as JSON because their type was wrong
        self._ascending = True  # every sparse column's rows in ascending order (so a full one needs no take)

    def __len__(self) -> int:
        return len(self._resource_of_row)

    def add(
        self,
        resource: ResourceRow,
        *,
        trace_id: bytes,
        span_id: int,
        parent_span_id: int | None,
        name: str,
        span_kind: str,
        start_ns: int,
        end_ns: int,
        status_code: str,
        status_message: str | None,
        scope_name: str | None,
        attributes: Mapping[str, object],
        events: list | None = None,
    ) -> None:
        row = len(self._resource_of_row)
        fixed = self._fixed
        fixed["trace_id"].append(trace_id)
        fixed["span_id"].append(span_id)
        fixed["parent_span_id"].append(parent_span_id)
        fixed["name"].append(name)
        fixed["span_kind"].append(span_kind)
        fixed["start_ns"].append(start_ns)
        fixed["end_ns"].append(end_ns)
        fixed["status_code"].append(status_code)
        fixed["status_message"].append(status_message or None)
        fixed["scope_name"].append(scope_name or None)
        self._resource_of_row.append(self._resource_index(resource))
        if events:
            self._add_events(row, events)
        self._add_attributes(row, attributes)

    def extend(
        self,
        resources: list[ResourceRow],
        fixed: dict[str, list],
        attributes: Iterable[Mapping[str, object]],
        events: dict[int, list] | None = None,
    ) -> None:
        """Add a whole batch given column-wise (the fast path: one comprehension per field, not per span).

        ``resources`` holds each row's resource; ``events`` maps batch rows to their event lists.
        """
        first = len(self._resource_of_row)
        for name, values in fixed.items():
            self._fixed[name].extend(values)
        distinct = {id(r): r for r in resources}
        index = {key: self._resource_index(r) for key, r in distinct.items()}
        self._resource_of_row.extend(map(index.__getitem__, map(id, resources)))
        for row, row_events in (events or {}).items():
            self._add_events(first + row, row_events)
        self._add_attribute_batch(first, attributes)

    def _add_events(self, row: int, events: list[dict]) -> None:
        """A span's events: GenAI content events are set aside with its content, the rest kept as JSON."""
        kept = []
        for event in events:
            name = event.get("name")
            if name in _CONTENT_EVENTS:
                self._content.setdefault(row, []).append((EVENT + name, event.get("attributes")))
            else:
                kept.append(event)
        if kept:
            self._events[0].append(row)
            self._events[1].append(dumps(kept))

    def _add_attribute_batch(self, first: int, attributes: Iterable[Mapping[str, object]]) -> None:
        """Spans grouped by their attribute names, then each group's values moved a column at a time.

        Spans of one kind carry the same names in the same order (every turn span of a job sets the same
        fields), so a batch holds a handful of groups and the per-span work is one ``tuple(keys)``; which
        name goes to which column is planned once per group (``_plan``), the values move with ``map``. A
        group's row numbers are copied into each of its columns as int64 bytes, not as Python ints.
        """
        attributes = attributes if isinstance(attributes, list | tuple) else list(attributes)
        names = list(map(tuple, attributes))
        if not names:
            return
        groups: dict[tuple, tuple] = {}
        if names.count(names[0]) == len(names):  # the common case, checked in C: one kind of span
            groups[names[0]] = (np.arange(first, first + len(names), dtype=np.int64), attributes)
        else:
            for row, (keys, attrs) in enumerate(zip(names, attributes, strict=True), first):
                group = groups.get(keys)
                if group is None:
                    group = groups[keys] = ([], [])
                group[0].append(row)
                group[1].append(attrs)
        if len(groups) > 1:
            self._ascending = False  # a column's rows now come group by group
        sparse = self._sparse
        for keys, (rows, dicts) in groups.items():
            if not keys:
                continue
            columns, extras, content = _plan(keys)
            row_bytes = array("q", rows).tobytes() if isinstance(rows, list) else rows.tobytes()
            for i, column in columns:  # a column at a time, in C: no per-span object is made
                column_rows, column_values = sparse[column]
                column_rows.frombytes(row_bytes)
                column_values.extend(map(itemgetter(keys[i]), dicts))
            if extras:
                names = [key for _, key in extras]
                pick = itemgetter(*names)
                for row, d in zip(array("q", row_bytes), dicts, strict=True):
                    picked = pick(d)
                    self._extras[row] = dict(zip(names, picked if len(names) > 1 else (picked,), strict=True))
            if content:
                names = [key for _, key in content]
                for row, d in zip(array("q", row_bytes), dicts, strict=True):
                    self._content.setdefault(row, []).extend((key, d[key]) for key in names)

    def _resource_index(self, resource: ResourceRow) -> int:
        index = self._resource_ids.get(id(resource))
        if index is None:
            index = self._resource_ids[id(resource)] = len(self._resources)
            self._resources.append(resource)
        return index

    def _add_attributes(self, row: int, attributes: Mapping[str, object]) -> None:
        sparse = self._sparse
        extras = None
        aliased = None
        for key, value in attributes.items():
            column = _SPAN_COLUMNS.get(key)
            if column is None:
                if semconv.is_content(key):
                    self._content.setdefault(row, []).append((key, value))
                    continue
                if extras is None:
                    extras = self._extras.setdefault(row, {})
                extras[key] = value
            elif key in _ALIASES:
                aliased = aliased or {}
                aliased[key] = (column, value)
            else:
                rows, values = sparse[column]
                rows.append(row)
                values.append(value)
        for key, (column, value) in (aliased or {}).items():
            rows, values = sparse[column]
            if rows and rows[-1] == row:  # the canonical name came too and wins; keep the alias as JSON
                self._extras.setdefault(row, {})[key] = value
            else:
                rows.append(row)
                values.append(value)

    def tables(self) -> dict[str | None, pa.Table]:
        """One table per run id (``None`` for spans that named no run)."""
        n = len(self)
        resource_of_row = pa.array(self._resource_of_row, pa.int32(), memory_pool=_POOL)
        columns: dict[str, pa.Array] = {
            f.name: pa.array(self._fixed[f.name], f.type, memory_pool=_POOL) for f in SPAN_FIELDS
        }
        columns.update(resource_columns(self._resources, resource_of_row))
        for column, (rows, values) in self._sparse.items():
            if rows:
                columns[column] = _scatter(rows, self._typed(column, rows, values), n, self._ascending)
            else:
                columns[column] = _nulls(_TYPES[column], n)
        extras = self._extras
        attributes = pa.array([dumps(e) for e in extras.values()], pa.string(), memory_pool=_POOL)
        columns["attributes"] = _scatter(list(extras), attributes, n, False)
        events = pa.array(self._events[1], pa.string(), memory_pool=_POOL)
        columns["events"] = _scatter(self._events[0], events, n, True)
        table = pa.Table.from_arrays([columns[name] for name in SPAN_SCHEMA.names], schema=SPAN_SCHEMA)
        self.found = self._found(table)
        return self._split_by_run(table, resource_of_row)

    def _found(self, table: pa.Table) -> Found:
        runs, of_row = [r.run_id for r in self._resources], self._resource_of_row
        content = self._content
        return Found(table, lambda row: runs[of_row[row]], list(content), list(content.values()))

    def _split_by_run(self, table: pa.Table, resource_of_row: pa.Array) -> dict[str | None, pa.Table]:
        runs = [r.run_id for r in self._resources]
        if len(set(runs)) <= 1:
            return {runs[0] if runs else None: table}
        run_ids = pa.array(runs, pa.string(), memory_pool=_POOL)
        run_of_row = pc.take(run_ids, resource_of_row, memory_pool=_POOL)
        masks = {run: pc.equal(run_of_row, run, memory_pool=_POOL) for run in set(runs) if run is not None}
        if None in runs:
            masks[None] = pc.is_null(run_of_row, memory_pool=_POOL)
        return {run: pc.filter(table, mask, memory_pool=_POOL) for run, mask in masks.items()}

    def _typed(self, column: str, rows: Sequence[int], values: list) -> pa.Array:
        arrow_type = _TYPES[column]
        try:
            return pa.array(values, arrow_type, memory_pool=_POOL)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return pa.array(self._coerce_column(column, rows, values), arrow_type, memory_pool=_POOL)

    def _coerce_column(self, column: str, rows: Sequence[int], values: list) -> list:
        """Slow path, taken only for a column holding a wrong-typed value."""
        arrow_type = _TYPES[column]
        attribute = _ATTRIBUTE_OF_COLUMN[column]
        out = []
        for row, value in zip(rows, values, strict=True):
            coerced = coerce(value, arrow_type)
            if value is not None and coerced is None:
                self.untyped += 1
                self._extras.setdefault(row, {})[attribute] = value
            out.append(coerced)
        return out


def resource_columns(resources: list[ResourceRow], resource_of_row: pa.Array) -> dict[str, pa.Array]:
    """Each row's resource columns (``resource_attributes`` included), ``resource_of_row`` indexing
    ``resources``: a resource's values are typed once, then taken per row. With one resource (one process's
    batch, the common case) each value is repeated instead: ``pc.take``'s Python wrapper costs ~15 us a column
    (it reads the environment on each call)."""
    if len(resources) == 1:
        (resource,) = resources
        n = len(resource_of_row)
        columns = {
            column: _repeat(value, n, _TYPES[column])
            for column, value in zip(_RESOURCE_COLUMN_NAMES, resource.values, strict=True)
        }
        columns["resource_attributes"] = _repeat(resource.extras, n)
        return columns
    columns = {}
    for i, column in enumerate(_RESOURCE_COLUMN_NAMES):
        per_resource = pa.array([r.values[i] for r in resources], _TYPES[column], memory_pool=_POOL)
        columns[column] = pc.take(per_resource, resource_of_row, memory_pool=_POOL)
    extras = pa.array([r.extras for r in resources], pa.string(), memory_pool=_POOL)
    columns["resource_attributes"] = pc.take(extras, resource_of_row, memory_pool=_POOL)
    return columns


def _scatter(rows: Sequence[int], values: pa.Array, n: int, ascending: bool) -> pa.Array:
    """A length-n column with ``values`` at ``rows`` (distinct; ``ascending`` when known to be sorted) and
    nulls elsewhere."""
    if len(rows) == n and ascending:
        return values
    if not rows:
        return _nulls(values.type, n)
    index = np.full(n, -1, dtype=np.int64)
    rows = rows if isinstance(rows, array) else array("q", rows)
    index[np.frombuffer(rows, dtype=np.int64)] = np.arange(len(rows), dtype=np.int64)
    if len(rows) == n:  # every row has a value, in another order
        return pc.take(values, pa.array(index, memory_pool=_POOL), memory_pool=_POOL)
    return pc.take(values, pa.array(index, mask=index < 0, memory_pool=_POOL), memory_pool=_POOL)


_NULLS: dict[pa.DataType, pa.Array] = {}


def _nulls(arrow_type: pa.DataType, n: int) -> pa.Array:
    """An all-null column, sliced (zero-copy) from one kept per type: most convention columns are empty."""
    held = _NULLS.get(arrow_type)
    if held is None or len(held) < n:
        held = _NULLS[arrow_type] = pa.nulls(max(n, 1 << 16), arrow_type, memory_pool=_POOL)
    return held.slice(0, n)


_PLANS: dict[tuple, tuple[list, list]] = {}


def _plan(keys: tuple) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[tuple[int, str]]]:
    """Where each of these attribute names goes: ``(index, column)`` pairs, ``(index, name)`` extras and
    ``(index, name)`` content (``semconv.is_content``: set aside for the transcripts, never kept in a span).

    An alias goes to its column unless the canonical name (or an earlier alias) already filled it; then it
    is kept, as JSON, after the other extras.
    """
    plan = _PLANS.get(keys)
    if plan is not None:
        return plan
    columns, extras, content, aliased, taken = [], [], [], [], set()
    for i, key in enumerate(keys):
        column = _SPAN_COLUMNS.get(key)
        if column is None:
            (content if semconv.is_content(key) else extras).append((i, key))
        elif key in _ALIASES:
            aliased.append((i, key, column))
        else:
            columns.append((i, column))
            taken.add(column)
    for i, key, column in aliased:
        if column in taken:
            extras.append((i, key))
        else:
            columns.append((i, column))
            taken.add(column)
    if len(_PLANS) >= 4096:  # a sender inventing names per span must not grow this without bound
        _PLANS.clear()
    plan = _PLANS[keys] = (columns, extras, content)
    return plan


def coerce(value: object, arrow_type: pa.DataType) -> object:
    """Coerce when nothing is lost; otherwise None (the caller keeps the original as JSON)."""
    if value is None:
        return None
    try:
        if pa.types.is_string(arrow_type):
            return str(value) if isinstance(value, str | int | float | bool) else None
        if pa.types.is_floating(arrow_type):
            return (
                float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
            )
        if pa.types.is_integer(arrow_type):
            if isinstance(value, bool):
                return int(value)
            number = float(value) if isinstance(value, str | float) else value
            if isinstance(number, float) and number.is_integer():
                number = int(number)
            return number if isinstance(number, int) and -(2**63) <= number < 2**64 else None
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _jsonable(value: object) -> object:
    if isinstance(value, tuple | list):
        return list(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


# One encoder for every row: ``json.dumps`` with arguments builds a new one per call, which was ~40 % of the
# cost of a small attribute dict's JSON (the TRL adapter's turns and samples: 2.4 -> 1.4 us each); same output.
_ENCODER = json.JSONEncoder(default=_jsonable, separators=(",", ":"))


def dumps(value: object) -> str:
    return _ENCODER.encode(value)


_KIND_NAMES = {kind: kind.name.lower() for kind in SpanKind}
_STATUS_NAMES = {code: code.name.lower() for code in StatusCode}
_KIND_BY_ID = {id(kind): name for kind, name in _KIND_NAMES.items()}  # members are singletons
_STATUS_BY_ID = {id(code): name for code, name in _STATUS_NAMES.items()}


def readable_spans_to_rows(
    spans: Iterable, default_run_id: str | None, *, resource_defaults: Mapping[str, object] | None = None
) -> SpanRows:
    """SDK ``ReadableSpan`` objects into rows (the in-process exporter's path).

    ``resource_defaults`` fills resource attributes a job's own TracerProvider did not set (attach() added
    to an existing provider cannot change its resource).
    """
    records = SpanRecords()
    for span in spans:
        records.append(span)
    return records.to_rows(default_run_id, resource_defaults=resource_defaults)


_RECORD_FIELDS = (
    "trace_ids",
    "span_ids",
    "parents",
    "names",
    "kinds",
    "starts",
    "ends",
    "codes",
    "messages",
    "scopes",
    "resources",
    "attributes",
    "events",
)


def record(span) -> tuple:
    """What the store keeps of a finished SDK span, as one tuple (fields in ``_RECORD_FIELDS`` order).

    This runs on the job's thread for every span (``StoreSpanProcessor.on_end``), so it reads the SDK's
    private fields, a fifth of the cost of its public properties (pinned by tests/test_sdk_contract.py), and
    keeps only ints, strings, the attribute dict and objects every span shares: the span itself is freed at
    once. An SDK whose fields differ takes the public path.
    """
    try:
        context, parent, status = span._context, span._parent, span._status
        events = span._events
        return (
            context.trace_id,
            context.span_id,
            parent.span_id if parent is not None else None,
            span._name,
            span._kind,
            span._start_time,
            span._end_time,
            status._status_code,
            status._description,
            span._instrumentation_scope,
            span._resource,
            span._attributes._dict,
            tuple(events) if events._dq else None,  # the deque: BoundedList's len() is a Python call
        )
    except AttributeError:
        context, parent, status, events = span.context, span.parent, span.status, span.events
        return (
            context.trace_id,
            context.span_id,
            parent.span_id if parent is not None else None,
            span.name,
            span.kind,
            span.start_time,
            span.end_time,
            status.status_code,
            status.description,
            span.instrumentation_scope,
            span.resource,
            _plain_attributes(span),
            tuple(events) if events else None,
        )


class SpanRecords:
    """Finished spans as column lists: what ``StoreSpanProcessor.on_end`` keeps of each span.

    ``append`` reads the dozen fields the store keeps (``record``) and lets the span go: nothing per span is
    kept but ints, strings and the attribute dict, none of which the garbage collector tracks, and the lists
    are turned into rows a column at a time (``to_rows``). A list of one tuple per span would spare
    ``on_end`` its lock (one append is atomic), but each tuple holds the span's kind and scope, so the
    collector tracks and scans every waiting one: measured, that cost more than the lock it saves.
    """

    __slots__ = ("columns", *_RECORD_FIELDS)

    def __init__(self) -> None:
        self.columns = tuple([] for _ in _RECORD_FIELDS)
        for name, column in zip(_RECORD_FIELDS, self.columns, strict=True):
            setattr(self, name, column)

    def __len__(self) -> int:
        return len(self.ends)

    def append(self, span) -> None:
        """Keep one finished span's fields (all read before a list grows: the columns stay aligned)."""
        (trace_id, span_id, parent, name, kind, start, end, code, message, scope, resource, attrs,
         events) = record(span)  # fmt: skip
        (trace_ids, span_ids, parents, names, kinds, starts, ends, codes, messages, scopes, resources,
         attributes, events_) = self.columns  # fmt: skip
        trace_ids.append(trace_id)
        span_ids.append(span_id)
        parents.append(parent)
        names.append(name)
        kinds.append(kind)
        starts.append(start)
        ends.append(end)
        codes.append(code)
        messages.append(message)
        scopes.append(scope)
        resources.append(resource)
        attributes.append(attrs)
        events_.append(events)

    def to_rows(
        self, default_run_id: str | None, *, resource_defaults: Mapping[str, object] | None = None
    ) -> SpanRows:
        """The records as rows, a column at a time: the in-process exporter's path."""
        rows = SpanRows()
        if not len(self):
            return rows
        (trace_ids, span_ids, parents, names, kinds, starts, ends, codes, messages, scopes, resources,
         attributes, events) = self.columns  # fmt: skip
        scope_names = {
            key: sc.name if sc is not None else None for key, sc in {id(sc): sc for sc in scopes}.items()
        }
        resource_rows = {
            id(r): ResourceRow.from_attributes({**(resource_defaults or {}), **r.attributes}, default_run_id)
            for r in {id(r): r for r in resources}.values()
        }
        fixed = {
            "trace_id": list(map(int.to_bytes, trace_ids, repeat(16), repeat("big"))),
            "span_id": span_ids,
            "parent_span_id": parents,
            "name": names,
            "span_kind": list(map(_KIND_BY_ID.__getitem__, map(id, kinds))),  # Enum hashing is Python
            "start_ns": starts,
            "end_ns": ends,
            "status_code": list(map(_STATUS_BY_ID.__getitem__, map(id, codes))),
            "status_message": [m or None for m in messages] if any(messages) else [None] * len(messages),
            "scope_name": list(map(scope_names.__getitem__, map(id, scopes))),
        }
        with_events = (
            {i: [_event(e) for e in row] for i, row in enumerate(events) if row} if any(events) else None
        )
        rows.extend(list(map(resource_rows.__getitem__, map(id, resources))), fixed, attributes, with_events)
        return rows


class SpanColumns:
    """Finished spans given a kind at a time, each field as a column: for a producer that records many spans
    of a few kinds after the fact, in bulk (the TRL adapter: a round's rollouts, then their turns, then their
    rewards).

    Where ``SpanRecords`` keeps a row of fields and an attribute dict per span, a block here is one list per
    attribute and the ids as lists, and ``to_rows`` assembles each column once for every block: measured on
    the adapter's tiny run (820 spans), building the spans and their table took ~6 ms of CPU, against ~10 ms
    as records. The rows are the ones the SDK path writes for the same spans (tests/test_trl.py): internal
    spans, status unset, one scope and one resource (the tracer's and the provider's), attribute names
    mapped to columns by ``_plan`` as every other path maps them, the others kept as JSON in their order.
    """

    def __init__(self, scope, resource) -> None:
        self.scope = scope
        self.resource = resource
        self._blocks: list[tuple] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(
        self,
        name: str,
        trace_ids: list[bytes],
        span_ids: list[int],
        parent_ids: list[int] | None,
        starts: Sequence[int],
        ends: Sequence[int],
        attributes: Mapping[str, Sequence],
    ) -> None:
        """``len(span_ids)`` spans named ``name``: ``trace_ids`` 16 bytes each, ``parent_ids`` ``None`` for
        roots, ``attributes`` one equal-length list per attribute name, ``None`` where a span has none."""
        n = len(span_ids)
        if not n:
            return
        keys = tuple(attributes)
        columns, extras, content = _plan(keys)
        values = [attributes[key] for key in keys]
        kept = {column: values[i] for i, column in columns}
        rows = None
        if extras:
            names = [key for _, key in extras]
            rows = _json_rows(names, zip(*[values[i] for i, _ in extras], strict=True))
        entries = None
        if content:  # per span, its content entries (collectors.content), None values left out
            named = [(key, values[i]) for i, key in content]
            entries = [[(key, v[j]) for key, v in named if v[j] is not None] for j in range(n)]
        self._blocks.append((name, n, trace_ids, span_ids, parent_ids, starts, ends, kept, rows, entries))
        self._n += n

    def head(self, count: int) -> SpanColumns:
        """The first ``count`` spans (what fits a bounded queue)."""
        kept = SpanColumns(self.scope, self.resource)
        for name, n, traces, ids, parents, starts, ends, columns, rows, entries in self._blocks:
            m = min(n, count - kept._n)
            if m <= 0:
                break
            cut = {column: values[:m] for column, values in columns.items()}
            block = (name, m, traces[:m], ids[:m], parents and parents[:m], starts[:m], ends[:m], cut)
            kept._blocks.append((*block, rows and rows[:m], entries and entries[:m]))
            kept._n += m
        return kept

    def extend(self, other: SpanColumns) -> None:
        """Take ``other``'s blocks (same scope and resource) after these."""
        self._blocks.extend(other._blocks)
        self._n += other._n

    def to_rows(
        self, default_run_id: str | None, *, resource_defaults: Mapping[str, object] | None = None
    ) -> _ColumnRows:
        resource = ResourceRow.from_attributes(
            {**(resource_defaults or {}), **self.resource.attributes}, default_run_id
        )
        return _ColumnRows(self, resource)


class _ColumnRows:
    """``SpanColumns`` with its resource row: what the exporter buffers (``tables()``, ``untyped``, len)."""

    def __init__(self, columns: SpanColumns, resource: ResourceRow) -> None:
        self._columns = columns
        self._resource = resource
        self.untyped = 0
        self.found: Found | None = None  # set by tables(), as SpanRows sets it

    def __len__(self) -> int:
        return len(self._columns)

    def tables(self) -> dict[str | None, pa.Table]:
        blocks, n = self._columns._blocks, len(self._columns)
        scope = self._columns.scope
        traces, span_ids, parents, names = [], [], [], []
        for block in blocks:
            traces += block[2]
            span_ids += block[3]
            parents += block[4] or [None] * block[1]
            names += [block[0]] * block[1]
        out: dict[str, pa.Array] = {
            "trace_id": pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(16), n, [None, pa.py_buffer(b"".join(traces))]
            ),
            "span_id": pa.array(span_ids, pa.uint64(), memory_pool=_POOL),
            "parent_span_id": pa.array(parents, pa.uint64(), memory_pool=_POOL),
            "name": pa.array(names, pa.string(), memory_pool=_POOL),
        }
        for field, value in (("span_kind", "internal"), ("status_code", "unset")):
            out[field] = _repeat(value, n)
        out["status_message"] = _nulls(pa.string(), n)
        out["scope_name"] = _repeat(getattr(scope, "name", None), n)
        for field, position in (("start_ns", 5), ("end_ns", 6)):
            times: list = []
            for block in blocks:
                times += block[position]
            out[field] = pa.array(times, pa.int64(), memory_pool=_POOL)
        out.update(resource_columns([self._resource], _repeat(0, n, pa.int32())))
        extras: list = [None] * n  # per row: the attributes kept as JSON
        filled: dict[str, list] = {}  # each convention column some block has, its values placed at their rows
        row = 0
        for block in blocks:
            end = row + block[1]
            if block[8]:
                extras[row:end] = block[8]
            for column, values in block[7].items():
                column_values = filled.get(column)
                if column_values is None:
                    column_values = filled[column] = [None] * n
                column_values[row:end] = values
            row = end
        for column in _SPAN_ONLY:
            values = filled.get(column)
            out[column] = _nulls(_TYPES[column], n) if values is None else self._typed(column, values, extras)
        if any(extras):
            out["attributes"] = pa.array(extras, pa.string(), memory_pool=_POOL)
        else:
            out["attributes"] = _nulls(pa.string(), n)
        out["events"] = _nulls(pa.string(), n)
        table = pa.Table.from_arrays([out[name] for name in SPAN_SCHEMA.names], schema=SPAN_SCHEMA)
        self.found = self._found(table)
        return {self._resource.run_id: table}

    def _found(self, table: pa.Table) -> Found:
        run, rows, entries, row = self._resource.run_id, [], [], 0
        for block in self._columns._blocks:
            if block[9]:
                for i, span_entries in enumerate(block[9]):
                    if span_entries:
                        rows.append(row + i)
                        entries.append(span_entries)
            row += block[1]
        return Found(table, lambda _: run, rows, entries)

    def _typed(self, column: str, values: list, extras: list) -> pa.Array:
        """The column in its type; a value that is not (and cannot be coerced without loss) is kept as JSON in
        its row's ``attributes``, as ``SpanRows`` keeps it."""
        arrow_type = _TYPES[column]
        try:
            return pa.array(values, arrow_type, memory_pool=_POOL)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
        attribute = _ATTRIBUTE_OF_COLUMN[column]
        coerced = [coerce(value, arrow_type) for value in values]
        for row, (value, typed) in enumerate(zip(values, coerced, strict=True)):
            if value is not None and typed is None:
                self.untyped += 1
                extras[row] = dumps({**(json.loads(extras[row]) if extras[row] else {}), attribute: value})
        return pa.array(coerced, arrow_type, memory_pool=_POOL)


def _repeat(value: object, n: int, arrow_type: pa.DataType | None = None) -> pa.Array:
    """``n`` copies of one value (or nulls; a string unless ``arrow_type``), without a Python list of them."""
    arrow_type = arrow_type or pa.string()
    if value is None:
        return _nulls(arrow_type, n)
    return pa.repeat(pa.scalar(value, arrow_type), n, memory_pool=_POOL)


def _json_rows(names: list[str], rows: Iterable[tuple]) -> list[str | None]:
    """Each row's values under ``names`` as a JSON object (None values left out; None if nothing is left);
    equal rows are encoded once: a block's spans repeat a few (a turn's finish reasons)."""
    done: dict = {}
    out = []
    for row in rows:
        try:  # the values' types in the key: True == 1 == 1.0 must not share an encoding
            key = (row, tuple(map(type, row)))
            text = done.get(key, False)
        except TypeError:  # an unhashable value
            key, text = None, False
        if text is False:
            fields = {k: v for k, v in zip(names, row, strict=True) if v is not None}
            text = dumps(fields) if fields else None
            if key is not None:
                done[key] = text
        out.append(text)
    return out


def _plain_attributes(span) -> Mapping[str, object]:
    """The span's attribute dict itself: the public property wraps it in two mapping layers whose Python-level
    iteration costs more than the rest of the conversion (a private read, with the public one as fallback)."""
    raw = getattr(span, "_attributes", None)
    if raw is None:
        return span.attributes or {}
    return getattr(raw, "_dict", raw)


def _event(event) -> dict:
    return {"name": event.name, "time_ns": event.timestamp, "attributes": dict(event.attributes or {})}
