"""The OpenTelemetry SDK's private fields rollscope reads for speed (collectors/rows.py), pinned here.

``SpanRecords.append`` and ``_plain_attributes`` read a finished span's private fields (a fifth of the cost
of its public properties) and fall back to the public ones when they are missing, so a new SDK that moves
them would silently make every span several times slower to record. pyproject.toml pins the SDK's major
version; this test fails loudly, naming the field, when one of them moves or changes meaning.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from rollscope.collectors.rows import SpanRecords, _plain_attributes

# private field -> the public property it stands for
FIELDS = {
    "_context": "context",
    "_parent": "parent",
    "_status": "status",
    "_events": "events",
    "_name": "name",
    "_kind": "kind",
    "_start_time": "start_time",
    "_end_time": "end_time",
    "_instrumentation_scope": "instrumentation_scope",
    "_resource": "resource",
}


def finished_span():
    keep = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("contract")
    turn = {"attributes": {"rl.turn.index": 2}}
    with tracer.start_as_current_span("rl.rollout"), tracer.start_as_current_span("rl.turn", **turn) as span:
        span.add_event("retry", {"attempt": 1})
        span.set_status(Status(StatusCode.ERROR, "timeout"))
    return next(s for s in keep.get_finished_spans() if s.name == "rl.turn")


def test_the_private_fields_rows_reads_are_the_public_ones():
    span = finished_span()
    for private, public in FIELDS.items():
        assert hasattr(span, private), f"the SDK's ReadableSpan has no {private} any more (rows.py reads it)"
        got, expected = getattr(span, private), getattr(span, public)
        assert tuple(got) == tuple(expected) if private == "_events" else got == expected, private
    status = span._status
    assert (status._status_code, status._description) == (status.status_code, status.description)
    assert type(span._attributes._dict) is dict, "the SDK's BoundedAttributes no longer keeps a plain _dict"
    assert _plain_attributes(span) is span._attributes._dict
    assert dict(_plain_attributes(span)) == dict(span.attributes) == {"rl.turn.index": 2}


def test_records_take_the_private_path_and_keep_what_the_public_one_gives():
    span = finished_span()
    records = SpanRecords()
    records.append(span)
    assert records.attributes[0] is span._attributes._dict  # the dict itself: the fast path was taken
    assert (records.names, records.codes) == (["rl.turn"], [StatusCode.ERROR])
    assert records.trace_ids == [span.context.trace_id] and records.parents == [span.parent.span_id]


def test_a_spans_events_are_read_through_the_deque_rows_checks():
    """``rows.record`` asks the events' deque whether there are any (``BoundedList.__len__`` is a Python
    call on every span); a span with events and one without read back as the public property gives them."""
    with_events = finished_span()
    assert type(with_events._events._dq).__name__ == "deque", "the SDK's BoundedList no longer keeps _dq"
    plain = next(s for s in _spans_of(lambda tracer: tracer.start_span("plain").end()) if s.name == "plain")
    records = SpanRecords()
    records.append(with_events)
    records.append(plain)
    assert records.events == [tuple(with_events.events), None]
    assert [e.name for e in records.events[0]] == ["retry"]


def _spans_of(emit) -> list:
    keep = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    emit(provider.get_tracer("contract"))
    return list(keep.get_finished_spans())
