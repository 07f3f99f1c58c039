"""One number format for every face of rollscope: the report, the check lines, the pages and Compare.

Shares and rates as percentages (``12.3 %``), never a fraction beside a percentage of the same thing; counts
with thousands separators; FLOPs with SI prefixes; durations with their unit; a figure that cannot be known
as ``—``. Tests compare what a face shows with these functions.
"""

from __future__ import annotations

import math
import sys

MISSING = "—"
_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def missing(value) -> bool:
    # pandas' NA only exists once pandas is imported: the CLI imports this module for every command, and
    # importing pandas here cost `rollscope --help` (and `rollscope collect`, `compact`, ...) ~0.35 s.
    pandas = sys.modules.get("pandas")
    if value is None or (pandas is not None and value is pandas.NA):
        return True
    try:
        return math.isnan(value)
    except TypeError:
        return False


def count(value) -> str:
    return MISSING if missing(value) else f"{int(round(value)):,}"


def counted(value, noun: str) -> str:
    """A count with its noun, singular for one: ``1 turn``, ``3 turns``, ``1,204 messages``."""
    one = not missing(value) and int(round(value)) == 1
    return f"{count(value)} {noun if one else noun + 's'}"


def rate(value) -> str:
    """A share or rate (0.25) as a percentage (25.0 %)."""
    return MISSING if missing(value) else f"{100 * value:.1f} %"


def change(value) -> str:
    """A relative change (0.024) as a signed percentage (+2.4 %)."""
    return MISSING if missing(value) else f"{'+' if value >= 0 else ''}{rate(value)}"


def points(value) -> str:
    """A difference of two percentages, in percentage points."""
    return MISSING if missing(value) else f"{value:.1f} points"


def ratio(value) -> str:
    return MISSING if missing(value) else f"{value:.2f} : 1"


def times(value) -> str:
    """A multiple (2.5) as the detectors state it: ``2.50×``."""
    return MISSING if missing(value) else f"{value:,.2f}×"


def number(value, digits: int = 2) -> str:
    return MISSING if missing(value) else f"{value:,.{digits}f}"


def seconds(value) -> str:
    """A duration with its unit: µs, ms, s, min or h."""
    if missing(value):
        return MISSING
    size = abs(value)
    if size >= 3600:
        return f"{value / 3600:,.2f} h"
    if size >= 120:
        return f"{value / 60:.1f} min"
    if size >= 1 or size == 0:
        return f"{value:.1f} s"
    return f"{1000 * value:.0f} ms" if size >= 0.001 else f"{1e6 * value:.0f} µs"


def device_seconds(value, unit: str = "device", like=None) -> str:
    """Device time (devices × seconds) with its unit: ``1,234.5 device-s``, or hours once ``like`` (the
    figure a column of them is read against, e.g. their total; default the value itself) reaches one hour."""
    if missing(value):
        return MISSING
    number, unit = device_time(value, unit, like)
    return f"{number} {unit}"


def device_time(value, unit: str = "device", like=None) -> tuple[str, str]:
    """``device_seconds`` as its number and its unit apart (``("1,234.5", "device-h")``), for a metric whose
    label carries the unit: a wide number and a long unit do not fit a quarter of a page."""
    scale = value if like is None or missing(like) else like
    if abs(scale) >= 3600:
        return f"{value / 3600:,.1f}", f"{unit}-h"
    return f"{value:,.1f}", f"{unit}-s"


def flops(value) -> str:
    """FLOPs with an SI prefix: 1.33 EFLOP, 74.4 TFLOP, 950 FLOP."""
    if missing(value):
        return MISSING
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}FLOP"
    return f"{value:,.0f} FLOP"


def per_second(value, what: str) -> str:
    return MISSING if missing(value) else f"{value:,.0f} {what}/s"


def check_value(value, unit: str) -> str:
    """A health check's figure the way its message states it (``unit`` from queries.checks.CheckResult)."""
    if missing(value):
        return MISSING
    whole_seconds = lambda v: f"{v:,.0f} s"  # noqa: E731
    score = lambda v: number(v, 3)  # noqa: E731
    units = {"share": rate, "points": points, "count": count, "seconds": whole_seconds, "times": times}
    return {**units, "score": score}.get(unit, number)(value)
