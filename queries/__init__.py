"""The store and everything read from it: layout, views for ad hoc SQL, and every analysis as SQL."""

from rollscope.errors import QueryError, RollscopeError, StoreError, UnknownRunError

__all__ = ["connect", "Reader", "RollscopeError", "StoreError", "QueryError", "UnknownRunError"]


def __getattr__(name):
    # duckdb is imported only by readers: a collector inside an RL job never pays for it.
    if name in ("connect", "Reader"):
        from rollscope.queries import reader

        return getattr(reader, name)
    raise AttributeError(name)
