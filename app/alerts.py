"""Alerts that reach a person: `rollscope watch` runs the checks on a live run and reports each change.

Every interval the watch brings the run's derived state up to date, runs every check rule
(``queries.checks.run_checks``) and compares each verdict with the last one it saw, kept in the store
(``store.alerts``): a rule going from PASS to FAIL, or back, is one alert, recorded there first (so a restarted
watch sends no alert twice), then printed and handed to the webhook (``app.notify``). A rule the state has never
seen counts as passing, so a watch started on a run already in trouble reports what fails. An alert the webhook
has not confirmed stays pending in the state and is sent again by the next watch of the run; its ``id`` lets a
receiver drop the one copy a crash between delivery and its record could make.

The message is a JSON object Slack's incoming webhooks take (``text``, with Slack's three characters escaped)
and any receiver can read (``rollscope``: the alert's fields).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from rollscope.queries.analyses import DETECTORS
from rollscope.store import alerts as store_alerts


@dataclass
class Verdict:
    """What one rule said this time (a ``CheckResult``'s fields the alerts keep)."""

    rule: str
    ok: bool
    message: str
    value: float | int | None = None
    threshold: float | int | None = None
    unit: str = "count"
    step: int | None = None


class Watch:
    """A run's alert state and its changes; thread-safe (the webhook's thread records deliveries)."""

    def __init__(self, store, run_id: str, dashboard: str | None = None, webhook: bool = True):
        """``webhook``: whether this watch posts its alerts; those of a watch that does not are recorded as
        never to be sent (a later watch with a webhook does not post old news)."""
        self.store, self.run_id, self.dashboard, self.webhook = store, run_id, dashboard, webhook
        self._lock = threading.Lock()
        self.state = store_alerts.load(store, run_id)

    def pending(self) -> list[dict]:
        """Alerts recorded but neither delivered nor given up, oldest first (a previous watch's too)."""
        with self._lock:
            return [dict(e) for e in self.state["events"] if not e.get("delivered") and not e.get("error")]

    def observe(self, verdicts: list[Verdict], now_ns: int | None = None) -> list[dict]:
        """Record the rules that changed since the last verdicts seen; returns their new alerts."""
        now_ns = now_ns or time.time_ns()
        with self._lock:
            rules = self.state["rules"]
            changed = [v for v in verdicts if rules.get(v.rule, {"ok": True})["ok"] != v.ok]
            events = [self._event(v, now_ns) for v in changed]
            new = [v for v in verdicts if v.rule not in rules or rules[v.rule]["ok"] != v.ok]
            for v in new:
                rules[v.rule] = {"ok": v.ok, "since_ns": now_ns}
            self.state["events"].extend(events)
            if new:
                self._save()
        return [dict(e) for e in events]

    def done(self, alert_id: str, delivered: bool, error: str | None = None) -> None:
        """Record an alert's delivery (or that the receiver refused it for good)."""
        with self._lock:
            for event in self.state["events"]:
                if event["id"] == alert_id:
                    event["delivered"], event["error"] = delivered, error
            self._save()

    def _event(self, v: Verdict, now_ns: int) -> dict:
        return {
            "id": uuid.uuid4().hex,
            "run_id": self.run_id,
            "rule": v.rule,
            "state": "PASS" if v.ok else "FAIL",
            "previous": "FAIL" if v.ok else "PASS",
            "time_ns": now_ns,
            "step": v.step,
            "message": v.message,
            "value": v.value,
            "threshold": v.threshold,
            "unit": v.unit,
            "delivered": False,
            "error": None if self.webhook else "no webhook",
        }

    def _save(self) -> None:
        store_alerts.save(self.store, self.run_id, self.state)

    def payload(self, event: dict) -> dict:
        """The webhook's JSON: Slack's ``text`` and the alert's fields for any other receiver."""
        link = self.link(event)
        return {"text": text(event, link), "rollscope": {**_public(event), "link": link}}

    def link(self, event: dict) -> str | None:
        """The dashboard page of the alert (Learning for a training detector, else Health), on its run."""
        if not self.dashboard:
            return None
        page = "learning" if event["rule"] in _LEARNING_RULES else "health"
        return f"{self.dashboard.rstrip('/')}/{page}?{urlencode({'run': self.run_id})}"


# The rules whose figures the Learning page shows (the detectors, the mismatch, the nonzero signal); the others'
# are on the Health page.
_LEARNING_RULES = frozenset((*DETECTORS, "mismatch-kl", "nonzero-signal"))


def text(event: dict, link: str | None = None) -> str:
    """One line a person reads in a chat: what changed, on which run, at which step, and why."""
    changed = "failing" if event["state"] == "FAIL" else "passing again"
    mark = ":rotating_light:" if event["state"] == "FAIL" else ":white_check_mark:"
    at = f" at step {event['step']}" if event.get("step") is not None else ""
    line = f"{mark} rollscope: *{event['rule']}* {changed} on run `{event['run_id']}`{at}: {event['message']}"
    line = _slack_escape(line)
    return f"{line} <{link}|open in rollscope>" if link else line


def stamp(event: dict) -> str:
    """The alert's time as a terminal line shows it (UTC)."""
    return datetime.fromtimestamp(event["time_ns"] / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _public(event: dict) -> dict:
    out = {k: v for k, v in event.items() if k not in ("delivered", "error")}
    out["time"] = datetime.fromtimestamp(event["time_ns"] / 1e9, UTC).isoformat()
    return out


def _slack_escape(line: str) -> str:
    """Slack reads <, > and & as markup (links, mentions): a rule's message quotes run data, so they are escaped."""
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
