"""What runs inside or beside an RL job: conventions, span helpers, the store exporter, the OTLP receiver.

from rollscope import attach
rl = attach(store="runs/", run_id="exp-7", role="rollout", devices=8)
with rl.rollout(task_id="t1", environment="swe", policy_version=3) as r:
    with rl.turn(0, input_tokens=3000, cached_input_tokens=2800, output_tokens=150):
        ...
    r.set(reward=1.0, rollout_status="ok")
"""

__all__ = ["attach", "RL", "RLSpan"]


def __getattr__(name):
    # Lazy, so importing the package (rollscope.collectors.content, say) pulls in no SDK machinery.
    if name == "attach":
        from rollscope.collectors.attaching import attach

        return attach
    if name in ("RL", "RLSpan"):
        from rollscope.collectors import spans

        return getattr(spans, name)
    raise AttributeError(name)
