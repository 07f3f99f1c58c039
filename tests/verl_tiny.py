"""verl's own agent-loop code on CPU: its ``AgentLoopWorker`` running ``ToolAgentLoop`` (rollscope's recording
subclass, put in place by the config entry users add) against a tiny scripted Llama behind the server-manager
interface verl calls (``generate(request_id, prompt_ids, sampling_params, ...) -> TokenOutput``), with real
function tools; then verl's own reward layout, GRPO advantages and ``compute_data_metrics`` on each batch, as
``RayPPOTrainer.fit`` runs them. Shared by tests/test_verl.py. Needs the ``verl`` extra.

The actor update itself (FSDP workers on GPUs) cannot run here: the trainer is verl's ``RayPPOTrainer`` class,
made without its workers, whose ``_update_actor`` returns what a worker group returns (no metrics).
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

from benchmarks.fixtures import trl_tiny

PROMPTS = ["a", "b c", "d e", "c", "a b c d e", "e"]  # "c" goes to the tool that fails
TOOLS = '''
from verl.tools.function_tool import function_tool


@function_tool
def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: The word.
    """
    return word.upper()


@function_tool
def broken(word: str) -> str:
    """A tool that always fails.

    Args:
        word: The word.
    """
    raise RuntimeError("broken tool")
'''


class TinyServer:
    """verl's server manager as agent loops call it, generating with a tiny Hugging Face model on the CPU.
    Each request may stop short (a seeded draw), so a group's rollouts differ: some answer, some do not."""

    def __init__(self, model, tokenizer, seed: int = 0, stop_short: float = 0.3):
        self.model, self.tokenizer = model, tokenizer
        self.rng = random.Random(seed)
        self.stop_short = stop_short
        self.requests = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        import torch
        from verl.workers.rollout.replica import TokenOutput

        self.requests += 1
        budget = 3 if self.rng.random() < self.stop_short else 40
        context = torch.tensor([list(prompt_ids)])
        with torch.no_grad():
            out = self.model.generate(
                context,
                attention_mask=torch.ones_like(context),
                max_new_tokens=budget,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        ids = out[0, context.shape[1] :].tolist()
        drafted = len(ids) + 2  # a drafter's counts, as vLLM reports them per request
        extra = {"spec_num_draft_tokens": drafted, "spec_num_accepted_tokens": len(ids) // 2}
        extra["spec_num_verify_steps"] = max(1, len(ids) // 3)
        return TokenOutput(token_ids=ids, stop_reason="completed", extra_fields=extra)


def setup(root: Path, response_length: int = 96, n: int = 4):
    """The tiny model and tokenizer saved where verl's config points, the tools file, and verl's config
    (its own ``ppo_trainer`` defaults, composed by Hydra, with rollscope's agent-loop config entry)."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import verl
    from hydra import compose, initialize_config_dir

    from rollscope.integrations import verl_agent

    tok = trl_tiny.tool_tokenizer()
    model = trl_tiny.scripted_model(tok)
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    (root / "tools.py").write_text(TOOLS)
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    overrides = [
        f"actor_rollout_ref.model.path={root / 'model'}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.prompt_length=1024",
        f"actor_rollout_ref.rollout.response_length={response_length}",
        f"actor_rollout_ref.rollout.n={n}",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        f"actor_rollout_ref.rollout.multi_turn.function_tool_path={root / 'tools.py'}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={verl_agent.CONFIG}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        "algorithm.adv_estimator=grpo",
    ]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    return config, model, tok


def trainer(config, tokenizer):
    """verl's ``RayPPOTrainer`` without its workers (see the module docstring)."""
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    t = RayPPOTrainer.__new__(RayPPOTrainer)
    t.config, t.tokenizer, t.global_steps = config, tokenizer, 0
    t._update_actor = lambda batch: DataProto(meta_info={"metrics": {}})
    return t


def answered(text: str) -> float:
    """The score: 1 when the conversation ends with the model's "done"."""
    return 1.0 if text.rstrip().endswith("done") else 0.0


def step_batch(worker, config, tokenizer, step: int, prompts: list[str]):
    """One step of ``RayPPOTrainer.fit``'s data path: uid per prompt, n rollouts each through the agent loop
    worker, the score at the last response token (``rm_scores``' layout), GRPO advantages."""
    import uuid

    import numpy as np
    import torch
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    n = config.actor_rollout_ref.rollout.n
    columns = {
        "raw_prompt": np.array([[{"role": "user", "content": p}] for p in prompts] + [None], dtype=object)[
            :-1
        ],
        "uid": np.array([str(uuid.uuid4()) for _ in prompts], dtype=object),
        "index": np.array([PROMPTS.index(p) for p in prompts]),
        "data_source": np.array(["words"] * len(prompts), dtype=object),
        "agent_name": np.array(["tool_agent"] * len(prompts), dtype=object),
    }
    batch = DataProto.from_dict(non_tensors=columns, meta_info={"global_steps": step})
    batch = batch.repeat(repeat_times=n, interleave=True)
    out = asyncio.run(worker.generate_sequences(batch))
    width_p = out.batch["prompts"].shape[1]
    lengths = out.batch["attention_mask"][:, width_p:].sum(-1)
    texts = tokenizer.batch_decode(out.batch["responses"], skip_special_tokens=True)
    scores = torch.zeros_like(out.batch["response_mask"], dtype=torch.float32)
    for i, text in enumerate(texts):
        scores[i, max(int(lengths[i]) - 1, 0)] = answered(text)
    out.batch["token_level_scores"] = scores
    out.batch["token_level_rewards"] = scores
    return compute_advantage(out, adv_estimator=config.algorithm.adv_estimator, num_repeat=n)
