"""The Compare page's table: two runs' reports side by side, each figure labelled, formatted and judged.

What a report key is called (``figure_label``), how its value is written (``report_value``) and which run is
better on it (``BETTER``): the Compare page's own vocabulary, apart from the cached calls it reads through.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from rollscope import formats
from rollscope.app.calls import analysis
from rollscope.app.filters import Filters
from rollscope.app.readers import live_store
from rollscope.app.threads import at_once
from rollscope.queries import report as queries_report


def compare(filters: Filters, other: str) -> pd.DataFrame:
    """The reports of the page's run and ``other`` side by side (``report_table``), both with the filters.

    The two reports are computed at once, one per thread: each is some thirty small queries that leave a core
    idle, so together they take little more than the larger one."""
    runs = (filters.run_id, other)
    reports = dict(
        at_once({run: partial(analysis, queries_report.report, filters, run_id=run) for run in runs})
    )
    return report_table(live_store(filters.store).cursor(filters.run_id), reports)


def report_table(con, reports: dict[str, dict]) -> pd.DataFrame:
    """Reports of two runs, one row per figure with a readable label, the change from the first to the
    second (absolute, in the figure's own format, and relative; ``queries.report.changes`` computes both)
    and which run is better where that is plain (``better``: the run's id, else empty). ``key`` keeps the
    report's dotted key."""

    flat = {run: _without_run_id(flatten(report)) for run, report in reports.items()}
    (run_a, first), (run_b, second) = flat.items()
    diff = queries_report.changes(con, first, second)
    keys = diff["key"].tolist()
    changes = [None if formats.missing(c) else c for c in diff["change"]]
    table = pd.DataFrame(
        {
            "figure": [figure_label(k) for k in keys],
            **{run: [report_value(k, f.get(k)) for k in keys] for run, f in flat.items()},
        }
    )
    table["change"] = [
        "" if c is None else _signed(report_value(k, c), c) if not _is_share(k) else formats.points(100 * c)
        for k, c in zip(keys, changes, strict=True)
    ]
    table["relative change"] = [
        formats.rate(r) if c is not None and not _is_share(k) else ""
        for k, c, r in zip(keys, changes, diff["relative_change"], strict=True)
    ]
    table["better"] = [_better(k, c, run_a, run_b) for k, c in zip(keys, changes, strict=True)]
    table["key"] = keys
    return table


SECTIONS = {
    "steps": "Steps",
    "funnel": "Funnel",
    "compute": "Compute",
    "prefill_decode": "Prefill : decode",
    "spec_decode": "Speculative decoding",
    "staleness": "Staleness",
    "trainer": "Trainer",
    "throughput": "Throughput",
}


# Report keys where more is better (+1) or worse (-1); Compare highlights the better run on these only.
BETTER = {
    "funnel.usable": 1,
    "funnel.rates.": 1,
    "compute.wasted_compute_share": -1,
    "compute.token_work.reprefilled": -1,
    "compute.token_work.generated_per_usable_token": -1,
    "prefill_decode.cache_hit_rate": 1,
    "prefill_decode.reprefill_waste_tokens": -1,
    "spec_decode.acceptance_rate": 1,
    "spec_decode.mean_accepted_length": 1,
    "spec_decode.expected_tokens_per_step": 1,
    "spec_decode.max_drift_points": -1,
    "spec_decode.drafter_logprob_turns": -1,
    "staleness.mean": -1,
    "staleness.within_bound_share": 1,
    "staleness.freshness_rate": 1,
    "staleness.beyond_bound": -1,
    "staleness.violations": -1,
    "staleness.used_beyond_bound": -1,
    "trainer.idle_fraction": -1,
    "throughput.rollout_tokens_per_s": 1,
    "throughput.tool_wait_share": -1,
    "throughput.dropped_spans": -1,
    "throughput.failed_spans": -1,
}


def figure_label(key: str) -> str:
    """A report key as Compare labels it: ``funnel.rates.completion`` → ``Funnel · completion rate``."""
    section, _, rest = key.partition(".")
    if not rest:
        return label(section).capitalize()
    parts = rest.split(".")
    if section == "funnel" and parts[0] == "rates":
        name = f"{label(parts[1]).replace('nonzero signal', 'nonzero-signal')} rate"
    elif section == "compute" and parts[0] in ("flops", "device_seconds", "flops_share") and len(parts) > 1:
        what = {"flops": "FLOPs", "device_seconds": "device time", "flops_share": "share of C_total FLOPs"}
        name = f"C_{parts[1]} {what[parts[0]]}"
    elif key == "compute.env_cpu_seconds":
        name = "C_env CPU time"
    else:
        name = " ".join(
            label(p) for p in parts if p not in ("token_work", "disaggregation") or len(parts) == 1
        )
    return f"{SECTIONS.get(section, label(section))} · {name}"


def report_value(key: str, value) -> str:
    """A report value formatted by what it is (a share, FLOPs, seconds, a count), as every page does."""

    if value is None or isinstance(value, bool | str):
        return "" if value is None else ("yes" if value is True else "no" if value is False else value)
    last = key.rsplit(".", 1)[-1]
    if _is_share(key):
        return formats.rate(value)
    if ".flops." in key:
        return formats.flops(value)
    if ".device_seconds." in key:
        return formats.device_seconds(value)
    if last == "env_cpu_seconds":
        return formats.device_seconds(value, "CPU")
    if last.endswith("_s") or last.endswith("_seconds"):
        return formats.seconds(value)
    if last == "max_drift_points":
        return formats.points(value)
    return formats.count(value) if float(value).is_integer() else formats.number(value)


def _without_run_id(flat: dict) -> dict:
    return {k: v for k, v in flat.items() if k != "run_id"}


def _is_share(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return ".rates." in key or "flops_share" in key or last.endswith(("rate", "share", "fraction"))


def _signed(text: str, change) -> str:
    return text if change < 0 or text.startswith("-") else f"+{text}"


def _better(key: str, change, run_a: str, run_b: str) -> str:
    direction = next((d for prefix, d in BETTER.items() if key == prefix or key.startswith(prefix)), 0)
    if not direction or not change:
        return ""
    return run_b if change * direction > 0 else run_a


def label(name: str) -> str:
    return name.replace("_", " ")


def flatten(value, prefix: str = "") -> dict:
    """A nested report as ``{"funnel.rates.completion": 0.95, ...}``; lists become one readable cell."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        value = "; ".join(
            ", ".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else str(x) for x in value
        )
    return {prefix.rstrip("."): value}
