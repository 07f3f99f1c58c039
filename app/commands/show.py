"""`rollscope show`: one rollout's transcript in the terminal, turn by turn with its accounting, or as JSON."""

from __future__ import annotations

import json
import sys

from rollscope import formats, semconv
from rollscope.app.commands._common import add_run, add_store, number, on_run

DEFAULT_MAX_CHARS = 2_000


def register(sub) -> None:
    p = sub.add_parser(
        "show",
        help="one rollout's transcript: each turn's messages, tool calls and results, with its tokens",
        description="Print one rollout as a conversation: its outcome, funnel stage and scores, then each "
        "turn's header (tokens, cached tokens, prefill / decode time, speculative acceptance) and messages "
        "(system prompt, user, assistant with reasoning and tool calls, tool results, judge prompt and "
        "rationale). Long texts are cut with a note (--max-chars); --json prints every text whole "
        "(keys in docs/transcripts.md).",
    )
    add_store(p)
    add_run(p, optional=True)
    p.add_argument("--rollout", required=True, metavar="ID", help="rollout id (the Rollouts page lists them)")
    p.add_argument("--json", action="store_true", help="print the stable JSON object, every text whole")
    p.add_argument(
        "--max-chars",
        type=number(0, whole=True),
        default=DEFAULT_MAX_CHARS,
        metavar="N",
        help=f"show a longer text's head and tail, N characters in all (default {DEFAULT_MAX_CHARS:,}; 0: whole)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.app import transcript

    max_chars = None if args.json or not args.max_chars else args.max_chars
    found = on_run(args, lambda con: read(con, args.run, args.rollout, max_chars))
    rollout, stage, scores, frame = found
    blocks = transcript.blocks(frame)
    if args.json:
        json.dump(
            transcript.as_json(rollout, stage, scores, blocks), sys.stdout, indent=2, ensure_ascii=False
        )
        sys.stdout.write("\n")
    else:
        sys.stdout.write(heading(args.run, rollout, stage, scores, blocks) + "\n\n" + transcript.text(blocks))
    return 0


def read(con, run_id: str, rollout_id: str, max_chars: int | None):
    """The rollout's outcome, funnel stage, scores and conversation, each read in its time window."""
    from rollscope.errors import UnknownRolloutError
    from rollscope.queries import analyses, trace, transcripts

    analyses.require_run(con, run_id)
    bounds = trace.window(con, run_id, rollout_id)
    rollout = trace.rollout(con, run_id, rollout_id, bounds)
    if rollout is None:
        raise UnknownRolloutError(
            "Unknown rollout",
            f'no rollout {rollout_id!r} in run {run_id!r} (the Rollouts page, or `rollscope sql "SELECT '
            f"rollout_id FROM rollouts WHERE run_id = '{run_id}'\"`, lists them)",
        )
    stage = transcripts.stage(con, run_id, rollout_id)
    scores = transcripts.scores(con, run_id, rollout_id, bounds)
    return rollout, stage, scores, transcripts.conversation(con, run_id, rollout_id, bounds, max_chars)


def heading(run_id: str, rollout: dict, stage: dict, scores, blocks) -> str:
    """Who the rollout is and how it ended: ids, status, reward and each score, consuming step, funnel stage."""
    from rollscope.app.transcript import plain

    def ids(*pairs):
        return " · ".join(f"{name} {plain(str(v))}" for name, v in pairs if v is not None)

    scored = ", ".join(
        f"{plain(str(r['name']))} {formats.number(r['reward'])}"
        + ("" if r["status"] == semconv.ROLLOUT_OK else f" {r['status']}")
        for r in scores.to_dict("records")
    )
    lines = [
        ids(
            ("rollout", rollout["rollout_id"]),
            ("run", run_id),
            ("environment", rollout["environment"]),
            ("task", rollout["task_id"]),
            ("group", rollout["group_id"]),
        ),  # fmt: skip
        f"status {plain(str(rollout['rollout_status']))} · reward {formats.number(rollout['reward'])}"
        + (f" ({scored})" if scored else "")
        + f" · policy version {formats.count(rollout['policy_version'])} · {formats.seconds(rollout['duration_s'])}",
        _consumed(rollout) + " · " + _stage(stage),
        f"{formats.counted(sum(b.kind == 'turn' for b in blocks), 'turn')} · "
        f"{formats.counted(sum(len(b.messages) for b in blocks), 'message')}",
    ]
    return "\n".join(lines)


def _consumed(rollout: dict) -> str:
    if rollout["train_step"] is None:
        return "not consumed by a train step yet"
    return (
        f"consumed by train step {rollout['train_step']} (decision {rollout['sample_decision']}, staleness "
        f"{formats.counted(rollout['sample_staleness'], 'version')})"
    )


def _stage(stage: dict) -> str:
    if not stage:
        return "funnel stage unknown"
    if stage["usable"]:
        return "usable"
    return f"lost at {stage['lost_at'].replace('_', ' ')}: {stage['lost_reason']}"
