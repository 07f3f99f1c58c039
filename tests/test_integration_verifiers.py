"""The verifiers adapter with the real package (PyPI ``verifiers``): a SingleAgentEnv runs a small taskset
through its own rollout machinery (interception server, subprocess runtime, rubric scoring) against an
OpenAI-compatible endpoint served on loopback; ``instrument(env)`` records what it ran, and
``rollscope import verifiers`` turns the run's saved ``traces.jsonl`` into the same rows."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

pytestmark = pytest.mark.slow  # a real verifiers run: ~20 s (`make test-slow` installs the extra)

vf = pytest.importorskip(
    "verifiers.v1", reason="the verifiers package is not installed (pip install 'rollscope[verifiers]')"
)

from verifiers.v1.configs.harness import HarnessConfig  # noqa: E402
from verifiers.v1.configs.taskset import TasksetConfig  # noqa: E402
from verifiers.v1.runtimes import subprocess as vf_subprocess  # noqa: E402
from verifiers.v1.utils.trace_store import write_episode  # noqa: E402

import tests.fixtures.vf_harness  # noqa: E402
import tests.fixtures.vf_taskset  # noqa: E402
from rollscope.integrations.verifiers import instrument  # noqa: E402
from tests.conftest import documented, recorded, rollscope, sql_json  # noqa: E402
from tests.fixtures.openai_server import openai_server  # noqa: E402

# verifiers imports plugins by module name: give the test's harness and taskset one
sys.modules.setdefault("rollscope_test_harness", tests.fixtures.vf_harness)
sys.modules.setdefault("rollscope_test_taskset", tests.fixtures.vf_taskset)
ROLLOUTS_PER_TASK = 2


def run_env(url: str, rl, results_dir) -> list:
    """Every task of the taskset ROLLOUTS_PER_TASK times, as `vf-eval` does (env.serving, env.run_slot),
    with each finished episode saved the way verifiers saves it."""
    config = vf.SingleAgentEnvConfig(
        id="sums",
        taskset=TasksetConfig(id="rollscope_test_taskset"),
        agent=vf.AgentConfig(
            harness=HarnessConfig(id="rollscope_test_harness"), runtime=vf.SubprocessConfig()
        ),
    )
    env = vf.SingleAgentEnv(config)
    instrument(env, rl=rl)
    ctx = vf.ModelContext(model="policy", client=vf.EvalClientConfig(base_url=url, api_key_var="VF_TEST_KEY"))

    async def main():
        episodes = []
        async with env.serving():
            slots = [slot for task in env.taskset for slot in env.slots(task, ROLLOUTS_PER_TASK)]
            for episode in await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots)):
                write_episode(results_dir, episode)
                episodes.append(episode)
        return episodes

    return asyncio.run(main())


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One instrumented verifiers run: (store, saved traces.jsonl, episodes, calls the endpoint answered)."""
    from rollscope.collectors import attach

    root = tmp_path_factory.mktemp("vf")
    store, results = root / "store", root / "results"
    results.mkdir()
    mp = pytest.MonkeyPatch()
    mp.setenv("VF_TEST_KEY", "sk-test")
    # verifiers keeps its subprocess runtimes under ~/.cache/verifiers: keep this run's in the test's folder
    mp.setattr(vf_subprocess, "CACHE_DIR", root / "cache")
    rl = attach(store=store, run_id="vf-live", role="rollout", set_global=False)
    try:
        with openai_server() as (url, calls):
            episodes = run_env(url, rl, results)
    finally:
        rl.shutdown()
        mp.undo()
    return store, results / "traces.jsonl", episodes, calls


ROLLOUTS = (
    "SELECT rollout_id, task_id, group_id, environment, rollout_status, reward, "
    "attributes->>'$.\"verifiers.stop_condition\"' AS stop, "
    "(attributes->>'$.\"verifiers.is_truncated\"')::BOOLEAN AS truncated, "
    "(attributes->>'$.\"verifiers.metric.reply_chars\"')::DOUBLE AS reply_chars, "
    "error_type, "
    "(attributes->>'$.\"verifiers.timing.agent_s\"')::DOUBLE AS agent_s, "
    "(attributes->>'$.\"verifiers.timing.model_s\"')::DOUBLE AS model_s, duration_s "
    "FROM rollouts ORDER BY rollout_id"
)
TURNS = (
    "SELECT rollout_id, turn_index, input_tokens, cached_input_tokens, output_tokens, request_model, "
    "status_code, duration_s, context_tokens, prefix_tokens, continuity_break FROM turns "
    "ORDER BY rollout_id, turn_index"
)
TOOLS = "SELECT rollout_id, tool_name, tool_call_id, duration_s FROM tools ORDER BY rollout_id, tool_call_id"
REWARDS = "SELECT rollout_id, reward_name, reward FROM rewards ORDER BY rollout_id, reward_name"


def test_each_rollout_verifiers_ran_is_a_rollout_with_turns_tools_and_rubric_rewards(live):
    store, _, episodes, calls = live
    traces = {t.id: t for e in episodes for t in e.traces}
    assert len(traces) == 3 * ROLLOUTS_PER_TASK

    rollouts = sql_json(store, ROLLOUTS)
    assert [r["rollout_id"] for r in rollouts] == sorted(traces)
    for r in rollouts:
        trace = traces[r["rollout_id"]]
        assert r["task_id"] == r["group_id"] == trace.task.key  # a task's rollouts form its group
        assert r["environment"] == "sums+rollscope_test_taskset"  # verifiers' env id: env + taskset
        assert r["stop"] == trace.stop_condition
        if trace.ok:
            assert (r["rollout_status"], r["reward"], r["truncated"]) == ("ok", trace.reward, False)
            assert r["reward"] == 1.5  # correct (1.0) + used_tool (1.0 x weight 0.5)
            assert r["reply_chars"] == len(trace.last_reply)
            assert r["agent_s"] == pytest.approx(trace.timing.agent.duration)
            assert r["model_s"] == pytest.approx(trace.timing.agent.model.duration)
        else:  # the engine answered 500: verifiers' provider error, no scoring
            assert (r["rollout_status"], r["reward"], r["error_type"]) == (
                "infra_error",
                None,
                "ProviderError",
            )
            assert r["stop"] == "provider_error"

    turns = sql_json(store, TURNS)
    answered = [c for c in calls if "usage" in c]
    assert len(turns) == len(calls) == 2 * 2 * ROLLOUTS_PER_TASK + ROLLOUTS_PER_TASK
    # every turn's tokens are the endpoint's own usage: prompt tokens with the cached ones included
    expected = sorted(
        (
            c["usage"]["prompt_tokens"],
            c["usage"]["prompt_tokens_details"]["cached_tokens"],
            c["usage"]["completion_tokens"],
        )
        for c in answered
    )
    assert (
        sorted(
            (t["input_tokens"], t["cached_input_tokens"], t["output_tokens"])
            for t in turns
            if t["input_tokens"] is not None
        )
        == expected
    )
    assert any((t["cached_input_tokens"] or 0) > 0 for t in turns)  # the second call of each rollout
    failed = [t for t in turns if t["status_code"] == "error"]
    assert len(failed) == ROLLOUTS_PER_TASK and all(t["input_tokens"] is None for t in failed)
    assert {t["request_model"] for t in turns} == {"policy"}
    for rollout_id, trace in traces.items():
        mine = [t for t in turns if t["rollout_id"] == rollout_id]
        assert [t["turn_index"] for t in mine] == list(range(len(trace.calls)))
        assert [t["duration_s"] for t in mine] == pytest.approx(
            [c.time.duration for c in trace.calls], abs=1e-6
        )
        # the second call extends the first's conversation: its history is the tokens the first ended with
        # (the relayed calls carry no token ids: no exact prefix is claimed, the break not known)
        if len(mine) == 2 and mine[0]["input_tokens"] is not None:
            assert mine[1]["context_tokens"] == mine[0]["input_tokens"] + mine[0]["output_tokens"]
            assert (mine[1]["prefix_tokens"], mine[1]["continuity_break"]) == (None, None)

    tools = sql_json(store, TOOLS)
    assert len(tools) == 2 * ROLLOUTS_PER_TASK
    assert {t["tool_name"] for t in tools} == {"add"}
    assert {t["tool_call_id"] for t in tools} == {"call-2-3", "call-40-2"}
    assert all(t["duration_s"] >= 0 for t in tools)

    rewards = sql_json(store, REWARDS)
    assert len(rewards) == 2 * 2 * ROLLOUTS_PER_TASK  # two rubric functions, scored rollouts only
    assert {(r["reward_name"], r["reward"]) for r in rewards} == {("correct", 1.0), ("used_tool", 1.0)}


MESSAGES = (
    "SELECT rollout_id, turn_index, span_name, source, role, content, tool_calls, tool_call_id FROM messages "
    "ORDER BY rollout_id, start_ns, span_id, ordinal"
)


def test_each_rollout_keeps_its_conversation_as_verifiers_built_it(live):
    """Each model call's new input and reply, and each tool call's arguments and result, in the order
    verifiers' trace graph has them."""
    store, _, episodes, _ = live
    rows = sql_json(store, MESSAGES)
    answered = [t for e in episodes for t in e.traces if t.ok]
    assert len(answered) == 2 * ROLLOUTS_PER_TASK
    for trace in answered:
        mine = [r for r in rows if r["rollout_id"] == trace.id and r["span_name"] == "rl.turn"]
        branch = [n.message for n in trace.nodes]
        assert [(r["role"], r["content"]) for r in mine] == [(m.role, m.content) for m in branch]
        called = [json.loads(r["tool_calls"]) for r in mine if r["tool_calls"]]
        assert called == [
            [{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments)} for c in m.tool_calls]
            for m in branch
            if m.role == "assistant" and m.tool_calls
        ]
        tools = [r for r in rows if r["rollout_id"] == trace.id and r["span_name"].startswith("execute_tool")]
        results = [m for m in branch if m.role == "tool"]
        assert [(r["source"], r["tool_call_id"]) for r in tools] == [
            pair
            for m in results
            for pair in (("tool_arguments", m.tool_call_id), ("tool_result", m.tool_call_id))
        ]
        assert [r["content"] for r in tools if r["source"] == "tool_result"] == [m.content for m in results]


def test_the_docs_table_row_for_verifiers_is_what_the_adapter_recorded(live):
    assert recorded(live[0]) == documented("verifiers")


def test_saved_results_import_to_the_same_rows(live, tmp_path):
    store, saved, _, _ = live
    imported = tmp_path / "imported"
    code, out, err = rollscope("import", "verifiers", saved, "--store", imported, "--run-id", "vf-live")
    assert (code, err) == (0, "")
    assert out.strip() == (
        f"imported {3 * ROLLOUTS_PER_TASK} episodes: {3 * ROLLOUTS_PER_TASK} rollouts, "
        f"{5 * ROLLOUTS_PER_TASK} turns, {2 * ROLLOUTS_PER_TASK} tool calls, {4 * ROLLOUTS_PER_TASK} rewards "
        "into run vf-live"
    )
    for query in (ROLLOUTS, TURNS, TOOLS, REWARDS, MESSAGES):
        assert sql_json(imported, query) == sql_json(store, query)


def test_a_file_that_is_not_a_verifiers_run_imports_nothing_and_says_which_line(live, tmp_path):
    _, saved, _, _ = live
    bad = tmp_path / "traces.jsonl"
    lines = saved.read_text().splitlines()
    bad.write_text("\n".join([lines[0], '{"id": "x"}', *lines[1:]]) + "\n")
    store = tmp_path / "store"
    code, out, err = rollscope("import", "verifiers", tmp_path, "--store", store, "--run-id", "vf-bad")
    assert (code, out) == (1, "")
    assert (
        err.startswith("rollscope: Not a verifiers run:")
        and f"{bad}:2:" in err
        and "nothing was imported" in err
    )
    assert len(err.strip().splitlines()) == 1
    assert not (store / "spans").exists()
    code, _, err = rollscope(
        "import", "verifiers", tmp_path / "missing.jsonl", "--store", store, "--run-id", "x"
    )
    assert code == 1 and "no such file" in err


def test_an_empty_file_imports_nothing_and_writes_no_empty_run(tmp_path):
    empty = tmp_path / "traces.jsonl"
    empty.write_text("\n")
    code, out, err = rollscope("import", "verifiers", empty, "--store", tmp_path / "store", "--run-id", "v")
    assert (code, out) == (1, "")
    assert err == f"rollscope: Not a verifiers run: {empty}: no episodes in it; nothing was imported\n"
    assert not (tmp_path / "store").exists()


def test_something_that_is_not_an_environment_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(TypeError, match="takes a verifiers Environment .*, not list"):
        instrument([], store=tmp_path / "runs", run_id="v")
    assert not (tmp_path / "runs").exists()


def test_instrument_never_raises_into_the_run(live, tmp_path):
    """A recording failure is logged; the episode still comes back to verifiers' runner."""

    class Env:
        async def run_slot(self, slot, ctx):
            return {"traces": [{"id": "t1", "calls": "not a list"}]}

    class Broken:
        def rollout(self, *args, **kwargs):
            raise RuntimeError("store gone")

    env = Env()
    instrument(env, rl=Broken())
    assert asyncio.run(env.run_slot(None, None)) == {"traces": [{"id": "t1", "calls": "not a list"}]}


# --- prime-rl run directories, built from this run's verifiers episode records ------------------------------


def _prime_dir(root, saved, steps: dict) -> None:
    """prime-rl's layout: rollouts/step_N/train/{all,effective}/traces.jsonl, and metrics.jsonl."""
    import json

    for step, (everything, effective) in steps.items():
        for subset, episodes in (("all", everything), ("effective", effective)):
            if episodes is None:
                continue
            path = root / "rollouts" / f"step_{step}" / "train" / subset / "traces.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    rows = [{"step": s, "time": 1.8e9 + 10 * s, "time/wait_for_batch": 0.5 * s} for s in steps]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _episodes(saved):
    """The run's episodes by task, one group each: the errored task's, and two scored ones. One rollout of the
    first scored task scores 0, so its group has signal (prime-rl trains on it); the other group is all-equal."""
    import copy
    import json

    episodes = [json.loads(line) for line in saved.read_text().splitlines()]
    by_task: dict = {}
    for e in episodes:
        by_task.setdefault(e["traces"][0]["task"]["key"], []).append(e)
    errored = next(g for g in by_task.values() if not g[0]["traces"][0]["ok"])
    signal, flat = [g for g in by_task.values() if g[0]["traces"][0]["ok"]]
    signal = copy.deepcopy(signal)
    signal[0]["traces"][0]["rewards"]["correct"]["score"] = 0.0
    return errored, signal, flat


def _renamed(group, suffix):
    import copy

    group = copy.deepcopy(group)
    for e in group:
        e["id"] = f"{e['id']}{suffix}"
        if e.get("group"):
            e["group"]["id"] = f"{e['group']['id']}{suffix}"
        for t in e["traces"]:
            t["id"] = f"{t['id']}{suffix}"
    return group


def test_a_prime_rl_run_imports_with_its_funnel_losses_equal_to_all_minus_effective_by_cause(live, tmp_path):
    """Step 1: every episode arrived (all), the group with signal shipped (effective). Step 2, still being
    written (no effective yet) at the first import: another group with signal, which prime-rl then drops (a
    stale or rejected group). Importing again adds step 2 and nothing twice."""
    from rollscope.queries import analyses, connect

    _, saved, _, _ = live
    errored, signal, flat = _episodes(saved)
    late = _renamed(signal, "-2")
    run = tmp_path / "run"
    _prime_dir(run, saved, {1: (errored + signal + flat, signal), 2: (late, None)})
    store = tmp_path / "store"
    code, out, err = rollscope("import", "prime-rl", run, "--store", store, "--run-id", "prime")
    assert (code, err) == (0, "")
    assert "imported 1 steps" in out and "1 still being written" in out
    _prime_dir(run, saved, {1: (errored + signal + flat, signal), 2: (late, [])})
    code, out, err = rollscope("import", "prime-rl", run, "--store", store, "--run-id", "prime")
    assert (code, err) == (0, "") and "imported 1 steps" in out and "1 steps already imported" in out
    code, out, _ = rollscope("import", "prime-rl", run, "--store", store, "--run-id", "prime")
    assert code == 0 and "imported 0 steps" in out

    # all minus effective, by cause, read from the directory the way prime-rl decides
    traces = [t for group in (errored, signal, flat, late) for e in group for t in e["traces"]]
    shipped = {t["id"] for e in signal for t in e["traces"]}
    expected = {
        "infra_error": sum(1 for t in traces if t["id"] not in shipped and t.get("errors")),
        "zero_signal": sum(len(e["traces"]) for e in flat),
        "invalid": sum(len(e["traces"]) for e in late),
    }
    assert all(expected.values()) and sum(expected.values()) == len(traces) - len(shipped)
    con = connect(store)
    losses = analyses.funnel_losses(con, "prime")
    lost = {}
    for row in losses.itertuples():
        cause = {"all-equal group": "zero_signal"}.get(row.reason, row.reason)
        lost[cause] = lost.get(cause, 0) + int(row.lost)
    print(
        "\nprime-rl all − effective by cause:",
        expected,
        "\nrollscope funnel losses:",
        losses.to_dict("records"),
    )
    assert lost == expected
    funnel = analyses.funnel(con, "prime")
    assert int(funnel.dispatched.iloc[0]) == len(traces)
    assert int(funnel.usable.iloc[0]) == len(shipped)
    steps = analyses.trainer_steps(con, "prime")
    assert steps.step.tolist() == [1, 2] and steps.train_samples.tolist() == [len(shipped), 0]
    assert (
        con.execute("SELECT count(*), count(DISTINCT rollout_id) FROM rollouts").fetchone()
        == (len(traces),) * 2
    )
    # each answered trace's conversation, as its episode record holds it (the trace's message graph)
    rows = sql_json(store, MESSAGES)
    for trace in (t for t in traces if t["ok"]):
        mine = [
            (r["role"], r["content"])
            for r in rows
            if r["rollout_id"] == trace["id"] and r["span_name"] == "rl.turn"
        ]
        assert mine == [(n["message"]["role"], n["message"].get("content")) for n in trace["nodes"]]
    assert recorded(store) == documented("prime-rl")
