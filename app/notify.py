"""Delivering alerts to a webhook: JSON POSTs in order, on a thread of their own, retried with backoff.

`rollscope watch` hands each alert to ``Webhook.post`` and goes on checking: a slow or unreachable receiver never
holds up the checks. The thread sends alerts one at a time in the order they came (a rule's FAIL before its
PASS), each until it is delivered (any 2xx), retrying a network error, a timeout, a 5xx, 408 or 429 after 1, 2,
4 … seconds (at most ``MAX_BACKOFF_S``, or the receiver's ``Retry-After``) for as long as the watch runs; any
other answer (a 4xx: a wrong URL, a payload the receiver refuses) will not change by retrying, so that alert is
given up and the next one sent. ``on_done(alert_id, delivered, error)`` reports each outcome, from the thread.
The token, when there is one, goes in an ``Authorization: Bearer`` header (from ``ROLLSCOPE_NOTIFY_TOKEN``,
never the command line, which ``ps`` shows).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable

log = logging.getLogger("rollscope.notify")

TIMEOUT_S = 10.0  # one POST
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
RETRIED = {408, 429}  # 4xx answers worth another try


class Webhook:
    """One receiver, and the thread that delivers to it."""

    def __init__(self, url: str, token: str | None = None, on_done: Callable | None = None, *, sleep=None):
        self.url, self._token = url, token
        self._on_done = on_done or (lambda alert_id, delivered, error: None)
        self._queue: deque[tuple[str, bytes]] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._busy = False
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait  # tests pass a shorter clock
        self._thread = threading.Thread(target=self._run, name="rollscope-notify", daemon=True)
        self._thread.start()

    def post(self, alert_id: str, payload: dict) -> None:
        """Queue one alert; returns at once."""
        body = json.dumps(payload).encode()
        with self._wake:
            self._queue.append((alert_id, body))
            self._wake.notify()

    def pending(self) -> int:
        """Alerts not yet delivered or given up (the one being sent included)."""
        with self._wake:
            return len(self._queue) + self._busy

    def close(self, timeout: float) -> int:
        """Stop after delivering what is queued, waiting at most ``timeout`` seconds; returns the alerts left
        undelivered (a later watch sends them: they stay in the store's alert state)."""
        deadline = time.monotonic() + timeout
        with self._wake:
            self._closing = True
            self._wake.notify()
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        with self._wake:
            self._wake.notify()
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()) + TIMEOUT_S)
        return self.pending()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._wake:
                while not self._queue and not self._stop.is_set():
                    if self._closing:
                        return
                    self._wake.wait()
                if self._stop.is_set():
                    return
                alert_id, body = self._queue[0]
                self._busy = True
            delivered, error = self._deliver(body)
            with self._wake:
                if delivered is not None:  # None: stopped while retrying; the alert stays undelivered
                    self._queue.popleft()
                self._busy = False
            if delivered is not None:
                self._report(alert_id, delivered, error)

    def _deliver(self, body: bytes) -> tuple[bool | None, str | None]:
        """Send until delivered (True), refused for good (False), or stopped (None)."""
        backoff = FIRST_BACKOFF_S
        while not self._stop.is_set():
            retry, error, asked = self._attempt(body)
            wait = backoff if asked is None else asked
            if error is None:
                return True, None
            if not retry:
                log.warning("rollscope: alert refused by %s (%s); not retried", _host(self.url), error)
                return False, error
            log.warning(
                "rollscope: alert not delivered to %s (%s); retrying in %.0f s",
                _host(self.url),
                error,
                wait,
            )
            self._sleep(wait)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
        return None, None

    def _attempt(self, body: bytes) -> tuple[bool, str | None, float | None]:
        """One POST: (whether a failure is worth retrying, the failure or None, the receiver's Retry-After)."""
        headers = {"Content-Type": "application/json", "User-Agent": "rollscope-watch"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                answer.read()
            return False, None, None
        except urllib.error.HTTPError as e:
            retry = e.code >= 500 or e.code in RETRIED
            return retry, f"HTTP {e.code}", _retry_after(e.headers.get("Retry-After")) if retry else None
        except (urllib.error.URLError, OSError, ValueError) as e:  # refused, unreachable, timed out
            return True, str(getattr(e, "reason", e)), None

    def _report(self, alert_id: str, delivered: bool, error: str | None) -> None:
        try:
            self._on_done(alert_id, delivered, error)
        except Exception:  # the watch's bookkeeping must not stop deliveries
            log.exception("rollscope: recording an alert's delivery failed")


def _retry_after(value: str | None) -> float | None:
    """A Retry-After of seconds (capped at MAX_BACKOFF_S); an HTTP date or nonsense is ignored."""
    try:
        return min(MAX_BACKOFF_S, max(0.0, float(value))) if value else None
    except ValueError:
        return None


def _host(url: str) -> str:
    """The receiver as a log line names it: scheme and host, never the path (a Slack webhook's path is its
    secret)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"
