"""Configuration precedence: argument, then ROLLSCOPE_* / OTEL_* variables, then the default."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rollscope import settings
from rollscope.settings import ENV, Settings
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("env", "arguments", "expected"),
    [
        ({}, {}, {"store": Path("runs"), "role": "rollout", "devices": 0.0, "max_queue_size": 65_536}),
        (
            {"ROLLSCOPE_STORE": "/data/rs", "ROLLSCOPE_ROLE": "train"},
            {},
            {"store": Path("/data/rs"), "role": "train"},
        ),
        ({"ROLLSCOPE_ROLE": "train"}, {"role": "judge"}, {"role": "judge"}),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "4096"}, {}, {"max_queue_size": 4096}),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "lots"}, {}, {"max_queue_size": 65_536}),  # bad env: logged, default
        ({"ROLLSCOPE_ROLE": "chef"}, {}, {"role": "rollout"}),
        ({"ROLLSCOPE_DEVICES": "-3"}, {"devices": 4}, {"devices": 4}),
        ({"OTEL_SERVICE_NAME": "trainer-0"}, {}, {"service_name": "trainer-0"}),
        ({"ROLLSCOPE_BLOCK_STEPS": "4"}, {}, {"block_steps": 4}),
        ({"ROLLSCOPE_BLOCK_STEPS": "0"}, {}, {"block_steps": 32}),
        ({"ROLLSCOPE_CACHE": "/scratch/rs"}, {}, {"cache": Path("/scratch/rs")}),
        ({"ROLLSCOPE_RUN_ID": "exp 7"}, {}, {"run_id": "exp-7"}),  # made safe, not ignored
    ],
)
def test_precedence(monkeypatch, env, arguments, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings.resolve(**arguments)
    assert {k: getattr(settings, k) for k in expected} == expected


@pytest.mark.parametrize("arguments", [{"role": "chef"}, {"devices": -1}, {"colour": "red"}])
def test_a_bad_argument_raises(arguments):
    with pytest.raises(ValueError):
        Settings.resolve(**arguments)


def test_attach_reads_the_run_id_from_otel_resource_attributes(monkeypatch, tmp_path):
    from rollscope.collectors import attach

    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "rl.run.id=from-env,deployment.environment=prod")
    rl = attach(store=tmp_path, set_global=False)
    try:
        assert rl.run_id == "from-env"
    finally:
        rl.shutdown()


# --- every variable rollscope reads, set to anything: the job keeps running and a bad value is logged ---------

ANY_VALUE = ["-3", "0", "1.5", "abc", "nan", "inf", "1e400", "99999999999999999999", "", "   ", "x" * 300]

# Values each variable accepts; every other non-blank value is logged and ignored.
ACCEPTED = {
    "ROLLSCOPE_STORE": {"-3", "0", "1.5", "abc", "nan", "inf", "1e400", "99999999999999999999"},
    "ROLLSCOPE_RUN_ID": {"0", "1.5", "abc", "nan", "inf", "1e400", "99999999999999999999"},
    "ROLLSCOPE_ROLE": set(),
    "ROLLSCOPE_DEVICES": {"0", "1.5"},
    "ROLLSCOPE_SEGMENT_ROWS": set(),
    "ROLLSCOPE_SEGMENT_SECONDS": {"1.5"},
    "ROLLSCOPE_STATS_SECONDS": {"1.5"},
    "ROLLSCOPE_COMPACT": {"0"},
    "ROLLSCOPE_COMPACT_SECONDS": {"1.5"},
    "ROLLSCOPE_DERIVE_MEMORY": set(),
    "ROLLSCOPE_DERIVE_THREADS": set(),
    "OTEL_SERVICE_NAME": set(ANY_VALUE),
    "OTEL_BSP_MAX_QUEUE_SIZE": set(),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": set(),
    "OTEL_BSP_SCHEDULE_DELAY": {"1.5"},
    "ROLLSCOPE_NOTIFY_URL": set(),  # only an http(s) URL
    "ROLLSCOPE_NOTIFY_TOKEN": set(ANY_VALUE),
}
RESOURCE_VALUES = [
    "abc",
    "=,=",
    "rl.run.id=../../etc",
    "rl.run.id=",
    "rl.staleness.bound=abc,rl.model.parameters=-3",
    "rl.compute.devices=-3,rl.compute.role=chef",
    "rl.staleness.bound=1e400",
]


def _job(
    tmp_path, monkeypatch, name: str, value: str, resource="rl.run.id=fallback"
) -> tuple[int, list[str]]:
    """Run a small job in ``tmp_path`` with ``name=value``; the spans it stored and rollscope's warnings."""
    import logging

    import pyarrow.parquet as pq

    from rollscope.collectors import attach

    monkeypatch.chdir(tmp_path)
    for other in ENV:
        monkeypatch.delenv(other, raising=False)
    if resource:
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", resource)
    monkeypatch.setenv(name, value)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("rollscope")
    logger.addHandler(handler)
    try:
        rl = attach(run_id=None if "RUN_ID" in name else "job", set_global=False, staleness_bound=2)
        try:
            for i in range(3):
                with rl.rollout(task_id=f"t-{i}", environment="swe"), rl.turn(0, output_tokens=5):
                    pass
            assert rl.force_flush()
        finally:
            rl.shutdown()
    finally:
        logger.removeHandler(handler)
    stored = sum(pq.read_metadata(p).num_rows for p in tmp_path.rglob("spans/run_id=*/*.parquet"))
    warnings = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    return stored, warnings


@pytest.mark.parametrize("value", ANY_VALUE, ids=lambda v: repr(v[:12]))
@pytest.mark.parametrize("name", list(ACCEPTED))
def test_any_value_of_a_variable_leaves_the_job_running(tmp_path, monkeypatch, name, value):
    stored, warnings = _job(tmp_path, monkeypatch, name, value)
    assert stored == 6  # three rollouts of one turn each
    bad = value.strip() != "" and value not in ACCEPTED[name]
    assert any(name in w for w in warnings) == bad, warnings


def test_a_bad_webhook_address_in_the_environment_is_warned_about_without_repeating_it(tmp_path, monkeypatch):
    # a Slack webhook's address is its key: a mistyped one must not land in a job's logs
    secret = "hooks.slack.com/services/T000/B000/XXXXSECRET"
    stored, warnings = _job(tmp_path, monkeypatch, "ROLLSCOPE_NOTIFY_URL", secret)
    assert stored == 6
    assert any("ROLLSCOPE_NOTIFY_URL" in w for w in warnings) and not any("XXXXSECRET" in w for w in warnings)


@pytest.mark.parametrize("value", RESOURCE_VALUES)
def test_any_resource_attributes_leave_the_job_running(tmp_path, monkeypatch, value):
    stored, _ = _job(tmp_path, monkeypatch, "OTEL_RESOURCE_ATTRIBUTES", value)
    assert stored == 6


@pytest.mark.parametrize("resource", [None, "rl.run.id=other"])  # ROLLSCOPE_* wins over OTEL_*, as always
def test_a_malformed_run_id_from_the_environment_is_made_safe(tmp_path, monkeypatch, resource):
    import re

    stored, warnings = _job(tmp_path, monkeypatch, "ROLLSCOPE_RUN_ID", "exp 7/../a", resource=resource)
    assert stored == 6
    assert [p.name for p in (tmp_path / "runs" / "spans").iterdir()] == ["run_id=exp-7-..-a"]
    assert (
        [w for w in warnings if "ROLLSCOPE_RUN_ID" in w]
        == [w for w in warnings if re.search("ROLLSCOPE_RUN_ID.*exp-7-..-a", w)]
        != []
    ), warnings


def test_a_store_path_that_is_a_file_falls_back(tmp_path, monkeypatch):
    (tmp_path / "not-a-dir").write_text("")
    stored, warnings = _job(tmp_path, monkeypatch, "ROLLSCOPE_STORE", str(tmp_path / "not-a-dir"))
    assert stored == 6 and (tmp_path / "runs" / "spans").is_dir()
    assert any("ROLLSCOPE_STORE" in w for w in warnings)


@pytest.mark.parametrize(
    "arguments",
    [
        {"devices": float("nan")},
        {"segment_seconds": float("inf")},
        {"segment_rows": 0},
        {"max_queue_size": "x"},
    ],
)
def test_a_bad_argument_raises_a_clear_error(arguments):
    with pytest.raises(ValueError, match=next(iter(arguments))):
        Settings.resolve(**arguments)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("8GB", 8 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5g", int(1.5 * 2**30)),
        ("10%", None),  # a tenth of machine_memory()
        ("", None),
        ("lots", None),
        ("12KB", None),
    ],
)
def test_a_derivations_memory_is_a_size_or_a_share_of_the_machines(monkeypatch, value, expected):
    """ROLLSCOPE_DERIVE_MEMORY: a size or a share of the machine's memory; unset or bad (logged), a quarter of
    it; the limit DuckDB's derivation database gets (queries/derive_db.py)."""
    from rollscope.queries import derive_db, derived_schemas
    from rollscope.settings import DERIVE_MEMORY_SHARE, machine_memory

    monkeypatch.setenv("ROLLSCOPE_DERIVE_MEMORY", value)
    if expected is None:
        share = 0.10 if value == "10%" else DERIVE_MEMORY_SHARE
        expected = int(machine_memory() * share)
    assert Settings.resolve().derive_memory_bytes == expected
    schemas = derived_schemas.shipped()  # as a derivation opens it
    with tempfile.TemporaryDirectory() as staging, derive_db.connection(Path(staging), schemas) as con:
        (limit,) = con.execute("SELECT current_setting('memory_limit')").fetchone()
    assert limit.endswith("iB") and abs(_bytes(limit) - expected) <= expected // 20, (
        limit
    )  # DuckDB shows it rounded


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_a_bad_block_size_in_the_environment_is_logged_and_ignored_at_import():
    """store/derived.py reads ROLLSCOPE_BLOCK_STEPS once, at import: a bad value must not stop the import (a job
    imports the store through attach())."""
    code = "from rollscope.store import derived; print(derived.BLOCK_STEPS)"
    for value, expected in (("4", "4"), ("abc", "32"), ("-1", "32")):
        env = {**os.environ, "ROLLSCOPE_BLOCK_STEPS": value}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout.strip()) == (0, expected), done.stderr
        assert ("ROLLSCOPE_BLOCK_STEPS" in done.stderr) == (expected == "32"), done.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"ROLLSCOPE_CACHE": "/scratch/rs", "XDG_CACHE_HOME": "/xdg"}, Path("/scratch/rs")),
        ({"XDG_CACHE_HOME": "/xdg"}, Path("/xdg/rollscope")),
        ({}, Path.home() / ".cache" / "rollscope"),
    ],
)
def test_the_cache_directory_follows_rollscope_cache_then_xdg(monkeypatch, env, expected):
    for name in ("ROLLSCOPE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert settings.cache_dir() == expected


def test_a_variable_read_must_be_declared():
    with pytest.raises(KeyError, match="ROLLSCOPE_COLOUR"):
        settings.consulted("ROLLSCOPE_COLOUR")


def _environment_reads(path: Path) -> list[int]:
    """Lines that read a variable (``os.environ.get``, ``os.environ[...]``, ``in os.environ``, ``os.getenv``).
    Copying the whole environment for a child process (``{**os.environ}``, ``os.environ.items()``) or setting
    a variable is not a read of one."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if (
            call
            and node.func.attr == "getenv"
            or call
            and node.func.attr == "get"
            and _is_environ(node.func.value)
            or isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_environ(node.value)
            or isinstance(node, ast.Compare)
            and any(_is_environ(c) for c in node.comparators)
        ):
            lines.append(node.lineno)
    return lines


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def test_only_settings_reads_the_environment():
    """Every variable is read in rollscope/settings.py, where it is documented (ENV, FOREIGN) and a bad value
    is logged and ignored, never raised; tests may set and read what they like."""
    folders = ("rollscope", "store", "collectors", "simulator", "queries", "app", "benchmarks")
    reads = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "rollscope" / "settings.py"
        for line in _environment_reads(path)
    ]
    assert reads == [], "read these through rollscope.settings (Settings, environment(), consulted())"
    assert _environment_reads(ROOT / "rollscope" / "settings.py")  # the check finds what it looks for
