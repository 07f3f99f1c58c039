"""A finished verl run's files: ``rollscope import verl DIR`` (no verl needed).

* ``trainer.rollout_data_dir``: one ``{step}.jsonl`` per step (``RayPPOTrainer._write_generations``), a line
  per rollout with its decoded ``input`` and ``output``, ``score``, ``step`` and the reward's extra keys (``uid``
  where the trainer adds it, ``request_id``);
* the ``file`` logger's JSONL (``{"step": N, "data": {metric: value}}`` per step), found in DIR or given.

Each rollout line becomes an ``rl.rollout`` (task = its prompt, group = ``uid`` when present, reward = score,
policy version = the step before), one ``rl.turn`` with the transcript (``gen_ai.input.messages`` /
``gen_ai.output.messages``: the decoded text; no token counts, which the dump does not keep), an ``rl.reward``
(``score``) and an ``rl.sample`` (``zero_signal`` when its uid group's scores are all equal, else ``used``).
Each logged step becomes an ``rl.train_step`` with ``timing_s/gen`` as its wait and every numeric metric as
``verl.metric.<name>`` (``training/off_policy/trajectory_staleness*``, ``rollout/spec_accept_rate``,
``response_length/*`` among them). The files keep no clock time, so the steps are laid end to end by
``timing_s/step``, ending at the metrics file's modification time.
"""

from __future__ import annotations

import json
from pathlib import Path

from rollscope import semconv
from rollscope.integrations.trl_spans import _task_id
from rollscope.integrations.verifiers import BadRecord

_NS = 1_000_000_000


def read_dir(
    directory: Path | str, metrics: Path | str | None = None
) -> tuple[dict[int, list], dict[int, dict], Path]:
    """The rollouts by step and the logged metrics by step; BadRecord names the first bad line."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(directory)
    rollouts, logged, log_path = {}, {}, Path(metrics) if metrics else None
    for path in sorted(directory.glob("*.jsonl")):
        if path.stem.isdigit():
            rollouts[int(path.stem)] = _lines(path, ("output", "score"))
        elif log_path is None and _is_log(path):
            log_path = path
    if log_path is not None:
        logged = {row["step"]: row["data"] for row in _lines(log_path, ("step", "data"))}
    if not rollouts and not logged:
        raise BadRecord(f"{directory}: no verl rollout dumps ({{step}}.jsonl) or file-logger JSONL in it")
    return rollouts, logged, log_path or directory


def _is_log(path: Path) -> bool:
    with path.open(encoding="utf-8") as f:
        first = f.readline()
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "data" in row and "step" in row


def _lines(path: Path, needed: tuple[str, ...]) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadRecord(f"{path}:{number}: not JSON ({e.msg})") from None
            if not isinstance(row, dict) or any(key not in row for key in needed):
                raise BadRecord(f"{path}:{number}: not a verl record (needs {', '.join(needed)})")
            rows.append(row)
    return rows


def import_dir(directory, store, run_id: str, *, metrics=None) -> dict[str, int]:
    """Write a finished verl run's dumps and logged steps to ``store`` as run ``run_id``; returns counts."""
    from rollscope.collectors.attaching import attach

    rollouts, logged, log_path = read_dir(directory, metrics)
    steps = sorted(set(rollouts) | set(logged))
    durations = [float((logged.get(s) or {}).get("timing_s/step") or 0.0) for s in steps]
    end = (
        int(log_path.stat().st_mtime * _NS)
        if log_path.is_file()
        else int(Path(directory).stat().st_mtime * _NS)
    )
    start = end - int(sum(durations) * _NS)
    rl = attach(store=store, run_id=run_id, role="train", service_name="verl", set_global=False)
    counts = {"steps": 0, "rollouts": 0}
    try:
        for step, seconds in zip(steps, durations, strict=True):
            finish = start + int(seconds * _NS)
            counts["rollouts"] += _record_rollouts(rl, run_id, step, rollouts.get(step, []), start, finish)
            if step in logged:
                _record_step(rl, step, logged[step], len(rollouts.get(step, [])), start, finish)
                counts["steps"] += 1
            start = finish
    finally:
        rl.shutdown()
    return counts


def _record_rollouts(rl, run_id: str, step: int, rows: list, start: int, end: int) -> int:
    groups: dict = {}
    for row in rows:
        groups.setdefault(row.get("uid"), []).append(float(row["score"]))
    for i, row in enumerate(rows):
        uid, score = row.get("uid"), float(row["score"])
        rollout_id = f"{run_id}/s{step}/{i}"
        group = groups[uid]
        flat = uid is not None and len(group) > 1 and max(group) == min(group)
        fields = dict(
            task_id=_task_id({"prompt": row.get("input")}), group_id=str(uid) if uid is not None else None
        )
        with rl.rollout(
            rollout_id,
            policy_version=step - 1,
            rollout_status=semconv.ROLLOUT_OK,
            reward=score,
            start_time=start,
            end_time=end,
            **fields,
        ):
            with rl.turn(
                0, input=str(row.get("input", "")), output=str(row["output"]), start_time=start, end_time=end
            ):
                pass
            with rl.reward(reward_name="score", reward=score, start_time=end, end_time=end):
                pass
        with rl.sample(rollout_id, step - 1, "zero_signal" if flat else "used", start_time=end, end_time=end):
            pass
    return len(rows)


def _record_step(rl, step: int, data: dict, samples: int, start: int, end: int) -> None:
    numeric = {
        f"verl.metric.{k}": float(v)
        for k, v in data.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    wait = data.get("timing_s/gen")
    with rl.train_step(
        step - 1,
        policy_version=step,
        train_samples=samples or None,
        train_wait_s=float(wait) if isinstance(wait, int | float) else None,
        start_time=start,
        end_time=end,
        attributes=numeric,
    ):
        pass
