"""Every analysis on a large store, against a hand-written DuckDB aggregate over the native table, same run.

The store is simulated once (``rollscope simulate --spans N``, default 10M spans) unless ``--store`` points at
one that already holds the run. Both sides read ``Reader(store, run_id=RUN).con``, a connection of that run
alone, as the dashboard and the commands open one (on a connection of every run of a store of many, each scan
opens every run's derived files): the analyses go through the views and macros exactly as the dashboard's calls
do; each baseline is a query written by hand against ``_spans``, the run's raw spans copied into a native table,
computing the same figure the shortest way we know. The machine is shared, so each side is timed
best-of-``--repeats`` with the two alternating, and the figure that matters is the ratio. Targets: ≤ 1 s per analysis and ≤ 3× its baseline.

Usage: python benchmarks/queries.py [--store DIR] [--run ID] [--spans N] [--fast] [--only NAME ...] [--repeats R] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This script shares its name with the package it measures: import the package, not the script.
sys.path[:1] = [str(Path(__file__).resolve().parent.parent)]

from rollscope.queries import Reader, analyses, connect  # noqa: E402
from rollscope.queries.report import report  # noqa: E402
from rollscope.store.layout import run_ids  # noqa: E402

# Hand-written baselines over the native table: the same figures, no views, no macros.
_ROLLOUTS = """SELECT rollout_id, group_id, rollout_status, reward FROM _spans
    WHERE run_id = $run AND name = 'rl.rollout'"""
_TURNS = """SELECT rollout_id, instance_id, devices, model_parameters, start_ns, end_ns, policy_version,
    input_tokens, cached_input_tokens, output_tokens, context_tokens, prefill_time_s, decode_time_s,
    spec_draft_tokens, spec_accepted_tokens, spec_verify_steps, drafter_version, logprobs_source
    FROM _spans WHERE run_id = $run AND name = 'rl.turn'"""
_SAMPLES = """SELECT rollout_id, train_step, sample_decision, sample_staleness, sample_tokens FROM _spans
    WHERE run_id = $run AND name = 'rl.sample'"""
BASELINES = {
    "funnel": f"""
        WITH r AS ({_ROLLOUTS}), s AS ({_SAMPLES}),
        g AS (SELECT group_id, count(reward) AS n, min(reward) <> max(reward) AS vary FROM r GROUP BY group_id)
        SELECT count(*), count(*) FILTER (r.rollout_status = 'ok'), count(*) FILTER (r.reward IS NOT NULL),
               count(*) FILTER (g.vary AND g.n >= 2), count(*) FILTER (s.sample_decision = 'used')
        FROM r LEFT JOIN s USING (rollout_id) LEFT JOIN g USING (group_id)""",
    "funnel_losses": f"""
        WITH r AS ({_ROLLOUTS}), s AS ({_SAMPLES})
        SELECT s.sample_decision, r.rollout_status, count(*) FROM r LEFT JOIN s USING (rollout_id) GROUP BY ALL""",
    "compute_terms": f"""
        WITH t AS ({_TURNS}),
        w AS (SELECT instance_id, devices, end_ns, greatest(start_ns, coalesce(max(end_ns) OVER (
                PARTITION BY instance_id ORDER BY start_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                start_ns)) AS from_ns FROM t)
        SELECT (SELECT sum(2.0 * model_parameters * (input_tokens - cached_input_tokens + output_tokens)) FROM t),
               (SELECT sum(greatest(0, end_ns - from_ns) * devices) / 1e9 FROM w)""",
    "token_work": f"""
        WITH t AS (SELECT rollout_id, sum(output_tokens) AS o,
                          sum(greatest(0, context_tokens - cached_input_tokens)) AS w FROM ({_TURNS}) GROUP BY 1),
        s AS ({_SAMPLES})
        SELECT sum(o) FILTER (s.sample_decision = 'used'), sum(w) FILTER (s.sample_decision = 'used'),
               sum(s.sample_tokens) FROM t JOIN s USING (rollout_id)""",
    "prefill_decode": f"""
        SELECT sum(input_tokens - cached_input_tokens), sum(cached_input_tokens), sum(output_tokens),
               sum(greatest(0, context_tokens - cached_input_tokens)), sum(prefill_time_s), sum(decode_time_s)
        FROM ({_TURNS})""",
    "disaggregation": f"""
        WITH t AS ({_TURNS}), s AS ({_SAMPLES}),
        p AS (SELECT s.train_step, sum(input_tokens - cached_input_tokens) / sum(output_tokens) AS ratio
              FROM t JOIN s USING (rollout_id) GROUP BY 1)
        SELECT (SELECT stddev_pop(ratio) / avg(ratio) FROM p), (SELECT median(end_ns - start_ns) FROM t)""",
    "spec_decode": f"""
        SELECT sum(spec_accepted_tokens) / sum(spec_draft_tokens), sum(spec_accepted_tokens) / sum(spec_verify_steps)
        FROM ({_TURNS})""",
    "spec_drift": f"""
        SELECT drafter_version, policy_version, sum(spec_accepted_tokens) / sum(spec_draft_tokens)
        FROM ({_TURNS}) GROUP BY ALL""",
    "logprob_lint": f"""
        WITH t AS ({_TURNS}), s AS ({_SAMPLES})
        SELECT s.train_step, t.policy_version, count(*) FROM t LEFT JOIN s USING (rollout_id)
        WHERE t.logprobs_source = 'drafter' GROUP BY ALL""",
    "staleness": f"SELECT sample_staleness, count(*) FROM ({_SAMPLES}) GROUP BY 1",
    # the advisor's inputs: funnel counts, per-environment turn sums, judge seconds, train seconds per token
    "advise": f"""
        WITH r AS ({_ROLLOUTS}), s AS ({_SAMPLES}), t AS ({_TURNS}),
        g AS (SELECT group_id, count(reward) AS n, min(reward) <> max(reward) AS vary FROM r GROUP BY group_id)
        SELECT
            (SELECT [count(*), count(*) FILTER (r.rollout_status = 'ok'), count(*) FILTER (g.vary AND g.n >= 2),
                     count(*) FILTER (s.sample_decision = 'used')]
             FROM r LEFT JOIN s USING (rollout_id) LEFT JOIN g USING (group_id)),
            (SELECT [sum(input_tokens - cached_input_tokens), sum(greatest(0, context_tokens - cached_input_tokens)),
                     sum(prefill_time_s), sum(decode_time_s), sum(spec_verify_steps), sum(output_tokens)]
             FROM t),
            (SELECT sum(end_ns - start_ns) FROM _spans WHERE run_id = $run AND name = 'rl.judge'),
            (SELECT regr_slope((end_ns - start_ns) / 1e9 - train_wait_s, train_tokens) FROM _spans
             WHERE run_id = $run AND name = 'rl.train_step')""",
    "throughput": f"""
        WITH o AS (SELECT rollout_id, sum(output_tokens) AS n FROM ({_TURNS}) GROUP BY 1)
        SELECT quantile_cont(n, [0.5, 0.9, 0.99]) FROM o""",
}

ANALYSES = {
    "funnel": lambda con, run: analyses.funnel(con, run),
    "funnel_losses": lambda con, run: analyses.funnel_losses(con, run),
    "compute_terms": lambda con, run: analyses.compute_terms(con, run),
    "token_work": lambda con, run: analyses.token_work(con, run),
    "prefill_decode": lambda con, run: analyses.prefill_decode(con, run),
    "disaggregation": lambda con, run: analyses.disaggregation(con, run),
    "spec_decode": lambda con, run: analyses.spec_decode(con, run),
    "spec_drift": lambda con, run: analyses.spec_drift(con, run),
    "logprob_lint": lambda con, run: analyses.logprob_lint(con, run),
    "staleness": lambda con, run: analyses.staleness(con, run),
    "throughput": lambda con, run: analyses.throughput(con, run),
    "advise": lambda con, run: analyses.advise(con, run),
}


def simulate(store: Path, run_id: str, spans: int, fast: bool = False) -> None:
    command = [
        sys.executable,
        "-m",
        "rollscope.app.cli",
        "simulate",
        "--store",
        str(store),
        "--run-id",
        run_id,
        "--preset",
        "scale",
        "--spans",
        str(spans),
        "--quiet",
        *(["--fast"] if fast else []),
    ]
    subprocess.run(command, check=True, cwd=Path(__file__).resolve().parent.parent)


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(con, run_id: str, repeats: int, only=None) -> list[tuple[str, float, float]]:
    rows = []
    for name, analysis in ANALYSES.items():
        if only and name not in only:
            continue
        analysis(con, run_id)  # warm: macros created, caches filled
        mine = best_of(lambda a=analysis: a(con, run_id), repeats)
        base = best_of(lambda q=BASELINES[name]: con.execute(q, {"run": run_id}).fetchall(), repeats)
        rows.append((name, mine, base))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help="an existing store (default: simulate one)")
    parser.add_argument("--run", default="bench", help="run id in the store (default: bench)")
    parser.add_argument("--spans", type=int, default=10_000_000, help="spans to simulate (default: 10M)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=ANALYSES, help="only these analyses (default all)")
    parser.add_argument(
        "--fast", action="store_true", help="simulate with the fast mode (rollscope simulate --fast)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the simulated store (printed) for next time"
    )
    args = parser.parse_args()
    made = args.store is None
    store = args.store or Path(tempfile.mkdtemp(prefix="rollscope-bench-"))
    try:
        if args.run not in run_ids(store):
            simulate(store, args.run, args.spans, args.fast)
        run(store, args.run, args.repeats, args.only)
    finally:
        if made and not args.keep:
            shutil.rmtree(store, ignore_errors=True)
    return 0


def run(store: Path, run_id: str, repeats: int, only=None) -> None:
    started = time.perf_counter()
    con = Reader(store, run_id=run_id).con
    # The baselines' native table: the run's raw spans copied into DuckDB once (the reader itself reads Parquet).
    con.execute("CREATE OR REPLACE TEMP TABLE _spans AS SELECT * FROM raw_spans WHERE run_id = ?", [run_id])
    spans = con.execute("SELECT count(*) FROM _spans WHERE run_id = ?", [run_id]).fetchone()[0]
    print(f"store {store}: run {run_id}, {spans:,} spans, loaded in {time.perf_counter() - started:.1f} s")
    print(f"{'analysis':<16} {'seconds':>8} {'baseline':>9} {'ratio':>6}  targets (≤ 1 s, ≤ 3×)")
    for name, mine, base in measure(con, run_id, repeats, only):
        verdict = "ok" if mine <= 1.0 and mine <= 3 * base else "MISSED"
        print(f"{name:<16} {mine:8.3f} {base:9.3f} {mine / base:5.1f}×  {verdict}")
    if not only:
        print(f"{'report (all)':<16} {best_of(lambda: report(con, run_id), 1):8.3f}")
    advise_cli(store, run_id, repeats)


def advise_cli(store: Path, run_id: str, repeats: int) -> None:
    """`rollscope advise` as a user runs it: a fresh connection over the derived tables on disk, every lever."""
    from rollscope.app.commands.advise import advise

    connect(store, run_id=run_id)  # the derived tables caught up once, as the first reader of the run does
    mine = best_of(lambda: advise(connect(store, run_id=run_id), run_id), repeats)
    base = best_of(
        lambda: (
            connect(store, run_id=run_id)
            .execute(BASELINES["advise"].replace("_spans", "spans"), {"run": run_id})
            .fetchall()
        ),
        repeats,
    )
    verdict = "ok" if mine <= 1.0 else "MISSED"
    print(
        f"{'advise (CLI)':<16} {mine:8.3f} {base:9.3f} {mine / base:5.1f}×  {verdict}"
        "  (fresh connection, derived tables on disk; baseline: the hand-written query over the raw Parquet)"
    )


if __name__ == "__main__":
    sys.exit(main())
