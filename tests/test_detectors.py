"""Is training going wrong: the detectors fire at the step the simulator injected each failure, stay silent on
healthy runs and the shipped sample run, and read the signals and truncation a run records (docs/metrics.md,
"Detectors", "Training signals" and "Truncation")."""

from __future__ import annotations

from functools import partial

import pytest

from benchmarks.detectors import FAILURES  # the failure presets, one per detector
from rollscope.queries import analyses, checks, connect
from tests.conftest import ROOT, rollscope
from tests.simulated_runs import simulated_preset
from tests.test_analyses import TinyRun, at


def verdicts(store, run: str) -> dict[str, dict]:
    con = connect(store)
    return {
        rule: analyses.detector_summary(con, run, rule, **checks.detector_parameters(rule))
        for rule in analyses.DETECTORS
    }


def check_lines(store, run: str) -> tuple[int, dict[str, str]]:
    """`rollscope check`'s exit status and its line per rule."""
    code, out, _ = rollscope("check", "--store", store, "--run", run)
    return code, {line.split(":")[0].split(" ", 1)[1]: line for line in out.splitlines()}


def window(rule: str) -> int:
    return checks.detector_parameters(rule)["window"]


@pytest.mark.long
@pytest.mark.parametrize("preset", FAILURES)
def test_each_failure_fires_its_rules_within_a_window_of_its_onset_and_no_other_rule(preset):
    store, truth = simulated_preset(preset)
    (failure,) = truth["failures"]
    onset = failure["onset_step"]
    for rule, verdict in verdicts(store, preset).items():
        if rule in failure["rules"]:
            assert verdict["first_step"] is not None, (rule, verdict)
            assert onset <= verdict["first_step"] <= onset + window(rule), (rule, onset, verdict)
        else:
            assert verdict["steps_fired"] == 0, (rule, verdict)


@pytest.mark.long
def test_a_collapsed_entropy_that_comes_back_passes_again():
    store, truth = simulated_preset("entropy-collapse")
    (failure,) = truth["failures"]
    verdict = verdicts(store, "entropy-collapse")["entropy-collapse"]
    assert not verdict["firing"]  # back to its level by the run's end
    assert failure["until_step"] <= verdict["last_step"] < failure["until_step"] + window("entropy-collapse")
    line = check_lines(store, "entropy-collapse")[1]["entropy-collapse"]
    assert line.startswith("PASS entropy-collapse: ")
    assert f"first fired at step {verdict['first_step']}," in line


@pytest.mark.long
def test_a_detectors_stretches_cover_the_steps_it_fired_at_and_are_none_when_it_never_fired():
    store, _ = simulated_preset("entropy-collapse")
    con = connect(store)
    for rule, verdict in verdicts(store, "entropy-collapse").items():
        found = analyses.detector_episodes(con, "entropy-collapse", rule, **checks.detector_parameters(rule))
        assert tuple(found.columns) == analyses.EPISODE_COLUMNS, rule
        if verdict["steps_fired"]:
            assert (found["first_step"].min(), found["last_step"].max()) == (
                verdict["first_step"],
                verdict["last_step"],
            )
            assert found["steps"].sum() == verdict["steps_fired"], rule
        else:
            assert found.empty, rule


@pytest.mark.long
def test_a_page_reading_a_rules_verdict_and_stretches_computes_its_rows_once():
    """The Learning page asks each rule for its verdict and its stretches at once, on one Memo: both read the
    rule's rows, computed once, and give what a plain connection gives."""
    store, _ = simulated_preset("entropy-collapse")
    reader = connect(store)
    memo = analyses.Memo(reader.cursor)
    for rule in analyses.DETECTORS:
        params = checks.detector_parameters(rule)
        asked = (memo, "entropy-collapse", rule)
        verdict, found = analyses.together(
            {
                "verdict": partial(analyses.detector_summary, *asked, **params),
                "stretches": partial(analyses.detector_episodes, *asked, **params),
            }
        ).values()
        assert verdict == analyses.detector_summary(reader, "entropy-collapse", rule, **params), rule
        assert found.equals(analyses.detector_episodes(reader, "entropy-collapse", rule, **params)), rule
        assert memo.kept_of("detector_" + rule.replace("-", "_")) == 1, rule  # its rows computed once
    assert verdicts(store, "entropy-collapse")["entropy-collapse"]["steps_fired"]  # one rule did fire


@pytest.mark.long
def test_a_detector_still_firing_fails_its_check_naming_the_step_it_first_fired_at():
    store, truth = simulated_preset("kl-acceleration")
    verdict = verdicts(store, "kl-acceleration")["kl-acceleration"]
    code, lines = check_lines(store, "kl-acceleration")
    line = lines["kl-acceleration"]
    assert code == 1 and verdict["firing"]
    assert line.startswith("FAIL kl-acceleration: KL to the reference ")
    assert f"first fired at step {verdict['first_step']}," in line


@pytest.mark.long
def test_no_detector_fires_on_the_healthy_preset():
    store, truth = simulated_preset("healthy")
    assert truth["failures"] == []
    fired = {rule: v for rule, v in verdicts(store, "healthy").items() if v["steps_fired"]}
    assert fired == {}
    judged = verdicts(store, "healthy")
    assert all(v["steps_judged"] >= 30 for v in judged.values()), judged  # each had steps to judge


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 6))
def test_no_detector_fires_on_the_healthy_preset_whatever_the_seed(seed):
    store, _ = simulated_preset("healthy", seed)
    fired = {rule: v for rule, v in verdicts(store, f"healthy-{seed}").items() if v["steps_fired"]}
    assert fired == {}


@pytest.mark.long
@pytest.mark.parametrize("run", ["sample", "no-excursion"])
def test_no_detector_rule_fires_on_the_shipped_sample_runs(run):
    _, lines = check_lines(ROOT / "sample_data", run)
    for rule in analyses.DETECTORS:
        line = lines[rule]
        assert line.startswith(f"PASS {rule}: "), line
        # Each of the sample's environments is scored by one reward function: reward dominance, which compares
        # an environment's components, has nothing to judge there and says so; every other rule judged the run.
        unjudged = rule == "reward-dominance" and "two reward components or more" in line
        assert "never fired in" in line or unjudged, line


# --- what the detectors read ------------------------------------------------------------------------------------


@pytest.mark.long
def test_the_trainer_signals_per_step_are_the_ones_it_logged():
    store, truth = simulated_preset("healthy")
    frame = analyses.trainer_steps(connect(store), "healthy").set_index("step")
    for row in truth["learning"]["by_step"]:
        logged = row["train_signals"]
        got = frame.loc[row["train_step"], list(logged)].to_dict()
        assert got == pytest.approx(logged, rel=1e-12), row["train_step"]


@pytest.mark.long
def test_the_clip_rate_is_split_by_the_limit_that_cut_each_rollout_off():
    store, truth = simulated_preset("length-explosion")
    frame = analyses.generations_by_step(connect(store), "length-explosion").set_index("step")
    cut = {"response": 0, "turns": 0}
    for row in truth["learning"]["by_step"]:
        t = row["truncation"]
        step = frame.loc[row["train_step"]]
        assert step["rollouts"] == t["rollouts"]
        for limit in ("response", "context", "turns", "tools"):
            assert step[f"{limit}_cut_share"] == pytest.approx(t[limit] / t["rollouts"]), (row, limit)
        cut = {k: cut[k] + t[k] for k in cut}
    assert (
        cut["response"] > 100 and cut["turns"] > 10
    )  # the math limit after the explosion; swe's turn budget
    assert frame["max_tokens"].max() == 32768


def test_a_turn_the_context_length_cut_off_counts_against_that_limit_not_the_batchs_longest(store):
    """verl#7823: a response stopped by the model's context length is shorter than the response limit; a clip
    rate computed as "length equals the longest response" (or the response limit) misses it."""
    run = TinyRun(store)
    run.train_step(0, 0, 100)
    limits = {"max_tokens": 1000, "context_length": 4096}
    length = {"gen_ai.response.finish_reasons": ["length"]}
    stop = {"gen_ai.response.finish_reasons": ["stop"]}
    turns = {
        "r-context": {
            "input_tokens": 3696,
            "output_tokens": 400,
            "attributes": length,
        },  # 3,696 + 400 = 4,096
        "r-response": {"input_tokens": 100, "output_tokens": 1000, "attributes": length},
        "r-recorded": {"input_tokens": 100, "output_tokens": 300, "truncation_limit": "context"},
        "r-stop": {
            "input_tokens": 100,
            "output_tokens": 1000,
            "attributes": stop,
        },  # the longest, not cut off
        "r-short": {"input_tokens": 100, "output_tokens": 20, "attributes": stop},
    }
    for i, (rid, turn) in enumerate(turns.items()):
        run.rollout(rid, "g", float(i % 2), turns=[{"start": 1, "end": 2, **limits, **turn}])
        run.sample(rid, 0, "used")
    budget = run.server.rollout("r-budget-span", group_id="g2", truncation_limit="turns", reward=1.0)
    with budget, run.server.turn(0, input_tokens=100, output_tokens=10, start_time=at(1), end_time=at(2)):
        pass
    run.sample("r-budget-span", 0, "used")
    step = analyses.generations_by_step(run.done(), "tiny").iloc[0]
    assert step["rollouts"] == 6
    assert step["clipped_share"] == pytest.approx(3 / 6)  # response, context and the recorded context
    assert step["response_cut_share"] == pytest.approx(1 / 6)
    assert step["context_cut_share"] == pytest.approx(2 / 6)
    assert step["turns_cut_share"] == pytest.approx(1 / 6)
    assert step["max_tokens"] == 1000 and step["longest_response"] == 1000


def test_infrastructure_aborts_stay_out_of_reward_statistics(store):
    """radixark/miles#2800: an aborted rollout a verifier scored 0 is not a failed answer."""
    run = TinyRun(store)
    run.train_step(0, 0, 100)
    for rid, status, score in (("ok-1", "ok", 1.0), ("ok-2", "ok", 0.0), ("lost", "aborted", 0.0)):
        run.rollout(rid, "g", None, status=status)
        with run.server.reward(reward_name="tests", reward=score, attributes={"rl.rollout.id": rid}):
            pass
        run.sample(rid, 0, "used" if status == "ok" else "invalid")
    con = run.done()
    rewards = analyses.rewards_by_step(con, "tiny").iloc[0]
    assert (rewards["scored"], rewards["mean_reward"]) == (2, 0.5)
    learning = analyses.learning(con, "tiny")
    assert (learning["scored"].iloc[0], learning["reward_mean"].iloc[0]) == (2, 0.5)
    losses = analyses.funnel_losses(con, "tiny")
    assert losses.set_index("reason").loc["aborted", "lost"] == 1  # counted as a drop, by its cause


@pytest.mark.parametrize(
    "names",
    [
        {  # TRL's GRPOTrainer logs
            "entropy": 0.61,
            "kl": 0.012,
            "clip_ratio/region_mean": 0.03,
            "grad_norm": 0.8,
            "learning_rate": 1e-6,
        },
        {  # verl's actor metrics
            "actor/entropy": 0.61,
            "actor/kl_loss": 0.012,
            "actor/ppo_kl": 0.002,
            "actor/pg_clipfrac": 0.03,
            "actor/grad_norm": 0.8,
            "actor/lr": 1e-6,
        },
    ],
    ids=["trl", "verl"],
)
def test_a_frameworks_own_metric_names_land_in_the_signal_columns(store, names):
    run = TinyRun(store)
    with run.trainer.train_step(0, policy_version=1, attributes=names, start_time=at(0), end_time=at(1)):
        pass
    row = analyses.trainer_steps(run.done(), "tiny").iloc[0]
    assert row["train_entropy"] == 0.61 and row["train_kl"] == 0.012
    assert row["train_clip_fraction"] == 0.03 and row["train_grad_norm"] == 0.8
    assert row["train_learning_rate"] == 1e-6
    policy_kl = analyses.plain(row["train_policy_kl"])
    assert policy_kl == names.get("actor/ppo_kl")  # verl's update KL is not the KL to the reference
