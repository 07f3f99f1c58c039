"""vLLM and SGLang: the turn's trace context into each request, and per-request speculative decoding out.

```python
from rollscope.integrations.engines import record_spec, traceparent_headers

with rl.turn(i, input_tokens=...) as turn:
    response = client.chat.completions.create(..., extra_headers=traceparent_headers())
    record_spec(turn, response)
```

``traceparent_headers()`` adds the current span's W3C ``traceparent`` (and ``tracestate``) to a request's
headers. vLLM and SGLang, started with ``--otlp-traces-endpoint`` pointing at ``rollscope collect``, make their
request span (vLLM's ``llm_request`` or ``chat {model}``, SGLang's request span) a child of the ``rl.turn``; the
``turns`` view then fills that turn's prefill / decode time, time to first token and cached tokens from it
instead of counting the request as a turn of its own.

``spec_attributes(response)`` reads a response's per-request speculative-decoding counts into ``rl.spec.*``
attributes: vLLM's opt-in ``metrics.speculative_decoding`` (``--per-request-spec-decode-metrics``; also on
the last chunk of a stream) and SGLang's ``meta_info`` (``spec_draft_token_num``, ``spec_accept_token_num``,
``spec_verify_ct``; its native ``/generate`` answer). ``record_spec(span, response)`` sets them on a span.

``cache_attributes(response)`` reads the prompt tokens the engine served from its prefix cache into
``gen_ai.usage.cache_read.input_tokens`` (what the Prefill / decode page splits by remedy): the OpenAI-compatible
``usage.prompt_tokens_details.cached_tokens`` (vLLM with ``--enable-prompt-tokens-details``, SGLang) and SGLang's
``meta_info.cached_tokens``. ``record_cache(span, response)`` sets it on a span.

Nothing here raises into the job: a response of an unknown shape gives no attributes, a failure is logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rollscope import semconv

log = logging.getLogger("rollscope.integrations")

_W3C = TraceContextTextMapPropagator()

# vLLM's metrics.speculative_decoding field -> rollscope attribute
VLLM_SPEC = {
    "num_draft_tokens": semconv.SPEC_DRAFT_TOKENS,
    "num_accepted_draft_tokens": semconv.SPEC_ACCEPTED_TOKENS,
    "num_spec_steps": semconv.SPEC_VERIFY_STEPS,
    "num_spec_tokens": semconv.SPEC_K,
}
# SGLang's meta_info field -> rollscope attribute
SGLANG_SPEC = {
    "spec_draft_token_num": semconv.SPEC_DRAFT_TOKENS,
    "spec_accept_token_num": semconv.SPEC_ACCEPTED_TOKENS,
    "spec_verify_ct": semconv.SPEC_VERIFY_STEPS,
}


def traceparent_headers(headers: Mapping[str, str] | None = None, span=None) -> dict[str, str]:
    """``headers`` plus the W3C ``traceparent`` of ``span`` (an ``RLSpan`` or OpenTelemetry span; default:
    the current span). Without a recording span the headers come back unchanged."""
    out = dict(headers or {})
    try:
        span = getattr(span, "span", span) if span is not None else trace.get_current_span()
        if not span.get_span_context().is_valid:
            return out
        _W3C.inject(out, context=trace.set_span_in_context(span))
    except Exception:
        log.exception("rollscope: could not add traceparent to the request headers")
    return out


def spec_attributes(response) -> dict[str, int]:
    """``rl.spec.*`` attributes from a vLLM or SGLang response (a dict, an ``openai`` response object, or
    the JSON text); empty when it carries no speculative-decoding counts."""
    return _read(response, _spec, "speculative decoding")


def _spec(body: Mapping) -> dict[str, int]:
    metrics = body.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    if isinstance(spec, Mapping):
        return _counts(spec, VLLM_SPEC)
    meta = body.get("meta_info")
    return _counts(meta, SGLANG_SPEC) if isinstance(meta, Mapping) else {}


def record_spec(span, response) -> dict[str, int]:
    """Set ``spec_attributes(response)`` on ``span`` (an ``RLSpan`` or OpenTelemetry span); returns them."""
    return _record(span, spec_attributes(response), "speculative decoding")


def cache_attributes(response) -> dict[str, int]:
    """``gen_ai.usage.cache_read.input_tokens`` from a vLLM or SGLang response (a dict, an ``openai`` response
    object, or the JSON text); empty when it reports no cached count."""
    return _read(response, _cached, "cached tokens")


def _cached(body: Mapping) -> dict[str, int]:
    usage = body.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, Mapping) else None
    source = details if isinstance(details, Mapping) else body.get("meta_info")
    return (
        _counts(source, {"cached_tokens": semconv.CACHED_INPUT_TOKENS}) if isinstance(source, Mapping) else {}
    )


def _read(response, pick, what: str) -> dict[str, int]:
    """``pick(body)`` of a response (a dict, an ``openai`` response object, or the JSON text); nothing for any
    other shape, and never an error into the job."""
    try:
        body = _as_dict(response)
        return pick(body) if body else {}
    except ValueError as e:
        # text that is not JSON (a truncated stream chunk): bad input, not a bug, so one line
        log.warning("rollscope: no %s read: the response is not JSON (%s)", what, e)
    except Exception:
        log.exception("rollscope: could not read %s from the response", what)
    return {}


def record_cache(span, response) -> dict[str, int]:
    """Set ``cache_attributes(response)`` on ``span`` (an ``RLSpan`` or OpenTelemetry span); returns them."""
    return _record(span, cache_attributes(response), "cached tokens")


def _record(span, attributes: dict, what: str) -> dict:
    if attributes:
        try:
            getattr(span, "span", span).set_attributes(attributes)
        except Exception:
            log.exception("rollscope: could not set %s attributes", what)
    return attributes


def _counts(source: Mapping, names: dict[str, str]) -> dict[str, int]:
    out = {}
    for field, attribute in names.items():
        value = source.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if value >= 0 and float(value).is_integer():
            out[attribute] = int(value)
    return out


def _as_dict(response) -> Mapping | None:
    if isinstance(response, Mapping):
        return response
    if isinstance(response, str | bytes | bytearray):
        parsed = json.loads(response)
        return parsed if isinstance(parsed, Mapping) else None
    dump = getattr(response, "model_dump", None)  # openai (pydantic) objects keep unknown fields
    if callable(dump):
        return dump()
    to_dict = getattr(response, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return None
