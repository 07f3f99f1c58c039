"""One base error with a human title, so the CLI prints one clean line and pages show ``st.error``."""

from __future__ import annotations


class RollscopeError(Exception):
    """Something a user can fix; ``title`` is the short heading, ``str()`` the whole sentence."""

    title = "rollscope error"

    def __init__(self, title: str, message: str):
        super().__init__(message)
        self.title = title


class StoreError(RollscopeError):
    """The store is missing, unreadable, or not a store."""


class QueryError(RollscopeError):
    """A query failed: bad SQL, an unknown view or column, or a sandbox refusal. Keeps the SQL."""

    def __init__(self, title: str, message: str, sql: str | None = None, params: object = None):
        super().__init__(title, message)
        self.sql = sql
        self.params = params


class UnknownRunError(RollscopeError):
    """A run id that the store does not hold."""


class UnknownRolloutError(RollscopeError):
    """A rollout id that the run does not hold."""
