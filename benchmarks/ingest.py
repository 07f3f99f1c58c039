"""Ingest throughput of `rollscope collect` over OTLP/HTTP and OTLP/gRPC, against a bare protobuf decode of the same bodies.

Builds seeded RL-shaped spans (rollouts, turns, tool calls, rewards) with a real TracerProvider, encodes them
as the SDK's OTLPSpanExporter would (protobuf, 512 spans a request by default) and as OTLP/JSON, then:

1. the baseline: ``ExportTraceServiceRequest.FromString`` of every body, with nothing read out of it;
   next to it, OTLP/JSON decoded by the receiver's own reader and by protobuf's ``json_format`` (hex ids
   turned into base64, ``ParseDict``, then the protobuf path), which is why the receiver keeps its reader;
2. the receiver's pipeline without HTTP, in this process, stage by stage (decode, rows, Arrow, publish);
3. a real `rollscope collect` subprocess fed by concurrent keep-alive clients, for each encoding, and by as
   many gRPC channels calling ``TraceService/Export`` with the same protobuf bodies.

The receiver's cost per span is its process CPU time (all threads: HTTP, decode, Parquet, fsync) per span
stored, counted from its first answer to /health (start-up imports are paid once, not per span); "per core" is spans per receiver CPU-second, which stays meaningful on a shared machine where wall
time does not. Peak memory is the receiver's VmHWM. Every run checks that the store holds every span sent.

With ``--compare PYTHON`` (another checkout's interpreter, e.g. ``../main/.venv/bin/python``) each end-to-end
run is repeated, in the same run and alternating, with the receiver that interpreter imports: a before/after
figure on a shared machine, where two runs minutes apart can differ by a fifth.

Usage: python benchmarks/ingest.py [--spans 100000] [--batch 512] [--clients 8] [--compare PYTHON]
"""

from __future__ import annotations

import argparse
import base64
import gc
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # run as a script: the project's packages, not benchmarks/queries.py as `queries`

import pyarrow.parquet as pq  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from benchmarks.fixtures.otlp_json import encode_json, map_ids  # noqa: E402
from rollscope.collectors import otlp, otlp_json, otlp_protobuf  # noqa: E402
from rollscope.collectors.receiver import RECEIVER_GC  # noqa: E402
from rollscope.collectors.rows import SpanRows  # noqa: E402
from rollscope.store.layout import SegmentWriter, segments  # noqa: E402


def rl_spans(n: int, seed: int = 7) -> list:
    """About ``n`` finished spans of an agent RL run: per rollout, 4-8 turns with tool calls and a reward."""
    rnd = random.Random(seed)
    keep = InMemorySpanExporter()
    resource = Resource(
        {
            "rl.run.id": "bench",
            "service.name": "rollout-worker",
            "service.instance.id": "w-3",
            "rl.compute.role": "rollout",
            "rl.compute.devices": 8.0,
            "rl.model.name": "qwen3-8b",
            "rl.model.parameters": 8_000_000_000,
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("rollscope")
    rollout = 0
    while len(keep.get_finished_spans()) < n:  # (a copy of the list: counted every 64 rollouts, not each)
        for _ in range(64):
            _rollout(tracer, rnd, f"r-{seed}-{rollout:07d}")
            rollout += 1
    return list(keep.get_finished_spans()[:n])


def _rollout(tracer, rnd: random.Random, rollout_id: str) -> None:
    version = rnd.randint(0, 300)
    rollout = {
        "rl.rollout.id": rollout_id,
        "rl.task.id": f"task-{rnd.randint(0, 5000)}",
        "rl.group.id": f"g-{rnd.randint(0, 20000)}",
        "rl.environment.name": rnd.choice(["swe", "math", "web"]),
        "rl.policy.version": version,
    }
    with tracer.start_as_current_span("rl.rollout", attributes=rollout) as span:
        context = 0
        for turn in range(rnd.randint(4, 8)):
            prompt = rnd.randint(200, 6000)
            with tracer.start_as_current_span(
                "rl.turn", attributes=_turn(rnd, rollout_id, turn, context, prompt)
            ):
                pass
            context += prompt
            tool = rnd.choice(["bash", "python", "edit_file"])
            attrs = {
                "rl.rollout.id": rollout_id,
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"call-{rnd.getrandbits(48):x}",
                "rl.sandbox.id": f"sb-{rnd.randint(0, 63)}",
                "rl.tool.exit_code": rnd.choice([0, 0, 0, 1]),
                "rl.tool.observation_tokens": rnd.randint(10, 3000),
            }
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs):
                pass
        reward = {
            "rl.rollout.id": rollout_id,
            "rl.reward.name": "unit_tests",
            "rl.reward.score": rnd.random(),
        }
        with tracer.start_as_current_span("rl.reward", attributes=reward):
            pass
        span.set_attributes({"rl.rollout.status": "ok", "rl.reward.score": reward["rl.reward.score"]})


def _turn(rnd: random.Random, rollout_id: str, index: int, context: int, prompt: int) -> dict:
    return {
        "rl.rollout.id": rollout_id,
        "rl.turn.index": index,
        "gen_ai.usage.input_tokens": prompt + context,
        "gen_ai.usage.cache_read.input_tokens": context,
        "gen_ai.usage.output_tokens": rnd.randint(20, 800),
        "rl.turn.context_tokens": context,
        "gen_ai.latency.time_in_model_prefill": rnd.uniform(0.01, 0.5),
        "gen_ai.latency.time_in_model_decode": rnd.uniform(0.1, 8.0),
        "gen_ai.request.model": "qwen3-8b",
        "gen_ai.response.id": f"chatcmpl-{rnd.getrandbits(64):x}",
    }


def bodies(spans: list, batch: int) -> tuple[list[bytes], list[bytes]]:
    requests = [encode_spans(spans[i : i + batch]) for i in range(0, len(spans), batch)]
    return [r.SerializeToString() for r in requests], [encode_json(r) for r in requests]


def json_format_decode(body: bytes) -> otlp.Decoded:
    """OTLP/JSON through protobuf's own JSON parser: hex ids into the base64 ``json_format`` expects,
    ``ParseDict`` (unknown fields ignored, as OTLP asks), then the receiver's protobuf path."""
    data = json.loads(body)
    map_ids(data, lambda value: base64.b64encode(bytes.fromhex(value)).decode())
    request = json_format.ParseDict(data, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    return otlp_protobuf.decode_protobuf(request.SerializeToString())


def cpu_per_span(fn, payloads: list[bytes], n_spans: int) -> float:
    """Best of three passes, in microseconds of this process's CPU per span."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for body in payloads:
            fn(body)
        best = min(best, time.process_time() - start)
    return best / n_spans * 1e6


def pipeline_per_span(payloads: list[bytes], n_spans: int, batch_requests: int) -> dict[str, float]:
    """The receiver's work without HTTP, stage by stage, as its group commit does it: decode each request,
    add ``batch_requests`` requests to one SpanRows, convert to Arrow once, publish one durable segment."""
    stages = dict.fromkeys(
        (
            "decode (protobuf -> parts)",
            "rows (SpanRows.extend)",
            "Arrow (SpanRows.tables)",
            "publish (Parquet + fsync)",
        ),
        0.0,
    )
    names = list(stages)
    with tempfile.TemporaryDirectory() as tmp:
        writer = SegmentWriter(tmp, "spans", durable=True, dictionary=False)  # as the group commit writes
        for first in range(0, len(payloads), batch_requests):
            rows = SpanRows()
            for body in payloads[first : first + batch_requests]:
                start = time.process_time()
                decoded = otlp_protobuf.decode_protobuf(body)
                middle = time.process_time()
                decoded.add_to(lambda run_id, rows=rows: rows)
                end = time.process_time()
                stages[names[0]] += middle - start
                stages[names[1]] += end - middle
            start = time.process_time()
            (table,) = rows.tables().values()
            middle = time.process_time()
            writer.publish("bench", table)
            stages[names[2]] += middle - start
            stages[names[3]] += time.process_time() - middle
    return {name: seconds / n_spans * 1e6 for name, seconds in stages.items()}


# --- the receiver as a subprocess -----------------------------------------------------------------------------


def start_receiver(
    store: Path, grpc: bool = False, python: str | None = None
) -> tuple[subprocess.Popen, int]:
    """A `rollscope collect` subprocess, once it answers /health (its start-up imports are not ingest); its
    HTTP port, or its gRPC port with ``grpc``. ``python``: another checkout's interpreter (run outside this
    tree, writing no bytecode there)."""
    cmd = [
        python or sys.executable,
        "-m",
        "rollscope.app.cli",
        "collect",
        "--store",
        str(store),
        "--port",
        "0",
    ]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"} if python else None
    cwd = store.parent if python else ROOT
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    grpc_port = int(line.split(" and ")[1].split(" ")[0].rsplit(":", 1)[1]) if grpc else None
    port = int(line.split("http://")[1].split("/")[0].rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, grpc_port or port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the receiver did not answer /health within 60 s")


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def send_all(port: int, payloads: list[bytes], content_type: str, clients: int) -> None:
    """``clients`` keep-alive connections share the payloads; 429/503 are retried after Retry-After."""
    queue = list(reversed(payloads))
    lock = threading.Lock()
    errors: list[str] = []

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                if not queue:
                    break
                body = queue.pop()
            while True:
                conn.request("POST", "/v1/traces", body, {"Content-Type": content_type})
                response = conn.getresponse()
                response.read()
                if response.status not in (429, 503):
                    break
                time.sleep(float(response.getheader("Retry-After", "1")))
            if response.status != 200:
                errors.append(f"{response.status}")
        conn.close()

    _run_clients(client, clients, errors, "requests")


def _run_clients(client, clients: int, errors: list, what: str) -> None:
    """Run ``client`` on ``clients`` threads at once; any refusal ends the benchmark."""
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"receiver refused {len(errors)} {what}: {sorted(set(errors))}")


def send_all_grpc(port: int, payloads: list[bytes], clients: int) -> None:
    """``clients`` gRPC channels share the payloads; RESOURCE_EXHAUSTED/UNAVAILABLE are retried."""
    import grpc

    queue = list(reversed(payloads))
    lock = threading.Lock()
    errors: list[str] = []
    retry = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE}

    def client() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            while True:
                with lock:
                    if not queue:
                        break
                    body = queue.pop()
                while True:
                    try:
                        export(body, timeout=60)
                        break
                    except grpc.RpcError as e:
                        if e.code() not in retry:
                            errors.append(e.code().name)
                            break
                        time.sleep(1)

    _run_clients(client, clients, errors, "calls")


def fast_extra(python: str | None = None) -> str:
    """Which packages of rollscope's `fast` extra (orjson, httptools, uvloop) the receiver that ``python``
    runs can import: they change its CPU per span, so each figure says which it ran with."""
    code = "import importlib.util as u; print(' '.join(m for m in ('orjson', 'httptools', 'uvloop') if u.find_spec(m)))"
    found = subprocess.run(
        [python or sys.executable, "-c", code], capture_output=True, text=True
    ).stdout.split()
    return ", ".join(found) if found else "none of the fast extra"


def end_to_end(
    payloads: list[bytes], content_type: str, n_spans: int, clients: int, python: str | None = None
) -> dict:
    """``content_type`` "grpc" sends over OTLP/gRPC, else over OTLP/HTTP with that Content-Type."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        proc, port = start_receiver(store, grpc=content_type == "grpc", python=python)
        try:
            started = cpu0 = proc_cpu(proc.pid)
            t0 = time.perf_counter()
            if content_type == "grpc":
                send_all_grpc(port, payloads, clients)
            else:
                send_all(port, payloads, content_type, clients)
            wall, cpu = time.perf_counter() - t0, proc_cpu(proc.pid) - cpu0
            rss = peak_rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait()
        files = segments(store, "spans")
        stored = sum(pq.read_metadata(f).num_rows for f in files)
    if stored != n_spans:
        raise SystemExit(f"store holds {stored} spans, {n_spans} were sent")
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss, "segments": len(files), "startup_cpu_s": started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=512, help="spans per request (the SDK's default 512)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent keep-alive connections")
    parser.add_argument(
        "--compare", metavar="PYTHON", help="also run the receiver another checkout's python imports"
    )
    args = parser.parse_args()

    spans = rl_spans(args.spans)
    n = len(spans)
    proto, json_bodies = bodies(spans, args.batch)
    print(
        f"{n} RL spans in {len(proto)} requests of {args.batch}; protobuf {sum(map(len, proto)) / n:.0f} B/span"
    )

    gc.freeze()  # the spans and bodies built above are not the receiver's garbage to scan
    gc.set_threshold(*RECEIVER_GC)
    pipeline_per_span(proto[:8], 8 * args.batch, batch_requests=8)  # first-use imports, as the receiver does
    bare = cpu_per_span(ExportTraceServiceRequest.FromString, proto, n)
    stages = pipeline_per_span(proto, n, batch_requests=8)
    print(f"bare protobuf decode (baseline)          {bare:6.2f} us/span")
    hand = cpu_per_span(otlp_json.decode_json, json_bodies, n)
    quarter = max(1, len(json_bodies) // 4)  # a quarter of the bodies: json_format is slow
    official = cpu_per_span(json_format_decode, json_bodies[:quarter], min(n, quarter * args.batch))
    print(
        f"OTLP/JSON decode, the receiver's reader  {hand:6.2f} us/span; protobuf json_format + protobuf path "
        f"{official:6.2f} us/span = {official / hand:4.1f} x the reader (kept while over 1.5 x)"
    )
    for stage, cost in stages.items():
        print(f"receiver {stage:32s} {cost:6.2f} us/span  = {cost / bare:5.1f} x baseline")
    total = sum(stages.values())
    print(
        f"receiver pipeline, no HTTP               {total:6.2f} us/span  = {total / bare:5.1f} x baseline"
        f"  ({1e6 / total:,.0f} spans per CPU-second)"
    )

    print(f"this tree's receiver runs with {fast_extra()}")
    if args.compare:
        print(f"the compared receiver runs with {fast_extra(args.compare)}")
    for label, payloads, content_type in (
        ("protobuf", proto, "application/x-protobuf"),
        ("json", json_bodies, "application/json"),
        ("grpc", proto, "grpc"),
    ):
        r = end_to_end(payloads, content_type, n, args.clients)
        per_span = r["cpu_s"] / n * 1e6
        print(
            f"end to end {label:8s}: {n / r['wall_s']:8.0f} spans/s wall, {n / r['cpu_s']:8.0f} spans per receiver "
            f"CPU-second, {per_span:5.1f} us/span = {per_span / bare:5.1f} x baseline; peak RSS "
            f"{r['rss_mib']:.0f} MiB; {r['segments']} segments; {args.clients} clients; start-up before the "
            f"first request {r['startup_cpu_s']:.2f} CPU-s (not counted)"
        )
        if args.compare:
            other = end_to_end(payloads, content_type, n, args.clients, python=args.compare)
            theirs = other["cpu_s"] / n * 1e6
            print(
                f"    compared {label:8s}: {n / other['cpu_s']:8.0f} spans per receiver CPU-second, "
                f"{theirs:5.1f} us/span with {args.compare}; this tree's is {per_span / theirs:4.2f} x that"
            )


if __name__ == "__main__":
    main()
