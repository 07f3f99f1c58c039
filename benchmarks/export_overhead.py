"""Added cost per span of attach() + the store exporter, against the bare SDK with no processor.

Both are measured in the same run, alternating, because this machine is shared and noisy; the figure that
matters is the difference (and ratio), including the exporter's background work until every span is in the
store. Usage: python benchmarks/export_overhead.py [--spans N] [--repeats R]
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


def bare(n: int) -> float:
    tracer = TracerProvider(resource=Resource.create({"rl.run.id": "bench"})).get_tracer("bench")
    start = time.perf_counter()
    _loop(tracer, n)
    return (time.perf_counter() - start) / n


class _Discard(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def sdk_batching(n: int) -> float:
    """The SDK's own BatchSpanProcessor with an exporter that discards: what any batching exporter pays."""
    provider = TracerProvider(resource=Resource.create({"rl.run.id": "bench"}))
    processor = BatchSpanProcessor(_Discard(), max_queue_size=65_536, max_export_batch_size=8_192)
    provider.add_span_processor(processor)
    start = time.perf_counter()
    _loop(provider.get_tracer("bench"), n)
    processor.shutdown()
    return (time.perf_counter() - start) / n


def attached(n: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as store:
        rl = attach(store=store, run_id="bench", set_global=False)
        start = time.perf_counter()
        _loop(rl.tracer, n)
        rl.shutdown()  # until every span is published
        elapsed = time.perf_counter() - start
        return elapsed / n, rl.stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bare_runs, batching_runs, attached_runs = [], [], []
    for _ in range(args.repeats):
        bare_runs.append(bare(args.spans))
        batching_runs.append(sdk_batching(args.spans))
        per_span, stats = attached(args.spans)
        attached_runs.append(per_span)
    b, s, a = (statistics.median(r) * 1e6 for r in (bare_runs, batching_runs, attached_runs))
    print(f"spans per run: {args.spans}, repeats: {args.repeats} (medians)")
    print(f"bare SDK, no processor:              {b:6.1f} us/span")
    print(f"SDK BatchSpanProcessor, discarding:  {s:6.1f} us/span  (+{s - b:.1f}: the SDK's batching itself)")
    print(f"attach() + store exporter:           {a:6.1f} us/span  (every span published to the store)")
    print(f"added by rollscope over bare SDK:    {a - b:6.1f} us/span  ({a / b:.2f}x)")
    print(f"added by rollscope over SDK batching:{a - s:6.1f} us/span  (conversion + Parquet write)")
    print(f"last run: exported {stats['spans_exported']}, dropped {stats['spans_dropped']}")


if __name__ == "__main__":
    main()
