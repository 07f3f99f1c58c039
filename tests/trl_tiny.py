"""A real TRL GRPOTrainer run small enough for CPU: a 2-layer Llama and a word-level tokenizer built here.

Nothing is downloaded: the tokenizer's vocabulary and the model's config are written below. Shared by
tests/test_trl.py and benchmarks/trl_overhead.py. Needs the ``trl`` extra (``pip install -e '.[trl]'``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# No network: TRL's trainers send Hugging Face telemetry from a thread when built (a TLS context and a lookup
# that fails here, on the CPU the timed runs share); read when huggingface_hub is first imported.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

WORDS = list("abcdefghijklmnop")
SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
# Three environments; "b" makes the second reward function return None (no score from it).
PROMPTS = [
    ("a b c", "a"),
    ("d e f g", "b"),
    ("h i", "c"),
    ("j k l m n", "a"),
    ("o p a", "b"),
    ("b c d e", "c"),
]


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"
    )


def _llama_config(tok, **fields):
    """The 2-layer Llama both tiny models use, sized for ``tok``; ``fields`` add to or override it."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        **fields,
    )


def model(tok, seed: int = 0):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = _llama_config(tok, max_position_embeddings=64, bos_token_id=tok.bos_token_id)
    return LlamaForCausalLM(config)


def has_a(completions, **kwargs):
    """1 when the completion says "a": often all-equal within a group of 4, sometimes not."""
    return [1.0 if "a" in c.split() else 0.0 for c in completions]


def brevity(completions, environment, **kwargs):
    """Shorter is better; None (no score) for environment "b"."""
    return [
        None if env == "b" else 1.0 / (1 + len(c.split()))
        for c, env in zip(completions, environment, strict=True)
    ]


def trainer(output_dir, max_steps: int = 20, seed: int = 0, rollout_func=None, **config):
    """A built GRPOTrainer (8 completions a step: 2 prompts x 4 generations, at most 8 tokens each);
    ``rollout_func`` as TRL takes it (e.g. ``two_turn_rollout``)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = tokenizer()
    rows = [PROMPTS[i % len(PROMPTS)] for i in range(64)]
    dataset = Dataset.from_dict({"prompt": [p for p, _ in rows], "environment": [e for _, e in rows]})
    settings = dict(
        output_dir=str(output_dir),
        max_steps=max_steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        learning_rate=5e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    settings.update(config)
    policy = model(tok, seed)
    if settings.get(
        "beta"
    ):  # a KL penalty: TRL builds its reference model from the policy's path, so save it
        path = Path(output_dir) / "reference"
        policy.save_pretrained(path)
        policy.config._name_or_path = str(path)
    return GRPOTrainer(
        model=policy,
        processing_class=tok,
        reward_funcs=[has_a, brevity],
        args=GRPOConfig(**settings),
        train_dataset=dataset,
        **({"rollout_func": rollout_func} if rollout_func is not None else {}),
    )


# Logged keys that measure time, not training.
TIMING = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second")


def training_figures(log_history) -> list[dict]:
    """TRL's logged entries without the time measurements: what must not change with the adapter on."""
    return [
        {k: v for k, v in entry.items() if not any(k.endswith(t) for t in TIMING)} for entry in log_history
    ]


ENVIRONMENT_REPLY = "o p"  # what the environment says between the model's two turns


def two_turn_rollout(prompts, trainer):
    """A multi-turn ``rollout_func`` as a user writes one: the model answers (up to 3 tokens), the environment
    replies, the model answers again. Returns TRL's keys with ``env_mask`` (0 for the environment's tokens)."""
    import torch

    tok, model = trainer.processing_class, trainer.model
    reply = tok(ENVIRONMENT_REPLY, add_special_tokens=False)["input_ids"]
    out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
    for prompt in prompts:
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        completion, logprobs, mask = [], [], []
        for turn in range(2):
            context = torch.tensor([prompt_ids + completion])
            with torch.no_grad():
                generated = model.generate(
                    context,
                    attention_mask=torch.ones_like(context),
                    max_new_tokens=3,
                    min_new_tokens=1 if turn == 0 else 0,  # the first turn says something before the reply
                    do_sample=True,
                    output_scores=True,
                    return_dict_in_generate=True,
                    pad_token_id=tok.pad_token_id,
                )
            new = generated.sequences[0, context.shape[1] :].tolist()
            scores = [
                torch.log_softmax(s[0], -1)[t].item() for s, t in zip(generated.scores, new, strict=False)
            ]
            if (
                turn == 0
            ):  # the conversation goes on: drop the end-of-turn token, append the environment's reply
                while new and new[-1] == tok.eos_token_id:
                    new.pop()
                    scores.pop()
                new_mask = [1] * len(new) + [0] * len(reply)
                new, scores = new + reply, scores + [0.0] * len(reply)
            else:
                new_mask = [1] * len(new)
            completion += new
            logprobs += scores
            mask += new_mask
        out["prompt_ids"].append(prompt_ids)
        out["completion_ids"].append(completion)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
    return out


# --- TRL's own tool loop (``GRPOTrainer(tools=...)``) on a scripted model --------------------------------------
# A random tiny model never writes a tool call, so this one is scripted: a 2-layer Llama whose next-token logits
# get a large bias towards the next token of a fixed script while it generates. For each word of the user's
# message it calls a tool with that word (one call per turn), then answers "done". The tokenizer is a byte-level
# BPE trained here on a few lines, with Qwen2.5's chat template as TRL ships it, so TRL renders the tools, parses
# the calls and runs its tool loop exactly as for a real Qwen model.

TOOL_PROMPTS = ["a", "b c", "d e", "c"]  # "c" goes to the tool that fails
_TOOL_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]


def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: The word.
    """
    return word.upper()


def broken(word: str) -> str:
    """A tool that always fails.

    Args:
        word: The word.
    """
    raise RuntimeError("broken tool")


def _tool_call(word: str) -> str:
    name = "broken" if word == "c" else "lookup"
    call = json.dumps({"name": name, "arguments": {"word": word}})
    return f"<tool_call>\n{call}\n</tool_call><|im_end|>"


def tool_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    corpus = [_tool_call("a"), "<tool_response>\nA\n</tool_response>", "system user assistant done a b c d e"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    learn = trainers.BpeTrainer(
        vocab_size=400, special_tokens=_TOOL_SPECIAL, initial_alphabet=alphabet, show_progress=False
    )
    bpe.train_from_iterator(corpus * 20, learn)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|endoftext|>", eos_token="<|im_end|>")
    tok.chat_template = qwen2_5_chat_template
    return tok


def scripted_model(tok, seed: int = 0):
    import torch
    from transformers import LlamaForCausalLM

    header = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]

    def next_token(context: list[int]) -> int:
        starts = [i for i in range(len(context) - len(header) + 1) if context[i : i + len(header)] == header]
        written = len(context) - starts[-1] - len(header)  # tokens of this turn so far
        text = tok.decode(context)
        words = text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0].split()
        answered = text.count("<tool_response>")
        script = _tool_call(words[answered]) if answered < len(words) else "done<|im_end|>"
        ids = tok(script, add_special_tokens=False)["input_ids"]
        return ids[written] if written < len(ids) else tok.eos_token_id

    class ScriptedLlama(LlamaForCausalLM):
        def forward(self, input_ids=None, **kwargs):
            out = super().forward(input_ids=input_ids, **kwargs)
            if input_ids is not None and not torch.is_grad_enabled():  # generating (or scoring: harmless)
                if input_ids.shape[1] > 1:
                    self._contexts = [row.tolist() for row in input_ids]
                else:
                    for context, token in zip(self._contexts, input_ids[:, 0].tolist(), strict=True):
                        context.append(token)
                for row, context in enumerate(self._contexts):
                    out.logits[row, -1, next_token(context)] += 1000.0
            return out

    torch.manual_seed(seed)
    config = _llama_config(tok, max_position_embeddings=2048)
    return ScriptedLlama(config)


def answered(completions, **kwargs):
    """1 when the conversation ends with the model's "done"."""
    return [1.0 if c[-1].get("content") == "done" else 0.0 for c in completions]


def tool_trainer(output_dir, max_steps: int = 2, seed: int = 0):
    """A GRPOTrainer with TRL's tool loop: 8 conversations a step (2 prompts x 4), 1-3 model calls each."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = tool_tokenizer()
    rows = [[{"role": "user", "content": TOOL_PROMPTS[i % len(TOOL_PROMPTS)]}] for i in range(32)]
    return GRPOTrainer(
        model=scripted_model(tok, seed),
        processing_class=tok,
        reward_funcs=[answered],
        tools=[lookup, broken],
        train_dataset=Dataset.from_dict({"prompt": rows}),
        args=GRPOConfig(
            output_dir=str(output_dir),
            max_steps=max_steps,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=128,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=seed,
            disable_tqdm=True,
            dataloader_num_workers=0,
        ),
    )


# --- TRL's async GRPO trainer (trl.experimental.async_grpo) -------------------------------------------------


class QueueWorker:
    """A rollout worker as TRL's ``rollout_worker=`` takes one (the injection point its own tests use): the
    samples are what the test puts on ``rollout_buffer``, the queue the trainer's data loader takes from."""

    def __init__(self):
        import queue

        self.rollout_buffer = queue.Queue()
        self.version = 0

    def start(self):
        pass

    def stop(self):
        pass

    def update_model_version(self, model_version: int):
        self.version = model_version

    def check_health(self, stale_after_s: float):
        pass


class NoWeightTransfer:
    """TRL's ``weight_transfer=``: there is no vLLM server to send weights to."""

    def init_weight_transfer(self):
        pass

    def pause(self):
        pass

    def send_weights(self, iterator):
        for _ in iterator:  # walk the weights as a transfer would
            pass

    def resume(self):
        pass

    def destroy(self):
        pass


def async_trainer(output_dir, max_staleness: int = 1, batch_size: int = 4, seed: int = 0):
    """A built ``AsyncGRPOTrainer`` on the CPU: the tiny Llama saved to ``output_dir`` (the trainer loads a model
    by path), reward function ``has_a``, a ``QueueWorker`` and ``NoWeightTransfer``. Its training step cannot
    run on a CPU (tree attention loads FlashAttention-3 kernels from the Hugging Face Hub); its data loader,
    stale-sample test and weight sync do. One TRL call is answered here: building the trainer asks CUDA for the
    device's name (``get_peak_flops_per_device``, for its MFU figure), which fails on a machine without a GPU;
    it gets TRL's own figure for an unknown device."""
    import trl.experimental.async_grpo.async_grpo_trainer as async_module
    from datasets import Dataset
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    path = Path(output_dir) / "model"
    tok = tokenizer()
    model(tok, seed).save_pretrained(path)
    tok.save_pretrained(path)
    probe = async_module.get_peak_flops_per_device
    async_module.get_peak_flops_per_device = lambda accelerator, dtype: None
    try:
        return AsyncGRPOTrainer(
            model=str(path),
            reward_funcs=[has_a],
            args=AsyncGRPOConfig(
                output_dir=str(Path(output_dir) / "out"),
                max_steps=10,
                per_device_train_batch_size=batch_size,
                num_generations=4,
                max_staleness=max_staleness,
                token_budget=0,  # a fixed count of samples per batch: no vLLM server to ask for its context length
                dtype="float32",
                report_to="none",
                use_cpu=True,
                seed=seed,
                save_strategy="no",
                disable_tqdm=True,
            ),
            train_dataset=Dataset.from_dict({"prompt": [p for p, _ in PROMPTS]}),
            processing_class=tok,
            rollout_worker=QueueWorker(),
            weight_transfer=NoWeightTransfer(),
        )
    finally:
        async_module.get_peak_flops_per_device = probe


def rollout_group(prompt: str, replies: list[str], model_version: int, group_id: int, score=None) -> list:
    """One prompt's ``RolloutSample``s as TRL's worker makes them (``_compute_group_samples``): prompt then reply
    tokens, the reply's trained; one reward function, ``score`` (reply -> value, ``None``: no score; default
    ``has_a``), and the metrics the worker derives from it: reward (NaN when unscored) and reward_std, the
    spread of the group's scored rewards."""
    import math
    import time

    import numpy as np
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    score = score or (lambda reply: has_a([reply])[0])
    tok = tokenizer()
    prompt_ids = tok(prompt)["input_ids"]
    values = [score(reply) for reply in replies]
    scored = [v for v in values if v is not None]
    spread = float(np.std(scored)) if scored else math.nan
    samples = []
    for reply, value in zip(replies, values, strict=True):
        reply_ids = tok(reply)["input_ids"] + [tok.eos_token_id]
        reward = math.nan if value is None else float(value)
        samples.append(
            RolloutSample(
                prompt=[{"role": "user", "content": prompt}],
                completion=[{"role": "assistant", "content": reply}],
                input_ids=np.asarray(prompt_ids + reply_ids, dtype=np.int64),
                completion_mask=np.asarray([0] * len(prompt_ids) + [1] * len(reply_ids), dtype=np.int64),
                old_log_probs=np.zeros(len(prompt_ids) + len(reply_ids), dtype=np.float32),
                advantage=0.0,
                model_version=model_version,
                group_id=group_id,
                metrics={"reward": reward, "reward_std": spread, "rewards/has_a": reward},
                enqueued_at=time.time(),
            )
        )
    return samples


def rank_main(argv: list[str] | None = None) -> None:
    """One process of a data-parallel run, launched by torchrun (``python -m torch.distributed.run
    --nproc_per_node N -m tests.trl_tiny ROOT STEPS RUN``): every rank builds the tiny trainer and instruments it
    into ROOT/store, as a user's script does under accelerate; the main process writes TRL's log history to
    ROOT/log.json, and each rank its adapter's stats to ROOT/stats-<rank>.json."""
    import sys

    from rollscope.integrations.trl import instrument

    root, steps, run_id = argv or sys.argv[1:]
    root = Path(root)
    t = trainer(root / "out", max_steps=int(steps))
    inst = instrument(t, store=root / "store", run_id=run_id)
    t.train()
    inst.close()
    rank = t.accelerator.process_index
    stats = {"process_index": rank, "processes": t.accelerator.num_processes, **inst.stats}
    (root / f"stats-{rank}.json").write_text(json.dumps(stats, default=str))
    if t.accelerator.is_main_process:
        (root / "log.json").write_text(json.dumps(t.state.log_history))
    inst.rl.shutdown()


if __name__ == "__main__":
    rank_main()
