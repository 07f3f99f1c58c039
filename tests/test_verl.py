"""The verl adapter with verl's own code running on CPU (tests/verl_tiny.py): its AgentLoopWorker drives
ToolAgentLoop (rollscope's recording subclass, put in place by one config entry) against a tiny scripted model,
with real function tools; each step's batch goes through verl's reward layout and GRPO advantages, reaches the
instrumented trainer's actor update, and rollscope's per-step figures equal verl's ``compute_data_metrics``."""

from __future__ import annotations

import itertools
import json
import math
import re
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


@pytest.mark.extras
def test_verls_v1_trainer_is_refused_saying_what_to_use_instead(tmp_path):
    """verl 0.9's default trainer (trainer.use_v1) keeps its batches in TransferQueue: not wrapped, said at once
    rather than recording nothing."""
    pytest.importorskip("verl.trainer.ppo.v1", reason="needs the verl extra")
    from verl.trainer.ppo.v1 import PPOTrainerSync

    from rollscope.integrations.verl import instrument

    with pytest.raises(TypeError, match=r"trainer.use_v1=false\); PPOTrainerSync is the v1 trainer"):
        instrument(PPOTrainerSync.__new__(PPOTrainerSync), store=tmp_path / "runs", run_id=RUN)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """STEPS steps of 2 prompts x 4 rollouts; returns (store, verl's metrics per step, handle)."""
    pytest.importorskip(
        "verl", reason="needs the verl extra: pip install -e '.[dev,verl]' (make test-slow does)"
    )
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
    logged, batches = {}, {}
    for step in range(1, STEPS + 1):  # RayPPOTrainer.fit's order: generate, score, advantages, update, sync
        trainer.global_steps = step
        prompts = [verl_tiny.PROMPTS[(2 * step + k) % len(verl_tiny.PROMPTS)] for k in range(2)]
        batch = verl_tiny.step_batch(worker, config, tok, step, prompts)
        trainer._update_actor(batch)
        trainer.checkpoint_manager.update_weights(step)
        logged[step] = compute_data_metrics(batch=batch, use_critic=False)
        batches[step] = batch
    inst.close()
    yield types.SimpleNamespace(
        store=root / "store", logged=logged, inst=inst, syncs=syncs, batches=batches, tokenizer=tok
    )
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

    store, logged, inst = run.store, run.logged, run.inst
    assert inst.stats["failures"] == {}
    con = connect(store)
    frame = con.execute(PER_ROLLOUT, [RUN]).df().groupby("step").mean()
    generations = analyses.generations_by_step(con, RUN).set_index("step")
    scores = analyses.rewards_by_step(con, RUN).set_index(["step", "reward_name"])["mean_reward"]
    header = (
        "verl step | response_length/mean | response_length/clip_ratio | critic/score/mean | num_turns/mean"
    )
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
def test_turns_and_tools_carry_the_agent_loops_own_times_names_and_outcomes(run):
    from rollscope.queries import connect

    con = connect(run.store)
    tools = con.execute("SELECT tool_name, tool_exit_code, duration_s FROM tools").fetchall()
    assert {t[0] for t in tools} == {"lookup", "broken"}
    assert all((name == "broken") == (code == 1) and duration >= 0 for name, code, duration in tools)
    turns = con.execute(
        "SELECT spec_draft_tokens, attributes->>'$.\"rollscope.turn.timing\"' FROM turns"
    ).fetchall()
    assert all(timing is None for _, timing in turns)  # every turn has the loop's own times, none apportioned
    assert all(drafted is not None and drafted > 0 for drafted, _ in turns)  # the server's per-request counts
    syncs = con.execute("SELECT list(policy_version ORDER BY policy_version) FROM weight_syncs").fetchone()[0]
    assert syncs == list(range(1, STEPS + 1))
    assert run.syncs == list(range(1, STEPS + 1))  # the wrapped sync still ran verl's own


TRANSCRIPT = """
SELECT rollout_id, list((span_name, source, role, content, tool_calls::VARCHAR) ORDER BY start_ns, span_id, ordinal)
FROM messages WHERE run_id = ? GROUP BY rollout_id
"""


def _held(batch, i: int, tok) -> list[tuple]:
    """Rollout ``i``'s conversation as verl held it in the step's batch: the prompt it gave the loop, then per
    run of ``response_mask`` the model's tokens (decoded as verl's dumps decode them; the tool calls read from
    the raw text) or the tool messages fed back (their text inside the chat template's ``<tool_response>``)."""
    width, width_r = batch.batch["prompts"].shape[1], batch.batch["responses"].shape[1]
    length = int(batch.batch["attention_mask"][i, width:].sum())
    ids = batch.batch["responses"][i, :length].tolist()
    mask = batch.batch["response_mask"][i, :length].tolist()
    prompt = batch.non_tensor_batch["raw_prompt"][i][0]["content"]
    out, given, position = [], [("input", "user", prompt)], 0
    for is_model, n in ((bool(k), len(list(g))) for k, g in itertools.groupby(mask)):
        run, position = ids[position : position + n], position + n
        if not is_model:
            raw = tok.decode(run, skip_special_tokens=True)
            given = [
                ("input", "tool", r)
                for r in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", raw, re.S)
            ]
            continue
        calls = [
            json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", tok.decode(run), re.S)
        ]
        calls = calls if position < width_r else []  # a reply reaching the length limit runs no tools
        out += [("rl.turn", source, role, text, None) for source, role, text in given]
        text = tok.decode(run, skip_special_tokens=True)
        out.append(("rl.turn", "output", "assistant", text, json.dumps(calls) if calls else None))
        out += [("execute_tool", "tool_arguments", c["arguments"]) for c in calls]
        given = []
    return out


@pytest.mark.slow
def test_each_rollouts_transcript_is_the_text_verl_held_turn_by_turn(run):
    """Every turn's input and reply, the tool calls the model wrote and each tool's arguments and result, as
    the messages view returns them, against what verl's batch held (decoded here, independently)."""
    from rollscope.queries import connect

    stored = dict(connect(run.store).execute(TRANSCRIPT, [RUN]).fetchall())
    assert len(stored) == STEPS * 8
    tool_turns = 0
    for step, batch in run.batches.items():
        for i in range(len(batch)):
            rows = stored[f"{RUN}/s{step - 1}/{i}"]
            turns = [
                (span, source, role, text, calls and [dict(c, id=None) for c in json.loads(calls)])
                for span, source, role, text, calls in rows
                if span == "rl.turn"
            ]
            tools = [
                (span.split()[0], source, json.loads(text) if source == "tool_arguments" else text)
                for span, source, _, text, _ in rows
                if span != "rl.turn"
            ]
            held = _held(batch, i, run.tokenizer)
            expected_turns = [
                (s, src, role, text, calls and [dict(c, id=None) for c in json.loads(calls)])
                for s, src, role, text, calls in (h for h in held if h[0] == "rl.turn")
            ]
            assert turns == expected_turns
            arguments = [(s, src, args) for s, src, args in (h for h in held if h[0] == "execute_tool")]
            assert [t for t in tools if t[1] == "tool_arguments"] == arguments
            # each tool's result is the tool message verl fed back to the model next; the last turn's tools
            # ran, but verl ends the rollout when their reply would pass the length limit (never fed back)
            results = [t[2] for t in tools if t[1] == "tool_result"]
            fed_back = [text for _, source, role, text, _ in turns if role == "tool"]
            last_turn = max(k for k, row in enumerate(rows) if row[0] == "rl.turn")
            after_last = [row for row in rows[last_turn:] if row[1] == "tool_result"]
            assert results == fed_back + [row[3] for row in after_last]
            tool_turns += bool(results)
    assert tool_turns > 0 and any("Error executing tool" in t for r in stored.values() for *_, t, _ in r if t)


@pytest.mark.extras
def test_a_finished_runs_dumps_and_file_log_import_as_rollouts_samples_and_steps(tmp_path, monkeypatch):
    """The files verl itself writes: RayPPOTrainer._write_generations (trainer.rollout_data_dir) and the file
    logger (trainer.logger=['file'])."""
    pytest.importorskip("verl", reason="needs the verl extra")
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.tracking import FileLogger

    from rollscope.queries import analyses, connect
    from tests.conftest import documented, recorded, rollscope

    dumps = tmp_path / "dumps"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(dumps / "metrics.jsonl"))
    dumps.mkdir()
    logger = FileLogger("p", "e")
    for step in (1, 2):
        scores = [1.0, 0.0, 1.0, 1.0] if step == 1 else [0.0, 0.0, 1.0, 0.0]
        extra = {"uid": ["u1", "u1", "u2", "u2"] if step == 1 else ["u3", "u3", "u4", "u4"]}
        RayPPOTrainer._write_generations(
            ["a", "a", "b", "b"], ["x", "y", "z", "w"], [None] * 4, scores, extra, str(dumps), step
        )
        metrics = {"timing_s/step": 2.0, "timing_s/gen": 1.5, "critic/score/mean": sum(scores) / 4}
        logger.log(metrics, step)
    logger.finish()
    code, out, err = rollscope("import", "verl", dumps, "--store", tmp_path / "store", "--run-id", "v")
    assert (code, err) == (0, "") and out.strip() == "imported 2 steps, 8 rollouts into run v"
    con = connect(tmp_path / "store")
    decisions = con.execute(
        "SELECT train_step, sample_decision, count(*) FROM samples GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert decisions == [(0, "used", 2), (0, "zero_signal", 2), (1, "used", 2), (1, "zero_signal", 2)]
    steps = analyses.trainer_steps(con, "v")
    assert steps.train_samples.tolist() == [4, 4] and steps.train_wait_s.tolist() == [1.5, 1.5]
    means = analyses.rewards_by_step(con, "v").mean_reward.tolist()
    assert means == [0.75, 0.25]
    # each rollout's transcript: the input and output verl decoded into its dump
    conversations = con.execute(
        "SELECT rollout_id, list((role, content) ORDER BY ordinal) FROM messages GROUP BY 1 ORDER BY 1"
    ).fetchall()
    dumped = [
        (f"v/s{step}/{i}", [("user", row["input"]), ("assistant", row["output"])])
        for step in (1, 2)
        for i, row in enumerate(
            json.loads(line) for line in (dumps / f"{step}.jsonl").read_text().splitlines()
        )
    ]
    assert [(r, [tuple(m) for m in ms]) for r, ms in conversations] == dumped
    assert recorded(tmp_path / "store") == documented("verl files")
    code, out, err = rollscope(
        "import", "verl", tmp_path / "nothing", "--store", tmp_path / "s2", "--run-id", "v"
    )
    assert code == 1 and "not found" in err


@pytest.mark.slow
def test_the_docs_table_row_for_verl_is_what_the_adapter_recorded(run):
    from tests.conftest import documented, recorded

    assert recorded(run.store) == documented("verl")
