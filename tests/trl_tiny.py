"""A real TRL GRPOTrainer run small enough for CPU: a 2-layer Llama and a word-level tokenizer built here.

Nothing is downloaded: the tokenizer's vocabulary and the model's config are written below. Shared by
tests/test_trl.py and benchmarks/trl_overhead.py. Needs the ``trl`` extra (``pip install -e '.[trl]'``).
"""

from __future__ import annotations

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


def model(tok, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
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


def trainer(output_dir, max_steps: int = 20, seed: int = 0, **config):
    """A built GRPOTrainer (8 completions a step: 2 prompts x 4 generations, at most 8 tokens each)."""
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
    return GRPOTrainer(
        model=model(tok, seed),
        processing_class=tok,
        reward_funcs=[has_a, brevity],
        args=GRPOConfig(**settings),
        train_dataset=dataset,
    )


# Logged keys that measure time, not training.
TIMING = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second")


def training_figures(log_history) -> list[dict]:
    """TRL's logged entries without the time measurements: what must not change with the adapter on."""
    return [
        {k: v for k, v in entry.items() if not any(k.endswith(t) for t in TIMING)} for entry in log_history
    ]
