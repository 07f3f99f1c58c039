"""The alerts `rollscope watch` recorded for a run (``store.alerts``), as the Health page's timeline reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollscope.store import alerts as store_alerts

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("time", "rule", "state", "step", "delivered", "message")


def events(store, run_id: str) -> pd.DataFrame:
    """One row per change a watch saw, oldest first: its time (UTC), rule, new state (FAIL or PASS), the train
    step it judged at (a detector's), whether the webhook took it ("yes", "pending", or the receiver's refusal)
    and the rule's message. No rows when no watch has run."""
    import pandas as pd

    rows = [
        {
            "time": pd.Timestamp(e["time_ns"], unit="ns", tz="UTC"),
            "rule": e["rule"],
            "state": e["state"],
            "step": e.get("step"),
            "delivered": "yes" if e.get("delivered") else (e.get("error") or "pending"),
            "message": e["message"],
        }
        for e in store_alerts.load(store, run_id)["events"]
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS)).astype({"step": "Int64"})
