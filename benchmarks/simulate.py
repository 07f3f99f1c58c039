"""Simulator throughput (spans per second into a store), against the bare SDK measured in the same run.

Baseline: the same spans created by one process with the bare OpenTelemetry SDK and no processor at all —
the least any emitter of these spans can pay per core. The simulator then plans, emits through attach() from
K worker processes and publishes Parquet segments. The ratio says what the whole path costs over bare span
creation; the extrapolation says how long a 10M-span benchmark store takes on this machine. Fast mode
(`rollscope simulate --fast`: the same rows built as Arrow columns, no SDK) is measured too, next to the
plan alone (planning, spans and ground truth, nothing written): the least fast mode can cost. The CPU
per span of each stage of fast mode's two processes (the parent plans, builds the step's span tables and
records and keeps the ground truth; the writer turns them into Arrow and Parquet, and renders and publishes the
step's transcripts) says which one bounds it. On a busy machine the fast
run's wall rate says more about the load than about fast mode, so its two processes' CPU over the whole
call is printed too: spans over the larger of the two is the rate on two free cores.
Usage: python -m benchmarks.simulate [--spans N] [--fast-spans N] [--workers K] [--preset scale]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import pyarrow as pa
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from rollscope.collectors.rows import ResourceRow
from rollscope.simulator import config, groundtruth, simulate, transcripts
from rollscope.simulator.direct_writer import _Writer, arrow_table
from rollscope.simulator.planner import Planner
from rollscope.simulator.records import SpanBuilder, instances
from rollscope.store.layout import SegmentWriter


def records(preset: str, n: int) -> list[tuple]:
    c = config.resolve(preset)
    planner, builder = Planner(c), SpanBuilder(c, "bench")
    out: list[tuple] = []
    step = 0
    while len(out) < n:
        spans = builder.step(planner.plan_step(step))
        out += [r for recs in spans.all_records().values() for r in recs]
        step += 1
    return out[:n]


def bare(recs: list[tuple]) -> float:
    """Spans per second of the bare SDK (no processor, one core) creating exactly these spans."""
    tracer = TracerProvider(resource=Resource.create({"rl.run.id": "bench"})).get_tracer("bench")
    flags = TraceFlags(TraceFlags.SAMPLED)
    start = time.perf_counter()
    for name, begin, end, trace_id, _, parent, attributes, _ in recs:
        context = None
        if parent is not None:
            context = set_span_in_context(NonRecordingSpan(SpanContext(trace_id, parent, True, flags)))
        tracer.start_span(name, context=context, attributes=attributes, start_time=begin).end(end_time=end)
    return len(recs) / (time.perf_counter() - start)


def plan_only(preset: str, n: int) -> tuple[float, dict[str, float]]:
    """Spans per second of planning, building records and keeping the ground truth, writing nothing; and
    the CPU microseconds per span of each of those stages (all run in fast mode's one parent process)."""
    c = config.resolve(preset)
    planner, builder = Planner(c), SpanBuilder(c, "bench")
    truth = groundtruth.Truth(c, "bench", preset, instances(c), builder)
    stages = dict.fromkeys(("plan (dynamics)", "spans", "ground truth"), 0.0)
    names = list(stages)
    start, done, step = time.perf_counter(), 0, 0
    while done < n:
        t0 = time.process_time()
        plan = planner.plan_step(step)
        t1 = time.process_time()
        spans = builder.step(plan)
        t2 = time.process_time()
        truth.add_step(plan, spans)
        t3 = time.process_time()
        for name, seconds in zip(names, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            stages[name] += seconds
        done += len(spans)
        step += 1
    rate = done / (time.perf_counter() - start)
    return rate, {name: seconds / done * 1e6 for name, seconds in stages.items()}


def writer_side(preset: str, n: int) -> dict[str, float]:
    """CPU microseconds per span of fast mode's writer process, in this process: the steps' spans to Arrow
    (tables directly, records through ``SpanRows``), then to a published Parquet segment."""
    c = config.resolve(preset)
    planner, builder = Planner(c), SpanBuilder(c, "bench")
    batches, done, step = [], 0, 0
    while done < n:
        batches.append(builder.step(planner.plan_step(step)))
        done += len(batches[-1])
        step += 1
    pa.array([0])  # pyarrow's first conversion imports pandas (~0.4 s): once per process, not per span
    resources = {
        key.key: ResourceRow.from_attributes({"service.name": key.key}, "bench") for key in instances(c)
    }
    with tempfile.TemporaryDirectory() as store:
        writer = _Writer(store, "bench", resources)
        t0 = time.process_time()
        for batch in batches:
            for key, recs in batch.records.items():
                if recs:
                    writer._add(resources[key], recs)
        t1 = time.process_time()
        tables = [arrow_table(t, resources) for batch in batches for t in batch.tables]
        tables += list(writer._rows.tables().values())
        t2 = time.process_time()
        SegmentWriter(store, "spans").publish("bench", pa.concat_tables(tables))
        t3 = time.process_time()
        said = [transcripts.table(b.messages) for b in batches if b.messages is not None]
        t4 = time.process_time()
        if said:
            SegmentWriter(store, "messages", dictionary=False).publish("bench", pa.concat_tables(said))
        t5 = time.process_time()
    return {
        "records to rows (SpanRows)": (t1 - t0) / done * 1e6,
        "Arrow (tables, SpanRows.tables)": (t2 - t1) / done * 1e6,
        "publish (Parquet)": (t3 - t2) / done * 1e6,
        "messages rendered": (t4 - t3) / done * 1e6,
        "messages published": (t5 - t4) / done * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=300_000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--preset", default="scale")
    parser.add_argument("--fast-spans", type=int, default=1_000_000, help="spans for the fast mode run")
    parser.add_argument("--skip-normal", action="store_true", help="measure the fast mode only")
    args = parser.parse_args()
    baseline = bare(records(args.preset, min(args.spans, 100_000)))
    floor, parent = plan_only(args.preset, min(args.fast_spans, 200_000))
    writer = writer_side(args.preset, min(args.fast_spans, 100_000))
    print(f"cpus: {os.cpu_count()}  workers: {args.workers or 'default'}  preset: {args.preset}")
    print(f"bare SDK, 1 process, no processor : {baseline:10,.0f} spans/s  (baseline)")
    print(f"plan + ground truth, nothing written: {floor:8,.0f} spans/s  (the floor of fast mode)")
    for side, stages in (("parent", parent), ("writer", writer)):
        cost = ", ".join(f"{name} {us:.2f}" for name, us in stages.items())
        print(f"  fast mode's {side}: {sum(stages.values()):5.2f} us CPU/span ({cost})")
    if not args.skip_normal:
        rate, result = _run(args.preset, args.spans, args.workers, fast=False)
        print(
            f"simulate (plan + attach + store)  : {rate:10,.0f} spans/s  ({result.spans:,} spans, "
            f"{result.seconds:.1f} s) = {rate / baseline:.2f} x bare SDK"
        )
    parent_cpu, writer_cpu = time.process_time(), _children_cpu()
    rate, result = _run(args.preset, args.fast_spans, args.workers, fast=True)
    parent_cpu, writer_cpu = time.process_time() - parent_cpu, _children_cpu() - writer_cpu
    print(
        f"simulate --fast (plan + Arrow)    : {rate:10,.0f} spans/s  ({result.spans:,} spans, "
        f"{result.seconds:.1f} s) = {rate / baseline:.2f} x bare SDK, {rate / floor:.2f} x the plan alone"
    )
    bound = result.spans / max(parent_cpu, writer_cpu)
    print(
        f"  its CPU, whole call: parent {parent_cpu / result.spans * 1e6:.2f} us/span, writer "
        f"{writer_cpu / result.spans * 1e6:.2f} us/span (startup included): {bound:,.0f} spans/s on two "
        f"free cores = {bound / baseline:.2f} x bare SDK"
    )
    print(f"10M spans with --fast would take  : {10_000_000 / rate / 60:10.1f} min")


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (fast mode's writer, once joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(preset: str, spans: int, workers: int | None, fast: bool):
    with tempfile.TemporaryDirectory() as store:
        result = simulate(
            store,
            "bench",
            config.resolve(preset),
            spans_target=spans,
            workers=workers,
            digest=False,
            fast=fast,
        )
    return result.spans_per_second, result


if __name__ == "__main__":
    main()
