"""Every analysis, the report, the checks and the advisor read per-step aggregates, never a table that grows with
the run.

A run of any length keeps a few rows per step in the derived per-step tables (store/derived.py, scope "step");
the per-rollout and per-turn tables stay on disk for drill-downs and for deriving the aggregates. Emptying
those big tables under a reader must change no figure: what the analyses computed came from the small ones.
"""

from __future__ import annotations

import pandas as pd
import pytest

from rollscope.queries import analyses, derived_schemas
from rollscope.queries.checks import run_checks
from rollscope.queries.reader import Reader, empty_select
from rollscope.queries.report import report
from rollscope.queries.tables import TABLES
from tests.conftest import ROOT

RUN = "sample"

# The tables that grow with the run's rollouts, turns or scoring calls (not with its steps). `work` stays:
# compute_terms reads its pending rows (work no step has consumed yet, step IS NULL), which the step-ordered file
# skips to.
BIG = (
    "rollouts",
    "turns",
    "rollout_steps",
    "rollout_stages",
    "rollout_work",
    "turn_sums",
    "step_islands",
)


def everything(con) -> dict:
    """Every figure a user reads: the report, the checks, the trends, and every analysis by every key."""
    out = {
        "report": report(con, RUN),
        "checks": [c.line() for c in run_checks(con, RUN)],
        "generations": analyses.generations_by_step(con, RUN),
        "rewards": analyses.rewards_by_step(con, RUN),
        "funnel by task": analyses.funnel(con, RUN, by="task"),
        "funnel by environment": analyses.funnel(con, RUN, by="environment"),
        "staleness by step": analyses.staleness_by_step(con, RUN),
        "throughput, one environment": analyses.throughput(con, RUN, environment="swe"),
        "disaggregation, steps 10-40": analyses.disaggregation(con, RUN, steps=(10, 40)),
        "task solve rates": analyses.task_solve_rates(con, RUN),
        "task solve rates, steps 10-40 at 0.3": analyses.task_solve_rates(
            con, RUN, steps=(10, 40), success_threshold=0.3
        ),
        "mismatch by step": analyses.mismatch(con, RUN, by="step"),
        "staleness timing": analyses.staleness_timing(con, RUN),
        "staleness timing, one environment": analyses.staleness_timing(con, RUN, environment="swe"),
        "stale bias": analyses.stale_bias(con, RUN),
        "scoring latency": analyses.scoring_latency(con, RUN, by=None),
        "scoring latency by step": analyses.scoring_latency(con, RUN),
        "advise": analyses.advise(con, RUN),
        "advise, steps 10-60": analyses.advise(con, RUN, steps=(10, 60)),
        "goodput": analyses.goodput(con, RUN),
    }
    for by in (None, "step", "environment", "step_environment"):
        out[f"learning by {by}"] = analyses.learning(con, RUN, by=by)
    for by in (None, "step", "environment", "task"):
        out[f"zero_signal by {by}"] = analyses.zero_signal(con, RUN, by=by)
    for metric in analyses.TRENDS:
        out[f"trend {metric}"] = analyses.trend(con, RUN, metric, rolling=5)
    for by in ("environment", "turn_index", "step"):
        out[f"prefill_decode by {by}"] = analyses.prefill_decode(con, RUN, by=by)
    for by in (
        "policy_version",
        "drafter_version",
        "versions_since_refresh",
        "environment",
        "length_bucket",
        "step",
    ):
        out[f"spec_decode by {by}"] = analyses.spec_decode(con, RUN, by=by)
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], pd.DataFrame):
            pd.testing.assert_frame_equal(a[key], b[key], obj=key)
        else:
            assert _rounded(a[key]) == _rounded(b[key]), key


def _rounded(value):
    """``value`` with every float to 12 significant digits: a per-step table is read from several parts in
    parallel, so a sum of doubles over steps (a run's mean seconds) may differ in its last bits between two
    reads; any larger difference is a different figure."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map(_rounded, value))
    return value


@pytest.fixture
def reader():
    return Reader(ROOT / "sample_data", run_id=RUN)


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_no_figure_reads_a_table_that_grows_with_the_run(reader):
    before = everything(reader.con)
    assert len(before["report"]["funnel"]) and before["report"]["funnel"]["dispatched"] > 0
    for name in BIG:
        empty = empty_select(derived_schemas.current()[name])
        reader.con.execute(f"CREATE OR REPLACE VIEW _{name}_mat AS {empty}")
    assert reader.con.execute("SELECT count(*) FROM _turns_stepped($run)", {"run": RUN}).fetchall() == [(0,)]
    assert_same(everything(reader.con), before)


def test_per_step_tables_have_a_few_rows_per_step(reader):
    """What the analyses read is far smaller than the rollouts and turns it sums: in the sample run 64 rollouts
    and about 340 turns per step; the largest per-step table (prefill sums by step, environment and turn index)
    about 42 rows per step."""
    state = reader.derived_state(RUN)
    files = state.files()

    def count(name: str) -> int:
        parts = [str(p) for p in files[name]]
        return reader.con.execute("SELECT count(*) FROM read_parquet(?)", [parts]).fetchall()[0][0]

    steps = reader.con.execute(
        "SELECT count(DISTINCT step) FROM rollout_steps($run)", {"run": RUN}
    ).fetchall()[0][0]
    rollouts, turns = count("rollouts"), count("turns")
    for table in TABLES:
        # turn_sums and step_islands (BIG): scope "step" (a step's rows come from that step's turns and work,
        # so a catch-up replaces them by step), but one row per turn key or per process and island.
        if table.scope != "step" or table.name in ("rollout_tails", "turn_latency", "scoring", *BIG):
            continue
        assert count(table.name) <= 48 * steps, table.name
    assert rollouts > 60 * steps and turns > 300 * steps
    # The three kept for exact percentiles: one narrow row per value.
    calls = reader.con.execute(
        "SELECT count(*) FROM spans WHERE run_id = $run AND name IN ('rl.reward', 'rl.judge')", {"run": RUN}
    ).fetchall()[0][0]
    assert count("rollout_tails") <= 2 * rollouts and count("turn_latency") == turns
    assert count("scoring") == calls
