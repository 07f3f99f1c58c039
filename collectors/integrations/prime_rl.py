"""prime-rl run directories: ``rollscope import prime-rl DIR`` (no prime-rl needed).

prime-rl's orchestrator writes, per step, every rollout as it arrived and the ones it trained on, one verifiers
episode record per line (its ``FileMonitor``)::

    rollouts/step_N/train/all/traces.jsonl        every episode of the step's arrival window (errored ones too)
    rollouts/step_N/train/effective/traces.jsonl  the episodes shipped to the trainer, their traces filtered
    metrics.jsonl                                 one line per step: {"step": N, "time": ..., metric: value}

A trace is *effective* when prime-rl admitted its group, sampled it, did not cancel it as stale, it has no
error and its agent is trainable (``TrainEpisodes.effective``). So ``all`` minus ``effective`` is the step's
funnel loss, and the import names each lost trace's cause from the record itself:

* errored (``errors``; ``has_error``) → its rollout is ``infra_error`` (lost before completion), no sample;
* its group's scored rewards all equal (no trainable survivor: zero advantage everywhere) → ``zero_signal``;
* anything else prime-rl dropped (a stale or curriculum-rejected group, an untrainable agent; the file does
  not tell them apart) → ``invalid``, with ``prime_rl.dropped`` = true.

Effective traces are ``used`` by train step N. Each ``all`` episode becomes rollouts, turns, tool calls and
rewards exactly as ``rollscope import verifiers`` writes them (``record_episode``), and each step an
``rl.train_step`` (samples and tokens shipped, ``time/wait_for_batch`` as its wait, every numeric metric of
the step as ``prime_rl.metric.<name>``). A step is imported once its ``effective`` file exists (prime-rl
writes it in one append when the step ships); steps already in the store are skipped, so importing a run
that is still being written again picks up its new steps. Eval episodes (``eval/``) are not imported: they
never reach the trainer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from rollscope.integrations.verifiers import BadRecord, read_episodes, record_episode

_STEP_DIR = re.compile(r"step_(\d+)$")
_NS = 1_000_000_000


def steps_on_disk(directory: Path | str) -> tuple[list[int], list[int]]:
    """The train steps written completely (their ``effective`` file exists) and those still in progress."""
    root = Path(directory) / "rollouts"
    if not root.is_dir():
        raise FileNotFoundError(root)
    done, pending = [], []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if not match or not (child / "train" / "all" / "traces.jsonl").exists():
            continue
        shipped = (child / "train" / "effective" / "traces.jsonl").exists()
        (done if shipped else pending).append(int(match.group(1)))
    return sorted(done), sorted(pending)


def read_metrics(directory: Path | str) -> dict[int, dict]:
    """``metrics.jsonl`` by step (a line still being written at the end is left for the next import)."""
    path = Path(directory) / "metrics.jsonl"
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows[row["step"]] = row
    return rows


def import_run(directory, store, run_id: str, *, skip_steps=frozenset()) -> dict[str, int]:
    """Write the run's finished train steps not in ``skip_steps`` to ``store`` as run ``run_id``."""
    from rollscope.collectors.attaching import attach

    directory = Path(directory)
    done, pending = steps_on_disk(directory)
    todo = [step for step in done if step not in skip_steps]
    loaded = {step: _load_step(directory, step) for step in todo}  # every file checked before any is written
    metrics = read_metrics(directory)
    counts = {"steps": 0, "rollouts": 0, "turns": 0, "tool_calls": 0, "rewards": 0, "used": 0, "lost": 0}
    counts.update(skipped=len(done) - len(todo), pending=len(pending))
    if not todo:
        return counts
    rl = attach(store=store, run_id=run_id, role="train", service_name="prime-rl", set_global=False)
    try:
        for step in todo:
            _record_step(rl, step, *loaded[step], metrics, counts)
    finally:
        rl.shutdown()
    return counts


def _load_step(directory: Path, step: int) -> tuple[list[Mapping], set[str]]:
    base = directory / "rollouts" / f"step_{step}" / "train"
    everything = read_episodes(base / "all" / "traces.jsonl")
    try:
        effective = read_episodes(base / "effective" / "traces.jsonl")
    except BadRecord as e:
        if "no episodes" not in str(e):
            raise
        effective = []  # prime-rl shipped nothing this step
    return everything, {t["id"] for e in effective for t in e["traces"]}


def _record_step(rl, step: int, episodes: list, shipped: set, metrics: dict, counts: dict) -> None:
    for episode in episodes:
        for key, n in record_episode(rl, episode).items():
            counts[key] += n
    traces = [(e, t) for e in episodes for t in e["traces"]]
    end = _ns((metrics.get(step) or {}).get("time")) or max((_trace_end(t) for _, t in traces), default=0)
    flat = _flat_groups(traces)
    tokens = 0
    for episode, trace in traces:
        if trace["id"] not in shipped and (trace.get("errors") or not trace.get("ok")):
            continue  # lost before completion: its rollout's status (infra_error, aborted) says so
        used = trace["id"] in shipped
        decision = "used" if used else ("zero_signal" if flat.get(_group(episode, trace)) else "invalid")
        attributes = {} if used or decision == "zero_signal" else {"prime_rl.dropped": True}
        sample_tokens = _tokens(trace)
        tokens += sample_tokens if used else 0
        with rl.sample(
            trace["id"],
            step,
            decision,
            sample_tokens=sample_tokens,
            start_time=end,
            end_time=end,
            attributes=attributes,
        ):
            pass
        counts["used" if used else "lost"] += 1
    _record_train_step(rl, step, metrics, len(shipped), tokens, end)
    counts["steps"] += 1


def _record_train_step(rl, step: int, metrics: dict, samples: int, tokens: int, end: int) -> None:
    row = metrics.get(step) or {}
    before = _ns((metrics.get(step - 1) or {}).get("time")) or end
    numeric = {
        f"prime_rl.metric.{k}": float(v)
        for k, v in row.items()
        if k not in ("step", "time") and isinstance(v, int | float) and not isinstance(v, bool)
    }
    wait = row.get("time/wait_for_batch")
    with rl.train_step(
        step,
        policy_version=step + 1,
        train_samples=samples,
        train_tokens=tokens,
        train_wait_s=float(wait) if isinstance(wait, int | float) else None,
        start_time=min(before, end),
        end_time=end,
        attributes=numeric,
    ):
        pass


def _group(episode: Mapping, trace: Mapping):
    group = (episode.get("group") or {}).get("id")
    return group if group is not None else (trace.get("task") or {}).get("key")


def _flat_groups(traces: list) -> dict:
    """Per group: True when its scored, error-free rewards are all equal (zero advantage for all of them)."""
    rewards: dict = {}
    for episode, trace in traces:
        if trace.get("errors") or not trace.get("ok"):
            continue
        scored = [r for r in (trace.get("rewards") or {}).values() if isinstance(r, Mapping)]
        scored = [
            float(r["score"]) * float(r.get("weight", 1.0)) for r in scored if r.get("score") is not None
        ]
        rewards.setdefault(_group(episode, trace), []).append(sum(scored) if scored else None)
    return {g: len(v) > 1 and None not in v and len(set(v)) == 1 for g, v in rewards.items()}


def _tokens(trace: Mapping) -> int:
    total = 0
    for call in trace.get("calls") or []:
        usage = call.get("usage") or {}
        total += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    return total


def _trace_end(trace: Mapping) -> int:
    timing = trace.get("timing") or {}
    ends = [(timing.get(stage) or {}).get("end") for stage in ("agent", "scoring", "finalize")]
    return max((_ns(e) for e in ends if e), default=0)


def _ns(seconds) -> int:
    return int(float(seconds) * _NS) if seconds else 0
