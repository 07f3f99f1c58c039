"""rollscope: telemetry and observability for reinforcement-learning runs of LLM agents.

Everything installs under this one name, so a job's own ``app/``, ``queries.py`` or ``store.py`` never
collides with ours::

    from rollscope import attach
    rl = attach(store="runs/", run_id="exp-7", role="rollout", devices=8)

The parts, each its own subpackage (folders at the repository's top level, mapped here by pyproject.toml):
``rollscope.collectors`` (inside or beside the job), ``rollscope.store`` (the files on disk),
``rollscope.queries`` (views and analyses over them), ``rollscope.app`` (the CLI and the dashboard) and
``rollscope.simulator`` (a realistic run with its ground truth).
"""

__all__ = ["attach"]


def __getattr__(name):
    # Lazy: `import rollscope` alone loads neither the OpenTelemetry SDK nor DuckDB.
    if name == "attach":
        from rollscope.collectors.attaching import attach

        return attach
    raise AttributeError(name)
