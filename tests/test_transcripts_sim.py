"""The simulator's transcripts as a user reads them: what each environment's agents said, the same in both modes,
and the transcript flags (docs/metrics.md) equal to what the simulator injected, however the run is derived."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from rollscope import queries
from rollscope.queries import analyses
from rollscope.queries.reader import Reader
from rollscope.simulator import config, groundtruth, simulate
from rollscope.store import layout

RUN = "talk"


def knobs() -> dict:
    """A small run where every flag happens often: math capped at 8k tokens (a quarter of its chains reach it),
    more missing answers and loops than the defaults."""
    environments = config.to_dict(config.SimConfig())["environments"]
    for env in environments:
        if env["name"] == "math":
            env["output_max"] = 8000
    return {
        "seed": 3,
        "steps": 8,
        "groups_per_step": 6,
        "group_size": 4,
        "rollout": {"count": 2},
        "sandbox": {"count": 2},
        "environments": environments,
        "transcripts": {"answer_missing_rate": 0.15, "loop_rate": 0.25},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run simulated through attach() (normal mode), paced so that every process publishes each step's
    spans as it goes, as a live job's would (many segments, in the run's order; unpaced, each process
    published once at its end, and a live reader's catch-ups then depended on which process ended first):
    (store, ground truth)."""
    store = tmp_path_factory.mktemp("talk") / "store"
    simulate(store, RUN, config.resolve("default", [knobs()]), workers=2, pace=0.01)
    return store, groundtruth.load(store, RUN)


def rows(con, sql: str, **params) -> list[dict]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def transcript(con, rollout: str) -> list[dict]:
    """One rollout's conversation, as a user reads it from the messages view."""
    return rows(
        con,
        "SELECT span_name, turn_index, source, role, content, reasoning, tool_calls::VARCHAR AS tool_calls, "
        "tool_name, finish_reason, tokens FROM messages WHERE rollout_id = $r ORDER BY start_ns, span_id, ordinal",
        r=rollout,
    )


# --- what they said ---------------------------------------------------------------------------------------------


@pytest.mark.long
def test_fast_mode_writes_the_same_messages_as_the_normal_mode(tmp_path, run):
    store, truth = run
    simulate(tmp_path, RUN, config.resolve("default", [knobs()]), fast=True)
    fast = groundtruth.load(tmp_path, RUN)
    assert fast["messages_digest"] == truth["messages_digest"]
    assert truth["messages_digest"] == groundtruth.content_digest(store, RUN, dataset="messages")
    # column by column, so a difference names its column
    normal_rows, fast_rows = (
        groundtruth._canonical_table(s, RUN, True, "messages") for s in (store, tmp_path)
    )
    assert normal_rows.num_rows == fast_rows.num_rows == truth["transcripts"]["messages"] > 0
    columns = normal_rows.column_names
    assert [c for c in columns if not normal_rows.column(c).equals(fast_rows.column(c))] == []
    assert fast["transcripts"] == truth["transcripts"]


@pytest.mark.long
def test_another_run_id_changes_only_the_ids_of_the_messages(tmp_path, run):
    store, _ = run
    simulate(tmp_path, "other", config.resolve("default", [knobs()]), fast=True)
    same = [groundtruth.content_digest(s, r, ids=False, dataset="messages") for s, r in ((store, RUN), (tmp_path, "other"))]  # fmt: skip
    assert same[0] == same[1]


@pytest.mark.long
def test_a_coding_agent_reads_code_runs_tests_and_ends_with_a_patch(run):
    store, _ = run
    con = queries.connect(store)
    (rollout,) = rows(
        con,
        "SELECT r.rollout_id FROM rollouts AS r WHERE environment = 'swe' AND rollout_status = 'ok' "
        "AND (SELECT count(*) FROM tools AS t WHERE t.rollout_id = r.rollout_id) >= 3 ORDER BY rollout_id LIMIT 1",
    )
    said = transcript(con, rollout["rollout_id"])
    assert [m["role"] for m in said[:3]] == ["system", "user", "assistant"]
    assert "run_tests(command)" in said[0]["content"] and "Issue #" in said[1]["content"]
    # each reply's tool call is the next tool span's: same tool, same arguments
    replies = [m for m in said if m["source"] == "output"]
    calls = [m for m in said if m["source"] == "tool_arguments"]
    made = [json.loads(m["tool_calls"])[0] for m in replies if m["tool_calls"]]
    assert [(c["name"], c["arguments"]) for c in made] == [
        (m["tool_name"], json.loads(m["content"])) for m in calls
    ]
    assert all(r["finish_reason"] == "tool_call" for r in replies[:-1])
    final = replies[-1]
    assert final["finish_reason"] == "stop" and "```diff" in final["content"]
    # a test run returns pytest's log with its summary; its tokens are the span's observation
    logs = [m for m in said if m["tool_name"] == "run_tests" and m["source"] == "tool_result"]
    assert logs and all(re.search(r"=+ (1 failed, )?\d+ passed in [\d.]+s =+$", m["content"]) for m in logs)
    observed = rows(
        con, "SELECT observation_tokens FROM tools WHERE rollout_id = $r", r=rollout["rollout_id"]
    )
    results = [m["tokens"] for m in said if m["source"] == "tool_result"]
    assert sorted(results) == sorted(o["observation_tokens"] for o in observed if o["observation_tokens"])


@pytest.mark.long
def test_text_follows_the_spans_token_counts(run):
    store, truth = run
    con = queries.connect(store)
    c = truth["config"]["transcripts"]
    (short, long) = rows(
        con,
        "SELECT avg(length(content)) AS chars FROM messages WHERE source = 'tool_result' "
        "GROUP BY tokens > 600 ORDER BY tokens > 600",
    )
    assert short["chars"] < long["chars"] <= c["max_chars"] + 200
    # a reply cut at its environment's limit ends part-way, finish reason 'length', and says no answer
    cut = rows(
        con,
        "SELECT m.reasoning, m.content, t.output_tokens FROM messages AS m JOIN turns AS t "
        "ON t.span_id = m.span_id WHERE m.finish_reason = 'length'",
    )
    assert cut and {r["output_tokens"] for r in cut} == {8000}
    assert all(r["content"] is None and not r["reasoning"].endswith((".", ". ")) for r in cut)


@pytest.mark.long
def test_a_reasoning_rollout_boxes_the_answer_its_reward_says_and_a_judge_explains_its_score(run):
    store, _ = run
    con = queries.connect(store)
    answers = rows(
        con,
        "SELECT r.task_id, r.reward, m.content FROM rollouts AS r JOIN messages AS m USING (rollout_id) "
        "WHERE r.environment = 'math' AND m.finish_reason = 'stop' AND r.reward IS NOT NULL",
    )
    boxed = {}
    for a in answers:
        found = re.search(r"\\boxed\{(\d+)\}", a["content"] or "")
        if found:
            boxed.setdefault(a["task_id"], {}).setdefault(a["reward"], set()).add(found.group(1))
    both = [t for t, by in boxed.items() if len(by) == 2]
    assert both and all(boxed[t][1.0].isdisjoint(boxed[t][0.0]) and len(boxed[t][1.0]) == 1 for t in both)
    judged = rows(
        con,
        "SELECT j.reward, p.content AS prompt, o.content AS rationale FROM judges AS j "
        "JOIN messages AS p ON p.span_id = j.span_id AND p.source = 'input' "
        "JOIN messages AS o ON o.span_id = j.span_id AND o.source = 'output'",
    )
    assert judged and all(r["rationale"].endswith(f"Score: {r['reward']:g}") for r in judged)
    assert all("Question:" in r["prompt"] and "Response:" in r["prompt"] for r in judged)


@pytest.mark.long
def test_a_run_without_transcripts_writes_no_message(tmp_path):
    simulate(
        tmp_path, RUN, config.resolve("default", [knobs(), {"transcripts": {"enabled": False}}]), workers=1
    )
    truth = groundtruth.load(tmp_path, RUN)
    assert not layout.segments(tmp_path, "messages", RUN)
    assert truth["transcripts"] is None and truth["messages_digest"] is None
    assert analyses.transcript_flags(queries.connect(tmp_path), RUN, by="step").empty


# --- the flags ----------------------------------------------------------------------------------------------------


def flags_by_step(con, run: str = RUN) -> list[dict]:
    frame = analyses.transcript_flags(con, run, by="step")
    columns = [
        "step",
        "rollouts",
        "truncated",
        "answer_missing",
        "looping",
        "tool_error_rollouts",
        "tool_errors",
    ]
    return [{k: int(v) for k, v in r.items()} for r in frame[columns].to_dict("records")]


def expected(truth: dict) -> list[dict]:
    return [{"step": s.pop("train_step"), **s} for s in (dict(s) for s in truth["transcripts"]["by_step"])]


@pytest.mark.long
def test_the_transcript_flags_per_step_are_those_the_simulator_injected(run):
    store, truth = run
    got = flags_by_step(queries.connect(store))
    assert got == expected(truth)
    run_totals = truth["transcripts"]["run"]
    assert min(run_totals[k] for k in ("truncated", "answer_missing", "looping", "tool_error_rollouts")) >= 3


@pytest.mark.long
def test_a_live_reader_catching_up_segment_by_segment_counts_the_same_flags(tmp_path, run):
    store, truth = run
    live = tmp_path / "live"
    published = sorted(
        (p.name.split("-")[1], dataset, p)
        for dataset in ("messages", "spans", "collector_stats")
        for p in layout.segments(store, dataset, RUN)
    )  # in publish order; a writer's messages come before its spans
    spans = [i for i, (_, dataset, _) in enumerate(published) if dataset == "spans"]
    opens = {
        spans[len(spans) // 2],
        spans[len(spans) * 3 // 4],
        spans[-2],
    }  # a dashboard refreshing now and then
    reader = None
    for i, (_, dataset, path) in enumerate(published):
        target = layout.partition_dir(live, dataset, RUN)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target / path.name)
        if i in opens:
            reader = reader or Reader(live, run_id=RUN)
            reader.refresh()
    reader.refresh()
    assert reader.derived_how["incremental"] >= 2
    assert flags_by_step(reader.con) == expected(truth)


@pytest.mark.long
def test_the_learning_page_charts_the_flags_per_step(run):
    from tests.test_dashboard import assert_clean, figure, open_page, traces

    store, truth = run
    at = open_page(store, "learning", run=RUN)
    assert_clean(at)
    shown = figure(at, "transcript-flags")
    assert shown["layout"]["xaxis"]["title"]["text"] == "train step"
    assert shown["layout"]["yaxis"]["title"]["text"] == "rollouts (of those with a transcript)"
    lines = traces(shown)
    by_step = expected(truth)
    assert lines["cut at the token limit"]["y"] == [s["truncated"] for s in by_step]
    assert lines["a tool call failed"]["y"] == [s["tool_error_rollouts"] for s in by_step]
    caption = next(c.value for c in at.caption if "consumed rollouts with a transcript" in c.value)
    assert (
        f"**{truth['transcripts']['run']['looping']}** looping" in caption and "What to look for" in caption
    )
