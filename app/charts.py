"""Plotly figures and number formats for the pages: every axis says its unit, every figure looks alike.

Builders take the frames ``queries`` returns and only arrange them; no figure is computed here (the rolling
mean drawn over a noisy per-step series comes from ``queries/sql/analyses/rolling_mean.sql`` too).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

# one number format for every face (rollscope/formats.py), re-exported for the pages
from rollscope.formats import (  # noqa: F401
    change,
    count,
    counted,
    device_seconds,
    device_time,
    flops,
    missing,
    number,
    points,
    rate,
    ratio,
    seconds,
)
from rollscope.queries.analyses import ROLLING_STEPS  # noqa: F401 (the per-step charts' window; pages name it)
from rollscope.semconv import FUNNEL_STAGE_RATES, FUNNEL_STAGES

# the funnel analysis's columns of the four stage rates
RATES = tuple(f"{name}_rate" for name in FUNNEL_STAGE_RATES)
# One colour per compute term on every page; none in the red that means an error.
TERM_COLORS = {
    "rollout": "#2563eb",
    "train": "#16a34a",
    "teacher": "#9333ea",
    "judge": "#f59e0b",
    "env": "#64748b",
}
# Span kinds in a waterfall take the colour of the compute term they are work of.
KIND_COLORS = {
    "rollout": "#9aa5b1",
    "turn": TERM_COLORS["rollout"],
    "tool": TERM_COLORS["env"],
    "reward": "#10b981",
    "judge": TERM_COLORS["judge"],
    "teacher": TERM_COLORS["teacher"],
    "sample": "#334155",
    "train_step": TERM_COLORS["train"],
    "other": "#cbd5e1",
}
PALETTE = ("#2563eb", "#db2777", "#0d9488", "#ea580c", "#7c3aed", "#65a30d")
_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "legend": {"orientation": "h", "y": -0.2}}
# A line drawn with more points than this shows nothing more (a chart is at most about a thousand pixels wide) and
# costs seconds to build and send: a 10M-span run has 11,000 steps, seven sparklines 150,000 points.
MAX_POINTS = 600


def thinned(xs: pd.Series, ys: pd.Series, max_points: int = MAX_POINTS) -> tuple[list, list]:
    """The points of a line to draw: every one up to ``max_points``; beyond, consecutive points in buckets, each
    keeping its first, lowest and highest (min-max decimation), so a one-step spike or dip still shows. Missing
    values are never a bucket's lowest or highest; on ties the first point wins."""
    count = len(xs)
    if count <= max_points:
        return drawn(xs), drawn(ys)
    size = math.ceil(3 * count / max_points)
    buckets = math.ceil(count / size)
    values = pd.to_numeric(pd.Series(ys.to_numpy()), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    valid = np.zeros(buckets * size, dtype=bool)
    valid[:count] = ~np.isnan(values)
    padded = np.zeros(buckets * size)
    padded[:count] = np.where(valid[:count], values, 0.0)
    grid, ok = padded.reshape(buckets, size), valid.reshape(buckets, size)
    starts = np.arange(buckets) * size
    # Each bucket's first lowest and first highest valid value: a missing one counts as +inf (-inf) there, and a
    # bucket whose valid values are all +inf (-inf) takes its first valid point instead.
    rows, first = np.arange(buckets), np.argmax(ok, axis=1)
    lowest = np.argmin(np.where(ok, grid, np.inf), axis=1)
    lowest = np.where(ok[rows, lowest], lowest, first)
    highest = np.argmax(np.where(ok, grid, -np.inf), axis=1)
    highest = np.where(ok[rows, highest], highest, first)
    has = ok.any(axis=1)
    keep = np.unique(np.concatenate([starts, (starts + lowest)[has], (starts + highest)[has]]))
    return drawn(xs.iloc[keep]), drawn(ys.iloc[keep])


def drawn(values: pd.Series) -> np.ndarray | list:
    """A line's values as plotly takes them fastest: numbers as a NumPy array (validated whole and sent as a typed
    array: 1.2 ms a 600-point line where a list took 2.9, checked value by value), missing ones NaN, which
    plotly draws as a gap like a null; anything else (dates, names, booleans) as a list."""
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        return values.tolist()
    if pd.api.types.is_integer_dtype(values) and not values.hasnans:
        return values.to_numpy(dtype=np.int64)
    return values.to_numpy(dtype=float, na_value=np.nan)


def label(name: str) -> str:
    """A column name as a label: the same word users type in SQL, spaced."""
    return name.replace("_", " ")


# --- figures ------------------------------------------------------------------------------------------------


def _figure(title: str, x_title: str, y_title: str, **layout) -> go.Figure:
    """An empty figure with the common layout. Given whole to the constructor: set through ``update_layout``'s
    underscore names (``xaxis_title``) the same layout took 4 ms a figure, against 0.9 ms."""
    titles = {
        "title": {"text": title},
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}},
    }
    return go.Figure(layout={**titles, **_LAYOUT, **layout})


def funnel(row: dict) -> go.Figure:
    """The stages of one funnel row, each with its count and share of the stage before."""
    fig = go.Figure(
        go.Funnel(
            y=[label(s) for s in FUNNEL_STAGES],
            x=[row.get(s) or 0 for s in FUNNEL_STAGES],
            textinfo="value+percent previous",
        )
    )
    fig.update_layout(title="Rollouts per funnel stage (count; % of the stage before)", **_LAYOUT)
    return fig


def lines(
    frame: pd.DataFrame,
    x: str,
    ys: list[str],
    title: str,
    x_title: str,
    y_title: str,
    percent: bool = False,
    names: list[str] | None = None,
    support: str | None = None,
) -> go.Figure:
    """Lines over ``x``; ``support`` names a column of how many items each point rests on (turns,
    rollouts), written beside each point and in its hover, so a point resting on a handful stands out."""
    fig = _figure(title, x_title, y_title)
    for y, name in zip(ys, names or [label(y) for y in ys], strict=True):
        extra = {}
        if support is not None:
            counts = [count(v) for v in frame[support]]
            largest = max([float(v) for v in frame[support] if not missing(v)] or [1.0]) or 1.0
            sizes = [
                4 + 14 * math.sqrt(max(float(v), 0.0) / largest) if not missing(v) else 4
                for v in frame[support]
            ]
            extra = {
                "marker": {"size": sizes},
                "text": [f"n={c}" for c in counts] if len(frame) <= 30 else None,
                "textposition": "top center",
                "customdata": counts,
                "hovertemplate": f"%{{x}}: %{{y}}<br>{label(support)}: %{{customdata}}<extra>{name}</extra>",
            }
        mode = "lines+markers+text" if extra.get("text") else "lines+markers"
        xs, values = thinned(frame[x], frame[y]) if not extra else (frame[x].tolist(), frame[y].tolist())
        fig.add_scatter(x=xs, y=values, mode=mode, name=name, **extra)
    _axes(fig, frame[x], percent)
    return fig


def per_step(
    frame: pd.DataFrame,
    ys: list[str],
    title: str,
    y_title: str,
    percent: bool = False,
    names: list[str] | None = None,
) -> go.Figure:
    """Per-train-step series, each drawn pale with its mean over the last ``ROLLING_STEPS`` steps on top, so
    a noisy figure reads as a trend. ``frame`` is a per-step analysis as a page reads it (``calls.analysis``): a ``step`` column, the
    series, and each series' ``<y>_rolling_mean``."""
    fig = _figure(title, "train step", y_title)
    for i, (y, name) in enumerate(zip(ys, names or [label(y) for y in ys], strict=True)):
        color = PALETTE[i % len(PALETTE)]
        xs, values = thinned(frame["step"], frame[y])
        fig.add_scatter(
            x=xs,
            y=values,
            mode="lines",
            name=name,
            legendgroup=name,
            showlegend=False,
            opacity=0.35,
            line={"color": color, "width": 1},
        )
        xs, mean = thinned(frame["step"], frame[f"{y}_rolling_mean"])
        fig.add_scatter(
            x=xs,
            y=mean,
            mode="lines",
            name=f"{name} (mean of {ROLLING_STEPS} steps)",
            legendgroup=name,
            line={"color": color, "width": 2.5},
        )
    _axes(fig, frame["step"], percent)
    return fig


def _axes(fig: go.Figure, x: pd.Series, percent: bool, horizontal: bool = False) -> None:
    """Whole-number ticks for steps, versions and turns; rates from 0 %."""
    if pd.api.types.is_integer_dtype(x) and x.nunique() <= 20:
        (fig.update_yaxes if horizontal else fig.update_xaxes)(dtick=1)
    if percent:
        (fig.update_xaxes if horizontal else fig.update_yaxes)(tickformat=".0%", rangemode="tozero")


MAX_BARS = 200  # a bar chart of more categories than this is unreadable and costs seconds to build


def binned(frame: pd.DataFrame, x: str, ys: list[str], max_bars: int = MAX_BARS) -> tuple[pd.DataFrame, bool]:
    """A per-step bar frame of more than ``max_bars`` steps as ranges of consecutive steps, each bar the mean per
    step over its range (so the unit stays per step), labelled "first–last"; rows whose ``x`` is not a number
    (e.g. "not consumed") stay as they are. Returns the frame and whether it was binned."""
    numeric = pd.to_numeric(frame[x], errors="coerce").notna()
    if numeric.sum() <= max_bars:
        return frame, False
    steps = frame[numeric].reset_index(drop=True)
    groups = pd.Series(range(len(steps))) // math.ceil(len(steps) / max_bars)
    out = steps[ys].apply(pd.to_numeric, errors="coerce").groupby(groups).mean()
    first, last = steps[x].groupby(groups).first(), steps[x].groupby(groups).last()
    out.insert(0, x, [f"{a}–{b}" for a, b in zip(first, last, strict=True)])
    return pd.concat([out, frame.loc[~numeric, [x, *ys]]], ignore_index=True), True


def bars(
    frame: pd.DataFrame,
    x: str,
    ys: list[str],
    title: str,
    x_title: str,
    y_title: str,
    stacked: bool = True,
    horizontal: bool = False,
    percent: bool = False,
    colors: dict[str, str] | None = None,
    log: bool = False,
) -> go.Figure:
    frame, was_binned = binned(frame, x, ys) if not horizontal else (frame, False)
    if was_binned:
        x_title = f"{x_title} (ranges: mean per step)"
    fig = _figure(title, x_title, y_title, barmode="stack" if stacked else "group")
    for y in ys:
        xs, values = frame[x].astype(str).tolist(), frame[y].tolist()
        color = {"marker_color": colors[y]} if colors and y in colors else {}
        if horizontal:
            fig.add_bar(y=xs, x=values, name=label(y), orientation="h", **color)
        else:
            fig.add_bar(x=xs, y=values, name=label(y), **color)
    if log:
        (fig.update_xaxes if horizontal else fig.update_yaxes)(type="log")
    (fig.update_yaxes if horizontal else fig.update_xaxes)(type="category")  # "64" is a bucket, not a number
    if percent:
        (fig.update_xaxes if horizontal else fig.update_yaxes)(tickformat=".0%", rangemode="tozero")
    if horizontal:
        fig.update_layout(height=140 + 36 * len(frame))
        fig.update_yaxes(autorange="reversed")
    return fig


def second_axis(fig: go.Figure, frame: pd.DataFrame, x: str, y: str, name: str, title: str) -> go.Figure:
    """A line on its own right-hand axis, for a figure in another unit (C_env's CPU time beside devices)."""
    fig.add_scatter(
        x=frame[x].astype(str).tolist(),
        y=frame[y].tolist(),
        name=name,
        mode="lines",
        yaxis="y2",
        line={"color": TERM_COLORS["env"], "width": 2},
    )
    fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": title, "rangemode": "tozero"})
    return fig


def by_run(
    frames: dict[str, pd.DataFrame],
    x: str,
    y: str,
    title: str,
    x_title: str,
    y_title: str,
    kind: str = "bar",
    percent: bool = False,
) -> go.Figure:
    """One series per run on shared axes, so two runs compare at a glance."""
    fig = _figure(title, x_title, y_title, barmode="group")
    for run, frame in frames.items():
        if kind == "bar":
            fig.add_bar(x=frame[x].astype(str).tolist(), y=frame[y].tolist(), name=run)
            fig.update_xaxes(type="category")
        else:
            xs, values = thinned(frame[x], frame[y])
            fig.add_scatter(x=xs, y=values, mode="lines+markers", name=run)
    if frames:
        _axes(fig, pd.concat([f[x] for f in frames.values()]), percent)
    return fig


def histogram(
    frame: pd.DataFrame,
    x: str,
    y: str,
    title: str,
    x_title: str,
    y_title: str,
    bound: float | None = None,
    bound_label: str = "bound",
) -> go.Figure:
    """Pre-counted bins as bars, with an optional vertical line (a bound the values should stay under)."""
    fig = _figure(title, x_title, y_title)
    fig.add_bar(x=frame[x].tolist(), y=frame[y].tolist(), name=label(y))
    _axes(fig, frame[x], percent=False)
    if bound is not None:
        fig.add_vline(x=bound + 0.5, line_dash="dash", line_color="#ef4444", annotation_text=bound_label)
    return fig


def mark(fig: go.Figure, xs: list, labels: list[str], max_labels: int = 12) -> go.Figure:
    """Dotted vertical lines at ``xs`` (e.g. drafter rebuilds), set in one go: one add_vline per line is
    quadratic in plotly and takes minutes for hundreds of lines. Labelled only while they stay readable."""
    line = {"dash": "dot", "color": "#64748b", "width": 1}
    shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": line}
        for x in xs
    ]
    notes = (
        [
            {
                "x": x,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "text": text,
                "showarrow": False,
                "yanchor": "bottom",
            }
            for x, text in zip(xs, labels, strict=True)
        ]
        if len(xs) <= max_labels
        else []
    )
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *notes])
    return fig


FIRING = "#ef4444"  # a detector firing: shaded on the charts of the figure it watches


MAX_SHADED = 120  # stretches a chart shades at most: more merge across their narrowest gaps (``stretches``)


def stretches(first: np.ndarray, last: np.ndarray, most: int = MAX_SHADED) -> tuple[np.ndarray, np.ndarray]:
    """Stretches of steps (``first``, ``last``, in step order) merged across their narrowest gaps until at most
    ``most`` are left: a detector firing hundreds of times over tens of thousands of steps shades the same
    pixels with far fewer shapes (plotly validates and sends each one: 285 of them cost 40 ms to set alone)."""
    if len(first) <= most:
        return first, last
    gaps = first[1:] - last[:-1]
    closed = np.zeros(len(gaps), dtype=bool)
    closed[np.argsort(gaps, kind="stable")[: len(first) - most]] = True
    starts = np.concatenate([[True], ~closed])  # a stretch starts where the gap before it stays open
    ends = np.concatenate([~closed, [True]])
    return first[starts], last[ends]


def firing(fig: go.Figure, episodes: pd.DataFrame, rule: str, max_labels: int = 6) -> go.Figure:
    """Shade the stretches of steps a detector fired at (``analyses.detector_episodes``' rows, at most
    ``MAX_SHADED`` of them: ``stretches``), labelled with the rule and the step it started at while there are
    few; set in one go, as ``mark`` does."""
    ordered = episodes.sort_values("first_step")
    first, last = (ordered[c].to_numpy(dtype="int64") for c in ("first_step", "last_step"))
    first, last = stretches(first, last)
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": int(x0) - 0.5,
            "x1": int(x1) + 0.5,
            "y0": 0,
            "y1": 1,
            "fillcolor": FIRING,
            "opacity": 0.12,
            "line": {"width": 0},
            "layer": "below",
        }
        for x0, x1 in zip(first, last, strict=True)
    ]
    notes = [
        {
            "x": int(x0),
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "text": f"{rule} from step {int(x0)}",
            "showarrow": False,
            "xanchor": "left",
            "yanchor": "bottom",
            "font": {"color": FIRING},
        }
        for x0 in first[:max_labels]
    ]
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *notes])
    return fig


STATE_COLORS = {"FAIL": FIRING, "PASS": "#16a34a"}


def timeline(events: pd.DataFrame) -> go.Figure:
    """The alerts a watch recorded: one marker per change, at its time, on its rule's row, red for FAIL and
    green for PASS; the message in the hover."""
    rules = events["rule"].nunique()
    fig = _figure(
        "Alerts: check rules changing state", "time (UTC)", "rule", height=max(260, 150 + 40 * rules)
    )
    for state, color in STATE_COLORS.items():
        rows = events[events["state"] == state]
        fig.add_scatter(
            x=rows["time"],
            y=rows["rule"],
            mode="markers",
            name=state,
            marker={"color": color, "size": 11, "symbol": "x" if state == "FAIL" else "circle"},
            customdata=rows["message"],
            hovertemplate="%{x}<br>%{y}: %{customdata}<extra>" + state + "</extra>",
        )
    fig.update_yaxes(categoryorder="category descending")
    return fig


def sparkline(frame: pd.DataFrame, x: str, y: str, title: str, percent: bool = False) -> go.Figure:
    """A small per-step series on a train-step axis: the raw values thin and pale, and when the frame has
    ``rolling_mean`` that mean drawn over them."""
    xs, values = thinned(frame[x], frame[y])
    traces = [go.Scatter(x=xs, y=values, mode="lines", name=label(y), line={"width": 1, "color": "#93c5fd"})]
    if "rolling_mean" in frame:
        xs, means = thinned(frame[x], frame["rolling_mean"])
        traces.append(
            go.Scatter(
                x=xs, y=means, mode="lines", name="rolling mean", line={"width": 2.5, "color": "#1d4ed8"}
            )
        )
    # One layout, given whole: each update_* call validates the figure again (the Overview draws seven).
    layout = {
        "title": title,
        "height": 170,
        "margin": {"l": 0, "r": 0, "t": 30, "b": 0},
        "showlegend": False,
        "xaxis": {"title": {"text": "train step", "standoff": 2, "font": {"size": 11}}, "nticks": 6},
    }
    if percent:
        layout["yaxis"] = {"tickformat": ".0%"}
    return go.Figure(data=traces, layout=layout)


def waterfall(spans: pd.DataFrame, marks: pd.DataFrame | None = None) -> go.Figure:
    """One rollout's spans as horizontal bars on a time axis (seconds from the rollout's start); ``marks``
    (``trace.continuity``) name on its turns where continuity broke and where compaction happened."""
    rows = spans.reset_index(drop=True)
    marked = _turn_marks(marks)
    names = [_span_label(r, marked) for r in rows.itertuples()]
    # Instantaneous spans (a sample decision) get a sliver of width so they stay visible; hover shows the truth.
    sliver = max(float(rows["end_s"].max() - rows["start_s"].min()), 1.0) / 300 if len(rows) else 0.0
    fig = _figure("Rollout waterfall", "seconds from the rollout's start", "", height=120 + 28 * len(rows))
    for kind, group in rows.groupby("kind", sort=False):
        fig.add_bar(
            y=[names[i] for i in group.index],
            x=(group["end_s"] - group["start_s"]).clip(lower=sliver).tolist(),
            base=group["start_s"].tolist(),
            orientation="h",
            name=kind,
            marker_color=KIND_COLORS.get(kind, KIND_COLORS["other"]),
            customdata=group[["duration_s"]].to_numpy(),
            hovertemplate="%{y}: %{customdata[0]:.2f} s<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=names)
    return fig


def _turn_marks(marks: pd.DataFrame | None) -> dict[int, str]:
    """Turn index -> what a waterfall row says after it: a compaction before the turn, or why it prefilled its
    history again."""
    out: dict[int, str] = {}
    if marks is None:
        return out
    for m in marks.itertuples():
        if missing(m.turn_index):
            continue
        if not missing(m.compaction_tokens_before):
            out[int(m.turn_index)] = (
                f"✂ compacted {count(m.compaction_tokens_before)} → {count(m.compaction_tokens_after)}"
            )
        elif not missing(m.continuity_break):
            out[int(m.turn_index)] = f"⟲ {label(m.continuity_break)} ({count(m.reprefill_tokens)} again)"
    return out


def _span_label(row, marks: dict[int, str] | None = None) -> str:
    """A readable, unique row label: what the span is, then its position (and a turn's continuity mark)."""
    mark = (
        (marks or {}).get(None if missing(row.turn_index) else int(row.turn_index))
        if row.kind == "turn"
        else None
    )
    detail = {
        "turn": f"turn {_int(row.turn_index)}" + (f" {mark}" if mark else ""),
        "tool": f"tool {row.tool_name}",
        "reward": f"reward {row.reward_name or ''}".strip(),
        "train_step": f"train step {_int(row.train_step)}",
        "sample": f"sample ({row.sample_decision})",
    }.get(row.kind, row.kind if row.kind != "other" else row.name)
    return f"{row.Index + 1:>2}. {detail}"


def _int(value) -> str:
    return "?" if missing(value) else str(int(value))
