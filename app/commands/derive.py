"""`rollscope derive`: bring runs' derived tables up to date, here or as tasks on an existing Ray cluster."""

from __future__ import annotations

import sys
import time

from rollscope.app.commands._common import add_store, number, only_run, store_of
from rollscope.errors import RollscopeError, UnknownRunError


def register(sub) -> None:
    p = sub.add_parser(
        "derive",
        help="bring runs' derived tables and text-search sidecars up to date, here or on a Ray cluster",
        description="Derive what the analyses read, for the runs whose raw segments are newer, so the "
        "next report, check or page opens at once. Locally by default; with --ray, one Ray task per run on "
        "an existing cluster whose nodes all mount the store at the same path and have rollscope installed "
        "(pip install 'rollscope[ray]'). Safe while writers write and readers read.",
    )
    add_store(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--run",
        action="extend",
        nargs="+",
        metavar="ID",
        help="the runs to derive (default: the store's one run)",
    )
    which.add_argument("--all", action="store_true", help="every run of the store")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="derive as Ray tasks on this cluster: HOST:PORT of its head, ray://HOST:PORT or auto",
    )
    p.add_argument(
        "--cpus",
        type=number(1, whole=True),
        default=None,
        metavar="N",
        help="with --ray: CPUs each run's task holds, its DuckDB threads (default 4, at most a node's)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries.derive_runs import derive_runs

    store = store_of(args)
    runs = _runs(store, args)
    started, failed, counts = time.perf_counter(), 0, {}
    remote = (
        args.ray is not None
    )  # the text-search sidecars are a local derivation's: a search builds them else
    for outcome in derive_runs(store, runs, ray_address=args.ray, cpus=args.cpus):
        counts[outcome.done] = counts.get(outcome.done, 0) + 1
        if outcome.error:
            failed += 1
            print(f"rollscope: run {outcome.run_id}: {outcome.error}", file=sys.stderr)
            continue
        print(
            f"run {outcome.run_id}: {_said(outcome, remote)}{'' if remote else _indexed(store, outcome.run_id)}",
            flush=True,
        )
    summary = ", ".join(f"{n} {_DONE[done]}" for done, n in sorted(counts.items()))
    print(f"{len(runs)} run(s) in {time.perf_counter() - started:.1f} s: {summary}")
    return 1 if failed else 0


_DONE = {
    "current": "up to date",
    "derived": "derived",
    "waited": "derived by another process",
    "failed": "failed",
}


def _indexed(store, run_id: str) -> str:
    """Build the run's text-search sidecars (queries.text_index) after a local derivation: a search reads only
    the row groups they leave. Nothing to say when there were none to build."""
    from rollscope.queries import text_index
    from rollscope.queries.reader import Reader

    started = time.perf_counter()
    built = text_index.index_run(Reader(store, run_id=run_id).con, run_id)
    return f"; search index of {built} segment(s) in {time.perf_counter() - started:.1f} s" if built else ""


def _said(outcome, remote: bool) -> str:
    where = f" on {outcome.node}" if remote else ""
    if outcome.done == "current":
        return f"up to date{where}"
    if outcome.done == "waited":
        return f"derived by another process meanwhile ({outcome.how}), waited {outcome.seconds:.1f} s{where}"
    return f"derived ({outcome.how}) in {outcome.seconds:.1f} s{where}"


def _runs(store, args) -> list[str]:
    """--run's runs (each must be in the store), --all's, or the store's one run."""
    from rollscope.store.layout import check_run_id, run_ids

    if args.all:
        return run_ids(store)
    if not args.run:
        try:
            return [only_run(store)]
        except UnknownRunError as e:
            raise UnknownRunError(e.title, f"{e}, or --all") from None
    for run in args.run:
        try:
            check_run_id(run)
        except ValueError as e:
            raise RollscopeError("Bad run id", str(e)) from None
    unknown = [run for run in args.run if run not in set(run_ids(store))]
    if unknown:
        raise UnknownRunError(
            "Unknown run", f"no run {', '.join(map(repr, unknown))} in {store} (`rollscope runs` lists them)"
        )
    return list(dict.fromkeys(args.run))
