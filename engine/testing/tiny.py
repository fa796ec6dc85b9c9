"""A random-init tiny checkpoint built by the engine's own model builder, as `coevo init` builds its
base: for tests that need weights (merges, backends, the dashboard's jobs) but not training."""
from __future__ import annotations

from pathlib import Path

from engine.models.tiny import TinyModelConfig, build_model, generic_corpus, train_tokenizer


def tiny_checkpoint(out_dir, *, texts: list[str] = (), seed: int = 0, vocab_size: int = 1000) -> Path:
    """A Hugging Face model directory at out_dir: a tokenizer trained on the generic corpus and `texts`
    (e.g. a task's prompts), and a randomly initialised tiny Qwen3."""
    tok = train_tokenizer(generic_corpus() + list(texts), out_dir, vocab_size)
    return build_model(tok, out_dir, TinyModelConfig(vocab_size=vocab_size, seed=seed))
