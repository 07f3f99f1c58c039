"""Bringing runs' derived tables up to date, in this process or as tasks on a Ray cluster (`rollscope derive`).

The unit is the run. Each is derived by ``store.derived.catch_up`` with ``queries.derive``, under the run's lock,
wherever that runs: a task on another node keeps every guarantee a local reader has (one process derives a run
at a time, the manifest is published atomically, readers read the previous state meanwhile, a writer goes on
writing), and gives the same tables. Runs are independent, so they spread over a cluster's nodes; a run is
never split (``queries.derive`` derives one run in one DuckDB: see docs/store.md, "Deriving on a Ray
cluster"). The store must be at the same path on every node (a shared filesystem), and rollscope installed
there. Ray is imported only when a cluster is asked for (``pip install 'rollscope[ray]'``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rollscope import settings
from rollscope.errors import RollscopeError, StoreError
from rollscope.queries import definitions
from rollscope.queries.derive import derive
from rollscope.store import derived, layout

TASK_CPUS = 4  # CPUs a run's task asks for by default (ROLLSCOPE_DERIVE_THREADS there)
REACH_S = 5.0  # how long the head's port may take to answer before the address is called wrong


@dataclass(frozen=True)
class Outcome:
    """What bringing one run up to date did, where."""

    run_id: str
    done: str  # store.derived.catch_up's answer: "current", "derived" or "waited"; "failed"
    how: str | None  # "full" or "incremental" (derived or waited for), else None
    seconds: float
    node: str  # the host it ran on
    error: str | None = None  # one line, when it failed


def derive_run(store: str, run_id: str) -> Outcome:
    """Bring one run up to date here (this process, or a Ray worker on a node that mounts the store)."""
    started, node = time.perf_counter(), socket.gethostname()
    try:
        if not layout.segments(layout.require_store(store), "spans", run_id):
            raise StoreError(
                "Run not found",
                f"no run {run_id!r} under {store} on {node}: is the store on a filesystem every node mounts "
                "at the same path?",
            )
        state, done = derived.catch_up(store, run_id, derive, wait=True, definitions=definitions.digests())
    except RollscopeError as e:
        return Outcome(run_id, "failed", None, time.perf_counter() - started, node, f"{e.title}: {e}")
    how = state.how if state is not None and done != "current" else None
    return Outcome(run_id, done, how, time.perf_counter() - started, node)


def derive_runs(
    store: Path | str, runs: list[str], *, ray_address: str | None = None, cpus: int | None = None
) -> Iterator[Outcome]:
    """Each run brought up to date, one after another here, or at once as Ray tasks on the cluster at
    ``ray_address`` (``cpus`` each, default ``TASK_CPUS``, at most a node's); outcomes as they finish."""
    store = str(Path(store).resolve())  # the path every node opens
    stale = []
    for run in runs:  # a run already current costs a listing here, not a task there
        if derived.current(store, run, definitions=definitions.digests()) is not None:
            yield Outcome(run, "current", None, 0.0, socket.gethostname())
        else:
            stale.append(run)
    if ray_address is None:
        yield from (derive_run(store, run) for run in stale)
    elif stale:
        yield from _on_ray(store, stale, ray_address, cpus)


def _on_ray(store: str, runs: list[str], address: str, cpus: int | None) -> Iterator[Outcome]:
    ray = _ray()
    _connect(ray, address)
    try:
        each = _task_cpus(ray, cpus or TASK_CPUS)
        task = ray.remote(_derive_on_node).options(num_cpus=each, runtime_env={"env_vars": _task_env(each)})
        pending = {task.remote(store, run): run for run in runs}
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            run = pending.pop(ready)
            try:
                yield ray.get(ready)
            except ray.exceptions.RayError as e:  # the worker died, or a bug raised there
                cause = getattr(e, "cause", None) or e
                yield Outcome(run, "failed", None, 0.0, "?", f"Ray task failed: {_first_line(cause)}")
    finally:
        ray.shutdown()


def _derive_on_node(store: str, run_id: str) -> Outcome:
    """``derive_run`` as a Ray task: the node named by its host and Ray's node id (nodes may share a host)."""
    import ray

    outcome = derive_run(store, run_id)
    node = ray.get_runtime_context().get_node_id()[:8]
    return dataclasses.replace(outcome, node=f"{outcome.node} (node {node})")


def _ray():
    try:
        import ray
    except ImportError:
        raise RollscopeError(
            "Ray not installed", "--ray needs the ray extra: pip install 'rollscope[ray]'"
        ) from None
    return ray


def _connect(ray, address: str) -> None:
    """``ray.init`` on an existing cluster, in one line when it fails: nothing answers at the address, or the
    cluster wants a token this process lacks (both checked first: Ray itself retries for 20 s, logging each
    try), or Ray refuses for another reason."""
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and "://" not in address:
        try:
            socket.create_connection((host, int(port)), timeout=REACH_S).close()
        except OSError as e:
            raise RollscopeError(
                "Cannot reach Ray",
                f"nothing answers at {address} ({e.strerror or e}): give the head's address, HOST:PORT as "
                "`ray start --head` printed it",
            ) from None
        if not _has_token() and _wants_token(f"{host}:{port}"):
            raise RollscopeError("Ray refused the connection", _TOKEN_NEEDED.format(address=address))
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except ray.exceptions.AuthenticationError:
        raise RollscopeError("Ray refused the connection", _TOKEN_NEEDED.format(address=address)) from None
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RollscopeError(
            "Cannot connect to Ray",
            f"{address}: {_first_line(e)} (a cluster with token authentication refuses a wrong token so)",
        ) from None


_TOKEN_NEEDED = (
    "the cluster at {address} uses token authentication: give this process its token (RAY_AUTH_TOKEN, "
    "RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token)"
)


def _has_token() -> bool:
    """Whether this process has a Ray token, where Ray looks for one."""
    path = settings.consulted("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return bool(settings.consulted("RAY_AUTH_TOKEN")) or os.path.isfile(path)


def _wants_token(gcs: str) -> bool:
    """Whether the cluster's head (its GCS at ``gcs``) refuses a call without a token (Ray 2.60 and later
    turn token authentication on by default). Asked with one gRPC call of Ray's own protocol."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    with grpc.insecure_channel(gcs) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=REACH_S)
        except grpc.RpcError as e:
            return e.code() == grpc.StatusCode.UNAUTHENTICATED
    return False


def _task_cpus(ray, wanted: int) -> int:
    """``wanted``, or the largest node's CPUs when fewer: Ray would wait for ever for a task no node fits."""
    largest = max((n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]), default=0)
    if largest < 1:
        raise RollscopeError("No CPUs on the Ray cluster", "no node of the cluster offers a whole CPU")
    return int(min(wanted, largest))


def _task_env(cpus: int) -> dict[str, str]:
    """The environment a task derives in: this process's ``ROLLSCOPE_*`` settings (block size, memory limit,
    merging: a run derived on a node must be the run derived here), and as many DuckDB threads as CPUs the
    task holds. Not the receiver's token, which a derivation never needs."""
    env = {k: v for k, v in os.environ.items() if k.startswith("ROLLSCOPE_") and k != "ROLLSCOPE_TOKEN"}
    return {**env, "ROLLSCOPE_DERIVE_THREADS": str(cpus)}


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
