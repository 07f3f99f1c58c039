"""The headline figures of a run as one nested dict: what `rollscope report --json` prints.

Keys are stable and documented in docs/report.md; a figure that cannot be computed (no turns with
speculative decoding, no trainer spans yet) is ``None``, never missing. Every analysis runs once per report
(``analyses.Memo``) and independent sections at once (``analyses.together``); hand it a Memo to share them
with the checks and other pages too. ``headline`` is the part the dashboard's Overview shows, built by the same
functions, so it costs only what it shows.
"""

from __future__ import annotations

import pandas as pd

from rollscope.queries import analyses, sqlfiles
from rollscope.semconv import COMPUTE_TERMS, FUNNEL_RATES, FUNNEL_STAGES


def report(con, run_id: str, steps=None, environment=None) -> dict:
    """Funnel, compute, prefill:decode, speculative decoding, staleness, trainer and throughput figures."""
    con = analyses.memo(con)
    analyses.require_run(con, run_id)
    filters = {"steps": steps, "environment": environment}
    sections = analyses.together(
        {
            "steps": lambda: _steps(con, run_id),
            "environments": lambda: analyses.environments(con, run_id),
            "funnel": lambda: {**_funnel(con, run_id, filters), "losses": _losses(con, run_id, filters)},
            "compute": lambda: _compute(con, run_id, filters),
            "prefill_decode": lambda: {
                **_prefill_decode(con, run_id, filters),
                "disaggregation": _disaggregation(con, run_id, filters),
                "split": analyses.record(analyses.prefill_split(con, run_id, **filters)),
                "what_if": _prefill_what_if(con, run_id, filters),
            },
            "spec_decode": lambda: _spec_decode(con, run_id, filters),
            "staleness": lambda: analyses.staleness_summary(con, run_id, **filters),
            "trainer": lambda: _trainer(con, run_id, filters),
            "throughput": lambda: _throughput(con, run_id, filters),
            "staleness_timing": lambda: analyses.staleness_timing_summary(con, run_id, **filters),
            "stale_bias": lambda: _stale_bias(con, run_id, filters),
            "learning": lambda: _learning(con, run_id, filters),
            "zero_signal": lambda: analyses.zero_signal_summary(con, run_id, **filters),
            "mismatch": lambda: _mismatch(con, run_id, filters),
            "health": lambda: health(con, run_id),
            "goodput": lambda: analyses.goodput(con, run_id, **filters),
            "detectors": lambda: detectors(con, run_id),
        }
    )
    return {"run_id": run_id, **sections}


def detectors(con, run_id: str) -> dict:
    """Each training-health detector's verdict at its default threshold (docs/report.md, "detectors"), keyed by
    rule with ``_`` for ``-``: ``detector_verdict``'s."""
    return {rule.replace("-", "_"): detector_verdict(con, run_id, rule) for rule in analyses.DETECTORS}


def detector_verdict(con, run_id: str, rule: str) -> dict:
    """One detector's verdict at its default threshold: whether it fires at the latest step it judged, the first
    and latest step it fired at, the steps it fired at and judged, and its latest figure. Over the whole run: a
    detector's windows run over steps."""
    from rollscope.queries.checks import detector_parameters

    params = detector_parameters(rule)
    row = analyses.detector_summary(con, run_id, rule, **params)
    return {
        "firing": bool(row.get("firing")),
        "first_step": row.get("first_step"),
        "last_step": row.get("last_step"),
        "steps_fired": row.get("steps_fired") or 0,
        "steps_judged": row.get("steps_judged") or 0,
        "value": row.get("value"),
        "threshold": params["threshold"],
    }


def changes(con, first: dict, second: dict) -> pd.DataFrame:
    """How two flattened reports differ (``{"funnel.usable": 80, ...}``, keys in the first's order, then the
    second's): ``first``, ``second``, ``change`` and ``relative_change`` per key, from
    ``analyses/report_changes.sql``. A figure that is not a number in both reports has no change (NULL)."""
    keys = list(first | second)
    numeric = [all(_is_number(f.get(k)) for f in (first, second)) for k in keys]
    return sqlfiles.run(
        con.cursor(),  # a Memo's or a plain connection's: nothing here is kept
        "analyses/report_changes",
        title="Comparing the reports failed",
        keys=keys,
        first=[float(first[k]) if ok else None for k, ok in zip(keys, numeric, strict=True)],
        second=[float(second[k]) if ok else None for k, ok in zip(keys, numeric, strict=True)],
    )


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _stale_bias(con, run_id: str, filters: dict) -> dict:
    frame = analyses.stale_bias(con, run_id, **filters).set_index("samples")
    keys = ("rollouts", "decoded_tokens_mean", "duration_s_mean", "reward_mean", "success_rate")
    out = {}
    for kind, key in (("kept", "kept"), ("dropped stale", "dropped_stale")):
        row = frame.loc[kind] if kind in frame.index else None
        out[key] = {
            k: (analyses.plain(row[k]) if row is not None else (0 if k == "rollouts" else None)) for k in keys
        }
    return out


def _learning(con, run_id: str, filters: dict) -> dict:
    row = analyses.record(analyses.learning(con, run_id, **filters))
    tasks = analyses.task_solve_summary(con, run_id, **filters)
    return {
        **{k: row.get(k) for k in ("scored", "reward_mean", "reward_p10", "reward_p50", "reward_p90")},
        "success_rate": row.get("success_rate"),
        "success_threshold": analyses.SUCCESS_THRESHOLD,
        "train_loss_last": analyses.trainer(con, run_id, filters["steps"])["train_loss_last"],
        **{k: tasks[k] for k in ("tasks_attempted", "tasks_always_solved", "tasks_never_solved")},
    }


def _mismatch(con, run_id: str, filters: dict) -> dict:
    row = analyses.record(analyses.mismatch(con, run_id, **filters))
    steps = analyses.mismatch_steps(con, run_id, **filters)
    keys = (
        "mismatch_kl_mean",
        "mismatch_kl_max",
        "logprob_diff_mean",
        "logprob_diff_max",
        "importance_ratio_mean",
    )
    return {
        "samples": row.get("samples", 0),
        **{k: row.get(k) for k in keys},
        "worst_step_mismatch_kl": steps["worst_step_mismatch_kl"],
    }


def headline(con, run_id: str, steps=None, environment=None) -> dict:
    """The report's funnel stages and rates, compute, prefill:decode figures, speculative decoding and trainer,
    with the report's keys and values; without losses, disaggregation, staleness and throughput tails."""
    con = analyses.memo(con)
    analyses.require_run(con, run_id)
    filters = {"steps": steps, "environment": environment}
    sections = analyses.together(
        {
            "funnel": lambda: _funnel(con, run_id, filters),
            "compute": lambda: _compute(con, run_id, filters),
            "prefill_decode": lambda: _prefill_decode(con, run_id, filters),
            "spec_decode": lambda: _spec_decode(con, run_id, filters),
            "trainer": lambda: _trainer(con, run_id, filters),
        }
    )
    return {"run_id": run_id, **sections}


def _steps(con, run_id: str) -> dict:
    bounds = analyses.steps(con, run_id)
    return {"first": bounds[0] if bounds else None, "last": bounds[1] if bounds else None}


def _funnel(con, run_id: str, filters: dict) -> dict:
    row = analyses.record(analyses.funnel(con, run_id, **filters))
    return {
        **{stage: row.get(stage, 0) for stage in FUNNEL_STAGES},
        "scored_in_groups": row.get("scored_in_groups", 0),
        "rates": {rate: row.get(f"{rate}_rate") for rate in FUNNEL_RATES.values()},
    }


def _losses(con, run_id: str, filters: dict) -> list[dict]:
    losses = analyses.funnel_losses(con, run_id, **filters)
    return [analyses.record(losses.iloc[[i]]) for i in range(len(losses))]


def _compute(con, run_id: str, filters: dict) -> dict:
    """The compute terms, C_total and each term's share of it, as ``compute_terms.sql`` computes them."""
    table = analyses.compute_terms(con, run_id, **filters).set_index("term")
    column = {name: {t: analyses.plain(table.at[t, name]) for t in COMPUTE_TERMS} for name in table.columns}
    work = analyses.token_work(con, run_id, **filters)
    return {
        "flops": {**column["flops"], "total": analyses.plain(table["flops_total"].iloc[0])},
        "flops_share": column["flops_share"],
        "device_seconds": {
            **column["device_seconds"],
            "total": analyses.plain(table["device_seconds_total"].iloc[0]),
        },
        "env_cpu_seconds": analyses.plain(table.at["env", "device_seconds"]),
        "token_work": {k: v for k, v in work.items() if k != "wasted_compute_share"},
        "wasted_compute_share": work.get("wasted_compute_share"),
    }


def _prefill_decode(con, run_id: str, filters: dict) -> dict:
    row = analyses.record(analyses.prefill_decode(con, run_id, **filters))
    return {
        "ratio": row.get("prefill_decode_ratio"),
        "cache_hit_rate": row.get("cache_hit_rate"),
        **{
            k: row.get(k)
            for k in (
                "new_prefill_tokens",
                "cached_prefill_tokens",
                "decode_tokens",
                "reprefill_waste_tokens",
                "prefill_time_s",
                "decode_time_s",
            )
        },
    }


def _prefill_what_if(con, run_id: str, filters: dict) -> dict:
    """Each remedy of repeated prefill pulled alone (the advisor's levers; over the step range, every
    environment: the fleet's device-seconds belong to none)."""
    keys = ("applies", "why_not", "device_seconds_after", "usable_per_device_s_after", "gain")
    levers = analyses.prefill_what_if(con, run_id, filters["steps"])
    return {lever: {k: row.get(k) for k in keys} for lever, row in levers.items()}


def _disaggregation(con, run_id: str, filters: dict) -> dict:
    verdict = analyses.disaggregation(con, run_id, **filters)
    return {"verdict": verdict["verdict"], "reasons": verdict["reasons"]}


def _spec_decode(con, run_id: str, filters: dict) -> dict:
    row = analyses.record(analyses.spec_decode(con, run_id, **filters))
    drift = analyses.spec_drift(con, run_id, **filters)
    lint = analyses.logprob_lint_summary(con, run_id, **filters)
    return {
        **{
            k: row.get(k)
            for k in (
                "acceptance_rate",
                "mean_accepted_length",
                "expected_tokens_per_step",
                "drafted",
                "accepted",
                "verify_steps",
            )
        },
        "max_drift_points": analyses.plain(drift["max_drop_points"].iloc[0]) if len(drift) else None,
        "drifted_drafters": drift.loc[drift["flagged"], "drafter_version"].tolist(),
        "drafter_logprob_turns": lint["turns"],
    }


def _trainer(con, run_id: str, filters: dict) -> dict:
    row = analyses.trainer(con, run_id, filters["steps"])
    return {"idle_fraction": row.get("trainer_idle_fraction"), "steps": row.get("train_steps")}


def _throughput(con, run_id: str, filters: dict) -> dict:
    row = analyses.throughput(con, run_id, **filters)
    keys = (
        "rollout_tokens_per_s",
        "rate_window_s",
        "length_p50",
        "length_p90",
        "length_p99",
        "duration_p50_s",
        "duration_p90_s",
        "duration_p99_s",
        "tool_wait_share",
        "dropped_spans",
        "failed_spans",
    )
    return {k: row.get(k) for k in keys}


def health(con, run_id: str, now_ns: int | None = None) -> dict:
    """Is it stuck: rollouts in flight and the oldest, the most silent process, scoring latency over the run.
    As of ``now_ns``, else of the end of the run's newest span (docs/report.md)."""
    flying = analyses.in_flight(con, run_id, now_ns=now_ns)
    oldest = analyses.in_flight_summary(con, run_id, now_ns=now_ns)
    quiet = analyses.liveness(con, run_id, now_ns=now_ns)
    scoring = analyses.scoring_latency(con, run_id, by=None).set_index("kind")
    return {
        "as_of_ns": analyses.plain(quiet["as_of_ns"].iloc[0]) if len(quiet) else None,
        "in_flight": oldest["in_flight"],
        "oldest_in_flight_s": oldest["oldest_age_s"],
        "oldest_in_flight_rollout": oldest["oldest_rollout_id"],
        "in_flight_by_environment": [
            {
                "environment": r.environment,
                "in_flight": int(r.in_flight),
                "oldest_age_s": float(r.oldest_age_s),
            }
            for r in flying.itertuples()
        ],
        "most_silent_process": quiet["instance_id"].iloc[0] if len(quiet) else None,
        "most_silent_s": analyses.plain(quiet["silent_s"].iloc[0]) if len(quiet) else None,
        "scoring": {
            kind: {
                k: analyses.plain(scoring.at[kind, k]) if kind in scoring.index else None
                for k in ("calls", "p50_s", "p99_s", "timeouts")
            }
            for kind in ("verifier", "judge")
        },
    }
