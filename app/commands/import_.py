"""`rollscope import`: turn a framework's saved results into a run of the store (verifiers, prime-rl, verl)."""

from __future__ import annotations

from rollscope.app.commands._common import add_store
from rollscope.errors import RollscopeError


def register(sub) -> None:
    p = sub.add_parser(
        "import",
        help="write a framework's saved results (verifiers, prime-rl, verl) to the store as a run",
        description="Import saved results as spans of one run: the same rows a live adapter would write.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    vf = _kind(
        kinds,
        "verifiers",
        "a verifiers run's traces.jsonl (or its run directory)",
        "Each episode's traces become rl.rollout spans with their turns (token usage, cached input "
        "tokens), tool calls, per-rubric-function rewards, errors, stop condition and timings.",
        ("file", "FILE", "traces.jsonl, or the run directory holding it"),
        run_verifiers,
    )
    vf.add_argument("--environment", default=None, help="environment name (default: the env id in the file)")
    _kind(
        kinds,
        "prime-rl",
        "a prime-rl run directory (rollouts/step_N/train/{all,effective}, metrics.jsonl)",
        "Every train step's episodes as rollouts with turns, tool calls and rewards; the traces prime-rl "
        "trained on as used samples, the others lost by cause (infra_error, zero_signal, invalid); a train "
        "step per step. Steps already in the store are skipped: import a run still being written again to "
        "add its new steps.",
        ("dir", "DIR", "the run's output directory (holding rollouts/)"),
        run_prime_rl,
    )
    verl = _kind(
        kinds,
        "verl",
        "a finished verl run: trainer.rollout_data_dir dumps and the file logger's JSONL",
        "Each dumped rollout as a rollout with its transcript, score, group (uid) and sample; each logged "
        "step as a train step carrying verl's metrics.",
        ("dir", "DIR", "the rollout_data_dir ({step}.jsonl files)"),
        run_verl,
    )
    verl.add_argument(
        "--metrics", default=None, metavar="FILE", help="the file logger's JSONL (default: found in DIR)"
    )


def _kind(kinds, name: str, summary: str, description: str, source: tuple, func):
    """One ``rollscope import KIND SOURCE --store --run-id`` subcommand."""
    p = kinds.add_parser(name, help=summary, description=description)
    dest, metavar, help_text = source
    p.add_argument(dest, metavar=metavar, help=help_text)
    add_store(p)
    p.add_argument("--run-id", required=True, metavar="ID", help="the run to write to")
    p.set_defaults(func=func)
    return p


def run_verifiers(args) -> int:
    from rollscope.integrations.verifiers import BadRecord, import_file
    from rollscope.settings import default_store

    run_id = _run_id(args)
    try:
        counts = import_file(args.file, args.store or default_store(), run_id, environment=args.environment)
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


def _run_id(args) -> str:
    from rollscope.store.layout import check_run_id

    try:
        return check_run_id(args.run_id)
    except ValueError as e:
        raise RollscopeError("Bad option", str(e)) from None


def _steps_in_store(store, run_id: str) -> set[int]:
    """Train steps the run already has (none when the store or the run does not exist yet)."""
    from pathlib import Path

    if not (Path(store) / "spans").exists():
        return set()
    from rollscope.queries import connect

    con = connect(store)
    try:
        rows = con.execute(
            "SELECT DISTINCT train_step FROM train_steps WHERE run_id = ?", [run_id]
        ).fetchall()
    finally:
        con.close()
    return {int(step) for (step,) in rows if step is not None}


def run_prime_rl(args) -> int:
    from rollscope.integrations.prime_rl import import_run
    from rollscope.integrations.verifiers import BadRecord
    from rollscope.settings import default_store

    run_id, store = _run_id(args), args.store or default_store()
    try:
        counts = import_run(args.dir, store, run_id, skip_steps=_steps_in_store(store, run_id))
    except FileNotFoundError:
        raise RollscopeError("No such run", f"{args.dir}: no rollouts/ directory in it") from None
    except (BadRecord, UnicodeDecodeError) as e:
        raise RollscopeError("Not a prime-rl run", f"{e}; nothing was imported") from None
    print(
        f"imported {counts['steps']} steps: {counts['rollouts']} rollouts ({counts['used']} trained on, "
        f"{counts['lost']} dropped), {counts['turns']} turns, {counts['tool_calls']} tool calls into run {run_id}"
        f"; {counts['skipped']} steps already imported, {counts['pending']} still being written"
    )
    return 0


def run_verl(args) -> int:
    from rollscope.integrations.verifiers import BadRecord
    from rollscope.integrations.verl_files import import_dir
    from rollscope.settings import default_store

    run_id = _run_id(args)
    try:
        counts = import_dir(args.dir, args.store or default_store(), run_id, metrics=args.metrics)
    except FileNotFoundError as e:
        raise RollscopeError("No such directory", f"{e.filename or args.dir}: not found") from None
    except (BadRecord, UnicodeDecodeError) as e:
        raise RollscopeError("Not a verl run", f"{e}; nothing was imported") from None
    print(f"imported {counts['steps']} steps, {counts['rollouts']} rollouts into run {run_id}")
    return 0
