"""The verl adapter with verl's own code running on CPU (tests/verl_tiny.py): its AgentLoopWorker drives
ToolAgentLoop (rollscope's recording subclass, put in place by one config entry) against a tiny scripted model,
with real function tools; each step's batch goes through verl's reward layout and GRPO advantages, reaches the
instrumented trainer's actor update, and rollscope's per-step figures equal verl's ``compute_data_metrics``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types

import pytest

STEPS = 6
RUN = "verl-1"


def test_importing_the_adapter_loads_neither_torch_nor_verl():
    code = (
        "import sys, rollscope.integrations.verl as m; assert callable(m.instrument); "
        "print(sorted(k for k in ('torch', 'verl', 'transformers', 'ray') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_something_that_is_not_a_verl_trainer_is_refused_before_anything_is_written(tmp_path):
    from rollscope.integrations.verl import instrument

    with pytest.raises(TypeError, match="takes a verl RayPPOTrainer, not dict"):
        instrument({}, store=tmp_path / "runs", run_id=RUN)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """STEPS steps of 2 prompts x 4 rollouts; returns (store, verl's metrics per step, handle)."""
    pytest.importorskip("verl", reason="needs the verl extra: pip install -e '.[dev,verl]' (make test-slow does)")
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.metric_utils import compute_data_metrics

    from rollscope.integrations.verl import instrument
    from tests import verl_tiny

    root = tmp_path_factory.mktemp("verl")
    config, model, tok = verl_tiny.setup(root)
    worker = AgentLoopWorker(config, llm_client=verl_tiny.TinyServer(model, tok))
    trainer = verl_tiny.trainer(config, tok)
    syncs = []
    trainer.checkpoint_manager = types.SimpleNamespace(update_weights=syncs.append)
    inst = instrument(trainer, store=root / "store", run_id=RUN)
    logged = {}
    for step in range(1, STEPS + 1):  # RayPPOTrainer.fit's order: generate, score, advantages, update, sync
        trainer.global_steps = step
        prompts = [verl_tiny.PROMPTS[(2 * step + k) % len(verl_tiny.PROMPTS)] for k in range(2)]
        batch = verl_tiny.step_batch(worker, config, tok, step, prompts)
        trainer._update_actor(batch)
        trainer.checkpoint_manager.update_weights(step)
        logged[step] = compute_data_metrics(batch=batch, use_critic=False)
    inst.close()
    yield root / "store", logged, inst, syncs
    inst.rl.shutdown()


# Per consuming step, from the store: response tokens (the turns' decoded tokens and the tool replies' tokens fed
# back, verl's response_length), and verl's turn count (model calls + tool replies + the prompt).
PER_ROLLOUT = """
SELECT s.train_step AS step,
       (SELECT coalesce(sum(t.output_tokens), 0) FROM turns t WHERE t.run_id = s.run_id AND t.rollout_id = s.rollout_id)
     + (SELECT coalesce(sum(x.observation_tokens), 0) FROM tools x WHERE x.run_id = s.run_id AND x.rollout_id = s.rollout_id)
       AS response_tokens,
       (SELECT count(*) FROM turns t WHERE t.run_id = s.run_id AND t.rollout_id = s.rollout_id)
     + (SELECT count(*) FROM tools x WHERE x.run_id = s.run_id AND x.rollout_id = s.rollout_id
        AND x.observation_tokens IS NOT NULL) + 1 AS turns
FROM samples s WHERE s.run_id = ?
"""


def _same(ours: float, theirs: float) -> bool:
    return math.isclose(ours, theirs, rel_tol=1e-6, abs_tol=1e-9)


@pytest.mark.slow
def test_rollscope_figures_equal_verls_compute_data_metrics_step_by_step(run):
    from rollscope.queries import analyses, connect

    store, logged, inst, _ = run
    assert inst.stats["failures"] == {}
    con = connect(store)
    frame = con.execute(PER_ROLLOUT, [RUN]).df().groupby("step").mean()
    generations = analyses.generations_by_step(con, RUN).set_index("step")
    scores = analyses.rewards_by_step(con, RUN).set_index(["step", "reward_name"])["mean_reward"]
    header = "verl step | response_length/mean | response_length/clip_ratio | critic/score/mean | num_turns/mean"
    lines = [header, " | ".join("---" for _ in header.split(" | "))]
    mismatches = []
    for step, metrics in logged.items():
        s = step - 1  # rollscope's train_step s is verl's global step s + 1
        pairs = [
            (float(frame.loc[s, "response_tokens"]), metrics["response_length/mean"]),
            (float(generations.loc[s, "clipped_share"]), metrics["response_length/clip_ratio"]),
            (float(scores.loc[(s, "score")]), metrics["critic/score/mean"]),
            (float(frame.loc[s, "turns"]), float(metrics["num_turns/mean"])),
        ]
        lines.append(" | ".join([str(step), *(f"{o:.4f} / {t:.4f}" for o, t in pairs)]))
        mismatches += [(step, o, t) for o, t in pairs if not _same(o, t)]
    table = "\n".join(["rollscope / verl, per step", *lines])
    print("\n" + table)
    assert not mismatches, f"{mismatches}\n{table}"
    # The run exercises what the figures must get right: clipped and finished responses, groups with and
    # without signal, several turns.
    clip = [m["response_length/clip_ratio"] for m in logged.values()]
    score = [m["critic/score/mean"] for m in logged.values()]
    assert any(c > 0 for c in clip) and any(c < 1 for c in clip)
    assert any(0 < x < 1 for x in score)
    decisions = dict(con.execute("SELECT sample_decision, count(*) FROM samples GROUP BY 1").fetchall())
    assert set(decisions) == {"used", "zero_signal"} and sum(decisions.values()) == STEPS * 8


@pytest.mark.slow
def test_turns_and_tools_carry_the_agent_loops_own_times_names_and_transcripts(run):
    from rollscope.queries import connect

    store, _, _, syncs = run
    con = connect(store)
    tools = con.execute(
        "SELECT tool_name, tool_exit_code, attributes->>'$.\"gen_ai.tool.call.arguments\"', "
        "attributes->>'$.\"gen_ai.tool.call.result\"', duration_s FROM tools"
    ).fetchall()
    assert {t[0] for t in tools} == {"lookup", "broken"}
    for name, code, arguments, result, duration in tools:
        word = json.loads(arguments)["word"]
        assert (name == "broken") == (word == "c") == (code == 1)
        assert result == (word.upper() if code == 0 else "Error executing tool 'broken': broken tool")
        assert duration >= 0
    turns = con.execute(
        "SELECT t.rollout_id, t.turn_index, t.start_time, t.end_time, t.spec_draft_tokens, "
        "t.attributes->>'$.\"gen_ai.output.messages\"', t.attributes->>'$.\"gen_ai.input.messages\"', "
        "t.attributes->>'$.\"rollscope.turn.timing\"' FROM turns t ORDER BY t.rollout_id, t.turn_index"
    ).fetchall()
    assert all(t[7] is None for t in turns)  # every turn has the loop's own times, none apportioned
    assert all(t[4] is not None and t[4] > 0 for t in turns)  # the server's per-request speculative counts
    first = [t for t in turns if t[1] == 0]
    assert all(json.loads(t[6])[0]["role"] == "user" for t in first)
    later = [t for t in turns if t[1] > 0]
    assert later and all(json.loads(t[6])[0]["role"] == "tool" for t in later)
    assert any('"done' in json.loads(t[5])[0]["parts"][0]["content"] or "done" in t[5] for t in turns)
    assert con.execute("SELECT list(policy_version ORDER BY policy_version) FROM weight_syncs").fetchone()[0] == list(
        range(1, STEPS + 1)
    )
    assert syncs == list(range(1, STEPS + 1))  # the wrapped sync still ran verl's own
