"""`rollscope import`: turn a framework's saved results into a run of the store (today: verifiers)."""

from __future__ import annotations

from rollscope.app.commands._common import add_store
from rollscope.errors import RollscopeError


def register(sub) -> None:
    p = sub.add_parser(
        "import",
        help="write a framework's saved results (verifiers traces.jsonl) to the store as a run",
        description="Import saved results as spans of one run: the same rows a live adapter would write.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    vf = kinds.add_parser(
        "verifiers",
        help="a verifiers run's traces.jsonl (or its run directory)",
        description=(
            "Each episode's traces become rl.rollout spans with their turns (token usage, cached input "
            "tokens), tool calls, per-rubric-function rewards, errors, stop condition and timings."
        ),
    )
    vf.add_argument("file", metavar="FILE", help="traces.jsonl, or the run directory holding it")
    add_store(vf)
    vf.add_argument("--run-id", required=True, metavar="ID", help="the run to write the rollouts to")
    vf.add_argument("--environment", default=None, help="environment name (default: the env id in the file)")
    vf.set_defaults(func=run_verifiers)


def run_verifiers(args) -> int:
    from rollscope.collectors.settings import default_store
    from rollscope.integrations.verifiers import BadRecord, import_file
    from rollscope.store.layout import check_run_id

    try:
        check_run_id(args.run_id)
    except ValueError as e:
        raise RollscopeError("Bad option", str(e)) from None
    try:
        counts = import_file(
            args.file, args.store or default_store(), args.run_id, environment=args.environment
        )
    except FileNotFoundError:
        raise RollscopeError(
            "No such file", f"{args.file}: no such file (or no traces.jsonl in it)"
        ) from None
    except (BadRecord, UnicodeDecodeError) as e:
        raise RollscopeError("Not a verifiers run", f"{e}; nothing was imported") from None
    print(
        f"imported {counts['episodes']} episodes: {counts['rollouts']} rollouts, {counts['turns']} turns, "
        f"{counts['tool_calls']} tool calls, {counts['rewards']} rewards into run {args.run_id}"
    )
    return 0
