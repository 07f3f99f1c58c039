"""A real local Ray cluster of several nodes, for the tests and the benchmark that derive on Ray.

Each node is a `ray start --block` process (the head with ``--head``, the others joining it), as a user starts
a cluster, every port of its own picked free (the head's outside Ray's worker range, 10002-19999; workers on
ports the system picks) and its files in a temporary folder of its own, so that it never meets another Ray on
the machine. Stopping it ends the processes this started (their process groups), never `ray stop`, which
ends every Ray of the user.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
WORKER_PORTS = range(10002, 20000)  # Ray's default worker port range, which the head's port must avoid


def free_port() -> int:
    """A free TCP port outside Ray's worker range (the system's ephemeral ports are above it)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in WORKER_PORTS:
            return port


def environment(auth: str = "disabled", token: str | None = None) -> dict[str, str]:
    """What a node and a client of the cluster run with: token authentication as asked (``disabled`` for a
    throwaway cluster; with ``token``, given in the environment, so nothing is written to ~/.ray)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update({"RAY_AUTH_MODE": auth, "RAY_USAGE_STATS_ENABLED": "0"})
    if token is not None:
        env["RAY_AUTH_TOKEN"] = token
    return env


def _node_args(cpus: int) -> list[str]:
    ports = (
        "--node-manager-port",
        "--object-manager-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
    )
    ports += ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port")
    return [
        *(a for p in ports for a in (p, str(free_port()))),
        *("--num-cpus", str(cpus), "--object-store-memory", str(100 * 2**20), "--disable-usage-stats"),
        *("--min-worker-port", "0", "--max-worker-port", "0", "--node-ip-address", "127.0.0.1"),
    ]


@contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1, *, env: dict[str, str] | None = None, timeout: float = 120):
    """Yields the head's address (HOST:PORT) once ``nodes`` nodes of ``cpus`` CPUs each have joined."""
    env = env or environment()
    folder = Path(tempfile.mkdtemp(prefix="rsray-", dir="/tmp"))  # short: Ray's sockets live under it
    port = free_port()
    address = f"127.0.0.1:{port}"
    head = [RAY, "start", "--block", "--head", "--port", str(port), "--include-dashboard", "false"]
    head += ["--ray-client-server-port", str(free_port()), "--temp-dir", str(folder)]
    started = []
    try:
        for i in range(nodes):
            args = head if i == 0 else [RAY, "start", "--block", "--address", address]
            with open(folder / f"node-{i}.log", "w") as log:  # the node's process keeps its own copy
                started.append(
                    subprocess.Popen(
                        [*args, *_node_args(cpus)],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            if i == 0:
                _wait_for_port(port, started[0], timeout)
        _wait_for_nodes(address, nodes, env, timeout)
        yield address
    finally:
        for proc in reversed(started):
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for_port(port: int, head: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"the Ray head exited ({head.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the Ray head did not listen in time")


WAIT_FOR_NODES = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="WARNING", log_to_driver=False)
deadline = time.monotonic() + float(sys.argv[3])
while sum(n["Alive"] for n in ray.nodes()) < int(sys.argv[2]):
    if time.monotonic() > deadline:
        sys.exit("not every node joined")
    time.sleep(0.2)
"""


def _wait_for_nodes(address: str, nodes: int, env: dict[str, str], timeout: float) -> None:
    subprocess.run(
        [sys.executable, "-c", WAIT_FOR_NODES, address, str(nodes), str(timeout)],
        env=env,
        check=True,
        timeout=timeout + 60,
    )


def _stop(proc: subprocess.Popen) -> None:
    """End a node: `ray start --block` stops what it started on SIGTERM; its process group, if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this started (start_new_session): its own processes
    except ProcessLookupError:
        pass
