"""The RL span helpers returned by ``attach()``: context managers for rollouts, turns, tools, rewards, ...

Keyword arguments are the store's column names (``input_tokens=``, ``environment=``), the same words users
type in SQL, and become the convention attributes (``gen_ai.usage.input_tokens``, ``rl.environment.name``).
Child spans of a rollout get its ``rl.rollout.id`` automatically, so turns, tools and rewards join to their
rollout without walking parent ids. Every helper accepts ``start_time`` / ``end_time`` in Unix nanoseconds
for jobs (and the simulator) that record spans after the fact.

Content goes in the same way, under natural names: ``rl.turn(input=..., output=...)``, ``span.set(output=...)``
once the reply is in, ``rl.tool(name, arguments=..., result=...)``, ``rl.judge(prompt=..., rationale=...)``
(text, a message dict or a list of messages). They become GenAI's content attributes, which the store keeps
apart from the spans (``collectors.content``); with capture off they are not even set.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.trace import Span, Status, StatusCode

from rollscope import semconv
from rollscope.collectors.content import encode, encode_text

_ATTRIBUTE_OF = {a.column: a.name for a in semconv.SPAN_ATTRIBUTES}
# Content keyword arguments: the attribute each sets and the source its text is encoded for (None: as text).
CONTENT_FIELDS = {
    "system": ("gen_ai.system_instructions", "system"),
    "input": ("gen_ai.input.messages", "input"),
    "output": ("gen_ai.output.messages", "output"),
    "prompt": ("gen_ai.input.messages", "input"),  # a judge's
    "rationale": ("gen_ai.output.messages", "output"),  # a judge's
    "arguments": ("gen_ai.tool.call.arguments", None),
    "result": ("gen_ai.tool.call.result", None),
}
_current_rollout: ContextVar[str | None] = ContextVar("rollscope_rollout", default=None)


def content_attributes(fields: dict, capture: bool) -> dict:
    """Pop the content keyword arguments out of ``fields``; their attributes when ``capture``, else none."""
    out = {}
    for key in [k for k in fields if k in CONTENT_FIELDS]:
        value = fields.pop(key)
        if capture and value is not None:
            name, source = CONTENT_FIELDS[key]
            out[name] = encode(value, source) if source is not None else encode_text(value)
    return out


def attributes_from_fields(fields: dict) -> dict:
    """Column-named keyword arguments to convention attributes; None values are left out."""
    out = {}
    for key, value in fields.items():
        name = _ATTRIBUTE_OF.get(key)
        if name is None:
            raise TypeError(f"unknown field {key!r}; use a column from docs/semconv.md or attributes={{...}}")
        if value is not None:
            out[name] = value
    return out


class RLSpan:
    """An OpenTelemetry span that also takes column-named fields: ``span.set(reward=1.0)``."""

    def __init__(self, span: Span, capture: bool = True):
        self.span = span
        self.capture = capture
        self.fields_set: set[str] = set()

    def set(self, **fields) -> RLSpan:
        """Column-named fields, and content (``output=``, ``result=``, ...), on the span."""
        content = content_attributes(fields, self.capture)
        self.span.set_attributes({**attributes_from_fields(fields), **content})
        self.fields_set.update(k for k, v in fields.items() if v is not None)
        return self

    def __getattr__(self, name):
        return getattr(self.span, name)


class RL:
    """Span helpers bound to one tracer; also flushes and shuts down the store exporter."""

    def __init__(self, tracer, provider, processor, exporter, settings):
        self.tracer = tracer
        self.provider = provider
        self.processor = processor
        self.exporter = exporter
        self.settings = settings
        self.run_id = exporter.default_run_id
        self.capture = exporter.content.enabled  # content keyword arguments are dropped when off

    @contextmanager
    def span(
        self, name: str, *, start_time=None, end_time=None, attributes=None, **fields
    ) -> Iterator[RLSpan]:
        """Any span, with fields, content and raw attributes; the building block of the helpers below."""
        content = content_attributes(fields, self.capture)
        attrs = {**(attributes or {}), **attributes_from_fields(fields), **content}
        rollout_id = _current_rollout.get()
        if rollout_id is not None:
            attrs.setdefault(semconv.ROLLOUT_ID, rollout_id)
        with self.tracer.start_as_current_span(
            name, attributes=attrs, start_time=start_time, end_on_exit=False
        ) as otel_span:
            wrapped = RLSpan(otel_span, self.capture)
            wrapped.fields_set.update(fields)
            try:
                yield wrapped
            except Exception as exc:
                # What the SDK's use_span does on an exception, done here because the span ends here (at
                # end_time), before use_span sees it: an ended span takes no status, so it stayed "unset".
                otel_span.record_exception(exc)
                otel_span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise
            finally:
                otel_span.end(end_time=end_time)

    @contextmanager
    def rollout(self, rollout_id: str | None = None, **fields) -> Iterator[RLSpan]:
        """One attempt at a task. An exception inside marks it ``infra_error`` unless a status was set."""
        rollout_id = rollout_id or uuid.uuid4().hex
        token = _current_rollout.set(rollout_id)
        try:
            with self.span(semconv.ROLLOUT, attributes={semconv.ROLLOUT_ID: rollout_id}, **fields) as span:
                try:
                    yield span
                except BaseException:
                    if "rollout_status" not in span.fields_set:
                        span.set(rollout_status=semconv.ROLLOUT_INFRA_ERROR)
                    raise
        finally:
            _current_rollout.reset(token)

    def turn(self, turn_index: int | None = None, **fields):
        return self.span(semconv.TURN, turn_index=turn_index, **fields)

    def tool(self, tool_name: str, **fields):
        attributes = {semconv.OPERATION_NAME: semconv.TOOL_PREFIX, **fields.pop("attributes", {})}
        return self.span(
            f"{semconv.TOOL_PREFIX} {tool_name}", tool_name=tool_name, attributes=attributes, **fields
        )

    def reward(self, **fields):
        return self.span(semconv.REWARD, **fields)

    def judge(self, **fields):
        return self.span(semconv.JUDGE, **fields)

    def teacher(self, **fields):
        return self.span(semconv.TEACHER, **fields)

    def train_step(self, train_step: int, **fields):
        return self.span(semconv.TRAIN_STEP, train_step=train_step, **fields)

    def sample(self, rollout_id: str, train_step: int, sample_decision: str, **fields):
        if sample_decision not in semconv.SAMPLE_DECISIONS:
            raise ValueError(f"sample_decision must be one of {', '.join(semconv.SAMPLE_DECISIONS)}")
        return self.span(
            semconv.SAMPLE,
            rollout_id=rollout_id,
            train_step=train_step,
            sample_decision=sample_decision,
            **fields,
        )

    def weight_sync(self, policy_version: int, **fields):
        return self.span(semconv.WEIGHT_SYNC, policy_version=policy_version, **fields)

    # --- lifecycle ----------------------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Publish everything finished so far; True when it all reached the store."""
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop; safe to call twice. A provider attach() made is shut down with its processor, which
        also takes back the exit hook the SDK registered for it: that hook held the provider, and through it
        the exporter, its writers and their locks, until the interpreter exited (about 130 objects a handle,
        for every attach() in a process that attaches many times). The job's own provider stays as it was."""
        if getattr(self.provider, "_rollscope_made", False):
            self.provider.shutdown()
        self.processor.shutdown()

    @property
    def stats(self) -> dict[str, int]:
        return self.exporter.stats.snapshot()
