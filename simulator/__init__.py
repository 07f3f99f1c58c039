"""A realistic asynchronous agent-RL run, written through the real collectors path, with its ground truth.

    from rollscope.simulator import config, simulate
    result = simulate("runs/", "demo", config.resolve("sample"), progress=True)

See docs/simulator.md for the knobs, the presets and every key of the ground truth.
"""

from rollscope.simulator.run import Result, SimulationError, simulate

__all__ = ["simulate", "Result", "SimulationError"]
