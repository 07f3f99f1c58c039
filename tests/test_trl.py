"""The TRL adapter on a real GRPOTrainer (tiny Llama on CPU, built in benchmarks/fixtures/trl_tiny.py):
rollscope's per-step figures equal TRL's own logged metrics, and training is the same with and without the
adapter."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.fixtures import trl_tiny
from tests.conftest import ROOT, documented, free_port, recorded, spans_on_disk

STEPS = 20
RUN = "grpo-1"


def _needs_trl():
    pytest.importorskip(
        "trl", reason="needs the trl extra: pip install -e '.[dev,trl]' (make test-slow does)"
    )


def test_importing_the_adapter_loads_neither_torch_nor_trl():
    code = (
        "import sys, rollscope.integrations.trl as m; assert callable(m.instrument); "
        "print(sorted(k for k in ('torch', 'trl', 'transformers') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_something_that_is_not_a_trainer_is_refused_before_anything_is_written(tmp_path):
    from rollscope.integrations.trl import instrument

    with pytest.raises(TypeError, match=r"takes a built trl.GRPOTrainer .*, not dict"):
        instrument({"model": "not a trainer"}, store=tmp_path / "runs", run_id=RUN)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same 20-step run twice on one seed: plain, then instrumented. With a KL penalty (beta), so that TRL
    logs the KL to its reference model too."""
    _needs_trl()
    from rollscope.integrations.trl import instrument

    root = tmp_path_factory.mktemp("trl")
    plain = trl_tiny.trainer(root / "plain", max_steps=STEPS, beta=0.04)
    plain.train()
    traced = trl_tiny.trainer(root / "traced", max_steps=STEPS, beta=0.04)
    inst = instrument(traced, store=root / "store", run_id=RUN)
    traced.train()
    inst.close()
    yield plain, traced, inst, root / "store"
    inst.rl.shutdown()


def _number(value) -> float:
    """A figure as a float; no value (SQL NULL, TRL's NaN mean of no scores) is NaN."""
    return math.nan if value is None else float(value)


def _same(ours: float, theirs: float) -> bool:
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    return math.isclose(ours, theirs, rel_tol=1e-5, abs_tol=1e-6)


# TRL's logged signals and the rl.train_step columns the adapter records them in (the adapter's SIGNALS).
TRL_SIGNALS = {
    "loss": "train_loss",
    "entropy": "train_entropy",
    "kl": "train_kl",
    "clip_ratio/region_mean": "train_clip_fraction",
    "grad_norm": "train_grad_norm",
    "learning_rate": "train_learning_rate",
}


def _trl_steps(log_history: list[dict]) -> dict[int, dict]:
    return {e["step"]: e for e in log_history if "frac_reward_zero_std" in e}


@pytest.mark.slow
def test_the_adapter_never_changes_training(runs):
    plain, traced, inst, _ = runs
    assert inst.stats["failures"] == {}
    assert len(_trl_steps(traced.state.log_history)) == STEPS
    assert trl_tiny.training_figures(traced.state.log_history) == trl_tiny.training_figures(
        plain.state.log_history
    )


def _compare_with_trl(con, run: str, log_history: list[dict], names: list[str]):
    """rollscope's per-step figures of ``run`` next to TRL's logged ones: TRL's step entries, the table (printed,
    for the closing note) and the mismatches."""
    from rollscope.queries import analyses

    funnel = analyses.funnel(con, run, by="step").set_index("step")
    generations = analyses.generations_by_step(con, run).set_index("step")
    rewards = analyses.rewards_by_step(con, run).set_index(["step", "reward_name"])["mean_reward"]
    trainer = analyses.trainer_steps(con, run).set_index("step")
    trl = _trl_steps(log_history)
    # What the update measured, each as TRL logs it (the KL only with a KL penalty): rollscope's column, TRL's key
    signals = [(c, k) for k, c in TRL_SIGNALS.items() if any(k in e for e in trl.values())]
    header = ["trl step", "nonzero signal", "mean tokens", "clipped", *(f"{n} mean" for n in names)]
    header += [key for _, key in signals]
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    mismatches = []
    for trl_step, logged in sorted(trl.items()):
        step = (
            trl_step - 1
        )  # rollscope's train_step s produces policy version s + 1; TRL logs it as step s + 1
        pairs = [
            ("nonzero signal", funnel.loc[step, "nonzero_signal_rate"], 1 - logged["frac_reward_zero_std"]),
            ("mean tokens", generations.loc[step, "mean_output_tokens"], logged["completions/mean_length"]),
            ("clipped", generations.loc[step, "clipped_share"], logged["completions/clipped_ratio"]),
            *((f"{n} mean", rewards.loc[(step, n)], logged[f"rewards/{n}/mean"]) for n in names),
            *((key, trainer.loc[step, column], logged[key]) for column, key in signals),
        ]
        pairs = [(what, _number(ours), _number(theirs)) for what, ours, theirs in pairs]
        lines.append(
            " | ".join([str(trl_step), *(f"{ours:.4f} / {theirs:.4f}" for _, ours, theirs in pairs)])
        )
        mismatches += [
            (trl_step, what, ours, theirs) for what, ours, theirs in pairs if not _same(ours, theirs)
        ]
    table = "\n".join([f"rollscope / TRL, per step ({run})", *lines])
    print("\n" + table)
    return trl, table, mismatches


@pytest.mark.slow
def test_rollscope_figures_equal_trls_own_step_by_step(runs):
    from rollscope.queries import analyses, connect

    _, traced, inst, store = runs
    con = connect(store)
    trl, table, mismatches = _compare_with_trl(
        con, RUN, traced.state.log_history, list(traced.reward_func_names)
    )
    assert len(trl) == STEPS >= 20
    assert not mismatches, f"{mismatches}\n{table}"
    # The run exercises every branch: groups with and without signal, clipped and finished completions, and a
    # reward function that returns None (environment "b"), so equal figures are not equal by accident.
    frac = [e["frac_reward_zero_std"] for e in trl.values()]
    clipped = [e["completions/clipped_ratio"] for e in trl.values()]
    assert any(f > 0 for f in frac) and any(f < 1 for f in frac)
    assert any(0 < c < 1 for c in clipped)
    assert {"entropy", "kl", "grad_norm"} <= set.intersection(*(set(e) for e in trl.values()))
    assert (
        "| loss | entropy | kl | clip_ratio/region_mean | grad_norm | learning_rate" in table.splitlines()[1]
    )
    scored = analyses.rewards_by_step(con, RUN)
    assert (scored[scored.reward_name == "brevity"].scored < 8).any()


@pytest.mark.slow
def test_a_clip_ratio_trl_logs_is_the_steps_clip_fraction(tmp_path):
    """With two optimizer passes over each generation round (``num_iterations=2``) the second pass's importance
    ratios leave 1 and TRL's loss clips some tokens: rollscope records TRL's clip ratio, entropy and grad norm
    of every step as TRL logged them (the other figures are TRL's averages over a round; not compared here)."""
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import analyses, connect

    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=10, num_iterations=2, epsilon=0.01)
    inst = instrument(trainer, store=tmp_path / "store", run_id=RUN)
    trainer.train()
    inst.close()
    steps = analyses.trainer_steps(connect(tmp_path / "store"), RUN).set_index("step")
    logged = {e["step"]: e for e in trainer.state.log_history if "clip_ratio/region_mean" in e}
    clip = [e["clip_ratio/region_mean"] for e in logged.values()]
    assert len(logged) == 10 and any(c > 0 for c in clip), clip
    for trl_step, entry in logged.items():
        for key, column in TRL_SIGNALS.items():
            if key in entry:
                assert _same(_number(steps.loc[trl_step - 1, column]), _number(entry[key])), (trl_step, key)
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_data_parallel_run_is_one_run_whose_figures_equal_trls(tmp_path):
    """Two ranks under torchrun (CPU, gloo on loopback), each instrumented as a user's script is under
    accelerate: each rank records the completions it generated and its share of every step, and the run's
    figures are TRL's own, which TRL gathers across the ranks: a step both ranks recorded is one step."""
    _needs_trl()
    import os

    from rollscope.queries import analyses, connect

    steps, ranks, per_rank = 8, 2, 8
    launch = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}"]
    launch += ["--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    launch += ["-m", "benchmarks.fixtures.trl_tiny"]
    done = subprocess.run(
        [*launch, str(tmp_path), str(steps), RUN],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},  # two ranks on the machine's cores, not four threads
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    stats = [json.loads((tmp_path / f"stats-{rank}.json").read_text()) for rank in range(ranks)]
    assert [(s["process_index"], s["processes"], s["failures"]) for s in stats] == [(0, 2, {}), (1, 2, {})]
    assert [s["spans"]["rl.rollout"] for s in stats] == [steps * per_rank] * ranks

    con = connect(tmp_path / "store")
    log = json.loads((tmp_path / "log.json").read_text())
    trl, table, mismatches = _compare_with_trl(con, RUN, log, ["has_a", "brevity"])
    assert len(trl) == steps
    assert not mismatches, f"{mismatches}\n{table}"
    frac = [e["frac_reward_zero_std"] for e in trl.values()]
    assert any(f > 0 for f in frac) and any(f < 1 for f in frac)
    # Each step once, with both ranks' shares: the global batch, and TRL's gathered num_tokens as the running sum.
    assert analyses.funnel(con, RUN, by="step").dispatched.tolist() == [ranks * per_rank] * steps
    trainer = analyses.trainer_steps(con, RUN)
    assert trainer.step.tolist() == list(range(steps))
    assert trainer.train_samples.tolist() == [ranks * per_rank] * steps
    assert trainer.train_tokens.cumsum().tolist() == [e["num_tokens"] for e in trl.values()]
    assert analyses.trainer(con, RUN)["train_steps"] == steps
    listed = con.execute("SELECT train_steps, processes FROM runs WHERE run_id = ?", [RUN]).fetchone()
    assert listed == (steps, ranks)

    # Live, the ranks' segments arrive at their own pace: a reader that saw one rank's spans, then the other's in
    # pieces (its share of steps the first rank recorded already), holds what a fresh derivation of them holds.
    import pyarrow.compute as pc

    from benchmarks.fixtures.derived_rows import derived
    from rollscope.queries import Reader
    from rollscope.store.layout import SegmentWriter
    from tests.test_reader_incremental import fresh, stored_spans

    spans = stored_spans(tmp_path / "store", RUN).sort_by("start_ns")
    first, second = (spans.filter(pc.equal(spans["instance_id"], i)) for i in pc.unique(spans["instance_id"]))
    live_store = tmp_path / "live"
    writer, live = SegmentWriter(live_store), Reader(live_store, materialize=True)
    cut = second.num_rows // 3
    for piece in (first, second.slice(0, cut), second.slice(cut, cut), second.slice(2 * cut)):
        writer.publish(RUN, piece)
        live.refresh()
        assert derived(live, RUN) == derived(fresh(live_store), RUN)
    assert live.derived_how["incremental"] >= 2, live.derived_how
    assert analyses.trainer_steps(live.con, RUN).train_samples.tolist() == [ranks * per_rank] * steps


@pytest.mark.slow
def test_every_completion_is_a_rollout_with_its_turn_rewards_and_one_sample(runs):
    from rollscope.queries import connect

    _, traced, _, store = runs
    con = connect(store)
    per_step = 8  # 2 prompts x 4 generations
    rollouts = con.execute(
        "SELECT count(*), count(DISTINCT group_id), count(DISTINCT task_id), min(policy_version), "
        "max(policy_version), list(DISTINCT environment ORDER BY environment) FROM rollouts WHERE run_id = ?",
        [RUN],
    ).fetchone()
    assert rollouts == (STEPS * per_step, STEPS * 2, len(trl_tiny.PROMPTS), 0, STEPS - 1, ["a", "b", "c"])
    # Each group is one prompt's 4 completions of one round, generated by the policy of that step.
    groups = con.execute(
        "SELECT count(*) AS n, count(DISTINCT task_id) AS tasks, count(DISTINCT policy_version) AS versions "
        "FROM rollouts WHERE run_id = ? GROUP BY group_id",
        [RUN],
    ).fetchall()
    assert set(groups) == {(4, 1, 1)}
    assert con.execute("SELECT count(*) FROM turns WHERE run_id = ?", [RUN]).fetchone()[0] == STEPS * per_step
    assert con.execute(
        "SELECT count(*), count(DISTINCT rollout_id) FROM samples WHERE run_id = ?", [RUN]
    ).fetchone() == (STEPS * per_step, STEPS * per_step)
    # Train steps: one per optimizer step, with what they trained on; TRL's own num_tokens is the running sum.
    steps = con.execute(
        "SELECT train_step, policy_version, train_samples, train_tokens, train_wait_s FROM train_steps "
        "WHERE run_id = ? ORDER BY train_step",
        [RUN],
    ).fetchall()
    assert [s[:3] for s in steps] == [(i, i + 1, per_step) for i in range(STEPS)]
    assert all(s[4] > 0 for s in steps)
    num_tokens = [e["num_tokens"] for e in _trl_steps(traced.state.log_history).values()]
    assert [sum(s[3] for s in steps[: i + 1]) for i in range(STEPS)] == num_tokens
    # A function's None is "no score from it": a reward span without a score, not a zero.
    unscored = con.execute(
        "SELECT count(*) FROM rewards w JOIN rollouts r USING (run_id, rollout_id) "
        "WHERE w.run_id = ? AND w.reward_name = 'brevity' AND r.environment = 'b' AND w.reward IS NULL",
        [RUN],
    ).fetchone()[0]
    assert (
        unscored
        == con.execute(
            "SELECT count(*) FROM rollouts WHERE run_id = ? AND environment = 'b'", [RUN]
        ).fetchone()[0]
    )


@pytest.mark.slow
def test_a_completion_trained_on_in_several_steps_is_one_sample_with_its_reuse(tmp_path):
    """num_iterations=2, steps_per_generation=2: each completion feeds 2 of the 4 steps after its generation.
    With segments due every 10 ms, the spans are handed to the adapter's thread and reach the store while
    training runs, as a live dashboard reads them."""
    _needs_trl()
    from transformers import TrainerCallback

    from rollscope.integrations.trl import instrument
    from rollscope.queries import analyses, connect

    trainer = trl_tiny.trainer(
        tmp_path / "out", max_steps=8, per_device_train_batch_size=4, steps_per_generation=2, num_iterations=2
    )
    inst = instrument(trainer, store=tmp_path / "store", run_id="reuse", segment_seconds=0.01)
    on_disk = []

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            time.sleep(0.05)  # a step of a real run is longer than the tiny model's
            on_disk.append(spans_on_disk(tmp_path / "store") if (tmp_path / "store").exists() else 0)

    trainer.add_callback(Watch())
    trainer.train()
    assert max(on_disk[:-1]) > 0  # before the last step ended
    inst.close()
    con = connect(tmp_path / "store")
    samples = con.execute(
        "SELECT s.train_step, r.policy_version, s.attributes->>'rl.sample.uses', "
        "s.attributes->>'rl.sample.last_step' FROM samples s JOIN rollouts r USING (run_id, rollout_id) "
        "WHERE s.run_id = 'reuse'"
    ).fetchall()
    assert len(samples) == 16  # 2 generation rounds of 8; each completion once
    for first, version, uses, last in samples:
        assert uses == "2"
        assert version <= first < int(last) <= version + 3
    steps = analyses.trainer_steps(con, "reuse")
    assert list(steps.train_samples) == [4] * 8
    funnel = analyses.funnel(con, "reuse")
    assert int(funnel.dispatched.iloc[0]) == 16
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_run_faster_than_the_segment_interval_hands_span_work_over_at_the_completions_bound(
    tmp_path, monkeypatch
):
    """Waiting span work keeps TRL's token lists alive: however fast the run, at most HANDOFF_COMPLETIONS of
    them wait before the adapter's thread takes them (here 40, with segments due only every hour), and what it
    builds mid-run is the whole run's record."""
    _needs_trl()
    from transformers import TrainerCallback

    from rollscope.integrations import trl as adapter
    from rollscope.queries import connect

    monkeypatch.setattr(adapter, "HANDOFF_COMPLETIONS", 40)
    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=6)
    inst = adapter.instrument(trainer, store=tmp_path / "store", run_id="bound", segment_seconds=3600)
    waiting, built = [], []

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            waiting.append(inst._pending_load)
            built.append(inst.counts["rl.rollout"])

    trainer.add_callback(Watch())
    trainer.train()
    inst.close()
    assert len(waiting) == 6 and max(waiting) < 40
    assert any(built)  # the adapter's thread built rollouts while training ran
    con = connect(tmp_path / "store")
    assert con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'bound'").fetchone()[0] == 48
    assert con.execute("SELECT count(*) FROM samples WHERE run_id = 'bound'").fetchone()[0] == 48
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_closed_trainer_is_not_kept_alive_and_training_again_still_records(tmp_path):
    """close() ends the adapter's thread, which otherwise held the trainer (model, optimizer, dataset) until the
    process exited; a train() after close() starts a new one and its spans still reach the store."""
    _needs_trl()
    import gc
    import threading
    import weakref

    from rollscope.integrations.trl import instrument
    from rollscope.queries import connect

    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=2)
    inst = instrument(trainer, store=tmp_path / "store", run_id="again")
    trainer.train()
    inst.close()
    trainer.train()  # a second session on the same trainer: its rollouts are recorded too
    inst._drain()
    inst.rl.force_flush()
    con = connect(tmp_path / "store")
    assert con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'again'").fetchone()[0] == 32
    inst._stop_worker()
    inst.rl.shutdown()
    ref = weakref.ref(trainer)
    del trainer, inst
    gc.collect()
    assert ref() is None
    assert not [t for t in threading.enumerate() if t.name == "rollscope-trl"]


@pytest.mark.slow
def test_a_multi_turn_rollout_func_gives_one_turn_per_model_call(tmp_path):
    """A rollout_func that talks to an environment between two model calls: two turns per rollout, the second
    reading everything before it, decoded tokens still adding up to TRL's completions/mean_length."""
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import analyses, connect

    steps = 4
    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=steps, rollout_func=trl_tiny.two_turn_rollout)
    inst = instrument(trainer, store=tmp_path / "store", run_id="multi")
    trainer.train()
    inst.close()
    assert inst.stats["failures"] == {}
    con = connect(tmp_path / "store")
    reply = len(trl_tiny.ENVIRONMENT_REPLY.split())
    turns = con.execute(
        "SELECT t.rollout_id, t.turn_index, t.input_tokens, t.output_tokens, t.start_time, t.end_time, "
        "t.attributes->>'rollscope.turn.timing', t.attributes->'gen_ai.response.finish_reasons', "
        "r.start_time, r.end_time FROM turns t JOIN rollouts r USING (run_id, rollout_id) "
        "WHERE t.run_id = 'multi' ORDER BY t.rollout_id, t.turn_index"
    ).fetchall()
    by_rollout: dict = {}
    for row in turns:
        by_rollout.setdefault(row[0], []).append(row)
    assert len(by_rollout) == steps * 8
    for first, second in by_rollout.values():
        assert (first[1], second[1]) == (0, 1)
        assert second[2] == first[2] + first[3] + reply  # prompt + turn 0 + the environment's reply
        assert '"tool_calls"' in first[7] and '"tool_calls"' not in second[7]
        assert first[6] == second[6] == "apportioned"
        assert first[8] <= first[4] <= first[5] <= second[4] <= second[5] <= second[9]
    logged = {e["step"]: e["completions/mean_length"] for e in _trl_steps(trainer.state.log_history).values()}
    ours = analyses.generations_by_step(con, "multi").set_index("step")["mean_output_tokens"]
    assert {s + 1: float(v) for s, v in ours.items()} == pytest.approx(logged, rel=1e-6)
    inst.rl.shutdown()


@pytest.mark.slow
def test_trls_tool_loop_gives_a_turn_per_model_call_and_a_span_per_tool_call(tmp_path):
    """GRPOTrainer(tools=...): each conversation's model calls are turns, each tool call an execute_tool span
    between them, and the per-step figures still equal TRL's (tokens, tool calls per rollout, failures)."""
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import analyses, connect

    trainer = trl_tiny.tool_trainer(tmp_path / "out", max_steps=2)
    inst = instrument(trainer, store=tmp_path / "store", run_id="tools")
    trainer.train()
    inst.close()
    assert inst.stats["failures"] == {}
    con = connect(tmp_path / "store")
    rollouts = con.execute(
        "SELECT r.rollout_id, r.task_id, list(t.turn_index ORDER BY t.turn_index), "
        "list(t.input_tokens ORDER BY t.turn_index), list(t.output_tokens ORDER BY t.turn_index), "
        "list(t.start_time ORDER BY t.turn_index), list(t.end_time ORDER BY t.turn_index) "
        "FROM rollouts r JOIN turns t USING (run_id, rollout_id) WHERE r.run_id = 'tools' GROUP BY ALL"
    ).fetchall()
    tools = con.execute(
        "SELECT rollout_id, list(tool_name ORDER BY start_time), list(tool_exit_code ORDER BY start_time), "
        "list(start_time ORDER BY start_time), list(end_time ORDER BY start_time) "
        "FROM tools WHERE run_id = 'tools' GROUP BY rollout_id"
    ).fetchall()
    tools = {row[0]: row[1:] for row in tools}
    assert len(rollouts) == 16
    for rollout_id, task, indexes, inputs, outputs, starts, ends in rollouts:
        words = json.loads(task)[0]["content"].split()
        assert indexes == list(range(len(words) + 1))  # one call per word, then the answer
        assert all(
            later > earlier + out for earlier, out, later in zip(inputs, outputs, inputs[1:], strict=False)
        )
        names, codes, tool_starts, tool_ends = tools[rollout_id]
        assert names == ["broken" if w == "c" else "lookup" for w in words]
        assert codes == [1 if w == "c" else 0 for w in words]
        for k in range(len(words)):  # tool call k runs after model call k and before model call k + 1
            assert ends[k] <= tool_starts[k] <= tool_ends[k] <= starts[k + 1]
    # TRL concatenates token ids turn after turn (the history is an exact prefix: the previous turn's prompt and
    # completion), and transformers' generate keeps no cache: every later turn prefills that history again
    # (evicted), every member of a group the task prompt the others prefilled too
    continuity = con.execute(
        "SELECT list(input_tokens ORDER BY turn_index), list(output_tokens ORDER BY turn_index), "
        "list(context_tokens ORDER BY turn_index), list(prefix_tokens ORDER BY turn_index), "
        "list(cached_input_tokens ORDER BY turn_index), list(continuity_break ORDER BY turn_index), "
        "any_value(task_prompt_tokens) FROM turns WHERE run_id = 'tools' GROUP BY rollout_id"
    ).fetchall()
    for inputs, outputs, contexts, prefixes, cached, breaks, prompt in continuity:
        assert contexts == [None] + [a + b for a, b in zip(inputs, outputs[:-1], strict=False)]
        assert prefixes == contexts and set(cached) == {0} and prompt == inputs[0]
        assert breaks == [None] + ["evicted"] * (len(breaks) - 1)
    split = analyses.record(analyses.prefill_split(con, "tools"))
    assert (
        split["reprefill_evicted_tokens"]
        == split["reprefill_tokens"]
        == sum(sum(c for c in row[2] if c is not None) for row in continuity)
    )
    (again,) = con.execute(
        "SELECT sum((n - 1) * p) FROM (SELECT count(*) AS n, any_value(task_prompt_tokens) AS p "
        "FROM rollouts WHERE run_id = 'tools' GROUP BY group_id)"
    ).fetchone()
    assert split["prompt_reprefill_tokens"] == again > 0
    logged = {e["step"]: e for e in _trl_steps(trainer.state.log_history).values()}
    ours = analyses.generations_by_step(con, "tools").set_index("step")
    per_step = con.execute(
        "SELECT s.train_step, count(t.*) / count(DISTINCT s.rollout_id), "
        "avg(CASE WHEN t.tool_exit_code <> 0 THEN 1.0 ELSE 0.0 END) "
        "FROM samples s LEFT JOIN tools t USING (run_id, rollout_id) WHERE s.run_id = 'tools' GROUP BY 1"
    ).fetchall()
    for step, calls, failures in per_step:
        assert float(ours.loc[step, "mean_output_tokens"]) == pytest.approx(
            logged[step + 1]["completions/mean_length"]
        )
        assert calls == pytest.approx(logged[step + 1]["tools/call_frequency"])
        assert failures == pytest.approx(logged[step + 1]["tools/failure_frequency"])
    inst.rl.shutdown()


def _recording(func, seen: list):
    """``func`` as a reward function that also keeps the prompts and completions TRL passed it."""

    def recording(prompts, completions, **kwargs):
        seen.append((prompts, completions))
        return func(prompts=prompts, completions=completions, **kwargs)

    recording.__name__ = func.__name__
    return recording


def _conversations(con, run: str) -> list[tuple[str, list]]:
    """Each rollout's transcript as (role, content) pairs, in order, from the messages view."""
    rows = con.execute(
        "SELECT rollout_id, list((role, content) ORDER BY start_ns, span_id, ordinal) FROM messages "
        "WHERE run_id = ? GROUP BY rollout_id ORDER BY rollout_id",
        [run],
    ).fetchall()
    return [(rollout, [tuple(pair) for pair in pairs]) for rollout, pairs in rows]


@pytest.mark.slow
def test_every_completion_trl_decoded_is_in_the_transcripts_as_its_reward_functions_read_it(tmp_path):
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import connect

    seen: list = []
    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=3)
    trainer.reward_funcs[0] = _recording(trainer.reward_funcs[0], seen)
    inst = instrument(trainer, store=tmp_path / "store", run_id="texts")
    trainer.train()
    inst.close()
    assert inst.stats["failures"] == {}
    received = sorted(
        (p, c) for prompts, completions in seen for p, c in zip(prompts, completions, strict=True)
    )
    assert len(received) == 3 * 8
    stored = sorted(
        (turns[0][1], turns[1][1]) for _, turns in _conversations(connect(tmp_path / "store"), "texts")
    )
    assert stored == received
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_tool_loop_conversation_is_stored_turn_by_turn_as_trl_ran_it(tmp_path):
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import connect

    seen: list = []
    trainer = trl_tiny.tool_trainer(tmp_path / "out", max_steps=1)
    trainer.reward_funcs[0] = _recording(trainer.reward_funcs[0], seen)
    inst = instrument(trainer, store=tmp_path / "store", run_id="tools")
    trainer.train()
    inst.close()
    assert inst.stats["failures"] == {}
    con = connect(tmp_path / "store")
    stored = sorted(turns for _, turns in _conversations(con, "tools"))
    received = sorted(
        [(m["role"], m["content"]) for m in [*prompt, *completion]]
        for prompts, completions in seen
        for prompt, completion in zip(prompts, completions, strict=True)
    )
    assert len(stored) == 8 and stored == received
    # each model call is a turn: its output the assistant message, the tool's answer the next turn's input
    per_turn = con.execute(
        "SELECT turn_index, list(role ORDER BY ordinal) FROM messages WHERE run_id = 'tools' "
        "GROUP BY rollout_id, turn_index, span_id ORDER BY rollout_id, turn_index"
    ).fetchall()
    assert {tuple(roles) for index, roles in per_turn if index == 0} == {("user", "assistant")}
    assert {tuple(roles) for index, roles in per_turn if index > 0} == {("tool", "assistant")}
    # docs/integrations.md's TRL row; weight syncs need vLLM (the async trainer's test checks that column)
    assert recorded(tmp_path / "store") == {**documented("TRL"), "weight syncs": "no"}
    inst.rl.shutdown()


@pytest.mark.slow
def test_with_capture_off_training_records_no_text(tmp_path):
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.store.layout import segments

    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=2)
    inst = instrument(trainer, store=tmp_path / "store", run_id="quiet", capture_content=False)
    trainer.train()
    inst.close()
    assert inst.stats["failures"] == {} and inst.stats["spans"]["rl.rollout"] == 16
    assert segments(tmp_path / "store", "messages", "quiet") == []
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_failing_adapter_is_logged_and_counted_never_raised(tmp_path, caplog):
    _needs_trl()
    from rollscope.integrations.trl import instrument

    trainer = trl_tiny.trainer(tmp_path / "out", max_steps=3)
    inst = instrument(trainer, store=tmp_path / "store", run_id="broken")

    real = inst._out.spans

    def broken(name, *args, **kwargs):  # rollouts and train steps cannot be recorded; the rest can
        if name in ("rl.rollout", "rl.train_step"):
            raise RuntimeError("exporter on fire")
        return real(name, *args, **kwargs)

    inst._out.spans = broken
    with caplog.at_level(logging.WARNING, logger="rollscope.integrations.trl"):
        trainer.train()
    assert trainer.state.global_step == 3
    assert inst.stats["failures"] == {"generate": 3, "train_step": 3}
    warnings = [r for r in caplog.records if "training goes on" in r.getMessage()]
    assert len(warnings) == 2  # once per hook, not once per step
    inst.rl.shutdown()


@pytest.mark.slow
def test_a_run_that_dies_without_close_still_has_every_span_it_made(tmp_path):
    """The adapter hands span work to its thread about once a second; at interpreter exit (training raised,
    nobody called close()) what was pending is still built and written."""
    _needs_trl()
    script = f"""
from transformers import TrainerCallback
from benchmarks.fixtures import trl_tiny
from rollscope.integrations.trl import instrument

class Crash(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise RuntimeError("the job crashed")

trainer = trl_tiny.trainer({str(tmp_path / "out")!r}, max_steps=20)
instrument(trainer, store={str(tmp_path / "store")!r}, run_id="crashed")
trainer.add_callback(Crash())
trainer.train()
"""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True)
    assert done.returncode != 0 and "the job crashed" in done.stderr
    from rollscope.queries import connect

    con = connect(tmp_path / "store")
    counts = con.execute(
        "SELECT (SELECT count(*) FROM rollouts WHERE run_id = $run), (SELECT count(*) FROM turns WHERE run_id = $run), "
        "(SELECT count(*) FROM samples WHERE run_id = $run), (SELECT count(*) FROM train_steps WHERE run_id = $run)",
        {"run": "crashed"},
    ).fetchone()
    assert counts == (3 * 8, 3 * 8, 3 * 8, 3)  # 3 steps of 8 completions, each trained on


@pytest.mark.slow
def test_the_adapters_own_columns_are_the_spans_the_sdk_path_writes(tmp_path):
    """By default the adapter queues its spans as columns (no SDK span objects: a twentieth of the CPU);
    given a provider of the job's own it goes through the SDK instead. Same run, same seed: the same spans."""
    _needs_trl()
    from opentelemetry.sdk.trace import TracerProvider

    from rollscope.integrations.trl import instrument
    from rollscope.integrations.trl_spans import _Columns, _SDKSpans

    stores, messages = {}, {}
    for path, provider in (("columns", None), ("sdk", TracerProvider())):
        trainer = trl_tiny.trainer(tmp_path / path, max_steps=3)
        given = {"tracer_provider": provider} if provider is not None else {}
        inst = instrument(trainer, store=tmp_path / path / "store", run_id="same", **given)
        assert type(inst._out) is (_Columns if provider is None else _SDKSpans)
        trainer.train()
        inst.close()
        assert inst.stats["failures"] == {}
        inst.rl.shutdown()
        stores[path] = _spans_in_order(tmp_path / path / "store")
        messages[path] = _spans_in_order(tmp_path / path / "store", "messages")
    assert len(stores["sdk"]) == 3 * 41  # 8 rollouts, 8 turns, 16 rewards, 8 samples, 1 train step a step
    assert stores["columns"] == stores["sdk"]
    # the transcripts too: the columns carry content as lists, the SDK's attributes as their JSON
    assert len(messages["sdk"]) == 3 * 8 * 2  # each completion's prompt and reply
    assert messages["columns"] == messages["sdk"]


@pytest.mark.slow
def test_the_async_trainer_records_what_its_loader_takes_and_drops_as_stale(tmp_path, caplog):
    """TRL's async GRPO trainer (trl.experimental) gets its samples from a rollout worker's queue and drops those
    more than max_staleness policy versions old. Its training step needs FlashAttention-3 kernels from the Hub,
    so the test drives what a CPU can run: the real trainer, its real data loader and weight sync, fed by a
    worker through TRL's rollout_worker= injection point. The loader fetches a batch ahead, so the test keeps
    one more batch queued than it asks for."""
    _needs_trl()
    from rollscope.integrations.trl import instrument
    from rollscope.queries import connect

    trainer = trl_tiny.async_trainer(tmp_path, max_staleness=1, batch_size=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rollscope"):
        inst = instrument(trainer, store=tmp_path / "store", run_id="async-1")
    # Nothing reported missing: the async trainer is one the adapter knows.
    assert not [r for r in caplog.records if r.name.startswith("rollscope")]
    queued = []

    def queue(*groups):
        for group in groups:
            for sample in group:
                trainer.rollout_worker.rollout_buffer.put(sample)
                queued.append(sample)

    def unscorable(reply):
        return None if reply == "p" else trl_tiny.has_a([reply])[0]

    queue(
        trl_tiny.rollout_group("a b c", ["a b", "c", "a", "d e"], model_version=0, group_id=0),  # used
        trl_tiny.rollout_group("d e f", ["b", "c", "d", "e"], model_version=0, group_id=1),  # no spread
    )
    batches = iter(trainer.get_train_dataloader())
    next(batches)
    trainer._sync_weight()
    trainer._sync_weight()  # the trainer's policy is version 2 now
    queue(
        trl_tiny.rollout_group("h i", ["a", "a", "a", "b"], model_version=0, group_id=2),  # 2 behind: dropped
        trl_tiny.rollout_group("j k", ["a", "p", "b", "a"], model_version=1, group_id=3, score=unscorable),
        trl_tiny.rollout_group("o p a", ["a", "a", "a", "a"], model_version=2, group_id=4),  # no spread
    )
    next(batches)
    next(batches)
    inst.close()
    assert inst.stats["failures"] == {}

    con = connect(tmp_path / "store")
    decisions = dict(con.execute("SELECT sample_decision, count(*) FROM samples GROUP BY ALL").fetchall())
    assert decisions == {"used": 7, "zero_signal": 8, "unscored": 1, "stale": 4}
    # TRL's own counts: the samples its loader dropped as stale, and the staleness of those it delivered.
    logged = trainer._metrics["train"]
    assert decisions["stale"] == len(logged["sample/dropped_stale_total"])
    # The run declares the loader's bound, so the staleness figures and `rollscope check` measure against it.
    assert con.execute("SELECT DISTINCT staleness_bound FROM spans").fetchall() == [(1,)]
    delivered = con.execute(
        "SELECT list(sample_staleness ORDER BY sample_staleness) FROM samples WHERE sample_decision != 'stale'"
    ).fetchone()[0]
    assert delivered == sorted(int(v) for v in logged["sample/staleness_mean"])
    # Each sample is a rollout of its group, generated by the policy version the worker stamped on it.
    groups = con.execute(
        "SELECT group_id, count(*), min(policy_version), max(policy_version) FROM rollouts "
        "GROUP BY ALL ORDER BY group_id"
    ).fetchall()
    assert groups == [(f"async-1/g{g}", 4, v, v) for g, v in enumerate([0, 0, 0, 1, 2])]
    # Decoded tokens as TRL counts a sample's completion tokens; one has_a score each, the unscored one absent.
    tokens = con.execute("SELECT sum(output_tokens), count(*) FROM turns").fetchone()
    assert tokens == (sum(int(s.completion_mask.sum()) for s in queued), len(queued))
    assert con.execute(
        "SELECT count(*), count(reward) FROM rewards WHERE reward_name = 'has_a'"
    ).fetchone() == (
        20,
        19,
    )
    syncs = con.execute("SELECT list(policy_version ORDER BY policy_version) FROM weight_syncs").fetchone()[0]
    assert syncs == [1, 2] and documented("TRL")["weight syncs"] == "yes"
    inst.rl.shutdown()


def _spans_in_order(store, dataset: str = "spans") -> list[dict]:
    """Every span (or message: ``dataset``) as written, in the order written; ids and rollout ids replaced by
    their order of appearance (the two runs draw different random ids); times and the resource left out (the
    runs differ in them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollscope.store.layout import segments

    table = pa.concat_tables(pq.read_table(f) for f in sorted(segments(store, dataset), key=lambda f: f.name))
    timed = ["start_ns", "end_ns", "train_wait_s"]
    resource = ["service_name", "instance_id", "role", "devices", "model_name", "model_parameters"]
    resource += ["algorithm", "staleness_bound", "resource_attributes"]
    rows = table.drop_columns([c for c in timed + resource if c in table.column_names]).to_pylist()
    order: dict = {}

    def seen(value):
        return None if value is None else order.setdefault(value, len(order))

    return [
        {
            **{k: v for k, v in row.items() if v is not None},
            **{k: seen(row[k]) for k in ("trace_id", "span_id", "parent_span_id", "rollout_id") if k in row},
        }
        for row in rows
    ]


@pytest.mark.extras
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_sample_decisions_follow_trls_own_arithmetic(aggregation, scale):
    """The adapter decides zero_signal/unscored in numpy; TRL computes the same test in torch with its own
    ``nanstd``. On rounds with ties, constant groups, missing scores and whole rows unscored, both agree."""
    _needs_trl()
    import types

    import numpy as np
    import torch
    from trl.trainer.utils import nanstd

    from rollscope.integrations.trl_decisions import _decisions

    rng = np.random.default_rng(7)
    generations, functions = 4, 2
    for _ in range(200):
        rewards = rng.choice([0.0, 0.5, 1.0, np.nan], size=(generations * 3, functions)).astype(np.float32)
        rewards[rng.random(len(rewards)) < 0.2] = np.nan  # every function returned None for these samples
        rewards[:generations] = rewards[0]  # a constant group
        weights = rng.choice([1.0, 0.5, 2.0], size=functions).astype(np.float32)
        trainer = types.SimpleNamespace(
            num_generations=generations, multi_objective_aggregation=aggregation, scale_rewards=scale
        )
        unscorable = np.isnan(rewards).all(axis=1)
        ours = _decisions(trainer, rewards, weights, unscorable)

        r, w = torch.from_numpy(rewards), torch.from_numpy(weights).unsqueeze(0)
        if aggregation == "normalize_then_sum":
            grouped = r.view(-1, generations, functions)
            mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
            std_k = nanstd(grouped, dim=1, keepdim=True)
            combined = (((grouped - mean_k) / (std_k + 1e-4)).view(-1, functions) * w).nansum(dim=1)
        else:
            combined = (r * w).nansum(dim=1)
        combined[torch.from_numpy(unscorable)] = torch.nan
        if aggregation == "normalize_then_sum" or scale == "batch":
            std = nanstd(combined).expand_as(combined)
        else:
            std = nanstd(combined.view(-1, generations), dim=1).repeat_interleave(generations, dim=0)
        zero = torch.isclose(std, torch.zeros_like(std)).tolist()
        theirs = [
            "unscored" if u else "zero_signal" if z else "used" for u, z in zip(unscorable, zero, strict=True)
        ]
        assert ours == theirs
