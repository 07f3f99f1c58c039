"""A one-line progress bar on stderr: no dependency, redrawn at most a few times a second."""

from __future__ import annotations

import sys
import time


class Progress:
    """``total`` is an estimate until :meth:`settle` fixes it; the bar never shows more done than total."""

    def __init__(self, total: int, label: str, stream=None, enabled: bool = True):
        self.total = max(1, total)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = time.monotonic()
        self._drawn = 0.0
        self._tty = getattr(self.stream, "isatty", lambda: False)()

    def estimate(self, total: int) -> None:
        """A better estimate of the total, e.g. from the steps planned so far."""
        self.total = max(1, total)

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        interval = 0.2 if self._tty else 5.0
        if not force and now - self._drawn < interval:
            return
        self._drawn = now
        self.total = max(self.total, done)  # an estimate that fell short grows rather than overshoot
        share = done / self.total
        bar = "#" * int(share * 30)
        rate = done / max(1e-9, now - self.started)
        line = f"{self.label} [{bar:<30}] {share:4.0%} {done:,}/{self.total:,} spans {rate:,.0f} spans/s"
        self.stream.write(("\r" + line) if self._tty else line + "\n")
        self.stream.flush()

    def close(self, done: int) -> None:
        """The last line: ``done`` of ``done`` (the exact total is known now)."""
        self.total = max(1, done)
        self.update(done, force=True)
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()
