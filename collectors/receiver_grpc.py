"""OTLP/gRPC for `rollscope collect`: ``TraceService/Export`` beside the HTTP receiver, one commit pipeline.

vLLM exports traces over gRPC unless told otherwise, as do the Java and Go SDKs and the OpenTelemetry
Collector's ``loadbalancing`` exporter. This listener answers them with what the HTTP receiver does, in the
same process: the same token, request and memory limits (``Receiver._reserve`` counts both protocols against
one budget), the same decoder thread (``collectors.otlp_protobuf.decode_protobuf``) and the same ``GroupCommit``, so an
``Export`` returns OK only once its spans are in a durable segment, whichever protocol carried them.

gRPC's own library reads the request (gzip included, ``grpc-encoding``) on a small thread pool and enforces
``max_request_bytes`` on the message; each call then hops onto the receiver's event loop. Refusals are the
gRPC equivalents of the HTTP statuses, with ``google.rpc.RetryInfo`` where a retry will help (the OTLP
exporters read ``google.rpc.retryinfo-bin``; other clients read it from ``grpc-status-details-bin``):

| HTTP | gRPC | retry info |
|---|---|---|
| 400 malformed | ``INVALID_ARGUMENT`` | no |
| 401 no or wrong token | ``UNAUTHENTICATED`` | no |
| 413 too large | ``RESOURCE_EXHAUSTED`` (gRPC's own message limit) | no |
| 429 over the memory budget | ``RESOURCE_EXHAUSTED`` | yes |
| 503 store unwritable, shutting down | ``UNAVAILABLE`` | yes |
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc

from rollscope.collectors import ports
from rollscope.collectors.otlp import export_response

if TYPE_CHECKING:
    from rollscope.collectors.receiver import Receiver, ReceiverConfig

log = logging.getLogger("rollscope.receiver")

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
DEFAULT_PORT = 4317
_WORKERS = 32  # calls read and waiting on their commit at once; more wait in gRPC's queue
_STOP_GRACE_S = 30

_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}


class GrpcListener:
    """The gRPC server, bound at construction (so ``port=0`` can report its port), started and stopped by
    the HTTP receiver's lifespan, which owns the event loop and the group commit it needs."""

    def __init__(self, config: ReceiverConfig, port: int):
        self.config = config
        self._receiver: Receiver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        address = f"[{config.host}]:{port}" if ":" in config.host else f"{config.host}:{port}"
        # A taken port refused here with our one line: gRPC's C core would first log its own failure to stderr
        # ("E1201 ... add_port.cc:83] Failed to add port ..."), which no Python setting silences.
        why = ports.taken(config.host, port) if port else None
        if why is not None:
            raise OSError(f"cannot listen for OTLP/gRPC on {address}: {why}")
        limit = config.max_request_bytes
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="rollscope-grpc"),
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.so_reuseport", 0),  # a second receiver on the same port fails, as HTTP's bind does
            ],
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(self._export)}
        )
        self._server.add_generic_rpc_handlers((handler,))
        try:
            self.port = self._server.add_insecure_port(address)
        except RuntimeError as e:  # grpcio raises RuntimeError when it cannot bind
            raise OSError(f"cannot listen for OTLP/gRPC on {address}: {e}") from None
        if not self.port:
            raise OSError(f"cannot listen for OTLP/gRPC on {address}: the port is taken or not allowed")

    def start(self, receiver: Receiver, loop: asyncio.AbstractEventLoop) -> None:
        self._receiver, self._loop = receiver, loop
        self._server.start()

    def stop(self) -> None:
        """Refuse new calls, let those in flight finish (their spans committed), then return. Blocking:
        run it off the event loop, which the calls in flight still need."""
        self._server.stop(_STOP_GRACE_S).wait()

    # --- one call -------------------------------------------------------------------------------------------

    def _export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        receiver = self._receiver
        token = self.config.token
        if token is not None:
            given = dict(context.invocation_metadata()).get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                self._loop.call_soon_threadsafe(receiver.stats.refused, 401)  # counters live on the loop
                _abort(context, 401, "missing or wrong 'authorization: Bearer <token>' metadata", None)
        future = asyncio.run_coroutine_threadsafe(_ingest(receiver, body), self._loop)
        try:
            answer = future.result()
        except Exception as e:  # the loop is gone (shutting down): tell the client to retry
            log.debug("rollscope collect: gRPC call failed on the event loop: %s", e)
            answer = (503, "the receiver is shutting down; retry later", self.config.retry_after_s)
        if isinstance(answer, bytes):
            return answer
        status, message, retry = answer
        _abort(context, status, message, retry)


async def _ingest(receiver: Receiver, body: bytes) -> bytes | tuple[int, str, int | None]:
    """On the receiver's loop: count the body against the shared budget, decode, wait for the commit."""
    from rollscope.collectors.receiver import Refusal, _Reservation

    reserved = _Reservation()
    try:
        receiver._reserve(len(body), reserved)
        decoded = await receiver._decode(body, "identity", False, reserved)
        receiver.stats.count(decoded)
        return export_response(decoded, as_json=False)
    except Refusal as refusal:
        receiver.stats.refused(refusal.status)
        return refusal.status, str(refusal), refusal.retry
    finally:
        receiver.pending_bytes -= reserved.bytes


def _abort(context: grpc.ServicerContext, status: int, message: str, retry: int | None):
    code = _CODES.get(status, grpc.StatusCode.UNKNOWN)
    if retry is not None:
        info = retry_info(retry)
        details = _status_details(code.value[0], message, info)
        context.set_trailing_metadata(
            (("google.rpc.retryinfo-bin", info), ("grpc-status-details-bin", details))
        )
    context.abort(code, message)


def retry_info(seconds: int) -> bytes:
    """``google.rpc.RetryInfo{retry_delay: Duration{seconds}}``, encoded by hand: ``googleapis-common-protos``
    is not a dependency of the receiver."""
    duration = b"\x08" + _varint(seconds)
    return b"\x0a" + _varint(len(duration)) + duration


def _status_details(code: int, message: str, info: bytes) -> bytes:
    """``google.rpc.Status{code, message, details: [Any(RetryInfo)]}``."""
    type_url = b"type.googleapis.com/google.rpc.RetryInfo"
    any_ = b"\x0a" + _varint(len(type_url)) + type_url + b"\x12" + _varint(len(info)) + info
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text + b"\x1a" + _varint(len(any_)) + any_


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)
