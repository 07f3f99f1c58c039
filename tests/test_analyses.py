"""Every analysis on small hand-made runs written through attach(), where each figure can be worked out by hand.

Times are seconds from T0; each run's processes are separate attach() calls, as separate processes would be.
"""

from __future__ import annotations

import pandas as pd
import pytest

from rollscope.collectors import attach
from rollscope.errors import UnknownRunError
from rollscope.queries import analyses, connect
from rollscope.semconv import FUNNEL_STAGES as STAGES

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
P = 1_000_000_000  # policy parameters


def at(seconds: float) -> int:
    return T0 + int(seconds * NS)


class TinyRun:
    """A run's rollout server, trainer, judge and teacher processes, writing spans at chosen times."""

    def __init__(self, store, run_id="tiny", *, bound=1, policy_parameters=P):
        common = {"store": store, "run_id": run_id, "set_global": False, "staleness_bound": bound}
        self.server = attach(role="rollout", devices=8, model_parameters=policy_parameters, **common)
        self.trainer = attach(role="train", devices=4, model_parameters=P, **common)
        self.judge_pool = attach(role="judge", devices=2, model_parameters=10 * P, **common)
        self.teacher_pool = attach(role="teacher", devices=1, model_parameters=4 * P, **common)
        self.store, self.run_id = store, run_id

    def rollout(
        self,
        rid,
        group,
        reward,
        *,
        status="ok",
        version=0,
        start=0,
        end=10,
        env="math",
        turns=None,
        judge=None,
    ):
        """A rollout; ``turns`` are dicts of turn fields plus ``start``/``end`` seconds."""
        rl = self.server
        with rl.rollout(
            rid,
            group_id=group,
            task_id=f"task-{group}",
            environment=env,
            policy_version=version,
            rollout_status=status,
            reward=reward,
            start_time=at(start),
            end_time=at(end),
        ):
            for index, turn in enumerate(turns or [{"start": start, "end": end}]):
                fields = {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 50, **turn}
                t0, t1 = fields.pop("start"), fields.pop("end")
                with rl.turn(index, start_time=at(t0), end_time=at(t1), **fields):
                    pass
            if judge is not None:
                with self.judge_pool.judge(
                    attributes={"rl.rollout.id": rid}, start_time=at(end), end_time=at(end + 1), **judge
                ):
                    pass

    def train_step(self, step, start, end, *, wait=0.0, tokens=1000):
        with self.trainer.train_step(
            step,
            policy_version=step + 1,
            train_tokens=tokens,
            train_wait_s=wait,
            start_time=at(start),
            end_time=at(end),
        ):
            pass

    def sample(self, rid, step, decision, staleness=None, tokens=None):
        with self.trainer.sample(
            rid,
            step,
            decision,
            sample_staleness=staleness,
            sample_tokens=tokens,
            start_time=at(0),
            end_time=at(0),
        ):
            pass

    def done(self):
        for rl in (self.server, self.trainer, self.judge_pool, self.teacher_pool):
            rl.shutdown()
        return connect(self.store)


@pytest.fixture
def tiny(store):
    return TinyRun(store)


def four_groups(run: TinyRun) -> None:
    """Group a: one infra error, one unscored, rewards 1 and 0. Group b: all 1. Group c: late, two behind."""
    run.rollout("a1", "a", 1.0)
    run.rollout("a2", "a", 0.0)
    run.rollout("a3", "a", None, judge={"judge_status": "timeout"})
    run.rollout("a4", "a", 1.0, status="infra_error")
    run.rollout("b1", "b", 1.0)
    run.rollout("b2", "b", 1.0)
    run.rollout("c1", "c", 0.0, end=30)
    run.rollout("c2", "c", 1.0, end=30, env="swe")
    run.rollout("d1", "d", 1.0, status="aborted", env="swe")
    for step in range(4):  # step s runs from 11 + 10 s to 20 + 10 s
        run.train_step(step, 11 + 10 * step, 20 + 10 * step, wait=1.0)


# --- funnel ------------------------------------------------------------------------------------------------


def test_funnel_derives_every_stage_from_rollouts_groups_and_versions(tiny):
    four_groups(tiny)
    con = tiny.done()
    row = analyses.record(analyses.funnel(con, "tiny"))
    assert {k: row[k] for k in STAGES} == {
        "dispatched": 9,
        "completed": 7,
        "scored": 6,
        "nonzero_signal": 4,
        "fresh": 2,
        "usable": 2,
    }
    assert row["completion_rate"] == pytest.approx(7 / 9)
    assert row["nonzero_signal_rate"] == pytest.approx(4 / 6)
    assert row["freshness_rate"] == pytest.approx(2 / 4)
    losses = analyses.funnel_losses(con, "tiny")
    assert losses.to_dict("records") == [
        {"stage": "completed", "reason": "aborted", "lost": 1},
        {"stage": "completed", "reason": "infra_error", "lost": 1},
        {"stage": "scored", "reason": "judge timeout", "lost": 1},
        {"stage": "nonzero_signal", "reason": "all-equal group", "lost": 2},
        {"stage": "fresh", "reason": "stale", "lost": 2},
    ]


def test_without_samples_a_rollout_is_consumed_by_the_first_step_after_it_ended(tiny):
    four_groups(tiny)
    con = tiny.done()
    by_step = analyses.funnel(con, "tiny", by="step")
    assert by_step[["step", "dispatched", "usable"]].to_dict("records") == [
        {"step": 0, "dispatched": 7, "usable": 2},
        {"step": 2, "dispatched": 2, "usable": 0},
    ]
    assert analyses.staleness(con, "tiny")[["staleness", "samples", "within_bound"]].to_dict("records") == [
        {"staleness": 0, "samples": 7, "within_bound": True},
        {"staleness": 2, "samples": 2, "within_bound": False},
    ]


def test_without_samples_a_group_is_consumed_once_all_of_it_is_back(tiny):
    tiny.rollout("a1", "a", 1.0, end=10)
    tiny.rollout("a2", "a", 0.0, end=14)  # step 0 waits for it: its data is ready at 15
    tiny.rollout("b1", "b", 1.0, end=12)
    tiny.rollout("b2", "b", 0.0, end=16)  # back after step 0 took its batch
    tiny.train_step(0, 11, 20, wait=4.0)
    tiny.train_step(1, 20, 30, wait=1.0)
    con = tiny.done()
    steps = analyses.funnel(con, "tiny", by="step")
    assert steps[["step", "dispatched"]].to_dict("records") == [
        {"step": 0, "dispatched": 2},
        {"step": 1, "dispatched": 2},
    ]


def test_recorded_sample_decisions_win_over_derived_stages(tiny):
    four_groups(tiny)
    decisions = {
        "a1": "used",
        "a2": "stale",
        "a3": "unscored",
        "a4": "invalid",
        "b1": "zero_signal",
        "b2": "zero_signal",
        "c1": "used",
        "c2": "used",
        "d1": "invalid",
    }
    for rid, decision in decisions.items():
        tiny.sample(rid, 3, decision, staleness=3 if decision == "stale" else 0)
    con = tiny.done()
    row = analyses.record(analyses.funnel(con, "tiny"))
    assert (row["dispatched"], row["completed"], row["scored"], row["nonzero_signal"], row["usable"]) == (
        9,
        7,
        6,
        4,
        3,
    )
    assert analyses.funnel(con, "tiny", by="step")["step"].tolist() == [3]
    summary = analyses.staleness_summary(con, "tiny")
    assert (summary["samples"], summary["mean"], summary["violations"]) == (9, pytest.approx(3 / 9), 1)


def test_funnel_filters_by_environment_and_step_keep_groups_whole(tiny):
    four_groups(tiny)
    con = tiny.done()
    swe = analyses.record(analyses.funnel(con, "tiny", environment="swe"))
    assert (swe["dispatched"], swe["nonzero_signal"], swe["fresh"]) == (2, 1, 0)  # c2's group has signal
    assert analyses.record(analyses.funnel(con, "tiny", steps=(1, 3)))["dispatched"] == 2
    assert analyses.funnel(con, "tiny", by="environment")["environment"].tolist() == ["math", "swe"]
    assert analyses.environments(con, "tiny") == ["math", "swe"]
    assert analyses.steps(con, "tiny") == (0, 3)


def test_what_if_reproduces_the_worked_example():
    rates = {"completion": 0.95, "scoring": 0.98, "nonzero_signal": 0.60, "freshness": 0.90}
    result = analyses.what_if(1000, rates, {"nonzero_signal": 0.80})
    assert round(result["usable"]) == 503
    assert round(result["new_usable"]) == 670
    assert result["throughput_gain"] == pytest.approx(1 / 3)


def test_an_unknown_run_is_a_clear_error(tiny):
    four_groups(tiny)
    con = tiny.done()
    with pytest.raises(UnknownRunError, match="no run 'exp-404'"):
        analyses.funnel(con, "exp-404")


# --- compute -----------------------------------------------------------------------------------------------


def test_concurrent_requests_on_one_server_count_once_in_device_seconds(tiny):
    # 64 requests in flight together on one 8-GPU server for 10 s, then one more from 20 s to 25 s.
    turns = [{"start": 0, "end": 10} for _ in range(64)] + [{"start": 20, "end": 25}]
    tiny.rollout("r1", "g", 1.0, end=25, turns=turns)
    con = tiny.done()
    terms = analyses.compute_terms(con, "tiny").set_index("term")
    assert terms.at["rollout", "busy_s"] == pytest.approx(15.0)
    assert terms.at["rollout", "device_seconds"] == pytest.approx(8 * 15.0)  # not 8 × (64 × 10 + 5)


def test_busy_time_is_the_union_of_overlapping_and_chained_intervals(tiny):
    turns = [
        {"start": 0, "end": 10},
        {"start": 5, "end": 15},
        {"start": 2, "end": 3},
        {"start": 15, "end": 16},
        {"start": 30, "end": 31},
    ]
    tiny.rollout("r1", "g", 1.0, end=31, turns=turns)
    tiny.train_step(0, 40, 50, wait=4.0)  # computes 6 s of its 10
    tiny.train_step(1, 50, 60, wait=0.0)
    con = tiny.done()
    terms = analyses.compute_terms(con, "tiny").set_index("term")
    assert terms.at["rollout", "busy_s"] == pytest.approx(17.0)
    assert terms.at["train", "busy_s"] == pytest.approx(16.0)
    assert terms.at["train", "device_seconds"] == pytest.approx(4 * 16.0)


def test_one_process_serving_two_roles_keeps_their_busy_times_apart(store):
    # A colocated node: the same instance serves the policy (8 GPUs) and a judge (2 GPUs).
    T0 = 1_700_000_000 * 10**9
    node = {"service.instance.id": "node-1"}
    policy = attach(
        store=store,
        run_id="colo",
        role="rollout",
        devices=8,
        resource_attributes=node,
        model_parameters=10**9,
        set_global=False,
    )
    judge = attach(
        store=store,
        run_id="colo",
        role="judge",
        devices=2,
        resource_attributes=node,
        model_parameters=10**9,
        set_global=False,
    )
    with policy.turn(0, start_time=T0, end_time=T0 + 10 * 10**9, input_tokens=1, output_tokens=1):
        pass
    with judge.judge(start_time=T0 + 5 * 10**9, end_time=T0 + 7 * 10**9, input_tokens=1, output_tokens=1):
        pass
    policy.shutdown()
    judge.shutdown()
    terms = analyses.compute_terms(connect(store), "colo").set_index("term")
    assert terms.at["rollout", "device_seconds"] == pytest.approx(8 * 10.0)
    assert terms.at["judge", "device_seconds"] == pytest.approx(2 * 2.0)


def test_flops_follow_tokens_and_model_sizes(tiny):
    tiny.rollout(
        "r1",
        "g",
        1.0,
        turns=[
            {"start": 0, "end": 5, "input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 100},
            {"start": 5, "end": 10, "input_tokens": 1500, "cached_input_tokens": 1100, "output_tokens": 200},
        ],
        judge={"input_tokens": 300, "output_tokens": 20, "reward": 1.0},
    )
    with tiny.teacher_pool.teacher(
        attributes={"rl.rollout.id": "r1"},
        teacher_tokens=800,
        teacher_model_parameters=70 * P,
        start_time=at(11),
        end_time=at(12),
    ):
        pass
    tiny.train_step(0, 20, 30, tokens=5000)
    con = tiny.done()
    terms = analyses.compute_terms(con, "tiny").set_index("term")
    assert terms.at["rollout", "flops"] == pytest.approx(2 * P * (600 + 100 + 400 + 200))
    assert terms.at["judge", "flops"] == pytest.approx(2 * 10 * P * 320)
    assert terms.at["teacher", "flops"] == pytest.approx(2 * 70 * P * 800)  # the span's model size wins
    assert terms.at["train", "flops"] == pytest.approx(6 * P * 5000)
    assert terms.at["judge", "device_seconds"] == pytest.approx(2 * 1.0)
    assert terms.at["teacher", "device_seconds"] == pytest.approx(1 * 1.0)
    assert pd.isna(terms.at["env", "flops"])


def test_env_cpu_seconds_sum_tool_durations_even_when_they_overlap(tiny):
    with tiny.server.rollout(
        "r1", group_id="g", environment="swe", policy_version=0, reward=1.0, start_time=at(0), end_time=at(10)
    ):
        for start in (0, 1, 2):
            with tiny.server.tool("bash", start_time=at(start), end_time=at(start + 4)):
                pass
    con = tiny.done()
    terms = analyses.compute_terms(con, "tiny").set_index("term")
    assert terms.at["env", "device_seconds"] == pytest.approx(12.0)
    assert analyses.throughput(con, "tiny")["tool_wait_share"] == pytest.approx(12.0 / 10.0)


def test_token_work_and_wasted_compute(tiny):
    two_turns = [
        {"start": 0, "end": 5, "input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 100},
        {
            "start": 5,
            "end": 10,
            "input_tokens": 1600,
            "cached_input_tokens": 600,
            "output_tokens": 100,
            "context_tokens": 1100,
        },
    ]
    tiny.rollout("r1", "g", 1.0, turns=two_turns)
    tiny.rollout("r2", "g", 0.0, turns=two_turns)
    tiny.rollout("r3", "g", None, status="infra_error", turns=two_turns)
    tiny.train_step(0, 11, 20)
    tiny.sample("r1", 0, "used", staleness=0, tokens=1700)
    tiny.sample("r2", 0, "used", staleness=0, tokens=1700)
    tiny.sample("r3", 0, "invalid", staleness=0)
    con = tiny.done()
    work = analyses.token_work(con, "tiny")
    assert work["usable_tokens"] == 400
    assert work["reprefilled"] == pytest.approx(2 * 500 / 400)
    assert work["trained"] == pytest.approx(2 * 1700 / 400)
    assert work["wasted_compute_share"] == pytest.approx(1 / 3)


def test_without_sample_tokens_a_usable_rollout_trains_on_its_final_context(tiny):
    two_turns = [
        {"start": 0, "end": 5, "input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 100},
        {"start": 5, "end": 10, "input_tokens": 1600, "cached_input_tokens": 600, "output_tokens": 100},
    ]
    tiny.rollout("r1", "g", 1.0, turns=two_turns)
    tiny.rollout("r2", "g", 0.0, turns=two_turns)
    tiny.rollout("r3", "g", None, status="infra_error", turns=two_turns)
    with tiny.teacher_pool.teacher(
        teacher_tokens=1700, attributes={"rl.rollout.id": "r1"}, start_time=at(10), end_time=at(11)
    ):
        pass
    tiny.train_step(0, 11, 20)  # no rl.sample: the stages and the consuming step are derived
    con = tiny.done()
    work = analyses.token_work(con, "tiny")
    assert work["train_tokens"] == 2 * 1700  # each usable rollout's largest input + output
    assert work["trained"] == pytest.approx(2 * 1700 / 400)
    assert work["teacher_scored"] == pytest.approx(1700 / 400)
    # FLOPs: each rollout's turns 2·P·(1100 + 1100), the teacher 2·4P·1700; r3 never became usable
    assert work["wasted_compute_share"] == pytest.approx(4400 / (3 * 4400 + 13600))


def test_token_work_with_no_usable_rollout_has_no_ratios_but_counts_the_waste(tiny):
    tiny.rollout("r1", "g", None, status="infra_error")
    tiny.rollout("r2", "g", None, status="infra_error")
    con = tiny.done()
    work = analyses.token_work(con, "tiny")
    assert (work["usable_tokens"], work["trained"], work["generated_per_usable_token"]) == (None, None, None)
    assert work["generated_tokens"] == 100
    assert work["wasted_compute_share"] == pytest.approx(1.0)
    assert analyses.token_work(con, "tiny", environment="swe")["generated_tokens"] is None


# --- prefill : decode --------------------------------------------------------------------------------------


def test_prefill_decode_by_turn_index_with_cache_reuse_and_reprefill_waste(tiny):
    turns = [
        {
            "start": 0,
            "end": 2,
            "input_tokens": 3000,
            "cached_input_tokens": 0,
            "output_tokens": 150,
            "prefill_time_s": 0.5,
            "decode_time_s": 1.5,
        },
        {
            "start": 2,
            "end": 4,
            "input_tokens": 6150,
            "cached_input_tokens": 2150,
            "output_tokens": 150,
            "context_tokens": 3150,
            "prefill_time_s": 0.7,
            "decode_time_s": 1.3,
        },
    ]
    tiny.rollout("r1", "g", 1.0, turns=turns)
    con = tiny.done()
    by_turn = analyses.prefill_decode(con, "tiny", by="turn_index").set_index("turn_index")
    assert by_turn.at[0, "prefill_decode_ratio"] == pytest.approx(20.0)
    assert by_turn.at[1, "new_prefill_tokens"] == 4000
    assert by_turn.at[1, "reprefill_waste_tokens"] == 1000
    whole = analyses.record(analyses.prefill_decode(con, "tiny"))
    assert whole["cache_hit_rate"] == pytest.approx(2150 / 9150)
    assert whole["prefill_time_s"] == pytest.approx(1.2)
    assert whole["decode_time_s"] == pytest.approx(2.8)


def test_disaggregation_verdict_shows_its_reasons(store):
    run = TinyRun(store, policy_parameters=70 * P)
    for step in range(4):
        turns = [
            {"start": 10 * step + i, "end": 10 * step + i + 3, "input_tokens": 3000, "output_tokens": 150}
            for i in range(3)
        ]
        run.rollout(f"r{step}", f"g{step}", 1.0, start=10 * step, end=10 * step + 6, turns=turns)
        run.train_step(step, 10 * step + 7, 10 * step + 9)
    con = run.done()
    verdict = analyses.disaggregation(con, "tiny")
    assert verdict["verdict"] is True
    assert verdict["prefill_decode_ratio"] == pytest.approx(20.0)
    assert len(verdict["reasons"]) == 5 and all(r.startswith("yes: ") for r in verdict["reasons"])


# --- speculative decoding ----------------------------------------------------------------------------------


def spec_turn(start, version, drafted, accepted, *, drafter="d0", built_from=0, logprobs="policy"):
    return {
        "start": start,
        "end": start + 1,
        "policy_version": version,
        "spec_draft_tokens": drafted,
        "spec_accepted_tokens": accepted,
        "spec_verify_steps": drafted // 4,
        "spec_k": 4,
        "drafter_version": drafter,
        "drafter_policy_version": built_from,
        "logprobs_source": logprobs,
    }


def test_acceptance_rate_accepted_length_and_expected_speedup(tiny):
    tiny.rollout("r1", "g", 1.0, turns=[spec_turn(0, 0, 400, 320), spec_turn(1, 0, 400, 280)])
    con = tiny.done()
    spec = analyses.record(analyses.spec_decode(con, "tiny"))
    alpha = 600 / 800
    assert spec["acceptance_rate"] == pytest.approx(alpha)
    assert spec["mean_accepted_length"] == pytest.approx(600 / 200)
    assert spec["expected_tokens_per_step"] == pytest.approx((1 - alpha**5) / (1 - alpha))


def test_acceptance_by_rollout_length_counts_whole_rollouts_and_the_usual_budget(tiny):
    def turn(start, decoded, accepted, k=4):
        return {**spec_turn(start, 0, 100, accepted), "output_tokens": decoded, "spec_k": k}

    # r1 decodes 600 tokens over two turns (bucket 512, though neither turn alone reaches 512), r2 100 (64)
    tiny.rollout("r1", "g", 1.0, turns=[turn(0, 300, 90), turn(1, 300, 70, k=8)])
    tiny.rollout("r2", "g", 0.0, turns=[turn(0, 100, 50), turn(1, 0, 30)])
    con = tiny.done()
    by_length = analyses.spec_decode(con, "tiny", by="length_bucket").set_index("length_bucket")
    assert by_length.index.tolist() == [64, 512]
    assert by_length.at[512, "acceptance_rate"] == pytest.approx(160 / 200)
    assert by_length.at[64, "acceptance_rate"] == pytest.approx(80 / 200)
    assert by_length["turns"].tolist() == [2, 2]
    assert analyses.record(analyses.spec_decode(con, "tiny"))["k"] == 4  # three of the four turns drafted 4


def test_acceptance_drift_is_flagged_against_the_drafters_first_versions(tiny):
    turns = [spec_turn(v, v, 100, 80 - 5 * v) for v in range(6)]  # 80% falling to 55%
    turns += [spec_turn(10 + v, v, 100, 70, drafter="d1", built_from=4) for v in (4, 5)]
    tiny.rollout("r1", "g", 1.0, end=20, turns=turns)
    con = tiny.done()
    drift = analyses.spec_drift(con, "tiny").set_index("drafter_version")
    assert drift.at["d0", "baseline_acceptance"] == pytest.approx(0.775)
    assert drift.at["d0", "latest_acceptance"] == pytest.approx(0.575)
    assert drift.at["d0", "drop_points"] == pytest.approx(20.0)
    assert bool(drift.at["d0", "flagged"]) and not bool(drift.at["d1", "flagged"])
    since = analyses.spec_decode(con, "tiny", by="versions_since_refresh").set_index("versions_since_refresh")
    assert since.at[5, "acceptance_rate"] == pytest.approx(0.55)
    assert since.at[0, "acceptance_rate"] == pytest.approx((80 + 70) / 200)


def test_logprob_lint_finds_turns_trained_on_drafter_logprobs(tiny):
    tiny.rollout(
        "r1", "g", 1.0, turns=[spec_turn(0, 3, 100, 80), spec_turn(1, 3, 100, 80, logprobs="drafter")]
    )
    tiny.rollout("r2", "g", 0.0, turns=[spec_turn(0, 3, 100, 80)])
    tiny.train_step(3, 11, 20)
    con = tiny.done()
    lint = analyses.logprob_lint(con, "tiny")
    assert lint[["step", "policy_version", "environment", "turns", "rollouts"]].to_dict("records") == [
        {"step": 3, "policy_version": 3, "environment": "math", "turns": 1, "rollouts": 1}
    ]
    assert analyses.logprob_lint(con, "tiny", environment="swe").empty


# --- staleness, throughput, trends -------------------------------------------------------------------------


def test_throughput_trainer_idle_and_length_tail(tiny):
    for i in range(10):
        tiny.rollout(
            f"r{i}", "g", float(i % 2), turns=[{"start": i, "end": i + 1, "output_tokens": 100 * (i + 1)}]
        )
    tiny.train_step(0, 20, 30, wait=4.0)
    tiny.train_step(1, 30, 40, wait=1.0)
    con = tiny.done()
    figures = analyses.throughput(con, "tiny")
    assert figures["trainer_idle_fraction"] == pytest.approx(5 / 20)
    assert figures["length_p50"] == pytest.approx(550.0)
    assert figures["length_p99"] == pytest.approx(991.0)
    assert figures["rollout_tokens_per_s"] == pytest.approx(5500 / 10)
    assert figures["dropped_spans"] == 0
    assert analyses.trend(con, "tiny", "trainer_idle_fraction")["trainer_idle_fraction"].tolist() == [
        0.4,
        0.1,
    ]


def test_a_weight_sync_every_rank_records_is_waited_on_once(tiny):
    # Two data-parallel ranks each record steps 0 and 1 and their own span of the one sync between them; rank 0
    # also records a second, later sync. Step 0's window: 11 s to 25 s, computing 11 s to 20.5 s (the later
    # rank's end), then the merged sync 20.6-23.5 s (2.9 s, not 2.8 s per rank) and the later one (0.5 s).
    rank_1 = attach(store=tiny.store, run_id="tiny", role="train", devices=4, set_global=False)
    for rank, (end_0, sync) in enumerate([(20.0, (20.6, 23.4)), (20.5, (20.7, 23.5))]):
        rl = tiny.trainer if rank == 0 else rank_1
        for step, (start, end) in enumerate([(11.0 + rank / 10, end_0), (25.0 + rank / 10, 34.0)]):
            with rl.train_step(step, policy_version=step + 1, start_time=at(start), end_time=at(end)):
                pass
        with rl.weight_sync(1, start_time=at(sync[0]), end_time=at(sync[1])):
            pass
    with tiny.trainer.weight_sync(1, start_time=at(24.0), end_time=at(24.5)):
        pass
    rank_1.shutdown()
    con = tiny.done()
    step_0 = analyses.trainer_goodput(con, "tiny").set_index("step").loc[0]
    assert step_0["window_s"] == pytest.approx(14.0)
    assert step_0["computing_s"] == pytest.approx(9.5)
    assert step_0["sync_wait_s"] == pytest.approx(2.9 + 0.5)
    assert step_0["other_s"] == pytest.approx(14.0 - 9.5 - 3.4)


def test_the_length_tail_and_tool_share_cover_finished_rollouts_of_the_filter(tiny):
    for i, env in enumerate(["math", "math", "math", "math", "swe"]):
        rl = tiny.server
        with rl.rollout(
            f"r{i}",
            group_id="g",
            environment=env,
            policy_version=0,
            reward=float(i % 2),
            start_time=at(0),
            end_time=at(10),
        ):
            with rl.turn(
                0, output_tokens=100 * (i + 1) if env == "math" else 1000, start_time=at(0), end_time=at(5)
            ):
                pass
            with rl.tool("bash", start_time=at(5), end_time=at(5 + (1 if env == "math" else 8))):
                pass
    # a rollout still running: its turn is recorded, its rl.rollout span is not (yet)
    with tiny.server.turn(
        0, output_tokens=5000, attributes={"rl.rollout.id": "r9"}, start_time=at(0), end_time=at(5)
    ):
        pass
    con = tiny.done()
    every = analyses.throughput(con, "tiny")
    assert every["length_p50"] == pytest.approx(300.0)  # 100, 200, 300, 400, 1000; not r9's 5000
    assert every["tool_wait_share"] == pytest.approx((4 * 1 + 8) / 50)
    math = analyses.throughput(con, "tiny", environment="math")
    assert math["length_p50"] == pytest.approx(250.0)
    assert math["duration_p90_s"] == pytest.approx(10.0)
    assert math["tool_wait_share"] == pytest.approx(4 / 40)
    assert math["rollout_tokens_per_s"] == pytest.approx(1000 / 5)


def test_trends_give_one_point_per_consuming_step(tiny):
    four_groups(tiny)
    con = tiny.done()
    assert analyses.trend(con, "tiny", "usable").to_dict("records") == [
        {"step": 0, "usable": 2},
        {"step": 2, "usable": 0},
    ]
    assert analyses.trend(con, "tiny", "staleness_mean")["staleness_mean"].tolist() == [0.0, 2.0]
    assert analyses.trend(con, "tiny", "usable", rolling=2)["rolling_mean"].tolist() == [2.0, 1.0]
    with pytest.raises(ValueError, match="metric must be one of"):
        analyses.trend(con, "tiny", "vibes")


def test_the_overview_trends_of_one_analysis_run_it_once(tiny):
    four_groups(tiny)
    con = tiny.done()
    memo = analyses.Memo(lambda: con)
    usable = analyses.trend(memo, "tiny", "usable", rolling=True)
    signal = analyses.trend(memo, "tiny", "nonzero_signal_rate", rolling=True)
    assert memo.computed() == {"run_exists", "funnel"} and memo.kept() == 2  # one funnel by step for both
    assert usable.equals(analyses.trend(con, "tiny", "usable", rolling=True))
    assert signal.equals(analyses.trend(con, "tiny", "nonzero_signal_rate", rolling=True))


def test_learning_without_percentiles_keeps_every_other_figure(tiny):
    four_groups(tiny)
    con = tiny.done()
    for by in (None, "step", "step_environment"):
        whole = analyses.learning(con, "tiny", by)
        lean = analyses.learning(con, "tiny", by, percentiles=False)
        percentiles = ["reward_p10", "reward_p50", "reward_p90"]
        assert whole[percentiles].notna().all().all() and lean[percentiles].isna().all().all()
        assert lean.drop(columns=percentiles).equals(whole.drop(columns=percentiles))
