"""Every analysis on simulated runs, held to the simulator's ground truth (docs/simulator.md).

Each run is simulated once per test session (``simulated()`` caches it); a run with ``rl.sample`` spans and
the same run without them check both ways the funnel is computed: recorded decisions, and stages derived from
rollouts, groups and policy versions.
"""

from __future__ import annotations

import pytest

from rollscope.queries import analyses, checks, connect
from rollscope.semconv import FUNNEL_STAGES as STAGES
from tests.simulated_runs import simulated

pytestmark = pytest.mark.long  # each worker simulates two runs in two processes each: `make test-all`


@pytest.fixture(
    scope="session",
    params=[("samples", False), ("derived", False), ("samples", True), ("derived", True)],
    ids=["samples", "derived", "samples-materialized", "derived-materialized"],
)
def run(request):
    """A simulated run, with and without rl.sample spans, read from Parquet directly and through the
    dashboard's materialized reader: (connection, run id, ground truth)."""
    name, materialize = request.param
    store, truth = simulated(name)
    return connect(store, materialize=materialize), name, truth


# --- funnel ------------------------------------------------------------------------------------------------


def test_funnel_counts_are_exact_and_rates_match(run):
    con, run_id, truth = run
    row = analyses.record(analyses.funnel(con, run_id))
    expected = truth["run"]["funnel"]
    assert {s: row[s] for s in STAGES} == {s: expected[s] for s in STAGES}
    for rate in ("completion", "scoring", "nonzero_signal", "freshness"):
        assert row[f"{rate}_rate"] == pytest.approx(expected["rates"][rate], rel=0.01)


def test_funnel_per_step_and_environment_match(run):
    con, run_id, truth = run
    by_step = analyses.funnel(con, run_id, by="step")
    assert by_step[["step", *STAGES]].to_dict("records") == [
        {"step": s["train_step"], **{k: s["funnel"][k] for k in STAGES}} for s in truth["by_step"]
    ]
    by_env = analyses.funnel(con, run_id, by="environment").set_index("environment")
    for env, piece in truth["by_environment"].items():
        assert by_env.loc[env, list(STAGES)].to_dict() == {k: piece["funnel"][k] for k in STAGES}


def test_funnel_losses_add_up_to_the_recorded_decisions(run):
    con, run_id, truth = run
    lost = analyses.funnel_losses(con, run_id).groupby("stage")["lost"].sum().to_dict()
    decisions = truth["run"]["decisions"]
    assert lost == {
        "completed": decisions["invalid"],
        "scored": decisions["unscored"],
        "nonzero_signal": decisions["zero_signal"],
        "fresh": decisions["stale"],
    }


def test_filters_select_the_same_rollouts_as_the_ground_truth(run):
    con, run_id, truth = run
    step = truth["by_step"][5]
    row = analyses.record(analyses.funnel(con, run_id, steps=(step["train_step"], step["train_step"])))
    assert row["usable"] == step["funnel"]["usable"]
    cell = next(c for c in truth["by_step_environment"] if c["train_step"] == step["train_step"])
    filtered = analyses.funnel(con, run_id, steps=(cell["train_step"],) * 2, environment=cell["environment"])
    assert analyses.record(filtered)["dispatched"] == cell["funnel"]["dispatched"]


# --- compute -----------------------------------------------------------------------------------------------


def test_flop_terms_and_device_seconds_match(run):
    con, run_id, truth = run
    terms = analyses.compute_terms(con, run_id).set_index("term")
    expected = truth["run"]["compute"]
    for term in ("rollout", "train", "teacher", "judge"):
        assert terms.at[term, "flops"] == pytest.approx(expected["flops"][term], rel=0.01)
        assert terms.at[term, "device_seconds"] == pytest.approx(expected["device_seconds"][term], rel=0.01)
        assert terms.at[term, "busy_s"] == pytest.approx(expected["busy_seconds"][term], rel=0.01)
    assert terms.at["env", "device_seconds"] == pytest.approx(expected["env_cpu_seconds"], rel=0.01)


def test_flops_per_step_match(run):
    con, run_id, truth = run
    by_step = analyses.compute_terms(con, run_id, by="step")
    for piece in truth["by_step"]:
        mine = by_step[by_step["step"] == piece["train_step"]].set_index("term")["flops"]
        for term, flops in piece["compute"]["flops"].items():
            if term != "total":
                assert mine[term] == pytest.approx(flops, rel=0.01)


def test_work_around_a_training_token_matches(run):
    con, run_id, truth = run
    work = analyses.token_work(con, run_id)
    expected = truth["run"]["work_per_token"]
    assert work["usable_tokens"] == expected["output_tokens"]
    assert work["reprefill_waste_tokens"] == expected["reprefill_waste_tokens"]
    assert work["train_tokens"] == expected["train_tokens"]
    assert work["teacher_tokens"] == expected["teacher_tokens"]
    assert work["wasted_compute_share"] == pytest.approx(truth["run"]["compute"]["wasted_share"], rel=0.01)


# --- prefill : decode, speculative decoding ----------------------------------------------------------------


def test_prefill_decode_matches_by_environment(run):
    con, run_id, truth = run
    by_env = analyses.prefill_decode(con, run_id, by="environment").set_index("environment")
    for env, piece in truth["by_environment"].items():
        expected = piece["prefill_decode"]
        assert by_env.at[env, "new_prefill_tokens"] == expected["new_input_tokens"]
        assert by_env.at[env, "reprefill_waste_tokens"] == expected["reprefill_waste_tokens"]
        assert by_env.at[env, "prefill_decode_ratio"] == pytest.approx(expected["ratio"], rel=0.01)
        assert by_env.at[env, "cache_hit_rate"] == pytest.approx(expected["cache_hit_rate"], rel=0.01)


def test_acceptance_matches_within_half_a_point(run):
    con, run_id, truth = run
    whole = analyses.record(analyses.spec_decode(con, run_id))
    assert whole["acceptance_rate"] == pytest.approx(
        truth["run"]["spec_decode"]["acceptance_rate"], abs=0.005
    )
    assert whole["mean_accepted_length"] == pytest.approx(
        truth["run"]["spec_decode"]["mean_accepted_length"], rel=0.01
    )
    by_version = analyses.spec_decode(con, run_id, by="policy_version").set_index("policy_version")
    for row in truth["by_policy_version"]:
        expected = row["spec_decode"]["acceptance_rate"]
        assert by_version.at[row["policy_version"], "acceptance_rate"] == pytest.approx(expected, abs=0.005)


def test_logprob_lint_finds_exactly_the_misconfigured_versions(run):
    con, run_id, truth = run
    lint = analyses.logprob_lint(con, run_id)
    first, last = truth["events"]["logprob_drafter_policy_versions"]
    assert int(lint["turns"].sum()) == truth["run"]["spec_decode"]["drafter_logprob_turns"]
    assert sorted(lint["policy_version"].unique()) == list(range(first, last + 1))


# --- staleness and throughput ------------------------------------------------------------------------------


def test_staleness_distribution_is_exact(run):
    con, run_id, truth = run
    dist = analyses.staleness(con, run_id)
    expected = truth["run"]["staleness"]
    assert {str(s): n for s, n in zip(dist["staleness"], dist["samples"], strict=True)} == expected[
        "histogram"
    ]
    summary = analyses.staleness_summary(con, run_id)
    assert summary["mean"] == pytest.approx(expected["mean"])
    assert summary["freshness_rate"] == pytest.approx(expected["freshness_rate"])
    assert (summary["violations"], summary["bound"]) == (expected["violations"], expected["bound"])


def test_trainer_idle_and_rollout_length_tail_match(run):
    con, run_id, truth = run
    figures = analyses.throughput(con, run_id)
    assert figures["trainer_idle_fraction"] == pytest.approx(
        truth["run"]["trainer"]["idle_fraction"], rel=0.01
    )
    lengths = truth["run"]["rollout_length"]
    for q in ("p50", "p90", "p99"):
        assert figures[f"length_{q}"] == pytest.approx(lengths["output_tokens"][q], rel=0.01)
        assert figures[f"duration_{q}_s"] == pytest.approx(lengths["duration_s"][q], rel=0.01)
    assert figures["dropped_spans"] == 0


def test_staleness_split_into_in_flight_and_queued_matches_per_step(run):
    con, run_id, truth = run
    timing = analyses.staleness_timing(con, run_id).to_dict("records")
    expected = [{"step": s["train_step"], **s["staleness_timing"]} for s in truth["learning"]["by_step"]]
    assert [row["step"] for row in timing] == [row["step"] for row in expected]
    for mine, theirs in zip(timing, expected, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-6)
    assert any(row["queued_versions_mean"] > 0 for row in timing)  # the excursion queues samples


def test_staleness_split_over_the_run_is_the_mean_over_every_consumed_sample(run):
    con, run_id, truth = run
    steps = [s["staleness_timing"] for s in truth["learning"]["by_step"] if s["staleness_timing"]["samples"]]
    n = sum(s["samples"] for s in steps)
    keys = ("in_flight_s_mean", "queued_s_mean", "in_flight_versions_mean", "queued_versions_mean")
    expected = {"samples": n, **{k: sum(s[k] * s["samples"] for s in steps) / n for k in keys}}
    assert analyses.staleness_timing_summary(con, run_id) == pytest.approx(expected, rel=1e-9)


def test_dropped_stale_against_kept_matches(run):
    con, run_id, truth = run
    bias = analyses.stale_bias(con, run_id).set_index("samples")
    for kind, figures in truth["learning"]["stale_bias"].items():
        assert bias.loc[kind].to_dict() == pytest.approx(figures)


# --- is it learning ----------------------------------------------------------------------------------------

_REWARD_KEYS = ("scored", "reward_mean", "reward_p10", "reward_p50", "reward_p90", "success_rate")


def test_reward_and_success_per_run_and_step_match(run):
    con, run_id, truth = run
    learning = truth["learning"]
    assert analyses.record(analyses.learning(con, run_id)) == pytest.approx(
        {k: learning["run"][k] for k in _REWARD_KEYS}
    )
    by_step = analyses.learning(con, run_id, by="step")
    expected = [{"step": s["train_step"], **{k: s[k] for k in _REWARD_KEYS}} for s in learning["by_step"]]
    got = by_step.to_dict("records")
    assert [row["step"] for row in got] == [row["step"] for row in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine == pytest.approx(theirs)
    losses = analyses.trend(con, run_id, "train_loss")["train_loss"].tolist()
    assert losses == [s["train_loss"] for s in learning["by_step"]]


def test_each_steps_reward_percentiles_are_those_of_its_rollouts_in_every_environment(run):
    """Per step and environment, and per step for one environment or a range of steps, the percentiles are
    numpy's over the rewards of the scored rollouts that step consumed (kept whole per step: reward_steps)."""
    import numpy as np

    con, run_id, _ = run
    rewards: dict[tuple[int, str], list[float]] = {}
    query = """SELECT step, environment, reward FROM rollout_stages(?)
               WHERE scored AND reward IS NOT NULL AND step IS NOT NULL"""
    for step, environment, reward in con.execute(query, [run_id]).fetchall():
        rewards.setdefault((step, environment), []).append(reward)
    percentiles = ["reward_p10", "reward_p50", "reward_p90"]
    by_both = analyses.learning(con, run_id, by="step_environment").set_index(["step", "environment"])
    assert sorted(by_both.index) == sorted(rewards)
    for key, values in rewards.items():
        assert by_both.loc[key, percentiles].tolist() == pytest.approx(np.percentile(values, [10, 50, 90]))
    for environment in {e for _, e in rewards}:
        one = analyses.learning(con, run_id, by="step", environment=environment).set_index("step")
        mine = by_both.xs(environment, level="environment")
        assert one[percentiles].equals(mine[percentiles]) and one["scored"].equals(mine["scored"])
    whole = analyses.learning(con, run_id, by="step").set_index("step")
    lo, hi = sorted(whole.index)[2], sorted(whole.index)[-3]
    some = analyses.learning(con, run_id, by="step", steps=(lo, hi)).set_index("step")
    assert some.equals(whole.loc[lo:hi]) and len(some) < len(whole)


def test_zero_signal_split_matches_per_run_step_and_environment(run):
    con, run_id, truth = run
    learning = truth["learning"]
    assert analyses.zero_signal_summary(con, run_id) == learning["zero_signal"]
    assert learning["zero_signal"]["all_wrong"]["groups"] and learning["zero_signal"]["all_right"]["groups"]
    by_step = analyses.zero_signal(con, run_id, by="step").set_index("step")
    for piece in learning["by_step"]:
        for kind, counts in piece["zero_signal"].items():
            got = by_step[f"{kind}_rollouts"].get(piece["train_step"], 0)
            assert (piece["train_step"], kind, got) == (piece["train_step"], kind, counts["rollouts"])
    by_env = analyses.zero_signal(con, run_id, by="environment").set_index("environment")
    for env, kinds in learning["zero_signal_by_environment"].items():
        assert {k: int(by_env.at[env, f"{k}_groups"]) for k in kinds} == {
            k: v["groups"] for k, v in kinds.items()
        }
    lost = analyses.funnel_losses(con, run_id)
    assert lost.loc[lost["stage"] == "nonzero_signal", "lost"].sum() == sum(
        v["rollouts"] for v in learning["zero_signal"].values()
    )


def test_task_solve_rates_and_curriculum_lists_match(run):
    con, run_id, truth = run
    tasks = truth["learning"]["tasks"]
    frame = analyses.task_solve_rates(con, run_id)
    assert dict(zip(frame["task"], frame["solve_rate"], strict=True)) == pytest.approx(tasks["solve_rate"])
    assert frame.loc[frame["status"] == "always solved", "task"].tolist() == tasks["always_solved"]
    assert frame.loc[frame["status"] == "never solved", "task"].tolist() == tasks["never_solved"]
    assert tasks["always_solved"] and tasks["never_solved"]  # the simulator has too-easy and too-hard tasks
    summary = analyses.task_solve_summary(con, run_id)
    assert summary == {
        "tasks_attempted": len(tasks["solve_rate"]),
        "tasks_always_solved": len(tasks["always_solved"]),
        "tasks_never_solved": len(tasks["never_solved"]),
        "tasks_mixed": len(tasks["solve_rate"]) - len(tasks["always_solved"]) - len(tasks["never_solved"]),
    }


def test_mismatch_per_step_matches_and_the_check_finds_the_excursion(run):
    con, run_id, truth = run
    learning = truth["learning"]
    by_step = analyses.mismatch(con, run_id, "step")
    expected = [
        (
            s["train_step"],
            s["mismatch"]["samples"],
            s["mismatch"]["mismatch_kl_mean"],
            s["mismatch"]["logprob_diff_max"],
        )
        for s in learning["by_step"]
        if s["mismatch"]["samples"]
    ]
    got = list(
        by_step[["step", "samples", "mismatch_kl_mean", "logprob_diff_max"]].itertuples(
            index=False, name=None
        )
    )
    assert [row[:2] for row in got] == [row[:2] for row in expected]
    assert [v for row in got for v in row[2:]] == pytest.approx([v for row in expected for v in row[2:]])
    result = next(r for r in checks.run_checks(con, run_id) if r.name == "mismatch-kl")
    if not learning["run"]["mismatch"]["samples"]:  # the run whose trainer records no rl.sample spans
        assert result.ok and result.value is None
        return
    first, last = truth["events"]["mismatch_excursion_steps"]
    assert not result.ok
    worst = max(expected, key=lambda row: row[2])
    steps = analyses.mismatch_steps(con, run_id, limit=checks.THRESHOLDS["mismatch-kl"])
    assert (steps["worst_step"], steps["steps"]) == (worst[0], len(expected))
    assert steps["worst_step_mismatch_kl"] == pytest.approx(worst[2]) == result.value
    assert (steps["first_step_over"], steps["last_step_over"]) == (first, last)
    over = by_step.loc[by_step["mismatch_kl_mean"] > checks.THRESHOLDS["mismatch-kl"], "step"]
    assert (over.min(), over.max()) == (first, last)
    calm = checks.run_checks(con, run_id, {"mismatch-kl": 1.0})
    assert next(r for r in calm if r.name == "mismatch-kl").ok


def test_per_step_rolling_means_are_the_last_steps_means_in_the_same_frame(run):
    """The dark line of every per-step chart: the mean of the step's figure and the ROLLING_STEPS − 1 before."""
    con, run_id, truth = run
    window = analyses.ROLLING_STEPS
    rates = [s["success_rate"] for s in truth["learning"]["by_step"]]
    expected = [_mean(rates[max(0, i - window + 1) : i + 1]) for i in range(len(rates))]
    by_step = analyses.learning(con, run_id, by="step", rolling=("success_rate", "reward_mean"))
    assert by_step["success_rate_rolling_mean"].tolist() == pytest.approx(expected)
    plain = analyses.learning(con, run_id, by="step")
    assert by_step[plain.columns].to_dict("records") == plain.to_dict("records")  # the figures unchanged
    per_env = analyses.learning(con, run_id, by="step_environment", rolling=("success_rate",))
    for _, rows in per_env.groupby("environment"):
        values = rows["success_rate"].tolist()
        means = [_mean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]
        assert rows["success_rate_rolling_mean"].tolist() == pytest.approx(means)
    trend = analyses.trend(con, run_id, "success_rate", rolling=True)
    assert trend["rolling_mean"].tolist() == pytest.approx(expected)


def _mean(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


# --- the reference's worked example ------------------------------------------------------------------------


def test_worked_example_gives_about_500_then_670_usable_and_a_third_more_throughput():
    store, _ = simulated("worked-example")
    row = analyses.record(analyses.funnel(connect(store), "worked-example"))
    assert row["dispatched"] == 1000
    assert row["usable"] == pytest.approx(500, abs=15)
    rates = {r: row[f"{r}_rate"] for r in ("completion", "scoring", "nonzero_signal", "freshness")}
    result = analyses.what_if(row["dispatched"], rates, {"nonzero_signal": 0.80})
    assert result["new_usable"] == pytest.approx(670, abs=15)
    assert result["throughput_gain"] == pytest.approx(1 / 3, abs=0.02)
    better, _ = simulated("worked-example-080")
    assert analyses.record(analyses.funnel(connect(better), "worked-example-080"))["usable"] == pytest.approx(
        670, abs=15
    )
