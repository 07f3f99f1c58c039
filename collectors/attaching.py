"""``attach()``: one line that wires an RL process's OpenTelemetry spans into a rollscope store."""

from __future__ import annotations

import logging
import os
import random
import threading
import uuid

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPERIMENTAL_RESOURCE_DETECTORS,
    OTEL_RESOURCE_ATTRIBUTES,
    OTEL_SERVICE_NAME,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from rollscope import semconv
from rollscope.collectors.content import ContentPolicy
from rollscope.collectors.exporter import StoreSpanExporter, StoreSpanProcessor, _reinit_after_fork
from rollscope.collectors.spans import RL
from rollscope.settings import Settings, compact_seconds, consulted, safe_run_id
from rollscope.store.layout import check_run_id

log = logging.getLogger("rollscope")


def attach(
    store=None,
    run_id: str | None = None,
    role: str | None = None,
    devices: float | None = None,
    *,
    service_name: str | None = None,
    model_name: str | None = None,
    model_parameters: int | None = None,
    algorithm: str | None = None,
    staleness_bound: int | None = None,
    resource_attributes: dict | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool = True,
    **settings,
) -> RL:
    """Attach rollscope to this process and return the RL span helpers.

    Adds a store exporter to ``tracer_provider`` (or to the global SDK provider the job already set), or
    creates and installs a provider when there is none. With ``set_global=False`` (or when an earlier
    attach() already installed the global one) the helpers get a private provider with this resource. Plain OpenTelemetry spans that carry the convention
    attributes land in the store exactly as the helpers' spans do.

    ``capture_content=False`` (or ``ROLLSCOPE_CAPTURE_CONTENT=0``) keeps transcripts out of the store; with
    ``content_max_chars`` and ``content_sample`` it is the capture policy (docs/store.md "Transcripts").
    """
    config = Settings.resolve(
        store=store, run_id=run_id, role=role, devices=devices, service_name=service_name, **settings
    )
    resource = _resource(
        config, model_name, model_parameters, algorithm, staleness_bound, resource_attributes
    )
    return _attach(config, resource, tracer_provider, set_global)


def process_resource(
    *,
    model_name: str | None = None,
    model_parameters: int | None = None,
    algorithm: str | None = None,
    staleness_bound: int | None = None,
    resource_attributes: dict | None = None,
    **arguments,
) -> Resource:
    """The resource attach() with these arguments gives the process (the simulator's fast mode uses it to
    write the rows attach() would have written)."""
    config = Settings.resolve(**arguments)
    return _resource(config, model_name, model_parameters, algorithm, staleness_bound, resource_attributes)


def _attach(config: Settings, resource: Resource, tracer_provider, set_global: bool) -> RL:
    run = _run_id(config, resource)
    if run != resource.attributes.get(semconv.RUN_ID):
        resource = resource.merge(Resource({semconv.RUN_ID: run}))
    exporter = StoreSpanExporter(
        config.store,
        default_run_id=str(run),
        resource_defaults=dict(resource.attributes),
        segment_rows=config.segment_rows,
        segment_seconds=config.segment_seconds,
        stats_seconds=config.stats_seconds,
        compact_seconds=compact_seconds(config),
        identity={
            "service_name": resource.attributes.get(semconv.SERVICE_NAME),
            "instance_id": resource.attributes.get(semconv.SERVICE_INSTANCE_ID),
            "role": config.role,
        },
        flush_thread=False,  # the processor's thread publishes
        content=ContentPolicy.of(config),
    )
    processor = StoreSpanProcessor(
        exporter,
        max_queue_size=config.max_queue_size,
        max_export_batch_size=config.max_export_batch_size,
        schedule_delay_millis=config.schedule_delay_millis,
    )
    provider = (
        tracer_provider or (set_global and _existing_sdk_provider()) or _new_provider(resource, set_global)
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("rollscope")
    if type(getattr(tracer, "id_generator", None)) is RandomIdGenerator:
        # The job's own provider with the SDK's default ids: rollscope's spans still leave its random alone. An
        # id generator the job chose itself (the simulator's planned ids) is kept.
        tracer.id_generator = PrivateIds()
    return RL(tracer, provider, processor, exporter, config)


def _resource(config: Settings, model_name, model_parameters, algorithm, staleness_bound, extra) -> Resource:
    """Explicit arguments win over OTEL_RESOURCE_ATTRIBUTES, which Resource.create merges underneath."""
    given = {
        semconv.RUN_ID: config.run_id,
        semconv.SERVICE_NAME: config.service_name,
        semconv.COMPUTE_ROLE: config.role,
        semconv.COMPUTE_DEVICES: float(config.devices),
        semconv.MODEL_NAME: model_name,
        semconv.MODEL_PARAMETERS: model_parameters,
        semconv.ALGORITHM: algorithm,
        semconv.STALENESS_BOUND: staleness_bound,
        semconv.PROCESS_PID: os.getpid(),
        **(extra or {}),
    }
    base = _detected()
    attributes = {k: v for k, v in given.items() if v is not None}
    if semconv.SERVICE_NAME not in attributes and base.attributes.get(semconv.SERVICE_NAME, "").startswith(
        "unknown_service"
    ):
        attributes[semconv.SERVICE_NAME] = f"rl-{config.role}"
    attributes.setdefault(
        semconv.SERVICE_INSTANCE_ID, base.attributes.get(semconv.SERVICE_INSTANCE_ID) or uuid.uuid4().hex
    )
    return base.merge(Resource(attributes))


_DETECTED: dict[tuple, Resource] = {}


def _detected() -> Resource:
    """``Resource.create({})``: what the SDK's resource detectors find. The SDK runs them on a thread pool of
    its own, a new thread each call (~1 ms of ``instrument()``, several when the CPU is busy); with the default
    detectors the answer depends only on the process (its ``service.instance.id``) and the two variables, so it
    is kept per process and setting. Detectors named in the environment run at every call, as before."""
    if consulted(OTEL_EXPERIMENTAL_RESOURCE_DETECTORS).strip():
        return Resource.create({})
    key = (os.getpid(), consulted(OTEL_RESOURCE_ATTRIBUTES), consulted(OTEL_SERVICE_NAME))
    found = _DETECTED.get(key)
    if found is None:
        _DETECTED.clear()
        found = _DETECTED[key] = Resource.create({})
    return found


def _run_id(config: Settings, resource: Resource) -> str:
    """The run id: the argument or ROLLSCOPE_RUN_ID (validated, or made safe, by Settings), else rl.run.id from
    OTEL_RESOURCE_ATTRIBUTES. A malformed id from the environment is made safe, with a warning, rather than
    stopping the job; no run id at all is the caller's error."""
    run = config.run_id or resource.attributes.get(semconv.RUN_ID)
    source = f"{semconv.RUN_ID} in OTEL_RESOURCE_ATTRIBUTES"
    if not run:
        raise ValueError("attach() needs a run id: pass run_id=, or set ROLLSCOPE_RUN_ID or rl.run.id")
    try:
        return check_run_id(str(run))
    except ValueError:
        safe = safe_run_id(str(run))
        log.warning("rollscope: %s=%r is not a valid run id; writing to run %r instead", source, run, safe)
        return safe


def _existing_sdk_provider() -> TracerProvider | None:
    """The job's own SDK provider; one made by an earlier attach() has another run's resource, so not that."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider) and not getattr(provider, "_rollscope_made", False):
        return provider
    return None


class PrivateIds(RandomIdGenerator):
    """Span and trace ids from a generator of rollscope's own. The SDK's default draws from the module-level
    ``random``, which the job seeds and draws from (shuffles, sampling): with it, every span would move the
    job's random numbers, and a seeded run would not repeat with rollscope attached."""

    def __init__(self) -> None:
        self._reseed()
        _reinit_after_fork(self._reseed)

    def _reseed(self) -> None:
        """A forked child reseeds (as ``random`` itself does): else it would hand out its parent's next ids."""
        self._rng = random.Random(os.urandom(16))
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._rng.getrandbits(128) or 1

    def many(self, n: int, bits: int) -> list[int]:
        """``n`` ids of ``bits`` bits under one lock: for a producer that makes its spans in blocks (the TRL
        adapter), where a call and a lock per id would cost more than the id."""
        with self._lock:
            draw = self._rng.getrandbits
            return [draw(bits) or 1 for _ in range(n)]


def _new_provider(resource: Resource, set_global: bool) -> TracerProvider:
    provider = TracerProvider(resource=resource, id_generator=PrivateIds())
    provider._rollscope_made = True
    if set_global and not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(provider)
    return provider
