"""Adapters for the frameworks and inference engines RL jobs run on: TRL, verifiers, vLLM and SGLang."""
