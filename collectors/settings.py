"""rollscope's one settings object and every environment variable it reads.

Precedence follows OpenTelemetry's: an explicit argument, then a ``ROLLSCOPE_*`` variable, then the standard
``OTEL_*`` one, then the default. A bad argument raises ``ValueError``; a bad environment value is logged and
falls back, because a typo in a job's environment must not stop the job.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

log = logging.getLogger("rollscope")

# Documented in README.md ("Configuration"); a test keeps the two equal.
ENV = {
    "ROLLSCOPE_STORE": "Store directory (default ./runs).",
    "ROLLSCOPE_RUN_ID": "Run id when attach() is not given one (rl.run.id in OTEL_RESOURCE_ATTRIBUTES also works).",
    "ROLLSCOPE_ROLE": "rl.compute.role of this process: rollout | train | teacher | judge | env.",
    "ROLLSCOPE_DEVICES": "rl.compute.devices: accelerators this process occupies (CPU cores for env).",
    "ROLLSCOPE_SEGMENT_ROWS": "Spans buffered before a segment is published (default 50000).",
    "ROLLSCOPE_SEGMENT_SECONDS": "Longest a finished span waits before it is published (default 2).",
    "ROLLSCOPE_STATS_SECONDS": "How often exporter counters are written to collector_stats (default 10).",
    "ROLLSCOPE_COMPACT": "0 turns off compacting runs in the background while they are written (default 1: on).",
    "ROLLSCOPE_COMPACT_SECONDS": "How often each writing process tries to compact its runs (default 10).",
    "ROLLSCOPE_TOKEN": "Bearer token `rollscope collect` requires (instead of --token, which `ps` shows).",
    "OTEL_SERVICE_NAME": "service.name of this process.",
    "OTEL_RESOURCE_ATTRIBUTES": "Extra resource attributes, key=value,... (may carry rl.run.id).",
    "OTEL_BSP_MAX_QUEUE_SIZE": "Batch span processor queue (rollscope's default 65536, not the SDK's 2048).",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "Spans per export call (rollscope's default 8192).",
    "OTEL_BSP_SCHEDULE_DELAY": "Milliseconds between exports (rollscope's default 500).",
}


def _env_value(names: tuple[str, ...], cast, default):
    for name in names:
        raw = os.environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            return cast(raw)
        except ValueError:
            log.warning("rollscope: ignoring %s=%r (not a valid value); using %r", name, raw, default)
            return default
    return default


def _positive(cast):
    def parse(raw):
        value = cast(raw)
        if value <= 0:
            raise ValueError(raw)
        return value

    return parse


def _switch(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("0", "1", "true", "false", "on", "off", "yes", "no"):
        raise ValueError(raw)
    return value in ("1", "true", "on", "yes")


def _role(raw: str) -> str:
    from rollscope.collectors.semconv import ROLES

    if raw not in ROLES:
        raise ValueError(raw)
    return raw


@dataclass
class Settings:
    """Everything a collector needs; build with :meth:`resolve` so precedence is applied once."""

    store: Path = Path("runs")
    run_id: str | None = None
    role: str = "rollout"
    devices: float = 0.0
    service_name: str | None = None
    segment_rows: int = 50_000
    segment_seconds: float = 2.0
    stats_seconds: float = 10.0
    compact: bool = True
    compact_seconds: float = 10.0
    max_queue_size: int = 65_536
    max_export_batch_size: int = 8_192
    schedule_delay_millis: float = 500.0
    extra: dict = field(default_factory=dict)

    @classmethod
    def resolve(cls, **arguments) -> Settings:
        d = cls()
        env = {
            "store": _env_value(("ROLLSCOPE_STORE",), Path, d.store),
            "run_id": _env_value(("ROLLSCOPE_RUN_ID",), str, d.run_id),
            "role": _env_value(("ROLLSCOPE_ROLE",), _role, d.role),
            "devices": _env_value(("ROLLSCOPE_DEVICES",), float, d.devices),
            "service_name": _env_value(("OTEL_SERVICE_NAME",), str, d.service_name),
            "segment_rows": _env_value(("ROLLSCOPE_SEGMENT_ROWS",), _positive(int), d.segment_rows),
            "segment_seconds": _env_value(
                ("ROLLSCOPE_SEGMENT_SECONDS",), _positive(float), d.segment_seconds
            ),
            "stats_seconds": _env_value(("ROLLSCOPE_STATS_SECONDS",), _positive(float), d.stats_seconds),
            "compact": _env_value(("ROLLSCOPE_COMPACT",), _switch, d.compact),
            "compact_seconds": _env_value(
                ("ROLLSCOPE_COMPACT_SECONDS",), _positive(float), d.compact_seconds
            ),
            "max_queue_size": _env_value(("OTEL_BSP_MAX_QUEUE_SIZE",), _positive(int), d.max_queue_size),
            "max_export_batch_size": _env_value(
                ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE",), _positive(int), d.max_export_batch_size
            ),
            "schedule_delay_millis": _env_value(
                ("OTEL_BSP_SCHEDULE_DELAY",), _positive(float), d.schedule_delay_millis
            ),
        }
        known = {f.name for f in fields(cls)}
        unknown = set(arguments) - known
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        given = {k: v for k, v in arguments.items() if v is not None}
        settings = cls(**{**env, **given})
        settings.validate()
        return settings

    def validate(self) -> None:
        from rollscope.collectors.semconv import ROLES

        self.store = Path(self.store)
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {self.role!r}")
        if self.devices < 0:
            raise ValueError(f"devices must be >= 0, not {self.devices!r}")
        if self.compact_seconds <= 0:
            raise ValueError(f"compact_seconds must be > 0, not {self.compact_seconds!r}")
        self.max_export_batch_size = min(self.max_export_batch_size, self.max_queue_size)


def default_store() -> Path:
    """The store the command line uses when --store is not given."""
    return _env_value(("ROLLSCOPE_STORE",), Path, Settings.store)


def compact_seconds(settings: Settings | None = None) -> float | None:
    """How often a writer compacts its runs in the background, or None when ``ROLLSCOPE_COMPACT=0``."""
    settings = settings or Settings.resolve()
    return settings.compact_seconds if settings.compact else None
