"""`rollscope collect`: an OTLP/HTTP trace receiver that writes the store.

Any OpenTelemetry SDK's ``OTLPSpanExporter``, an OpenTelemetry Collector's ``otlphttp`` exporter or vLLM's
``--otlp-traces-endpoint`` can send to it unchanged. It follows the OTLP/HTTP specification: protobuf and
OTLP/JSON bodies, gzip or deflate, an ``ExportTraceServiceResponse`` whose ``partial_success`` counts the
spans it could not store, and status codes a client can act on: 400 malformed, 401 no token, 413 too large,
415 unsupported type, 429 over the memory budget and 503 store unwritable, both with ``Retry-After`` so the
SDK's exporter retries. A 200 is sent only once the spans are in a durable segment (``collectors.group_commit``).

Memory is bounded by ``max_pending_bytes``: bodies admitted and not yet answered, wire and decompressed
sizes both counted; a request that would exceed it is answered 429 before its body is kept.
"""

from __future__ import annotations

import asyncio
import gc
import hmac
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rollscope.collectors import ports
from rollscope.collectors.content import ContentPolicy
from rollscope.collectors.group_commit import GroupCommit
from rollscope.collectors.otlp import Decoded, MalformedPayload, error_status, export_response
from rollscope.collectors.otlp_json import decode_json
from rollscope.collectors.otlp_protobuf import decode_protobuf
from rollscope.settings import Settings, compact_seconds
from rollscope.store.layout import SegmentWriter, check_run_id
from rollscope.store.schema import COLLECTOR_STATS_SCHEMA

log = logging.getLogger("rollscope.receiver")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/health"
# Decoding allocates many short-lived objects; the default thresholds spend ~20% of the CPU in collections.
# The young generation fills with what a commit window keeps alive (decoded attribute dicts, cached
# attribute pairs), and each collection walks all of it; at 50,000 that was still 1-2 us a span (counted with
# gc.callbacks in benchmarks.ingest's pipeline), at 200,000 a quarter of it, with the same peak RSS.
RECEIVER_GC = (200_000, 50, 100)
_DRAIN_LIMIT = 64 * 1024 * 1024
_STORE_RETRY_S = 5  # Retry-After when publishing failed: a full disk is not freed in a second  # read (and discard) at most this much of a refused body, then close


@dataclass
class ReceiverConfig:
    """Everything `rollscope collect` is started with; the defaults are its command-line defaults."""

    store: Path
    host: str = "127.0.0.1"
    port: int = 4318
    token: str | None = None
    run_id: str | None = None
    max_request_bytes: int = 16 * 1024 * 1024
    max_pending_bytes: int = 64 * 1024 * 1024
    commit_window: float = 0.05
    stats_seconds: float = 10.0
    retry_after_s: int = 1
    grpc_port: int | None = None  # OTLP/gRPC too, on this port (0 = any free); None = HTTP only
    compact_seconds: float | None = field(default_factory=compact_seconds)  # None: no background compaction
    # what it keeps of the content senders send (transcripts): ROLLSCOPE_CAPTURE_CONTENT & co by default
    content: ContentPolicy = field(default_factory=lambda: ContentPolicy.of(Settings.resolve()))

    def __post_init__(self) -> None:
        self.store = Path(self.store)
        if self.run_id is not None:
            check_run_id(self.run_id)
        if self.max_request_bytes <= 0 or self.max_pending_bytes < self.max_request_bytes:
            raise ValueError("max_pending_bytes must be at least max_request_bytes, and both positive")


class Refusal(Exception):
    """A request answered with an error status; ``retry`` adds ``Retry-After``."""

    def __init__(self, status: int, message: str, retry: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry = retry


class Receiver:
    """The HTTP application: admission, decoding on one thread, group commit, answers and counters."""

    def __init__(self, config: ReceiverConfig, grpc=None):
        self.config = config
        self.grpc = grpc  # a bound receiver_grpc.GrpcListener, started and stopped with this app
        self.stats = ReceiverStats(config)
        self.pending_bytes = 0
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollscope-decode")
        self._settling: list[tuple[asyncio.Future, object]] = []
        self._settling_lock = threading.Lock()
        self._commit: GroupCommit | None = None
        self._stats_task: asyncio.Task | None = None
        self.app = Starlette(
            routes=[Route(TRACES_PATH, self.traces, methods=["POST"]), Route(HEALTH_PATH, self.health)],
            lifespan=self._lifespan,
        )

    # --- lifecycle ------------------------------------------------------------------------------------------

    @contextmanager
    def _started(self) -> Iterator[None]:
        self.config.store.mkdir(parents=True, exist_ok=True)
        self._commit = GroupCommit(
            self.config.store,
            window=self.config.commit_window,
            compact_seconds=self.config.compact_seconds,
            content=self.config.content,
        )
        try:
            yield
        finally:
            self._commit.close()
            self._decoder.shutdown()
            self.stats.write(self._commit)

    @asynccontextmanager
    async def _lifespan(self, app):
        with self._started():
            self._stats_task = asyncio.create_task(self._write_stats_periodically())
            if self.grpc is not None:
                self.grpc.start(self, asyncio.get_running_loop())
            try:
                yield
            finally:
                self._stats_task.cancel()
                if self.grpc is not None:  # its calls in flight finish (and commit) before the commit closes
                    await asyncio.get_running_loop().run_in_executor(None, self.grpc.stop)

    async def _write_stats_periodically(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.stats_seconds)
            await loop.run_in_executor(None, self.stats.write, self._commit)

    # --- endpoints ----------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        try:
            self._authorize(request)
        except Refusal as refusal:
            return _refusal_response(refusal, as_json=True)
        published = self._commit.segments_published if self._commit else 0
        return JSONResponse(self.stats.health(segments_published=published, pending_bytes=self.pending_bytes))

    async def traces(self, request: Request) -> Response:
        as_json = _media_type(request) == JSON
        reserved = _Reservation()
        try:
            self._authorize(request)
            encoding = _content_encoding(request)
            body = await self._read_body(request, reserved)
            decoded = await self._decode(body, encoding, as_json, reserved)
            self.stats.count(decoded)
            return Response(export_response(decoded, as_json), media_type=JSON if as_json else PROTOBUF)
        except Refusal as refusal:
            self.stats.refused(refusal.status)
            await _drain(request)
            return _refusal_response(refusal, as_json)
        except ClientDisconnect:
            self.stats.refused(499)
            return Response(status_code=400)
        finally:
            self.pending_bytes -= reserved.bytes

    # --- steps of a request -------------------------------------------------------------------------------

    def _authorize(self, request: Request) -> None:
        token = self.config.token
        if token is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise Refusal(401, "missing or wrong 'Authorization: Bearer <token>' header")

    def _reserve(self, n: int, reserved: _Reservation) -> None:
        """Count ``n`` more bytes against the budget, or refuse with 429 so the client retries later."""
        if self.pending_bytes + n > self.config.max_pending_bytes and self.pending_bytes > 0:
            raise Refusal(429, "the receiver is at its memory budget; retry later", self.config.retry_after_s)
        self.pending_bytes += n
        reserved.bytes += n

    async def _read_body(self, request: Request, reserved: _Reservation) -> bytes:
        if _media_type(request) not in (PROTOBUF, JSON):
            raise Refusal(415, f"Content-Type must be {PROTOBUF} or {JSON}, not {_media_type(request)!r}")
        limit = self.config.max_request_bytes
        declared = _content_length(request)
        if declared is not None and declared > limit:
            raise Refusal(413, f"body of {declared} bytes is over the {limit}-byte limit")
        self._reserve(declared or 0, reserved)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refusal(413, f"body is over the {limit}-byte limit")
            if size > reserved.bytes:
                self._reserve(size - reserved.bytes, reserved)
            chunks.append(chunk)
        return b"".join(chunks)

    async def _decode(self, body: bytes, encoding: str, as_json: bool, reserved: _Reservation) -> Decoded:
        """Decode on the decoder thread, then wait until the group commit has published the spans."""
        loop = asyncio.get_running_loop()
        if encoding != "identity":
            body = await self._off_loop(_decompress, body, encoding, self.config.max_request_bytes)
            self._reserve(len(body), reserved)
        future = loop.create_future()
        self._commit.expect()
        try:
            self._decoder.submit(self._decode_and_submit, body, as_json, loop, future)
        except BaseException:
            self._commit.unexpect()
            raise
        try:
            decoded, error = await future  # one hop back to the loop per request, when its spans are durable
        except MalformedPayload as e:
            raise Refusal(400, str(e)) from None
        except _ShuttingDown:
            raise Refusal(
                503, "the receiver is shutting down; retry later", self.config.retry_after_s
            ) from None
        if error is not None:
            raise Refusal(503, f"the store is not writable now ({error}); retry later", _STORE_RETRY_S)
        return decoded

    async def _off_loop(self, fn, *args):
        try:
            return await asyncio.get_running_loop().run_in_executor(self._decoder, fn, *args)
        except MalformedPayload as e:
            raise Refusal(400, str(e)) from None
        except _ShuttingDown:
            raise Refusal(
                503, "the receiver is shutting down; retry later", self.config.retry_after_s
            ) from None

    def _decode_and_submit(self, body: bytes, as_json: bool, loop, future: asyncio.Future) -> None:
        """On the decoder thread: decode, queue the spans for the next commit; ``future`` gets ``(decoded,
        error)`` once they are durable (or the decode error), from whichever thread finishes the request."""
        submitted = False
        try:
            decoded = (decode_json if as_json else decode_protobuf)(body, self.config.run_id)
            if not decoded.accepted:
                return self._settle_soon(loop, future, (decoded, None))
            submitted = True  # submit() counts the request as arrived, even when it refuses it
            try:
                self._commit.submit(
                    decoded, lambda error: self._settle_soon(loop, future, (decoded, error)), expected=True
                )
            except RuntimeError:
                raise _ShuttingDown from None
        except BaseException as e:
            self._settle_soon(loop, future, e)
        finally:
            if not submitted:
                self._commit.unexpect()

    def _settle_soon(self, loop, future: asyncio.Future, outcome) -> None:
        """Settle ``future`` on the loop; settlements that arrive together share one wake-up of the loop (a
        commit answers every request of its window at once)."""
        with self._settling_lock:
            self._settling.append((future, outcome))
            if len(self._settling) > 1:
                return
        loop.call_soon_threadsafe(self._settle_all)

    def _settle_all(self) -> None:
        with self._settling_lock:
            settling, self._settling = self._settling, []
        for future, outcome in settling:
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


class _Reservation:
    """The bytes one request has counted against the receiver's memory budget (given back when it ends)."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0


class _ShuttingDown(Exception):
    pass


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _content_encoding(request: Request) -> str:
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in ("identity", "gzip", "deflate"):
        raise Refusal(415, f"Content-Encoding must be gzip, deflate or none, not {encoding!r}")
    return encoding


def _content_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        raise Refusal(400, f"Content-Length {raw!r} is not a number") from None


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """gzip (several members allowed) or deflate (zlib or raw), never inflating past ``limit`` bytes."""
    wbits = (
        16 + zlib.MAX_WBITS
        if encoding == "gzip"
        else (zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS)
    )
    out, rest = [], body
    size = 0
    try:
        while rest:
            inflater = zlib.decompressobj(wbits)
            part = inflater.decompress(rest, limit - size + 1)
            size += len(part)
            if size > limit or inflater.unconsumed_tail:
                raise Refusal(413, f"decompressed body is over the {limit}-byte limit")
            if not inflater.eof:
                raise MalformedPayload(f"{encoding} body is truncated")
            out.append(part)
            rest = inflater.unused_data if encoding == "gzip" else b""
    except zlib.error as e:
        raise MalformedPayload(f"body is not valid {encoding}: {e}") from None
    return b"".join(out)


async def _drain(request: Request) -> None:
    """Read a refused body to its end (up to a cap) so the client reads our answer, not a reset."""
    if request.scope.get("rollscope.drained"):
        return
    request.scope["rollscope.drained"] = True
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > _DRAIN_LIMIT:
                return
    except (ClientDisconnect, RuntimeError):
        return


# google.rpc.Code for each answer: INVALID_ARGUMENT, UNAUTHENTICATED, RESOURCE_EXHAUSTED, UNAVAILABLE
_RPC_CODES = {400: 3, 401: 16, 413: 3, 429: 8, 503: 14}


def _refusal_response(refusal: Refusal, as_json: bool) -> Response:
    headers = {"Retry-After": str(refusal.retry)} if refusal.retry is not None else {}
    if refusal.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if refusal.status == 415:
        return Response(str(refusal), status_code=415, media_type="text/plain", headers=headers)
    body = error_status(_RPC_CODES.get(refusal.status, 2), str(refusal), as_json)
    return Response(
        body, status_code=refusal.status, media_type=JSON if as_json else PROTOBUF, headers=headers
    )


class ReceiverStats:
    """Counters for /health and, per run, cumulative ``collector_stats`` rows (source 'receiver')."""

    _RUN_COUNTERS = ("spans_received", "spans_exported", "spans_failed")

    def __init__(self, config: ReceiverConfig):
        self.started = time.monotonic()
        self.instance_id = f"{socket.gethostname()}:{config.port}:{os.getpid()}"
        self.requests: dict[int, int] = {}
        self.spans = {"received": 0, "accepted": 0, "rejected": 0}
        self.by_run: dict[str, dict[str, int]] = {}
        self._written: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._writer = SegmentWriter(config.store, "collector_stats", compact_seconds=config.compact_seconds)
        self._config = config

    def refused(self, status: int) -> None:
        self.requests[status] = self.requests.get(status, 0) + 1

    def count(self, decoded: Decoded) -> None:
        self.requests[200] = self.requests.get(200, 0) + 1
        self.spans["received"] += decoded.received
        self.spans["accepted"] += decoded.accepted
        self.spans["rejected"] += decoded.rejected_spans
        with self._lock:
            for run_id, counts in decoded.by_run().items():
                row = self.by_run.setdefault(run_id, dict.fromkeys(self._RUN_COUNTERS, 0))
                for name, n in counts.items():
                    row[name] += n

    def health(self, *, segments_published: int, pending_bytes: int) -> dict:
        return {
            "status": "ok",
            "uptime_s": round(time.monotonic() - self.started, 3),
            "requests": {str(k): v for k, v in sorted(self.requests.items())},
            "spans_received": self.spans["received"],
            "spans_accepted": self.spans["accepted"],
            "spans_rejected": self.spans["rejected"],
            "segments_published": segments_published,
            "pending_bytes": pending_bytes,
            "max_pending_bytes": self._config.max_pending_bytes,
            "runs": sorted(self.by_run),
        }

    def write(self, commit: GroupCommit | None) -> None:
        """One row per run whose counters moved since the last write; never raises."""
        with self._lock:
            changed = {run: dict(c) for run, c in self.by_run.items() if c != self._written.get(run)}
        for run_id, counts in changed.items():
            row = {
                "time_ns": time.time_ns(),
                "service_name": "rollscope-collect",
                "instance_id": self.instance_id,
                "role": None,
                "pid": os.getpid(),
                "source": "receiver",
                "spans_dropped": 0,
                **counts,
                "segments_published": commit.segments_by_run.get(run_id, 0) if commit else 0,
                "attributes_kept_untyped": commit.untyped_by_run.get(run_id, 0) if commit else 0,
                "messages_exported": commit.messages_by_run.get(run_id, 0) if commit else 0,
            }
            try:
                self._writer.publish(run_id, pa.Table.from_pylist([row], schema=COLLECTOR_STATS_SCHEMA))
            except Exception:
                log.exception("rollscope collect: could not write collector stats for %s", run_id)
                continue
            self._written[run_id] = counts


# --- running it -----------------------------------------------------------------------------------------------


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts so ``port=0`` can report the port it got."""
    sock = ports.bound(host, port)
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def _server(receiver: Receiver):
    import uvicorn

    config = uvicorn.Config(
        receiver.app,
        http="auto",  # httptools' C parser when the `fast` extra is installed, else h11
        loop="auto",  # uvloop likewise, else asyncio's own loop
        log_level="warning",
        access_log=False,
        lifespan="on",
        limit_concurrency=2048,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=30,
    )
    return uvicorn.Server(config)


def bind_grpc(config: ReceiverConfig):
    """The OTLP/gRPC listener on ``config.grpc_port`` (which is set to the port it got), or None when off."""
    if config.grpc_port is None:
        return None
    from rollscope.collectors.receiver_grpc import GrpcListener

    listener = GrpcListener(config, config.grpc_port)
    config.grpc_port = listener.port
    return listener


def serve(config: ReceiverConfig, sock: socket.socket | None = None, grpc=None) -> None:
    """Run until SIGINT/SIGTERM; in-flight requests finish and their spans are committed first.
    ``grpc``: a listener from ``bind_grpc`` (else one is bound here when ``config.grpc_port`` is set)."""
    gc.set_threshold(*RECEIVER_GC)
    gc.freeze()  # start-up's modules and objects live for good: no collection needs to walk them
    sock = sock or bind(config.host, config.port)
    config.port = sock.getsockname()[1]
    grpc = grpc or bind_grpc(config)
    _server(Receiver(config, grpc)).run(sockets=[sock])


@contextmanager
def running(config: ReceiverConfig) -> Iterator[str]:
    """A receiver in a background thread of this process; yields its base URL (tests, embedding). With
    ``config.grpc_port`` set it serves OTLP/gRPC too, on the port then in ``config.grpc_port``."""
    sock = bind(config.host, config.port)
    config.port = sock.getsockname()[1]
    receiver = Receiver(config, bind_grpc(config))
    server = _server(receiver)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="rollscope-collect", daemon=True
    )
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the receiver did not start")
        time.sleep(0.01)
    try:
        yield f"http://{config.host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
