"""Adapters for the frameworks and inference engines RL jobs run on: TRL, verifiers, vLLM and SGLang.

    from rollscope.integrations.trl import instrument
    instrument(trainer, store="runs/", run_id="grpo-1")

Each adapter imports its framework only when called, so importing ``rollscope.integrations`` (or one of its
modules) pulls in neither torch nor the framework (docs/integrations.md).
"""

if __name__ != "rollscope.integrations":
    # This folder sits inside collectors/, so an editable install (or the repository on sys.path) could import
    # it a second time as ``rollscope.collectors.integrations``: separate module objects, each with its own
    # state (a trainer instrumented through one would not be known to the other). One name only.
    raise ImportError(
        f"import the adapters as rollscope.integrations (e.g. rollscope.integrations.trl), not {__name__}",
        name=__name__,
    )
