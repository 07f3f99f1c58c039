"""Added cost per span of attach() + the store exporter, against the bare SDK with no processor.

Both are measured in the same run, alternating, because this machine is shared and noisy; the figure that
matters is the difference (and ratio), including the exporter's background work until every span is in the
store. Each is timed twice: wall time of the loop until every span is published, and the process's CPU time
(all threads: the exporter's background thread included), which other work on a shared machine does not
inflate as much.

Transcripts: the same turn spans carrying GenAI content (``gen_ai.input.messages`` and
``gen_ai.output.messages`` of ``--content-kb`` KB together, as a job sets them with ``rl.turn(input=...,
output=...)``), with capture on (the message rows written to the ``messages`` dataset) and off (the attributes
dropped), against the spans without content in the same run: what capture adds per span and per KB, and the
bytes it leaves on disk per KB of content.
Usage: python -m benchmarks.export_overhead [--spans N] [--repeats R] [--content-kb K ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rollscope.collectors import attach

ATTRIBUTES = {  # a realistic turn span
    "rl.rollout.id": "r-000123",
    "rl.turn.index": 3,
    "rl.policy.version": 41,
    "gen_ai.usage.input_tokens": 6150,
    "gen_ai.usage.cache_read.input_tokens": 6000,
    "gen_ai.usage.output_tokens": 150,
    "rl.spec.draft_tokens": 600,
    "rl.spec.accepted_tokens": 410,
    "rl.spec.verify_steps": 150,
    "rl.spec.drafter.version": "d3",
    "rl.logprobs.source": "policy",
}


def _loop(tracer, n: int, attributes: dict | list[dict] = ATTRIBUTES) -> None:
    if isinstance(attributes, dict):
        for _ in range(n):
            with tracer.start_as_current_span("rl.turn", attributes=attributes):
                pass
        return
    for i in range(n):
        with tracer.start_as_current_span("rl.turn", attributes=attributes[i]):
            pass


def with_content(kb: float, n: int) -> list[dict]:
    """``n`` turns' attributes, each plus its own GenAI content of about ``kb`` KB: a tool log in, a reply with
    reasoning out (text that compresses as real text does: words of a vocabulary, different in every span, so
    neither the files' dictionaries nor anything else sees the same text twice)."""
    return [_content(kb, seed) for seed in range(n)]


def _content(kb: float, seed: int) -> dict:
    words = " ".join(f"w{(i + seed * 131) * 7919 % 10007}" for i in range(int(kb * 1024 / 6)))
    cut = len(words) * 3 // 4
    given = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": words[:cut]}]}]
    reply = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": words[cut:]},
                {"type": "text", "content": "pytest -x"},
            ],
            "finish_reason": "stop",
        }
    ]
    return {
        **ATTRIBUTES,
        "gen_ai.input.messages": json.dumps(given),
        "gen_ai.output.messages": json.dumps(reply),
    }


class _Clock:
    """Wall and process CPU time since it was made, per span."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def per_span(self, n: int) -> tuple[float, float]:
        return (time.perf_counter() - self.wall) / n, (time.process_time() - self.cpu) / n


def bare(n: int) -> tuple[float, float]:
    tracer = TracerProvider(resource=Resource.create({"rl.run.id": "bench"})).get_tracer("bench")
    clock = _Clock()
    _loop(tracer, n)
    return clock.per_span(n)


class _Discard(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def sdk_batching(n: int) -> tuple[float, float]:
    """The SDK's own BatchSpanProcessor with an exporter that discards: what any SDK-batching exporter pays
    before it converts a single span (attach() does not use it; see rollscope.collectors.exporter)."""
    provider = TracerProvider(resource=Resource.create({"rl.run.id": "bench"}))
    processor = BatchSpanProcessor(_Discard(), max_queue_size=65_536, max_export_batch_size=8_192)
    provider.add_span_processor(processor)
    clock = _Clock()
    _loop(provider.get_tracer("bench"), n)
    processor.shutdown()
    return clock.per_span(n)


def attached(n: int, attributes: dict = ATTRIBUTES, **settings) -> tuple[tuple[float, float], dict]:
    with tempfile.TemporaryDirectory() as store:
        rl = attach(store=store, run_id="bench", set_global=False, **settings)
        clock = _Clock()
        _loop(rl.tracer, n, attributes)
        rl.shutdown()  # until every span is published
        stats = {
            **rl.stats,
            "message_bytes": sum(p.stat().st_size for p in Path(store, "messages").rglob("*")),
        }
        return clock.per_span(n), stats


def content_costs(spans: int, repeats: int, sizes: list[float]) -> None:
    """Spans with content, capture on and off, against the same spans without content, alternating."""
    print(
        f"\ntranscripts: {spans} turn spans per run, repeats: {repeats} (medians; us/span, wall | process CPU)"
    )
    for kb in sizes:
        attributes = with_content(kb, spans)
        runs: dict[str, list] = {"none": [], "on": [], "off": []}
        for _ in range(repeats):
            runs["none"].append(attached(spans)[0])
            per_span, stats = attached(spans, attributes)
            runs["on"].append(per_span)
            runs["off"].append(attached(spans, attributes, capture_content=False)[0])
        (nw, nc), (ow, oc), (fw, fc) = (
            [statistics.median(r[i] for r in runs[k]) * 1e6 for i in (0, 1)] for k in ("none", "on", "off")
        )
        size = statistics.mean(
            len(a["gen_ai.input.messages"]) + len(a["gen_ai.output.messages"]) for a in attributes
        )
        print(f"  content {size / 1024:.1f} KB a span:")
        print(f"    no content (baseline):             {nw:6.1f} | {nc:6.1f}")
        print(
            f"    capture on:                         {ow:6.1f} | {oc:6.1f}   (+{ow - nw:.1f} | +{oc - nc:.1f}; "
            f"+{(ow - nw) / (size / 1024):.1f} | +{(oc - nc) / (size / 1024):.1f} per KB)"
        )
        print(
            f"    capture off (content dropped):      {fw:6.1f} | {fc:6.1f}   (+{fw - nw:.1f} | +{fc - nc:.1f})"
        )
        print(
            f"    on disk: {stats['message_bytes'] / spans:,.0f} bytes of messages a span "
            f"({stats['message_bytes'] / spans / size:.2f} of the content's size; segments as written, "
            f"before compaction), {stats['messages_exported']} message rows"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--content-kb", type=float, nargs="*", default=[1.0, 8.0], help="content sizes to measure (KB a span)"
    )
    args = parser.parse_args()
    attached(1_000)  # first use: imports and the first Parquet write, as a job pays once
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "batching": [], "attached": []}
    for _ in range(args.repeats):
        runs["bare"].append(bare(args.spans))
        runs["batching"].append(sdk_batching(args.spans))
        per_span, stats = attached(args.spans)
        runs["attached"].append(per_span)
    print(f"spans per run: {args.spans}, repeats: {args.repeats} (medians; us/span, wall | process CPU)")
    medians = {
        name: [statistics.median(r[i] for r in values) * 1e6 for i in (0, 1)] for name, values in runs.items()
    }
    (bw, bc), (sw, sc), (aw, ac) = medians["bare"], medians["batching"], medians["attached"]
    print(f"bare SDK, no processor (baseline):   {bw:6.1f} | {bc:6.1f}")
    print(f"SDK BatchSpanProcessor, discarding:  {sw:6.1f} | {sc:6.1f}   (+{sw - bw:.1f} | +{sc - bc:.1f})")
    print(f"attach() + store exporter:           {aw:6.1f} | {ac:6.1f}   (every span published to the store)")
    print(
        f"added by rollscope over bare SDK:    {aw - bw:6.1f} | {ac - bc:6.1f}   ({aw / bw:.2f}x | {ac / bc:.2f}x)"
    )
    print(f"last run: exported {stats['spans_exported']}, dropped {stats['spans_dropped']}")
    if args.content_kb:
        content_costs(args.spans // 4, args.repeats, args.content_kb)


if __name__ == "__main__":
    main()
