"""Binding a TCP port, one way for every server of ours: the OTLP/HTTP listener binds with it, and the
dashboard command and the OTLP/gRPC listener ask it first whether their port is free (so a taken port is our
one line, not another server's log after ours)."""

from __future__ import annotations

import socket


def bound(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``(host, port)``: IPv6 when the host is an IPv6 address, and ``SO_REUSEADDR`` so
    that a port left in ``TIME_WAIT`` by a restart is free, as the servers we start (uvicorn, Streamlit, gRPC)
    bind theirs. Closed again if the bind fails."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio sets TCP_NODELAY
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def taken(host: str, port: int) -> str | None:
    """Why ``(host, port)`` cannot be bound now (the system's reason: "Address already in use"), or None when
    it can."""
    try:
        bound(host, port).close()
    except OSError as e:
        return e.strerror or str(e)
    return None
