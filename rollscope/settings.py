"""rollscope's one settings object and every environment variable it reads.

Precedence follows OpenTelemetry's: an explicit argument, then a ``ROLLSCOPE_*`` variable, then the standard
``OTEL_*`` one, then the default. A bad argument raises ``ValueError``; a bad environment value is logged and
falls back, because a typo in a job's environment must not stop the job.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass, fields
from pathlib import Path

from rollscope import semconv

log = logging.getLogger("rollscope")

# Documented in docs/configuration.md; tests/test_docs.py keeps the two equal.
ENV = {
    "ROLLSCOPE_STORE": "Store directory (default ./runs).",
    "ROLLSCOPE_RUN_ID": "Run id when attach() is not given one (rl.run.id in OTEL_RESOURCE_ATTRIBUTES also works).",
    "ROLLSCOPE_ROLE": "rl.compute.role of this process: rollout | train | teacher | judge | env.",
    "ROLLSCOPE_DEVICES": "rl.compute.devices: accelerators this process occupies (CPU cores for env).",
    "ROLLSCOPE_SEGMENT_ROWS": "Spans buffered before a segment is published (default 50000).",
    "ROLLSCOPE_SEGMENT_SECONDS": "Longest a finished span waits before it is published (default 2).",
    "ROLLSCOPE_STATS_SECONDS": "How often exporter counters are written to collector_stats (default 10).",
    "ROLLSCOPE_COMPACT": "0 turns off compacting runs while they are written, and a reader's merging of a run's many small segments before deriving it (default 1: on).",
    "ROLLSCOPE_COMPACT_SECONDS": "How often each writing process tries to compact its runs (default 10).",
    "ROLLSCOPE_TOKEN": "Bearer token `rollscope collect` requires (instead of --token, which `ps` shows).",
    "ROLLSCOPE_DERIVE_MEMORY": "Memory a run's derivation holds before spilling to disk: 8GB, 512MiB, or a "
    "share of RAM like 25% (default 25%).",
    "ROLLSCOPE_DERIVE_THREADS": "Cores a run's derivation uses at once (default: every core).",
    "ROLLSCOPE_BLOCK_STEPS": "Consuming steps per part of a derived table on disk (default 32; docs/store.md).",
    "ROLLSCOPE_CACHE": "Where derived tables go when the store is not writable, the readers' schema files and the "
    "definitions derivations and readers copy in "
    "(default $XDG_CACHE_HOME/rollscope, else ~/.cache/rollscope).",
    "ROLLSCOPE_NOTIFY_URL": "Webhook `rollscope watch` posts to without --notify (keeps a Slack URL out of `ps`).",
    "ROLLSCOPE_NOTIFY_TOKEN": "Bearer token `rollscope watch` sends its webhook (never on the command line).",
    "ROLLSCOPE_CAPTURE_CONTENT": "0 keeps transcripts out of the store: no message content is written anywhere "
    "(default 1: on; see docs/store.md).",
    "ROLLSCOPE_CONTENT_MAX_CHARS": "Longest text kept per message; longer ones keep head and tail (default 32768).",
    "ROLLSCOPE_CONTENT_SAMPLE": "Share of groups whose transcripts are kept; failed and unscored rollouts are "
    "kept regardless (default 1: all).",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "OpenTelemetry GenAI's content switch, read when "
    "ROLLSCOPE_CAPTURE_CONTENT is unset: false or NO_CONTENT turns capture off.",
    "OTEL_SERVICE_NAME": "service.name of this process.",
    "OTEL_RESOURCE_ATTRIBUTES": "Extra resource attributes, key=value,... (may carry rl.run.id).",
    "OTEL_BSP_MAX_QUEUE_SIZE": "Batch span processor queue (rollscope's default 65536, not the SDK's 2048).",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "Spans per export call (rollscope's default 8192).",
    "OTEL_BSP_SCHEDULE_DELAY": "Milliseconds between exports (rollscope's default 500).",
}
# Variables other programs own and parse, which rollscope only looks at (so they have no row above).
FOREIGN = {
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "the SDK's extra resource detectors: attach() runs them at every call "
    "rather than keep what they found",
    "RAY_AUTH_TOKEN": "Ray's token: `rollscope derive --ray` checks this process has one before it asks a "
    "cluster that wants one",
    "RAY_AUTH_TOKEN_PATH": "the file Ray reads its token from (else ~/.ray/auth_token)",
    "XDG_CACHE_HOME": "the user's cache directory, where ROLLSCOPE_CACHE points by default",
}


# Variables whose value may be a secret (a webhook's address holds its key): a warning names them, never their value.
SECRET = frozenset({"ROLLSCOPE_TOKEN", "ROLLSCOPE_NOTIFY_URL", "ROLLSCOPE_NOTIFY_TOKEN"})


def _env_value(name: str, parse, default, *, quiet: bool = False, repair=None):
    """``parse(os.environ[name])``; unset or empty gives ``default``, and so does any bad value, with a
    warning (unless ``quiet``: a second read of the same variable), or what ``repair`` makes of it: whatever
    a job's environment holds, the job keeps running."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except (ValueError, TypeError, OverflowError) as e:
        fixed = repair(raw.strip()) if repair else None
        given = name if name in SECRET else f"{name}={raw!r}"
        if fixed is not None:
            log.warning("rollscope: %s is not valid (%s); using %r instead", given, e, fixed)
            return fixed
        if not quiet:
            log.warning("rollscope: ignoring %s (%s); using %r", given, e, default)
        return default


def _number(cast, low: float, high: float, *, low_inclusive: bool = False):
    """A parser for a finite number in (low, high] (or [low, high]): nothing else reaches a collector."""

    def parse(value):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError(f"expected a number, not {type(value).__name__}")
        number = cast(float(value)) if cast is int and isinstance(value, float) else cast(value)
        if cast is int and isinstance(value, float) and number != value:
            raise ValueError(f"expected a whole number, not {value!r}")
        if not math.isfinite(number):
            raise ValueError(f"expected a finite number, not {value!r}")
        above = number >= low if low_inclusive else number > low
        if not above or number > high:
            bracket = "[" if low_inclusive else "("
            raise ValueError(f"expected a number in {bracket}{low:g}, {high:g}], not {value!r}")
        return number

    return parse


def _switch(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("0", "1", "true", "false", "on", "off", "yes", "no"):
        raise ValueError(f"expected 0/1, true/false, on/off or yes/no, not {value!r}")
    return text in ("1", "true", "on", "yes")


def _genai_capture(value) -> bool:
    """OpenTelemetry GenAI's capture variable: true/false, or its newer NO_CONTENT | SPAN_ONLY | EVENT_ONLY |
    SPAN_AND_EVENT (any but NO_CONTENT captures)."""
    text = str(value).strip().upper()
    if text in ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"):
        return text != "NO_CONTENT"
    return _switch(value)


def _role(value) -> str:
    from rollscope.semconv import ROLES

    if value not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {value!r}")
    return value


# Run ids become directory names (store/layout.py's partitions), so only a safe alphabet is accepted.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """``run_id`` when it is in the run-id alphabet, else ``ValueError`` saying what is."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        raise ValueError(
            f"invalid run id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return run_id


def safe_run_id(text: str) -> str:
    """``text`` reduced to the run-id alphabet (letters, digits, '.', '_', '-'; at most 128 characters)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", text).lstrip("._-")[:128].rstrip("-")
    return safe or f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


# The share of the machine's memory a derivation holds before it spills to disk, unless ROLLSCOPE_DERIVE_MEMORY
# says otherwise: a dashboard or a report on a workstation leaves the rest to the user's own work.
DERIVE_MEMORY_SHARE = 0.25
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30})


def machine_memory() -> int:
    """The memory this process may use, in bytes: the machine's, or its container's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def _memory(value) -> int:
    """Bytes from ``8GB``, ``512MiB``, ``1.5g``, a whole number of bytes or a share of memory like ``25%``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"expected a size, not {type(value).__name__}")
    text = str(value).strip().lower().replace(" ", "")
    if text.endswith("%"):
        share = _number(float, 0, 100)(text[:-1])
        return int(machine_memory() * share / 100)
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-z]*)", text)
    if match is None or match[2] not in _UNITS:
        raise ValueError(f"expected a size like 8GB, 512MiB or 25%, not {value!r}")
    size = int(float(match[1]) * _UNITS[match[2]])
    if not 64 * 2**20 <= size <= 2**50:
        raise ValueError(f"expected 64MiB to 1PiB, not {value!r}")
    return size


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, not {type(value).__name__}")
    return value


def _url(value) -> str:
    """An http(s) URL with a host: where an alert can be posted."""
    text = _text(value).strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.split("/", 1)[0]:
        raise ValueError("expected an http:// or https:// URL")
    return text


def _path(value) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"expected a directory, not {type(value).__name__}")
    path = Path(value)
    if any(len(os.fsencode(part)) > 255 for part in path.parts):
        raise ValueError("a name in that path is longer than 255 bytes")
    if path.exists() and not path.is_dir():
        raise ValueError("that is a file, not a directory")
    return path


# field: (its environment variable, its parser). The same parser checks an argument (which raises) and an
# environment value (which is logged and falls back), so every consumer of Settings gets a valid value.
FIELDS = {
    "store": ("ROLLSCOPE_STORE", _path),
    "run_id": ("ROLLSCOPE_RUN_ID", check_run_id),
    "role": ("ROLLSCOPE_ROLE", _role),
    "devices": ("ROLLSCOPE_DEVICES", _number(float, 0, 1_000_000, low_inclusive=True)),
    "service_name": ("OTEL_SERVICE_NAME", _text),
    "segment_rows": ("ROLLSCOPE_SEGMENT_ROWS", _number(int, 0, 10_000_000)),
    "segment_seconds": ("ROLLSCOPE_SEGMENT_SECONDS", _number(float, 0, 86_400)),
    "stats_seconds": ("ROLLSCOPE_STATS_SECONDS", _number(float, 0, 86_400)),
    "compact": ("ROLLSCOPE_COMPACT", _switch),
    "compact_seconds": ("ROLLSCOPE_COMPACT_SECONDS", _number(float, 0, 86_400)),
    "max_queue_size": ("OTEL_BSP_MAX_QUEUE_SIZE", _number(int, 0, 4_194_304)),
    "max_export_batch_size": ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", _number(int, 0, 4_194_304)),
    "schedule_delay_millis": ("OTEL_BSP_SCHEDULE_DELAY", _number(float, 0, 3_600_000)),
    "token": ("ROLLSCOPE_TOKEN", _text),
    "derive_memory": ("ROLLSCOPE_DERIVE_MEMORY", _memory),
    "derive_threads": ("ROLLSCOPE_DERIVE_THREADS", _number(int, 0, 4096)),
    "block_steps": ("ROLLSCOPE_BLOCK_STEPS", _number(int, 0, 1_000_000)),
    "cache": ("ROLLSCOPE_CACHE", _path),
    "notify_url": ("ROLLSCOPE_NOTIFY_URL", _url),
    "notify_token": ("ROLLSCOPE_NOTIFY_TOKEN", _text),
    "capture_content": ("ROLLSCOPE_CAPTURE_CONTENT", _switch),
    "content_max_chars": ("ROLLSCOPE_CONTENT_MAX_CHARS", _number(int, 63, 1 << 30)),
    "content_sample": ("ROLLSCOPE_CONTENT_SAMPLE", _number(float, 0, 1, low_inclusive=True)),
}
# Standard variables read for a field whose own variable is unset (OpenTelemetry's precedence: ours, then theirs).
FALLBACKS = {"capture_content": (semconv.GENAI_CAPTURE_CONTENT, _genai_capture)}
# Fields whose bad environment value is made good rather than ignored: a run id with a stray character still
# names the run the job meant (each run of other characters becomes '-'), where ignoring it would send the
# job's spans to another run, or stop it for want of one.
REPAIRS = {"run_id": safe_run_id}


@dataclass
class Settings:
    """Everything a collector needs; build with :meth:`resolve` so precedence is applied once.

    Bounds (a value outside them is an error as an argument, and ignored with a warning from the environment):
    devices 0-1,000,000; segment_rows 1-10,000,000; segment_seconds, stats_seconds and compact_seconds above 0 and at most a
    day; max_queue_size and max_export_batch_size 1-4,194,304; schedule_delay_millis above 0 and at most an
    hour; content_max_chars 64 to 2^30; content_sample 0-1; derive_memory 64 MiB to 1 PiB (a size, ``8GB``,
    or a share of memory, ``25%``; default ``DERIVE_MEMORY_SHARE`` of ``machine_memory()``); derive_threads
    1-4,096 (default: every core); block_steps 1-1,000,000. Numbers must be finite.
    """

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
    token: str | None = None  # the bearer token `rollscope collect` requires
    # What a run's derivation (queries/derive.py) may use: DuckDB's memory limit in bytes, beyond which it
    # spills to disk, and the cores it runs on. None: a share of the machine's memory, and every core.
    derive_memory: int | None = None
    derive_threads: int | None = None
    block_steps: int = 32  # consuming steps per part of a blocked derived table (store/derived.py)
    cache: Path | None = None  # derived tables of a store this user may not write: cache_dir() when None
    notify_url: str | None = None  # the webhook `rollscope watch` posts alerts to
    notify_token: str | None = None  # the bearer token it sends there
    # Transcripts (docs/store.md). On by default: the content is the run's own training data, which the trainer
    # holds anyway and RL frameworks dump by default (verl's rollout_data_dir, prime-rl's traces), and a run
    # whose transcripts were not kept cannot be looked at afterwards; capped per message, so one huge tool
    # output costs a bounded amount.
    capture_content: bool = True
    content_max_chars: int = 32_768
    content_sample: float = 1.0

    @classmethod
    def resolve(cls, **arguments) -> Settings:
        known = {f.name for f in fields(cls)}
        unknown = set(arguments) - known
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        env = {name: environment(name) for name in FIELDS}
        for name, (var, parse) in FALLBACKS.items():
            ours = FIELDS[name][0]
            if _env_value(ours, FIELDS[name][1], None, quiet=True) is None:  # unset or bad: theirs decides
                env[name] = _env_value(var, parse, env[name])
        given = {k: v for k, v in arguments.items() if v is not None}
        for name, value in given.items():
            if name in FIELDS:
                try:
                    given[name] = FIELDS[name][1](value)
                except (ValueError, TypeError, OverflowError) as e:
                    raise ValueError(f"{name}: {e}") from e
        settings = cls(**{**env, **given})
        settings.validate()
        return settings

    def validate(self) -> None:
        self.store = Path(self.store)
        self.role = _role(self.role)
        self.max_export_batch_size = min(self.max_export_batch_size, self.max_queue_size)

    @property
    def derive_memory_bytes(self) -> int:
        """DuckDB's memory limit for a derivation: ``derive_memory``, else a share of the machine's."""
        return self.derive_memory or int(machine_memory() * DERIVE_MEMORY_SHARE)

    @property
    def derive_cores(self) -> int:
        """The cores a derivation runs on: ``derive_threads``, else every core this process may use."""
        return self.derive_threads or len(os.sched_getaffinity(0))


def environment(name: str):
    """One field's value from its environment variable alone (its default when unset, or bad: logged), for a
    reader that needs one setting, not a Settings (a module's constant, a directory looked up per call)."""
    var, parse = FIELDS[name]
    return _env_value(var, parse, getattr(Settings, name), repair=REPAIRS.get(name))


def cache_dir() -> Path:
    """The per-user cache directory: ``$ROLLSCOPE_CACHE``, else ``$XDG_CACHE_HOME/rollscope``, else
    ``~/.cache/rollscope``."""
    return environment("cache") or Path(consulted("XDG_CACHE_HOME") or Path.home() / ".cache") / "rollscope"


def consulted(name: str) -> str:
    """A variable's text as the environment holds it ('' when unset), for one that another program parses:
    one of ``FOREIGN``, or one of ``ENV`` the SDK reads itself (``OTEL_RESOURCE_ATTRIBUTES``)."""
    if name not in FOREIGN and name not in ENV:
        raise KeyError(f"{name} is not a variable rollscope reads: give it a row in ENV or FOREIGN")
    return os.environ.get(name, "")


def default_store() -> Path:
    """The store the command line uses when --store is not given."""
    return env_store() or Settings.store


def env_store() -> Path | None:
    """``$ROLLSCOPE_STORE`` when set to a usable directory name, else None."""
    return _env_value("ROLLSCOPE_STORE", _path, None)


def compact_seconds(settings: Settings | None = None) -> float | None:
    """How often a writer compacts its runs in the background, or None when ``ROLLSCOPE_COMPACT=0``."""
    settings = settings or Settings.resolve()
    return settings.compact_seconds if settings.compact else None
