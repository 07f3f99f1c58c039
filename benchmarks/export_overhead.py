"""Added cost per span of attach() + the store exporter, against the bare SDK with no processor.

Both are measured in the same run, alternating, because this machine is shared and noisy; the figure that
matters is the difference (and ratio), including the exporter's background work until every span is in the
store. Each is timed twice: wall time of the loop until every span is published, and the process's CPU time
(all threads: the exporter's background thread included), which other work on a shared machine does not
inflate as much. Usage: python -m benchmarks.export_overhead [--spans N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

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


def _loop(tracer, n: int) -> None:
    for _ in range(n):
        with tracer.start_as_current_span("rl.turn", attributes=ATTRIBUTES):
            pass


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


def attached(n: int) -> tuple[tuple[float, float], dict]:
    with tempfile.TemporaryDirectory() as store:
        rl = attach(store=store, run_id="bench", set_global=False)
        clock = _Clock()
        _loop(rl.tracer, n)
        rl.shutdown()  # until every span is published
        return clock.per_span(n), rl.stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
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


if __name__ == "__main__":
    main()
