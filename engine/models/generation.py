"""What every local backend shares: the checkpoint's own tokenizer, chat template and stop tokens."""
from __future__ import annotations

import json
from pathlib import Path

from engine.models.loops import loop_end

MAX_RANKED = 48  # the most next tokens a backend is asked to rank (`next_tokens`)


class ChatBackend:
    name = "base"

    def __init__(self, model_dir, *, seed: int = 0):
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the CLI prints its own progress
        self.model_dir = Path(model_dir)
        self.seed = seed
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, padding_side="left")
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.stop_ids = stop_ids(self.model_dir, self.tokenizer)

    @property
    def label(self) -> str:
        """What an evaluation or data set records: the engine, with its precision where it has a choice."""
        return self.name

    def chat_prompt(self, messages: list[dict]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160, stop_loops: int = 0) -> list[tuple[str, int]]:
        """(text, generated tokens) per prompt, in order; with `stop_loops`, an answer is cut where its tokens
        end in one span repeated that many times (engine.models.loops)."""
        raise NotImplementedError

    def next_tokens(self, prompt: str, *, n: int) -> list[str]:
        """The n most probable next tokens after `prompt`, decoded, most probable first: what constrained
        decoding (`sampling.constrain_calls`) picks from where the model leaves the allowed names."""
        raise NotImplementedError(f"the {self.name} backend does not rank next tokens")

    def _cut(self, ids: list[int], stop_loops: int = 0, end_dropped: bool = False) -> tuple[str, int]:
        """The text before the first stop token, and the tokens generated (the stop token included), or
        before the end of the first loop. `end_dropped`: the engine ended the sequence on a stop token that
        it left out of `ids`."""
        stop = next((n for n, t in enumerate(ids) if t in self.stop_ids), None)
        loop = loop_end(ids[:stop], stop_loops)  # a loop before the stop token: a live stop ended it there
        if loop is not None:
            return self.tokenizer.decode(ids[:loop], skip_special_tokens=False), loop
        if stop is not None:
            return self.tokenizer.decode(ids[:stop], skip_special_tokens=False), stop + 1
        return self.tokenizer.decode(ids, skip_special_tokens=False), len(ids) + end_dropped


def stop_ids(model_dir: Path, tokenizer) -> set[int]:
    """The generation config's end tokens and the tokenizer's own."""
    ids = {tokenizer.eos_token_id}
    gen = model_dir / "generation_config.json"
    if gen.exists():
        eos = json.loads(gen.read_text()).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [eos])
    return {i for i in ids if i is not None}
