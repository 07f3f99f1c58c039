"""How an incremental catch-up brings a "run" table up to date, by its ``refresh`` rule (``queries/tables.py``):
"windows" (rollout_goodput: the step windows from the new spans on swept again), "tail" (compute_busy: the union
from the first changed interval on), "quantiles" (run_percentiles: moved by the values removed and added),
"rederive" (from the other derived tables); "whole" and "merge" are one statement each (``catch_up._merge``).

Apart from the scope and the blocked tables' rows (``catch_up``) because each rule reads the final state of the
tables before it, not the scope's spans, and each is its own small algorithm.

Its statements are files of ``sql/raw/derive/`` run through ``sqlfiles``: values as bound parameters, and where
a view needs one (a view takes none), a small table the view reads (``windows_blocks.sql``' ``_kept_steps``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from rollscope.queries import sqlfiles
from rollscope.queries.derive_db import table_names, view
from rollscope.queries.parquet_parts import consolidate, union, with_block, write_blocked, write_whole
from rollscope.store import derived
from rollscope.store.derived import Job, block_of, holds

log = logging.getLogger("rollscope.derive")

# run_percentiles' windows (sql/raw/quantile_windows.sql), kept with the tables like the index; a state
# without them takes them on its next catch-up, which then reads every value once
WINDOWS = "_quantile_windows"


WINDOW_VALUES = 2048  # values a window keeps on each side of its percentile (read at each call: tests set it)


# a fragment: the rows of the scope's steps (and of no step)
IN_STEPS = sqlfiles.Fragment("(step IS NULL OR step IN (SELECT step FROM _scope_steps))")


def scope_blocks(con) -> set[str]:
    steps = sqlfiles.execute(con, "raw/derive/scope_steps", fetch=sqlfiles.fetchall)
    return {"p"} | {block_of(s) for (s,) in steps}


def refresh_windows(
    con, job: Job, table, tables: dict[str, list[Path]], old: list[Path], notes: dict
) -> list[Path]:
    """A "windows" table (rollout_goodput): its rows of the step windows from the one holding the new spans'
    first start on swept again (refresh_rollout_goodput.sql), the earlier windows' rows kept. Kept as blocks
    of steps like a blocked table, so only the blocks of those windows (and ``p``, time outside every window)
    are rewritten; the processes' bounds come from the manifest merged with the scoped rows'
    (``process_bounds``), not from every turn and rollout of the run."""
    from rollscope.queries.reader import schema_file

    t0 = sqlfiles.execute(con, "raw/derive/windows_first_new", fetch=sqlfiles.first_row)["t0"]
    if t0 is None:  # nothing it reads is new
        return old
    read_final(con, tables)
    previous = job.previous.meta.get("process_bounds") if job.previous is not None else None
    notes["process_bounds"] = process_bounds(con, previous)
    # A process that runs again after a pause was idle, not gone, from its previous last end on: a window from
    # there is swept again too (before, the sweep ended that process's time at its last end).
    last_end = {instance: hi for instance, _, hi, *_ in notes["process_bounds"]}
    resumed = [hi for instance, _, hi, *_ in previous or () if hi is not None and last_end[instance] > hi]
    t0 = min([t0, *resumed])
    start = sqlfiles.execute(con, "raw/derive/windows_from", fetch=sqlfiles.first_row, t0=t0)
    from_ns, first_ns = start["from_ns"], start["first_ns"]
    if from_ns is None:  # before the first window: sweep it all
        return rederive(con, job, table, tables)
    values = {"run": job.run_id, "from_ns": from_ns, "first_ns": first_ns}
    sqlfiles.execute(con, f"raw/refresh_{table.name}", fill={"schema": [schema_file("spans")]}, **values)
    swept = sqlfiles.execute(con, "raw/derive/windows_blocks", fetch=sqlfiles.fetchall, from_ns=from_ns)
    blocks = {"p"} | {block_of(s) for (s,) in swept}
    return rewrite_blocks(con, job, table.name, old, "_merged", _KEPT_WINDOWS, blocks)


# a fragment: the rows of the windows before the sweep's start (windows_blocks.sql)
_KEPT_WINDOWS = sqlfiles.Fragment("step IN (SELECT train_step FROM _kept_steps)")


def rewrite_blocks(
    con, job: Job, name: str, parts: list[Path], new: str, kept: sqlfiles.Fragment, blocks: set
) -> list[Path]:
    """A table kept in blocks of steps but refreshed by a rule of its own: the parts holding ``blocks`` (or a
    ``b=all`` part of an earlier layout) rewritten as their rows that satisfy ``kept`` plus the ``new`` relation's
    rows; the other parts reused."""
    old = [p for p in parts if derived.part_block(p) == "all" or holds(p, blocks)]
    relation = with_block(con, new)
    if old:
        view(con, f"_old_{name}_touched", old, schema=new)
        relation = union(relation, with_block(con, f"_old_{name}_touched", kept))
    written = write_blocked(con, name, relation, job.staging)
    return consolidate(con, name, [p for p in parts if p not in old] + written, job.staging)


def process_bounds(con, meta: list | None) -> list[list]:
    """_proc_bounds: each process's first start, last end, devices and whether it ran turns
    (process_bounds.sql) over the final turns and rollouts: the previous state's (``meta``; without them,
    computed from the final tables, once) merged with the scoped rows'. Returns them for the manifest."""
    if meta is None:
        sqlfiles.execute(con, "raw/process_bounds", fill={"turns": "_turns_mat", "rollouts": "_rollouts_mat"})
        rows = sqlfiles.execute(con, "raw/derive/proc_bounds_all", fetch=sqlfiles.fetchall)
    else:
        columns = [list(column) for column in zip(*meta, strict=True)] or [[] for _ in _BOUNDS_COLUMNS]
        sqlfiles.execute(
            con, "raw/derive/proc_bounds_meta", **dict(zip(_BOUNDS_COLUMNS, columns, strict=True))
        )
        fill = {"turns": "_turns_scoped", "rollouts": "_rollouts_scoped"}
        sqlfiles.execute(con, "raw/process_bounds", fill=fill)
        rows = sqlfiles.execute(con, "raw/derive/proc_bounds_merge", fetch=sqlfiles.fetchall)
    return [list(r) for r in rows]


_BOUNDS_COLUMNS = ("instances", "los", "his", "devices", "has_turns")  # proc_bounds_meta.sql's lists


def refresh_tail(con, job: Job, table, tables: dict[str, list[Path]], parts: dict) -> list[Path]:
    """A "tail" table (compute_busy): per step, the scoped steps' rows swept again; for the whole run, the
    previous union less its part from the first changed interval on plus the new one's
    (refresh_compute_busy.sql). Kept in blocks of steps like a blocked table (the whole-run rows in ``p``):
    only the scoped steps' blocks are rewritten."""
    for name in ("step_islands", "work", "compute_busy"):
        view(con, f"_old_{name}", parts[name], schema=f"_{name}_mat")
    for name in ("step_islands", "work"):
        view(con, f"_final_{name}", tables[name], schema=f"_{name}_mat")
    t0 = sqlfiles.execute(con, "raw/derive/tail_first_changed", fetch=sqlfiles.first_row)["t0"]
    read_final(con, tables)
    values = {"run": job.run_id, "t0_ns": t0 if t0 is not None else 2**62}
    sqlfiles.execute(con, f"raw/refresh_{table.name}", **values)
    kept = _KEPT_STEPS
    return rewrite_blocks(con, job, table.name, parts[table.name], "_merged", kept, scope_blocks(con))


# a fragment: compute_busy's per-step rows of the steps outside the scope
_KEPT_STEPS = sqlfiles.Fragment(
    "by_step AND step IS NOT NULL AND step NOT IN (SELECT step FROM _scope_steps)"
)


def read_final(con, tables: dict[str, list[Path]]) -> None:
    """Point the views of the tables written so far at their new parts (the scoped rows stay as _<t>_scoped)."""
    held = table_names(con)
    for done, files in tables.items():
        if f"_{done}_mat" in held:  # not yet a view over its new parts
            fill = {"table": f"_{done}_mat", "name": f"_{done}_scoped"}
            sqlfiles.execute(con, "raw/derive/rename_table", fill=fill)
            view(con, f"_{done}_mat", files, schema=f"_{done}_scoped")


def rederive(con, job: Job, table, tables: dict[str, list[Path]]) -> list[Path]:
    """A "rederive" table, from the tables written so far (their views now read the new parts) and the raw
    spans those keep (rederive_spans.sql)."""
    from rollscope.queries.reader import schema_file

    read_final(con, tables)
    sqlfiles.execute(con, "raw/rederive_spans", fill={"schema": [schema_file("spans")]})
    source = sqlfiles.Fragment(table.source)  # a relation of our declarations (tables.py); it may read $run
    sqlfiles.execute(con, "raw/derive/rederive", fill={"source": source}, run=job.run_id)
    return [write_whole(con, table.name, "_merged", job.staging)]


# quantile_between.sql's columns, the parameters quantile_interpolate.sql takes
_BETWEEN = ("all_environments", "environment", "metric", "slot", "v0", "v1", "fraction")


def quantile_windows(con, run: str, percentiles: str) -> None:
    """_quantile_windows_mat: the windows around each of the run's percentiles (``percentiles``, the relation
    holding its run_percentiles rows), taken over every value (quantile_windows.sql)."""
    sqlfiles.execute(con, "raw/quantile_windows", fill={"percentiles": percentiles}, run=run, k=WINDOW_VALUES)


def refresh_quantiles(
    con, job: Job, table, tables: dict[str, list[Path]], parts: dict, blocks: set[str], notes: dict
) -> tuple[list[Path], list[Path]]:
    """A "quantiles" table (run_percentiles) and its windows: moved by the values the catch-up removed and
    added (refresh_quantiles.sql), which costs those values; when a percentile left its window (or the state
    has no windows), taken again over every value, as the full derivation takes them. Returns both tables'
    parts."""
    read_final(con, tables)
    if parts.get(WINDOWS):
        view(con, "_qw_old", parts[WINDOWS])
        for name, alias in (
            ("rollout_tails", "_qd_tails"),
            ("turn_latency", "_qd_latency"),
            ("scoring", "_qd_scoring"),
        ):
            fill = {"alias": alias, "scoped": f"_{name}_scoped"}
            # the rows _replace_rows replaced, taken out again
            if touched := [str(p) for p in parts[name] if holds(p, blocks)]:
                sqlfiles.execute(con, "raw/derive/quantile_delta_touched", fill={**fill, "files": touched})
            else:
                sqlfiles.execute(con, "raw/derive/quantile_delta", fill=fill)
        sqlfiles.execute(con, "raw/refresh_quantiles")
        for row in sqlfiles.execute(con, "raw/derive/quantile_between", fetch=sqlfiles.fetchall):
            sqlfiles.execute(con, "raw/derive/quantile_interpolate", **dict(zip(_BETWEEN, row, strict=True)))
        if sqlfiles.execute(
            con, "raw/quantile_results", fetch=sqlfiles.first_row, run=job.run_id, k=WINDOW_VALUES
        )["kept"]:
            notes["quantiles"] = "windows"
            return (
                [write_whole(con, table.name, "_merged", job.staging)],
                [write_whole(con, WINDOWS, "_quantile_windows_mat", job.staging)],
            )
        log.info("run %s: a percentile left its window: taking them over every value", job.run_id)
    notes["quantiles"] = "every value"
    written = rederive(con, job, table, tables)
    quantile_windows(con, job.run_id, "_merged")
    return written, [write_whole(con, WINDOWS, "_quantile_windows_mat", job.staging)]
