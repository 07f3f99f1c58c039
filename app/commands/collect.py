"""`rollscope collect`: run the OTLP trace receiver (HTTP and gRPC) that writes the store."""

from __future__ import annotations

import argparse

from rollscope.app.commands._common import add_store, number, port_number
from rollscope.errors import RollscopeError

_MIB = 1024 * 1024


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "collect",
        help="receive OTLP traces (HTTP protobuf/JSON and gRPC) from SDKs, an OpenTelemetry Collector or vLLM",
        description=(
            "Listen for OTLP/HTTP trace exports on POST /v1/traces and OTLP/gRPC exports (TraceService/Export) "
            "and write the spans to the store. A request is answered 200 (gRPC OK) only once its spans are "
            "durable. GET /health reports counts."
        ),
    )
    add_store(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for all)"
    )
    parser.add_argument(
        "--port", type=port_number(), default=4318, help="port (default 4318, OTLP/HTTP's; 0 = any free)"
    )
    parser.add_argument(
        "--grpc-port",
        type=_grpc_port,
        default=None,
        metavar="PORT|off",
        help="OTLP/gRPC port on the same host (default 4317, OTLP/gRPC's; any free one when --port is 0; "
        "0 = any free; off = HTTP only)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every request (default: $ROLLSCOPE_TOKEN, which "
        "keeps the token out of `ps`)",
    )
    parser.add_argument(
        "--run-id",
        metavar="ID",
        help="run id for spans whose resource has no rl.run.id (else they are rejected)",
    )
    parser.add_argument(
        "--max-request-mib",
        type=number(0, above=True),
        default=16,
        metavar="MIB",
        help="largest body, after decompression (16)",
    )
    parser.add_argument(
        "--max-pending-mib",
        type=number(0, above=True),
        metavar="MIB",
        default=64,
        help="bodies held at once before answering 429 with Retry-After (64); bounds the receiver's memory",
    )
    parser.add_argument(
        "--commit-window",
        type=number(0),
        metavar="SECONDS",
        default=0.05,
        help="seconds requests wait to share one durable segment (0.05); larger = fewer, bigger files",
    )
    parser.add_argument(
        "--no-content",
        action="store_true",
        help="keep no transcripts: the message content senders send is written nowhere (default: "
        "$ROLLSCOPE_CAPTURE_CONTENT, else on)",
    )
    parser.set_defaults(func=run)


def _grpc_port(text: str) -> int | str:
    if text.strip().lower() == "off":
        return "off"
    try:
        return port_number()(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 or 'off', not {text!r}") from None


def run(args: argparse.Namespace) -> int:
    from rollscope.collectors.content import ContentPolicy
    from rollscope.collectors.receiver import ReceiverConfig, bind, bind_grpc, serve
    from rollscope.settings import Settings, default_store

    settings = Settings.resolve(capture_content=False if args.no_content else None)
    try:
        config = ReceiverConfig(
            store=args.store or default_store(),
            host=args.host,
            port=args.port,
            token=args.token or settings.token,
            run_id=args.run_id,
            max_request_bytes=int(args.max_request_mib * _MIB),
            max_pending_bytes=int(args.max_pending_mib * _MIB),
            commit_window=args.commit_window,
            grpc_port=_grpc_default(args),
            content=ContentPolicy.of(settings),
        )
    except ValueError as e:
        raise RollscopeError("Bad option", str(e)) from None
    try:
        sock = bind(config.host, config.port)
    except OSError as e:
        raise RollscopeError("Cannot listen", f"cannot listen on {config.host}:{config.port}: {e}") from None
    try:
        grpc = bind_grpc(config)
    except OSError as e:
        sock.close()
        raise RollscopeError(
            "Cannot listen", f"{e} (choose another with --grpc-port, or --grpc-port off)"
        ) from None
    host, port = sock.getsockname()[:2]
    grpc_note = f" and {_host(host)}:{config.grpc_port} (OTLP/gRPC)" if grpc is not None else ""
    print(
        f"rollscope collect: listening on http://{_host(host)}:{port}/v1/traces{grpc_note}, "
        f"writing {config.store}",
        flush=True,
    )
    serve(config, sock, grpc)
    return 0


def _grpc_default(args: argparse.Namespace) -> int | None:
    """--grpc-port as ReceiverConfig takes it: None for off; by default 4317, or any free port when the
    HTTP port is 0 too (tests and benchmarks start many receivers at once)."""
    if args.grpc_port == "off":
        return None
    if args.grpc_port is None:
        return 0 if args.port == 0 else 4317
    return args.grpc_port


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
