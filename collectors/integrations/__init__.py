"""Adapters for the frameworks and inference engines RL jobs run on: TRL, verifiers, vLLM and SGLang.

    from rollscope.integrations.trl import instrument
    instrument(trainer, store="runs/", run_id="grpo-1")

Each adapter imports its framework only when called, so importing ``rollscope.integrations`` (or one of its
modules) pulls in neither torch nor the framework (docs/integrations.md).
"""
