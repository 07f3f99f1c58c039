"""The derived tables, each declared once: what a row is, its key, what invalidates it, how the analyses read it.

A derived table is one ``Table`` below plus the SQL defining its rows: a table macro ``_<name>_src(run)`` (or
the relation ``source`` names) in a file of ``sql/analyses/macros`` (or ``sql/views``). Everything repetitive is
generated from the declarations (``generated``), written by ``make schemas`` (``python -m
rollscope.queries.derived_schemas``) and kept equal to them by ``tests/test_tables.py``:

* ``sql/raw/derived_tables.sql``: the empty typed tables ``_<name>_mat`` a derivation fills,
  ``CREATE TABLE _<name>_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _<name>_src('') LIMIT 0``;
* ``sql/raw/derive_full.sql``: the statement filling each from the spans a derivation reads,
  ``INSERT INTO _<name>_mat SELECT $run, * FROM _<name>_src($run)``, in declaration order (a table reads only
  earlier ones);
* ``sql/raw/derived_views.sql``: the names the analyses read pointed at the derived rows instead of their
  definitions, ``CREATE OR REPLACE MACRO _<name>(run) AS TABLE SELECT * EXCLUDE (run_id) FROM _<name>_mat
  WHERE run_id = run`` (``read_as``, ``views``: a table read by other names or shapes);

then ``sql/raw/derived_schemas.json``, every table's columns and types (``derived_schemas``). The store layer
keeps the tables on disk (``store/derived.py``) without knowing this catalogue: it is told a derivation's tables
and reads them back from each run's manifest. ``docs/store.md`` ("Adding a derived table") walks through one.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from rollscope.queries import sqlfiles

SCOPES = ("rollout", "trace", "step", "run")
REFRESHES = ("whole", "rederive", "merge", "windows", "tail", "quantiles")


@dataclass(frozen=True)
class Table:
    """One derived table: its key, what it is derived from, and how a catch-up brings it up to date."""

    name: str
    key: tuple[str, ...]
    what: str
    # What one row is computed from, which decides how an incremental catch-up refreshes it:
    # "rollout": a rollout's rows from that rollout's spans (and its group's, its step's train step);
    # "trace": a span's row from the spans of its trace (a turn joins its trace's rollout and engine spans);
    # "step": a step's rows from the raw and derived rows of that step alone (its consuming step; NULL, not
    # consumed yet, counts as a step); "run": from the whole run, refreshed as ``refresh`` says.
    scope: str = "run"
    # For scope "run" only: "whole" (the scoped derivation holds every input: train steps, weight syncs),
    # "rederive" (recomputed from the other derived tables, never from raw spans), "merge" (old rows merged
    # with the new spans' by queries/sql/raw/merge_<name>.sql) or "windows" (rows per step window: those from
    # the window holding the new spans on swept again, queries/sql/raw/refresh_<name>.sql) or "tail" (a union
    # of time intervals: its part from the first changed interval on taken again, refresh_<name>.sql); both
    # are kept in blocks of steps like the blocked tables, their rows of no step (or of the whole run) in b=p;
    # or "quantiles" (run_percentiles: exact percentiles read from windows of the values next to each, which
    # the values a catch-up removes and adds move, queries/sql/raw/refresh_quantiles.sql; taken again over
    # every value when one leaves its window). A "run" table without one is derived in full on every catch-up:
    # the safe default for a new table.
    refresh: str | None = None
    # Columns that say which grain of its figure a row holds, for a table that keeps several side by side
    # (per turn index or not, one grouping or another, over every environment or one). A merged part
    # (``queries/parquet_parts.py``'s consolidation) is written sorted by these, then by step, so a query of one grain
    # and step range reads only its row groups: DuckDB skips a row group whose min / max exclude the filter.
    order: tuple[str, ...] = ()
    # The SQL relation the table holds for run $run: a table macro of queries/sql (default ``_<name>_src($run)``),
    # its rows without run_id; or a view of every run (no parentheses) with run_id first, read WHERE run_id = $run.
    source: str = ""
    # The table macro the analyses read it by, ``<read_as>(run)`` (default ``_<name>``; "": none, ``views`` only),
    # pointed at the derived rows by derived_views.sql in place of its definition over raw spans.
    read_as: str | None = None
    # Further views or macros reading the derived rows ("VIEW <name> AS …", "MACRO <name>(run) AS TABLE …").
    views: tuple[str, ...] = ()

    def __post_init__(self):
        if self.scope not in SCOPES or (self.refresh is not None and self.refresh not in REFRESHES):
            raise ValueError(f"{self.name}: scope {self.scope!r}, refresh {self.refresh!r}")
        if not self.source:
            object.__setattr__(self, "source", f"_{self.name}_src($run)")

    @property
    def macro(self) -> bool:
        """Whether ``source`` is a table macro (its rows without run_id), not a view of every run."""
        return "(" in self.source

    @property
    def rows(self) -> str:
        """The query of the table's rows for run $run, run_id first."""
        if self.macro:
            return f"SELECT $run, * FROM {self.source}"
        return f"SELECT * FROM {self.source} WHERE run_id = $run"

    @property
    def row_order(self) -> tuple[str, ...]:
        """The order a merged part's rows are written in: ``order``, then step for a table with one."""
        return (*self.order, "step") if "step" in self.key else self.order

    @property
    def blocked(self) -> bool:
        """Kept as one Parquet part per block of ``BLOCK_STEPS`` consuming steps (and one for step NULL), so a
        catch-up rewrites the blocks of the steps it touched, not the table."""
        return self.scope in ("rollout", "trace", "step")


# Every derived table, in the order they are derived (later ones read earlier ones). Each holds one run
# (column run_id); any new or vanished span segment of the run (other than a compaction's regrouping) makes
# the run's tables out of date, and ``scope`` says which of their rows a new segment can change.
TABLES: tuple[Table, ...] = (
    Table(
        "rollouts",
        ("rollout_id",),
        "one row per rl.rollout span, with its reward",
        "rollout",
        source="_rollouts_src",
        read_as="",
        views=("VIEW rollouts AS SELECT * FROM _rollouts_mat",),
    ),
    Table(
        "train_steps",
        ("trace_id", "span_id"),
        "one row per rl.train_step span",
        "run",
        "whole",
        source="_train_steps_src",
        read_as="",
        views=("VIEW train_steps AS SELECT * FROM _train_steps_mat",),
    ),
    Table(
        "rollout_steps",
        ("rollout_id",),
        "each rollout's consuming step, staleness, train-inference mismatch",
        "rollout",
        read_as="rollout_steps",
    ),
    Table(
        "turns",
        ("trace_id", "span_id"),
        "every generation, with its step",
        "trace",
        read_as="",
        views=(
            "VIEW turns AS SELECT * EXCLUDE (step) FROM _turns_mat",
            "MACRO _turns_stepped(run) AS TABLE SELECT * FROM _turns_mat WHERE run_id = run",
        ),
        source="_turns_stepped_src($run)",
    ),
    Table(
        "rollout_stages", ("rollout_id",), "each rollout's funnel stages", "rollout", read_as="rollout_stages"
    ),
    Table(
        "work",
        ("term", "trace_id", "start_ns"),
        "every piece of work, with step",
        "trace",
        source="_compute_work_src($run)",
        read_as="_compute_work",
        # the work no step has consumed yet: what compute_terms sweeps beside the per-step islands
        views=(
            "MACRO _pending_work(run) AS TABLE SELECT * EXCLUDE (run_id) FROM _work_mat WHERE run_id = run AND step IS NULL",
        ),
    ),
    Table(
        "step_sums",
        ("term", "step", "environment"),
        "FLOPs, span ns per step",
        "step",
        source="_step_sums_src($run, NULL)",
    ),
    Table(
        "step_islands",
        ("term", "instance_id", "step", "environment", "start_ns"),
        "each process's busy islands per step",
        "step",
        source="_step_islands_src($run, NULL)",
        read_as="_busy_intervals",
    ),
    Table(
        "compute_busy",
        ("term", "by_step", "all_environments", "step", "environment", "instance_id"),
        "each process's busy ns per step or run, per environment or over all",
        "run",
        "tail",
        order=("by_step", "all_environments"),
    ),
    Table(
        "rollout_work",
        ("rollout_id",),
        "the work around each rollout",
        "rollout",
        source="_rollout_work_staged($run)",
    ),
    Table(
        "turn_sums",
        ("step", "environment", "turn_index", "policy_version", "drafter_version", "spec_k", "length_bucket"),
        "turn tokens, times, speculative counts per step and key",
        "step",
        source="_turn_sums_src($run, NULL)",
    ),
    # Per-step aggregates (queries/sql/analyses/macros/07_step_aggregates.sql): what every analysis, page, report
    # and check reads, a few rows per step; rollout_tails and turn_latency are narrow per-rollout / per-turn
    # values kept only for exact percentiles (no unique key: one row per value, in step order).
    Table(
        "funnel_sums",
        (
            "step",
            "environment",
            "task",
            "completed",
            "scored",
            "nonzero_signal",
            "fresh",
            "usable",
            "in_groups",
            "lost_at",
            "reason",
        ),
        "rollouts per step, environment, task and funnel outcome",
        scope="step",
    ),
    Table(
        "staleness_sums",
        ("step", "environment", "staleness", "decision", "bound"),
        "rollouts per step, environment, staleness, decision",
        scope="step",
    ),
    Table(
        "rollout_sums",
        ("step", "environment", "known", "usable"),
        "per-rollout work summed per step, environment, usable",
        scope="step",
    ),
    Table(
        "rollout_tails",
        ("step",),
        "each rollout's decoded tokens and seconds, for exact percentiles",
        scope="step",
    ),
    Table("turn_latency", ("step",), "each turn's seconds, for the exact median turn latency", scope="step"),
    Table(
        "prefill_sums",
        ("step", "environment", "turn_index", "per_turn_index"),
        "turn tokens and times per step, environment (and turn index)",
        scope="step",
        order=("per_turn_index",),
    ),
    Table(
        "prefill_split",
        ("step", "environment", "turn_index", "per_turn_index"),
        "prefill split by remedy per step, environment (and turn index)",
        scope="step",
        order=("per_turn_index",),
    ),
    Table(
        "spec_sums",
        (
            "grouped_by",
            "step",
            "environment",
            "spec_k",
            "policy_version",
            "drafter_version",
            "versions_since_refresh",
            "length_bucket",
        ),
        "drafting turns' counts per step, environment, k and one key",
        scope="step",
        order=("grouped_by",),
    ),
    Table(
        "lint_sums",
        ("step", "policy_version", "environment"),
        "turns with the drafter's log-probabilities per group",
        scope="step",
    ),
    Table(
        "generation_sums",
        ("step", "environment"),
        "consumed rollouts' decoded tokens and clipped count per step",
        scope="step",
    ),
    Table(
        "reward_sums",
        ("step", "environment", "reward_name"),
        "reward scores per step, environment and reward function",
        scope="step",
    ),
    # Is it stuck (queries/sql/analyses/macros/08_health.sql): liveness, scoring latency, goodput.
    # Scopes: a process's activity depends on the whole run so far; the rollouts in flight, a scoring call and
    # a rollout's turn seconds on that rollout; goodput is per step window (from a train step's start to the
    # next's), which a new train step changes for the step before it: recomputed whole.
    Table("process_activity", ("instance_id",), "each process's last span", scope="run", refresh="merge"),
    Table("open_rollouts", ("rollout_id",), "rollouts in flight", scope="rollout"),
    # One narrow row per scoring call in step order, like rollout_tails (exact latency percentiles).
    Table("scoring", ("step",), "each scoring call's latency", scope="step"),
    Table(
        "run_percentiles",
        ("all_environments", "environment"),
        "exact percentiles of the run and of each environment (tails, turn latency, scoring latency)",
        scope="run",
        refresh="quantiles",
    ),
    Table("trainer_goodput", ("step",), "the trainer's time per step", scope="run", refresh="whole"),
    Table(
        "rollout_goodput",
        ("step", "instance_id"),
        "each rollout process's time per step, by state",
        scope="run",
        refresh="windows",
    ),
    Table(
        "device_turn_sums",
        ("step", "environment", "instance_id", "staged"),
        "turn nanoseconds per consuming step, environment and rollout process, by use",
        scope="step",
    ),
    # Per step and environment, but a rollout's device-seconds are its share of its process's generating
    # device-seconds over the whole run: scope "run", taken again on every catch-up from the two small tables
    # above (a few rows per step and process), never from per-rollout rows.
    Table(
        "wasted_sums",
        ("step", "environment"),
        "device-seconds on rollouts never used, per step and environment",
        scope="run",
        refresh="rederive",
    ),
    # Is it learning, and the advisor (queries/sql/analyses/macros/09_learning.sql): per step like the aggregates
    # above. Groups are judged over the whole run, as funnel_sums' nonzero_signal is; a catch-up's scope holds
    # every member of a scoped rollout's group, and a member consumed at a step outside the scope brings that
    # step in (queries/sql/raw/scope.sql), so replacing the scoped steps' rows keeps them exact.
    Table(
        "reward_counts",
        ("step", "environment", "task", "reward"),
        "scored rollouts per step, environment, task and reward value",
        scope="step",
    ),
    Table(
        "reward_steps",
        ("step", "all_environments", "environment"),
        "scored rollouts and their exact reward percentiles per step, over all environments and per environment",
        scope="step",
        order=("all_environments",),
    ),
    Table(
        "zero_signal_sums",
        ("step", "environment", "task", "group_id", "kind"),
        "rollouts lost for no signal per step, environment, task, group and its kind",
        scope="step",
    ),
    Table(
        "mismatch_sums",
        ("step", "environment"),
        "train-inference mismatch counts, sums and maxima per step and environment",
        scope="step",
    ),
    Table(
        "staleness_timing",
        ("step", "all_environments", "environment"),
        "staleness in flight and queued per step, over all environments and per environment",
        scope="step",
        order=("all_environments",),
    ),
    Table(
        "stale_bias_sums",
        ("step", "environment", "kept", "reward"),
        "kept and stale-dropped rollouts per step, environment and reward",
        scope="step",
    ),
    Table(
        "advice_group_sums",
        ("step", "group_id"),
        "each group's members per outcome per step, for the advisor",
        scope="step",
    ),
    Table(
        "judge_sums",
        ("step", "environment", "judge_failed"),
        "judge calls and seconds on completed rollouts per step",
        scope="step",
    ),
    Table(
        "advice_spec_sums",
        (
            "step",
            "environment",
            "spec_k",
            "length_bucket",
            "drafter_version",
            "drafter_policy_version",
            "since",
        ),
        "fully drafting turn groups' sums per step and key, for the advisor",
        scope="step",
    ),
    # What the transcripts show went wrong (queries/sql/analyses/macros/11_transcript_flags.sql): the only tables
    # derived from message text (the run's messages, Job.messages), beside its tool spans.
    Table(
        "rollout_flags",
        ("rollout_id",),
        "each rollout's replies cut at the limit, looping, its missing answer and failed tool calls",
        scope="rollout",
    ),
    Table(
        "flag_sums",
        ("step", "environment"),
        "rollouts with each transcript flag per step and environment",
        scope="step",
    ),
)

TABLE_NAMES = tuple(t.name for t in TABLES)
FILLS = re.compile(r"INSERT INTO _(\w+)_mat\b")  # the table a derive_full.sql statement fills
BY_NAME = {t.name: t for t in TABLES}


# --- the generated SQL --------------------------------------------------------------------------------------

_HEADER = (
    "-- Generated from queries/tables.py by `make schemas`: edit the declarations there, not this file.\n"
)


def create_statement(table: Table) -> str:
    """The empty table ``_<name>_mat``, typed by binding its definition."""
    if not table.macro:
        return f"CREATE TABLE _{table.name}_mat AS SELECT * FROM {table.source} LIMIT 0;"
    empty = table.source.replace("$run", "''")
    return f"CREATE TABLE _{table.name}_mat AS SELECT NULL::VARCHAR AS run_id, * FROM {empty} LIMIT 0;"


def fill_statement(table: Table) -> str:
    """The statement filling ``_<name>_mat`` with run $run's rows from the spans the derivation reads."""
    return f"INSERT INTO _{table.name}_mat {table.rows};"


def view_statements(table: Table) -> list[str]:
    """The analyses' names for the table, pointed at its derived rows."""
    read_as = f"_{table.name}" if table.read_as is None else table.read_as
    views = (
        [
            f"CREATE OR REPLACE MACRO {read_as}(run) AS TABLE\n"
            f"    SELECT * EXCLUDE (run_id) FROM _{table.name}_mat WHERE run_id = run;"
        ]
        if read_as
        else []
    )
    return views + [f"CREATE OR REPLACE {view};" for view in table.views]


GENERATED = {
    "raw/derived_tables": (
        "-- The derived tables, empty, typed by their definitions in queries/sql/views and queries/sql/analyses/macros.\n"
        "-- A derivation fills them (derive_full.sql) and writes them to the store as Parquet; a reader keeps these\n"
        "-- empty ones for runs with no derived state.\n",
        create_statement,
    ),
    "raw/derive_full": (
        "-- Derive one run's tables from the spans raw_spans holds (every span of the run, or a scope of them), into\n"
        "-- the empty tables of derived_tables.sql, in declaration order: a table reads only earlier ones.\n",
        fill_statement,
    ),
    "raw/derived_views": (
        "-- What the analyses read, pointed at the derived tables _<table>_mat (a reader's views over the store's\n"
        "-- derived Parquet files, or while deriving, the tables being filled) instead of their definitions.\n",
        lambda table: "\n".join(view_statements(table)),
    ),
}


def markdown(tables: tuple[Table, ...] = TABLES) -> str:
    """docs/store.md's table of the derived tables, from their declarations (``tests/test_docs.py`` keeps the
    doc equal to it; ``python -m tests.test_docs tables`` prints it)."""
    lines = [
        "| table | key | scope (refresh) | what it holds | definition | read as |",
        "|---|---|---|---|---|---|",
    ]
    for t in tables:
        scope = t.scope if t.refresh is None else f"{t.scope} ({t.refresh})"
        lines.append(
            f"| `{t.name}` | {', '.join(t.key)} | {scope} | {t.what} | `{t.source.replace('$run', 'run')}` "
            f"| {_read_names(t)} |"
        )
    return "\n".join(lines) + "\n"


def _read_names(table: Table) -> str:
    """The names the analyses read a table by: its macro (``read_as``) and its further views and macros."""
    read_as = f"_{table.name}" if table.read_as is None else table.read_as
    names = [f"macro `{read_as}`"] if read_as else []
    for view in table.views:
        kind, name = re.match(r"(VIEW|MACRO) (\w+)", view).groups()
        names.append(f"{kind.lower()} `{name}`")
    return ", ".join(names)


def generated(tables: tuple[Table, ...] = TABLES) -> dict[str, str]:
    """Each generated file's text (by ``sqlfiles`` name) for ``tables``."""
    return {
        name: _HEADER + intro + "".join(f"{each(t)}\n" for t in tables)
        for name, (intro, each) in GENERATED.items()
    }


def stale() -> list[str]:
    """The generated files whose text differs from what the declarations generate."""
    return [name for name, text in generated().items() if _read(name) != text]


def _read(name: str) -> str | None:
    path = sqlfiles.SQL_DIR / f"{name}.sql"
    return path.read_text() if path.is_file() else None


def write() -> list[str]:
    """Write the generated files that changed; returns their names."""
    changed = stale()
    for name, text in generated().items():
        if name in changed:
            (sqlfiles.SQL_DIR / f"{name}.sql").write_text(text)
    sqlfiles.load.cache_clear()
    sqlfiles.statements.cache_clear()
    return changed


if __name__ == "__main__":
    for name in write():
        print(f"wrote {name}.sql", file=sys.stderr)
