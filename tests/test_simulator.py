"""The simulator as its users rely on it: reproducible runs whose ground truth is exactly what the store holds."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from rollscope import queries
from rollscope.semconv import FUNNEL_STAGES as STAGES
from rollscope.simulator import SimulationError, config, groundtruth, simulate
from tests.conftest import ROOT, python, rollscope

SMALL = {
    "seed": 11,
    "steps": 10,
    "groups_per_step": 4,
    "group_size": 4,
    "rollout": {"count": 2},
    "sandbox": {"count": 2},
    "teacher": {"count": 1},
    "drafter_refreshes": [0.5],
    "logprob_drafter": [0.6, 0.8],
    "staleness_excursion": [0.3, 0.5],
}


def small(**knobs):
    return config.resolve("default", [SMALL, knobs])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One small simulated run: (store, ground truth, a connection to the store)."""
    store = tmp_path_factory.mktemp("sim") / "store"
    simulate(store, "sim", small(), workers=2)
    return store, groundtruth.load(store, "sim"), queries.connect(store)


def rows(con, sql, *params):
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


# --- reproducibility -----------------------------------------------------------------------------------------


@pytest.mark.long
def test_same_seed_and_config_give_identical_spans(tmp_path, run):
    store, truth, _ = run
    simulate(tmp_path / "again", "sim", small(), workers=1)
    assert groundtruth.content_digest(tmp_path / "again", "sim") == truth["content_digest"]
    assert groundtruth.load(tmp_path / "again", "sim")["run"] == truth["run"]


@pytest.mark.long  # simulates the run twice, once in worker processes
def test_fast_mode_writes_the_same_spans_and_ground_truth_as_the_normal_mode(tmp_path, run):
    store, truth, con = run
    code, out, err = rollscope(
        "simulate", "--store", tmp_path, "--run-id", "sim", "--config", _small_config(tmp_path), "--fast"
    )
    assert code == 0, err
    fast = groundtruth.load(tmp_path, "sim")
    assert fast["content_digest"] == truth["content_digest"] == groundtruth.content_digest(tmp_path, "sim")
    # column by column, so a difference names its column (resource_attributes holds each writer's pid)
    normal_rows, fast_rows = (groundtruth._canonical_table(s, "sim", True) for s in (store, tmp_path))
    assert normal_rows.num_rows == fast_rows.num_rows == truth["spans"]["total"]
    columns = [c for c in normal_rows.column_names if c != "resource_attributes"]
    assert [c for c in columns if not normal_rows.column(c).equals(fast_rows.column(c))] == []
    assert {k: v for k, v in fast.items() if k != "preset"} == {
        k: v for k, v in truth.items() if k != "preset"
    }
    # each simulated process has its collector_stats row, as its exporter writes in the normal mode
    stats = rows(
        queries.connect(tmp_path),
        "SELECT instance_id, max(spans_exported) AS n, max(spans_dropped + spans_failed) AS lost"
        " FROM collector_stats GROUP BY instance_id ORDER BY instance_id",
    )
    expected = sorted((p["instance_id"], p["spans"]) for p in truth["processes"])
    assert [(r["instance_id"], r["n"]) for r in stats] == expected
    assert {r["lost"] for r in stats} == {0}


def _small_config(tmp_path) -> str:
    path = tmp_path / "small.json"
    path.write_text(json.dumps({**config.to_dict(small())}))
    return str(path)


@pytest.mark.long
def test_another_run_id_changes_only_the_ids(tmp_path, run):
    store, _, _ = run
    simulate(tmp_path, "other-name", small(), workers=1)
    assert groundtruth.content_digest(tmp_path, "other-name", ids=False) == groundtruth.content_digest(
        store, "sim", ids=False
    )
    assert groundtruth.content_digest(tmp_path, "other-name") != groundtruth.content_digest(store, "sim")


@pytest.mark.long
def test_span_content_uses_simulated_time_from_the_base_epoch(run):
    _, truth, con = run
    first, last = con.execute("SELECT min(start_ns), max(end_ns) FROM spans WHERE run_id = 'sim'").fetchone()
    assert first >= 1767225600 * 10**9  # 2026-01-01T00:00:00Z
    assert (last - first) / 1e9 == pytest.approx(truth["run"]["trainer"]["duration_s"], rel=0.5)


# --- ground truth against the store ------------------------------------------------------------------------

# A rollout compaction made several training samples has an rl.sample for each, all with its decision: it is one
# rollout of the funnel.
FUNNEL_SQL = """
WITH s AS (
    SELECT run_id, rollout_id, min(train_step) AS train_step, min(sample_staleness) AS sample_staleness,
           min(sample_decision) AS sample_decision
    FROM samples GROUP BY ALL
),
r AS (
    SELECT r.*, s.train_step, s.sample_staleness, s.sample_decision,
           r.rollout_status = 'ok' AND r.reward IS NOT NULL AS scored
    FROM rollouts r JOIN s USING (run_id, rollout_id) WHERE r.run_id = 'sim'
),
g AS (
    SELECT group_id, count(*) FILTER (WHERE scored) AS n, count(DISTINCT reward) FILTER (WHERE scored) AS d
    FROM r GROUP BY group_id
),
f AS (SELECT r.*, scored AND n >= 2 AND d > 1 AS signal FROM r JOIN g USING (group_id))
SELECT {key} AS key, count(*) AS dispatched, count(*) FILTER (WHERE rollout_status = 'ok') AS completed,
       count(*) FILTER (WHERE scored) AS scored, count(*) FILTER (WHERE signal) AS nonzero_signal,
       count(*) FILTER (WHERE signal AND sample_staleness <= 2) AS fresh,
       count(*) FILTER (WHERE sample_decision = 'used') AS usable
FROM f GROUP BY ALL ORDER BY 1
"""


@pytest.mark.long
def test_funnel_counts_match_per_run_step_and_environment(run):
    _, truth, con = run
    whole = rows(con, FUNNEL_SQL.format(key="'run'"))[0]
    assert {k: whole[k] for k in STAGES} == {k: truth["run"]["funnel"][k] for k in STAGES}
    by_step = {r["key"]: {k: r[k] for k in STAGES} for r in rows(con, FUNNEL_SQL.format(key="train_step"))}
    assert by_step == {s["train_step"]: {k: s["funnel"][k] for k in STAGES} for s in truth["by_step"]}
    by_env = {r["key"]: {k: r[k] for k in STAGES} for r in rows(con, FUNNEL_SQL.format(key="environment"))}
    assert by_env == {e: {k: s["funnel"][k] for k in STAGES} for e, s in truth["by_environment"].items()}


@pytest.mark.long
def test_recorded_decisions_and_staleness_match(run):
    _, truth, con = run
    # one decision per rollout: a compacted rollout's samples all carry it
    decisions = dict(
        con.execute("SELECT sample_decision, count(DISTINCT rollout_id) FROM samples GROUP BY 1").fetchall()
    )
    assert decisions == {k: v for k, v in truth["run"]["decisions"].items() if v}
    histogram = dict(
        con.execute(
            "SELECT sample_staleness::VARCHAR, count(DISTINCT rollout_id) FROM samples GROUP BY 1"
        ).fetchall()
    )
    assert histogram == truth["run"]["staleness"]["histogram"]
    mean = con.execute(
        "SELECT avg(staleness) FROM (SELECT min(sample_staleness) AS staleness FROM samples GROUP BY rollout_id)"
    ).fetchone()[0]
    assert mean == pytest.approx(truth["run"]["staleness"]["mean"])


@pytest.mark.long
def test_token_and_spec_totals_match_exactly(run):
    _, truth, con = run
    got = rows(
        con,
        """
        SELECT count(*) AS turns, sum(input_tokens) AS input_tokens, sum(cached_input_tokens) AS cached_input_tokens,
               sum(new_input_tokens) AS new_input_tokens, sum(output_tokens) AS output_tokens,
               sum(context_tokens) AS context_tokens,
               sum(greatest(0, context_tokens - cached_input_tokens)) AS reprefill_waste_tokens,
               count(spec_k) AS spec_turns, sum(spec_draft_tokens) AS draft_tokens,
               sum(spec_accepted_tokens) AS accepted_tokens, sum(spec_verify_steps) AS verify_steps,
               count(*) FILTER (WHERE logprobs_source = 'drafter') AS drafter_logprob_turns
        FROM turns WHERE run_id = 'sim'""",
    )[0]
    pd, spec = truth["run"]["prefill_decode"], truth["run"]["spec_decode"]
    for key in (
        "turns",
        "input_tokens",
        "cached_input_tokens",
        "new_input_tokens",
        "output_tokens",
        "context_tokens",
        "reprefill_waste_tokens",
    ):
        assert got[key] == pd[key], key
    for key in ("draft_tokens", "accepted_tokens", "verify_steps", "drafter_logprob_turns"):
        assert got[key] == spec[key], key
    assert got["spec_turns"] == spec["turns"]
    assert spec["drafter_logprob_turns"] > 0


@pytest.mark.long
def test_tool_judge_teacher_and_trainer_totals_match(run):
    _, truth, con = run
    r = truth["run"]
    tools = con.execute("SELECT count(*), sum(observation_tokens), sum(duration_s) FROM tools").fetchone()
    assert tools[:2] == (r["tools"]["calls"], r["tools"]["observation_tokens"])
    assert tools[2] == pytest.approx(r["compute"]["env_cpu_seconds"], rel=1e-9)
    judges = con.execute(
        "SELECT count(*), sum(input_tokens), sum(output_tokens), "
        "count(*) FILTER (WHERE judge_status = 'timeout') FROM judges"
    ).fetchone()
    assert judges == tuple(r["judge"][k] for k in ("spans", "input_tokens", "output_tokens", "timeouts"))
    assert con.execute("SELECT sum(teacher_tokens) FROM teachers").fetchone()[0] == r["teacher"]["tokens"]
    trainer = con.execute(
        "SELECT count(*), sum(train_tokens), sum(train_samples), sum(train_wait_s), "
        "sum(duration_s) FROM train_steps"
    ).fetchone()
    t = r["trainer"]
    assert trainer[:3] == (t["steps"], t["train_tokens"], t["train_samples"])
    assert trainer[3:] == pytest.approx((t["wait_s"], t["duration_s"]), rel=1e-9)
    names = dict(
        con.execute(
            "SELECT CASE WHEN name LIKE 'execute_tool %' THEN 'execute_tool' ELSE name END, "
            "count(*) FROM spans GROUP BY 1"
        ).fetchall()
    )
    assert names == truth["spans"]["by_name"]


BUSY_SQL = """
WITH work AS (
    SELECT instance_id, start_ns AS s, end_ns AS e FROM spans
    WHERE name IN ('rl.turn', 'rl.judge', 'rl.teacher') AND role IN ('rollout', 'judge', 'teacher')
    UNION ALL
    SELECT instance_id, start_ns + CAST(round(train_wait_s * 1e9) AS BIGINT), end_ns FROM spans
    WHERE name = 'rl.train_step'
),
reach AS (
    SELECT *, max(e) OVER (PARTITION BY instance_id ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM work
),
islands AS (
    SELECT *, sum(CASE WHEN before IS NULL OR s > before THEN 1 ELSE 0 END)
              OVER (PARTITION BY instance_id ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island FROM reach
)
SELECT instance_id, sum(hi - lo) / 1e9 AS busy
FROM (SELECT instance_id, island, min(s) AS lo, max(e) AS hi FROM islands GROUP BY ALL) GROUP BY 1
"""


@pytest.mark.long
def test_device_seconds_are_devices_times_the_union_of_busy_intervals(run):
    _, truth, con = run
    busy = dict(con.execute(BUSY_SQL).fetchall())
    for p in truth["processes"]:
        if p["busy_seconds"] is not None:
            assert busy.get(p["instance_id"], 0.0) == pytest.approx(p["busy_seconds"], rel=1e-6), p[
                "instance_id"
            ]
    rollout = [p for p in truth["processes"] if p["role"] == "rollout"]
    assert truth["run"]["compute"]["device_seconds"]["rollout"] == pytest.approx(
        sum(p["device_seconds"] for p in rollout)
    )
    # concurrent rollouts on one server overlap: summing turn durations would count them many times over
    summed = con.execute("SELECT sum(duration_s) FROM turns").fetchone()[0]
    assert summed > 2 * truth["run"]["compute"]["busy_seconds"]["rollout"]


@pytest.mark.long
def test_every_process_declares_its_role_devices_and_model(run):
    _, truth, con = run
    got = {
        r["instance_id"]: r
        for r in rows(
            con,
            """
        SELECT instance_id, any_value(role) AS role, any_value(devices) AS devices,
               any_value(model_parameters) AS model_parameters, count(*) AS spans
        FROM spans GROUP BY 1""",
        )
    }
    for p in truth["processes"]:
        row = got[p["instance_id"]]
        assert (row["role"], row["devices"], row["model_parameters"], row["spans"]) == (
            p["role"],
            p["devices"],
            p["model_parameters"],
            p["spans"],
        )


# --- presets, options, the command line ----------------------------------------------------------------------


@pytest.mark.long
@pytest.mark.parametrize(("preset", "usable"), [("worked-example", 500), ("worked-example-080", 670)])
def test_worked_example_presets_reproduce_the_reference(tmp_path, preset, usable):
    simulate(tmp_path, "we", config.resolve(preset), workers=1)
    funnel = groundtruth.load(tmp_path, "we")["run"]["funnel"]
    assert funnel["dispatched"] == 1000
    assert funnel["usable"] == pytest.approx(usable, abs=8)
    nominal = {
        "completion": 0.95,
        "scoring": 0.98,
        "freshness": 0.90,
        "nonzero_signal": 0.60 if preset == "worked-example" else 0.80,
    }
    assert funnel["rates"] == pytest.approx(nominal, abs=0.01)
    con = queries.connect(tmp_path)
    assert (
        con.execute(
            "SELECT count(DISTINCT rollout_id) FROM samples WHERE sample_decision = 'used'"
        ).fetchone()[0]
        == funnel["usable"]
    )


@pytest.mark.long
def test_without_sample_spans_the_consuming_step_follows_from_completion_order(tmp_path):
    """The trainer consumes groups in completion order: step s takes the groups whose last rollout ended
    after step s−1's data-ready time (start + train_wait_s) and at or before its own."""
    simulate(tmp_path, "nosamples", small(emit_samples=False), workers=1)
    truth = groundtruth.load(tmp_path, "nosamples")
    con = queries.connect(tmp_path)
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
    derived = dict(
        con.execute("""
        WITH ready AS (SELECT train_step, start_ns + CAST(round(train_wait_s * 1e9) AS BIGINT) AS ready_ns
                       FROM train_steps),
             groups AS (SELECT group_id, count(*) AS n, max(end_ns) AS done FROM rollouts GROUP BY 1)
        SELECT (SELECT min(train_step) FROM ready WHERE ready_ns >= done) AS step, sum(n)
        FROM groups GROUP BY 1""").fetchall()
    )
    assert derived == {s["train_step"]: s["funnel"]["dispatched"] for s in truth["by_step"]}
    assert truth["run"]["decisions"]["used"] == truth["run"]["funnel"]["usable"]


@pytest.mark.long
def test_scale_mode_stops_once_the_span_target_is_reached(tmp_path):
    result = simulate(tmp_path, "scale", small(), spans_target=1500, workers=1)
    truth = groundtruth.load(tmp_path, "scale")
    last_step = truth["by_step"][-1]
    assert 1500 <= result.spans == truth["spans"]["total"]
    assert result.spans - 1500 < 400 + last_step["funnel"]["dispatched"] * 40


def test_an_existing_run_is_refused_unless_replaced(tmp_path):
    args = [
        "simulate",
        "--store",
        tmp_path,
        "--run-id",
        "cli",
        "--config",
        _knobs(tmp_path),
        "--quiet",
        "--workers",
        "1",
    ]
    code, out, err = rollscope(*args)
    assert code == 0, err
    assert "simulated run cli" in out
    assert (tmp_path / "ground_truth" / "cli.json").exists()
    code, _, err = rollscope(*args)
    assert code == 1 and "already" in err
    code, _, err = rollscope(*args, "--replace", "--seed", "3")
    assert code == 0, err
    assert groundtruth.load(tmp_path, "cli")["seed"] == 3


def _knobs(tmp_path):
    path = tmp_path / "knobs.json"
    path.write_text(json.dumps({**SMALL, "steps": 3}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "nope"], "Unknown preset"),
        (["--config", "missing.json"], "No config file"),
        (["--run-id", "bad id!"], "Bad run id"),
    ],
)
def test_mistakes_get_one_clear_line(tmp_path, args, message):
    base = ["simulate", "--store", tmp_path, "--run-id", "x", "--quiet"]
    code, _, err = rollscope(*base, *args)
    assert code == 1
    assert message in err and "Traceback" not in err


def test_unknown_knobs_are_refused_not_ignored():
    with pytest.raises(config.ConfigError, match="grop_size"):
        config.resolve("default", [{"grop_size": 4}])


def test_simulation_error_is_a_rollscope_error():
    assert issubclass(SimulationError, queries.RollscopeError)


# --- the shipped sample run and the documentation --------------------------------------------------------------

SAMPLE = ROOT / "sample_data"


@pytest.mark.long
def test_the_shipped_sample_run_is_the_one_its_ground_truth_describes():
    truth = groundtruth.load(SAMPLE, "sample")
    assert groundtruth.content_digest(SAMPLE, "sample") == truth["content_digest"]
    second = groundtruth.load(SAMPLE, "no-excursion")  # the same run with one lever fixed, for Compare
    assert groundtruth.content_digest(SAMPLE, "no-excursion") == second["content_digest"]
    assert not second["events"]["staleness_excursion_steps"]
    events = truth["events"]
    assert len(truth["by_step"]) >= 100 and len(truth["by_environment"]) >= 3
    assert len(events["drafter_refreshes"]) >= 2 and events["logprob_drafter_policy_versions"]
    assert events["staleness_excursion_steps"] and truth["run"]["teacher"]["spans"] > 0
    for run in ("sample", "no-excursion"):  # and its transcripts are those the simulator wrote
        said = groundtruth.load(SAMPLE, run)
        assert groundtruth.content_digest(SAMPLE, run, dataset="messages") == said["messages_digest"]
        assert said["transcripts"]["run"]["rollouts"] == said["run"]["funnel"]["dispatched"]
    shipped = [f for f in SAMPLE.rglob("*") if f.is_file() and "derived" not in f.relative_to(SAMPLE).parts]
    size = sum(f.stat().st_size for f in shipped)  # derived/ is a cache a reader writes, not shipped
    assert size < 25 * 2**20


@pytest.mark.slow
@pytest.mark.parametrize(("run", "preset"), [("sample", "sample"), ("no-excursion", "sample-no-excursion")])
def test_the_sample_run_regenerates_from_its_documented_command(tmp_path, run, preset):
    command = f"rollscope simulate --store sample_data --run-id {run} --preset {preset} --compact"
    assert command in " ".join((ROOT / "docs" / "simulator.md").read_text().split())  # the command docs state
    code, _, err = rollscope(
        "simulate", "--store", tmp_path, "--run-id", run, "--preset", preset, "--compact", "--quiet"
    )
    assert code == 0, err
    fresh, shipped = groundtruth.load(tmp_path, run), groundtruth.load(SAMPLE, run)
    assert fresh["content_digest"] == shipped["content_digest"]
    assert fresh == shipped


@pytest.mark.long
def test_every_knob_and_ground_truth_key_is_documented(run):
    import dataclasses

    doc = (ROOT / "docs" / "simulator.md").read_text()
    knobs = {
        f.name for cls in (config.SimConfig, config.Environment, config.Tool) for f in dataclasses.fields(cls)
    }
    assert {k for k in knobs if f"`{k}`" not in doc} == set()
    _, truth, _ = run
    keys = set(truth) | set(truth["run"]) | set(truth["by_step"][0]) | set(truth["processes"][0])
    for section in (
        "funnel",
        "prefill_decode",
        "spec_decode",
        "staleness",
        "tools",
        "judge",
        "teacher",
        "trainer",
        "work_per_token",
    ):
        keys |= set(truth["run"][section])
    keys |= set(truth["run"]["compute"]) | set(truth["events"]) | set(truth["by_policy_version"][0])
    assert {k for k in keys if k not in doc} == set()


@pytest.mark.long
def test_a_paced_run_can_be_watched_growing(tmp_path):
    knobs = _knobs(tmp_path)
    code = "import sys; from rollscope.app.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "ROLLSCOPE_SEGMENT_SECONDS": "0.3"}  # publish often, as a live demo would
    writer = python(
        code,
        "simulate",
        "--store",
        str(tmp_path),
        "--run-id",
        "live",
        "--config",
        str(knobs),
        "--steps",
        "4",
        "--pace",
        "1.5",  # slow enough that a reader on a loaded machine still sees the run part-way
        "--quiet",
        stdout=subprocess.DEVNULL,
        env=env,
    )
    seen = []
    while writer.poll() is None:
        seen.append(queries.connect(tmp_path).execute("SELECT count(*) FROM rollouts").fetchone()[0])
        time.sleep(0.3)
    assert writer.returncode == 0
    final = groundtruth.load(tmp_path, "live")["run"]["funnel"]["dispatched"]
    assert seen == sorted(seen)
    assert any(0 < n < final for n in seen)


def test_the_progress_bar_ends_at_its_total_and_never_passes_it(tmp_path):
    import re

    code, _, err = rollscope(
        "simulate", "--store", tmp_path, "--run-id", "bar", "--config", _knobs(tmp_path), "--workers", "1"
    )
    assert code == 0, err
    drawn = [
        (int(share), int(done.replace(",", "")), int(total.replace(",", "")))
        for share, done, total in re.findall(r"(\d+)%\s+([\d,]+)/([\d,]+) spans", err)
    ]
    assert drawn and all(done <= total and share <= 100 for share, done, total in drawn), drawn
    spans = groundtruth.load(tmp_path, "bar")["spans"]["total"]
    assert drawn[-1] == (100, spans, spans)
