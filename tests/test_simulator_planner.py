"""The simulated run looks like a real asynchronous agent-RL run: shapes, drifts and events the analyses find.

These tests plan runs in memory (no store): the plan and its ground truth are what the emitted spans carry.
"""

from __future__ import annotations

import pytest

from rollscope.simulator import config, groundtruth
from rollscope.simulator.planner import Planner
from rollscope.simulator.records import SpanBuilder, instances

EVENTS = {
    "steps": 60,
    "teacher": {"count": 1},
    "drafter_refreshes": [0.5],
    "logprob_drafter": [0.7, 0.75],
    "staleness_excursion": [0.3, 0.45],
}


def plan(*layers: dict):
    """Plan a whole run; return (step plans, ground truth document)."""
    c = config.resolve("default", list(layers))
    planner, builder = Planner(c), SpanBuilder(c, "plan")
    truth = groundtruth.Truth(c, "plan", "default", instances(c), builder)
    steps = []
    for i in range(c.steps):
        step = planner.plan_step(i)
        truth.add_step(step, builder.step(step))
        steps.append(step)
    return steps, truth.document({}, None)


@pytest.fixture(scope="module")
def run():
    return plan(EVENTS)


def test_coding_is_prefill_dominated_and_reasoning_decode_dominated(run):
    _, truth = run
    swe, math_, research = (truth["by_environment"][e] for e in ("swe", "math", "research"))
    assert swe["prefill_decode"]["ratio"] > 10  # a 3,000-token test log answered by a ~150-token command
    assert math_["prefill_decode"]["ratio"] < 0.2  # one long chain of thought
    assert 1 < research["prefill_decode"]["ratio"] < 10
    assert swe["prefill_decode"]["turns"] / swe["funnel"]["dispatched"] > 8
    assert math_["prefill_decode"]["turns"] == math_["funnel"]["dispatched"]


def test_coding_turns_read_large_tool_outputs_and_reply_briefly(run):
    steps, _ = run
    swe = [r for s in steps for r in s.rollouts if r.env.name == "swe"]
    tests = [c.observation_tokens for r in swe for c in r.tools if c.name == "run_tests" and not c.error]
    replies = sorted(t.output_tokens for r in swe for t in r.turns)
    assert 2500 < sum(tests) / len(tests) < 4000
    assert 100 < replies[len(replies) // 2] < 250


def test_reasoning_lengths_have_a_long_tail(run):
    _, truth = run
    lengths = truth["by_environment"]["math"]["rollout_length"]["output_tokens"]
    assert lengths["p99"] > 3 * lengths["p50"]


def test_prefix_cache_reuse_and_its_absence():
    _, cached = plan({"steps": 6})
    _, off = plan({"steps": 6, "prefix_cache_hit_rate": 0.0})
    pd, pd_off = cached["run"]["prefill_decode"], off["run"]["prefill_decode"]
    assert pd["cache_hit_rate"] > 0.7
    assert pd["reprefill_waste_tokens"] < 0.15 * pd["context_tokens"]
    assert pd_off["cached_input_tokens"] == 0
    assert pd_off["reprefill_waste_tokens"] == pd_off["context_tokens"]  # every turn re-prefills its history
    assert pd_off["new_input_tokens"] == pd_off["input_tokens"]


def test_acceptance_falls_as_the_policy_moves_away_and_recovers_at_the_refresh(run):
    _, truth = run
    by_version = {row["policy_version"]: row for row in truth["by_policy_version"]}
    refresh = truth["by_policy_version"][-1]["drafter_policy_version"]
    assert refresh == 30
    before = _acceptance([by_version[v] for v in range(refresh - 6, refresh)])
    fresh_start = _acceptance([by_version[v] for v in range(2, 8)])
    after = _acceptance([by_version[v] for v in range(refresh, refresh + 6)])
    assert before < fresh_start - 0.03
    assert after > before + 0.03
    assert {row["drafter_version"] for row in truth["by_policy_version"]} == {"drafter-0", "drafter-1"}


def _acceptance(rows):
    accepted = sum(r["spec_decode"]["accepted_tokens"] for r in rows)
    return accepted / sum(r["spec_decode"]["draft_tokens"] for r in rows)


def test_acceptance_differs_by_environment_and_grows_with_context(run):
    steps, truth = run
    rates = {e: s["spec_decode"]["acceptance_rate"] for e, s in truth["by_environment"].items()}
    assert rates["swe"] > rates["math"] > rates["research"]
    turns = [t for s in steps for r in s.rollouts if r.env.name == "swe" for t in r.turns]
    short = [t for t in turns if t.context_tokens < 4000]
    long = [t for t in turns if t.context_tokens > 16000]
    assert sum(t.accepted_tokens for t in long) / sum(t.draft_tokens for t in long) > sum(
        t.accepted_tokens for t in short
    ) / sum(t.draft_tokens for t in short)


def test_drafter_logprobs_are_recorded_only_in_the_misconfigured_stretch(run):
    steps, truth = run
    first, last = 42, 44  # policy versions of steps 0.70 × 60 .. 0.75 × 60
    flagged = {
        r.policy_version for s in steps for r in s.rollouts for t in r.turns if t.logprobs_source == "drafter"
    }
    assert flagged == set(range(first, last + 1))
    assert truth["run"]["spec_decode"]["drafter_logprob_turns"] > 0


def test_staleness_stays_within_the_bound_except_in_the_excursion(run):
    steps, truth = run
    inside = [s for s in truth["by_step"] if 18 <= s["train_step"] < 27]
    outside = [s for s in truth["by_step"] if s["train_step"] >= 27]
    assert _freshness(inside) < _freshness(outside) - 0.1
    assert max(int(k) for k in truth["run"]["staleness"]["histogram"]) <= 4
    assert truth["run"]["staleness"]["violations"] > 0


def _freshness(steps):
    return sum(s["staleness"]["samples"] - s["staleness"]["violations"] for s in steps) / sum(
        s["staleness"]["samples"] for s in steps
    )


def test_rates_drift_as_the_policy_improves_and_infrastructure_ages(run):
    _, truth = run
    early, late = truth["by_step"][:20], truth["by_step"][-20:]

    def rate(steps, num, den):
        return sum(s["funnel"][num] for s in steps) / sum(s["funnel"][den] for s in steps)

    assert rate(late, "nonzero_signal", "scored") != pytest.approx(
        rate(early, "nonzero_signal", "scored"), abs=0.03
    )
    swe_early = [r for r in truth["by_step_environment"] if r["environment"] == "swe"][:20]
    swe_late = [r for r in truth["by_step_environment"] if r["environment"] == "swe"][-20:]
    assert rate(swe_late, "completed", "dispatched") < rate(swe_early, "completed", "dispatched")


def test_judge_timeouts_leave_rollouts_unscored(run):
    steps, truth = run
    research = [r for s in steps for r in s.rollouts if r.env.name == "research" and r.completed]
    timed_out = {
        r.rollout_id for r in research for j in r.scorings if j.kind == "judge" and j.status == "timeout"
    }
    unscored = {r.rollout_id for r in research if r.reward is None}
    assert timed_out == unscored and timed_out
    assert truth["by_environment"]["research"]["judge"]["timeouts"] == len(timed_out)


def test_the_clock_is_consistent(run):
    steps, _ = run
    available = {s.step: s.start for s in steps} | {s.step + 1: s.sync_end for s in steps}
    previous_ready = float("-inf")
    for s in steps:
        groups: dict[str, float] = {}
        for r in s.rollouts:
            assert available[r.policy_version] <= r.start < available.get(r.policy_version + 1, float("inf"))
            assert all(r.start <= t.start <= t.end <= r.end for t in r.turns)
            groups[r.group_id] = max(groups.get(r.group_id, 0.0), r.end)
        assert all(
            previous_ready < done <= s.ready for done in groups.values()
        )  # consumed in completion order
        assert s.start <= s.ready < s.end < s.sync_end
        previous_ready = s.ready


def test_the_trainer_waits_for_data_some_of_the_time(run):
    _, truth = run
    assert 0.05 < truth["run"]["trainer"]["idle_fraction"] < 0.9
    assert truth["run"]["compute"]["wasted_share"] > 0.2


def test_the_seed_decides_the_run():
    def outline(seed):
        steps, _ = plan({"steps": 3, "seed": seed})
        return [
            (r.rollout_id, r.task_id, r.status, r.reward, len(r.turns)) for s in steps for r in s.rollouts
        ]

    assert outline(5) == outline(5)
    assert outline(5) != outline(6)


def test_groups_hold_g_attempts_at_one_task(run):
    steps, _ = run
    by_group: dict[str, set] = {}
    for r in steps[0].rollouts:
        by_group.setdefault(r.group_id, set()).add((r.task_id, r.policy_version))
    assert all(len(v) == 1 for v in by_group.values())
    assert len(steps[0].rollouts) == 8 * len(by_group)
