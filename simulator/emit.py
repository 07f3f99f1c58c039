"""Worker processes that replay the plan through ``rollscope.attach()``, as a live job's processes would.

Each worker hosts some of the run's simulated processes (rollout servers, trainer, judges, teachers, sandbox
hosts). For each it calls ``attach()`` once, with that process's role, devices and model, and then turns
records into OpenTelemetry spans with the records' simulated timestamps (``start_time`` / ``end_time``)
and ids, and sets what each span said through the helpers' content arguments (``span.set(output=...)``, as
a job's code would). Nothing here writes to the store directly: every span takes the SDK → exporter →
segment path, and its content the exporter → messages path.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
import traceback

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import TraceFlags

from rollscope.simulator.records import StepSpans

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class PlannedIds(IdGenerator):
    """An id generator handing out the ids the plan chose (see simulator.records)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id

    def is_trace_id_random(self) -> bool:
        return False


def attach_arguments(store: str, run_id: str, process: dict, algorithm: str, staleness_bound: int) -> dict:
    """What a simulated process passes to attach(); the fast mode builds the same resource from it."""
    return {
        "store": store,
        "run_id": run_id,
        "role": process["role"],
        "devices": process["devices"],
        "service_name": process["service_name"],
        "model_name": process["model_name"],
        "model_parameters": process["model_parameters"],
        "algorithm": algorithm,
        "staleness_bound": staleness_bound,
        "resource_attributes": {"service.instance.id": process["instance_id"]},
    }


class Emitter:
    """One simulated process: its attach() and its tracer."""

    def __init__(
        self,
        store: str,
        run_id: str,
        process: dict,
        algorithm: str,
        staleness_bound: int,
        segment_seconds: float | None = None,
        capture: bool = True,
    ):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        from rollscope.collectors import attach
        from rollscope.collectors.content import DEFAULT_MAX_CHARS

        self.ids = PlannedIds()
        provider = TracerProvider(resource=Resource.get_empty(), id_generator=self.ids, sampler=ALWAYS_ON)
        self.rl = attach(
            **attach_arguments(store, run_id, process, algorithm, staleness_bound),
            tracer_provider=provider,
            set_global=False,
            segment_seconds=segment_seconds,
            # the run's own capture policy, whatever the environment says (fast mode writes the same rows)
            capture_content=capture,
            content_max_chars=DEFAULT_MAX_CHARS,
            content_sample=1.0,
        )
        self.tracer = self.rl.tracer
        self._parent: tuple | None = None
        self._context = None

    def emit(self, records: list[tuple], content: dict[int, dict] | None = None) -> None:
        """The records as spans; ``content``: by span id, the helpers' content arguments of those that said
        something (``span.set(output=...)``)."""
        from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, set_span_in_context

        from rollscope.collectors.spans import RLSpan

        tracer, ids, content = self.tracer, self.ids, content or {}
        for name, start, end, trace_id, span_id, parent, attributes, error in records:
            ids.trace_id, ids.span_id = trace_id, span_id
            context = None
            if parent is not None:
                if self._parent != (trace_id, parent):
                    self._parent = (trace_id, parent)
                    self._context = set_span_in_context(
                        NonRecordingSpan(SpanContext(trace_id, parent, is_remote=True, trace_flags=_SAMPLED))
                    )
                context = self._context
            span = tracer.start_span(name, context=context, attributes=attributes, start_time=start)
            if span_id in content:
                RLSpan(span, self.rl.capture).set(**content[span_id])
            if error:
                span.set_status(Status(StatusCode.ERROR, error))
            span.end(end_time=end)

    def close(self) -> dict[str, int]:
        self.rl.shutdown()
        return self.rl.stats


def work(
    index: int, store: str, run_id: str, processes: list[dict], settings: dict, inbox, outbox, counter
) -> None:
    """A worker's main loop: batches of {process key: records} until None, then shut every exporter down."""
    try:
        settings = dict(settings)
        flush = settings.pop("flush_each_batch", False)
        emitters = {p["key"]: Emitter(store, run_id, p, **settings) for p in processes}
        outbox.put(("ready", index, None))
        while (batch := inbox.get()) is not None:
            n = 0
            for key, (records, content) in batch.items():
                emitters[key].emit(records, content)
                n += len(records)
            if flush:  # paced: a step's spans reach the store together, as a live job's would
                for key in batch:
                    emitters[key].rl.force_flush()
            with counter.get_lock():
                counter.value += n
        stats = {key: e.close() for key, e in emitters.items()}
        outbox.put(("ok", index, stats))
    except BaseException:
        outbox.put(("error", index, traceback.format_exc()))


class Pool:
    """K worker processes (spawned: no state inherited from the parent), each hosting some processes."""

    def __init__(self, store: str, run_id: str, assignment: list[list[dict]], settings: dict):
        ctx = multiprocessing.get_context("spawn")
        self.counter = ctx.Value("q", 0)
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue(maxsize=3) for _ in assignment]
        self.owner = {p["key"]: i for i, procs in enumerate(assignment) for p in procs}
        self.workers = [
            ctx.Process(
                target=work,
                args=(i, store, run_id, procs, settings, self.inboxes[i], self.outbox, self.counter),
                daemon=True,
            )
            for i, procs in enumerate(assignment)
        ]
        self.results: dict[int, dict] = {}
        self.ready: set[int] = set()
        for w in self.workers:
            w.start()

    @property
    def emitted(self) -> int:
        return self.counter.value

    def send(self, spans: StepSpans, tick=None) -> None:
        """Route each process's spans, as records, to the worker hosting it; blocks while workers are behind."""
        batches: list[dict] = [{} for _ in self.workers]
        content = spans.content()
        for key, recs in spans.all_records().items():
            batches[self.owner[key]][key] = (recs, content.get(key, {}))
        for i, batch in enumerate(batches):
            if batch:
                self._put(i, batch, tick)

    def _put(self, i: int, item, tick) -> None:
        while True:
            self._check()
            try:
                self.inboxes[i].put(item, timeout=0.2)
                return
            except queue.Full:
                if tick:
                    tick()

    def wait_ready(self, tick=None) -> None:
        """Block until every worker has attached (so pacing and rates start with the workers)."""
        while len(self.ready) < len(self.workers):
            self._check()
            time.sleep(0.05)
            if tick:
                tick()

    def _check(self) -> None:
        while True:
            try:
                message = self.outbox.get_nowait()
            except queue.Empty:
                break
            self._receive(*message)
        for i, w in enumerate(self.workers):
            if not w.is_alive() and i not in self.results and w.exitcode not in (None, 0):
                self.terminate()
                raise RuntimeError(f"simulator worker {i} died with exit code {w.exitcode}")

    def finish(self, tick=None) -> dict[str, dict]:
        """Tell every worker to stop, wait until all spans are flushed, return each process's exporter stats."""
        for i in range(len(self.workers)):
            self._put(i, None, tick)
        while len(self.results) < len(self.workers):
            self._check()
            if len(self.results) < len(self.workers):
                try:
                    message = self.outbox.get(timeout=0.2)
                except queue.Empty:
                    if tick:
                        tick()
                    continue
                self._receive(*message)
        for w in self.workers:
            w.join()
        return {key: s for stats in self.results.values() for key, s in stats.items()}

    def _receive(self, status: str, index: int, payload) -> None:
        if status == "error":
            self.terminate()
            raise RuntimeError(f"simulator worker {index} failed:\n{payload}")
        if status == "ready":
            self.ready.add(index)
        else:
            self.results[index] = payload

    def terminate(self) -> None:
        for w in self.workers:
            if w.is_alive():
                w.terminate()
