"""Generation through CTranslate2, an inference engine made for CPUs (int8 on AVX-512/VNNI).

A checkpoint is converted once with CTranslate2's own converter (float32 weights; int8 is applied when
the model is loaded, so one conversion serves every compute type) and cached beside it; a checkpoint
whose weights changed is converted again. The k samples of one prompt share one prefill
(`num_hypotheses`); a batch holds prompts of similar length, and when they start with the same long prefix
(system prompt + home) it runs as a `static_prompt`, whose state CTranslate2 computes once per batch.

A prompt that goes on from an answer already begun (constrained decoding resumes and ranks next tokens
several times per turn) runs its chat prompt as a cached static prompt: the chat prompt's state is computed
once, not at every resumption. CTranslate2 never evicts a cached state, so the cache is bounded here."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

from engine.models.generation import ChatBackend
from engine.models.loops import LoopWatch

STAMP = "coevo_source.json"
MIN_SHARED_PREFIX = 32  # tokens; a shorter shared prefix is not worth a separate forward pass
# prompts of a batch may differ by this many tokens: an int8 decoding step is cheap next to its prefill, so int8
# gains from full batches more than it loses to token-by-token prompt tails. Measured on 40 smart-home prompts
# of SmolLM2-135M on 2 cores: int8 22 s at 64, 29 s at 16, 47 s with one batch per home; float32 32 s at 16,
# 37 s at 64, 30 s with one batch per home.
LENGTH_TOLERANCE = {"int8": 64, "int8_float32": 64}
DEFAULT_TOLERANCE = 16
CACHE_BYTES = 1 << 30  # the cached chat prompts' decoder states; SmolLM2-135M's take about 140 kB a token


def fingerprint(model_dir: Path) -> str:
    """Changes whenever the checkpoint's config or weights do."""
    h = hashlib.sha256((model_dir / "config.json").read_bytes())
    for f in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def cache_dir(model_dir: Path) -> Path:
    """Beside the checkpoint (`NAME.ct2/`), or in the user cache when its folder is read-only."""
    beside = model_dir.with_name(model_dir.name + ".ct2")
    if os.access(model_dir.parent, os.W_OK):
        return beside
    key = hashlib.sha256(str(model_dir).encode()).hexdigest()[:16]
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "coevo-rsi" / "ct2" / key


def ensure_converted(model_dir) -> Path:
    """The CTranslate2 model of a Hugging Face checkpoint, converted now unless cached and current."""
    model_dir = Path(model_dir).resolve()
    out = cache_dir(model_dir)
    want = fingerprint(model_dir)
    stamp = out / STAMP
    if stamp.exists() and json.loads(stamp.read_text()).get("fingerprint") == want:
        return out
    from ctranslate2.converters import TransformersConverter

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    TransformersConverter(str(model_dir), low_cpu_mem_usage=True).convert(str(tmp), quantization="float32")
    (tmp / STAMP).write_text(json.dumps({"fingerprint": want, "source": str(model_dir)}))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


class CTranslate2Backend(ChatBackend):
    name = "ctranslate2"

    def __init__(self, model_dir, *, compute_type: str = "float32", batch_size: int = 32, seed: int = 0,
                 threads: int = 0):
        import ctranslate2

        super().__init__(model_dir, seed=seed)
        self.compute_type = compute_type
        self.batch_size = batch_size
        self.length_tolerance = LENGTH_TOLERANCE.get(compute_type, DEFAULT_TOLERANCE)
        self.generator = ctranslate2.Generator(str(ensure_converted(self.model_dir)), device="cpu",
                                               compute_type=compute_type, intra_threads=threads)
        self.answer_marker = generation_prompt(self.tokenizer)
        self.cache_tokens = CACHE_BYTES // state_bytes_per_token(self.model_dir)
        self._cached: set[tuple[str, ...]] = set()
        self._cached_tokens = 0

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160, stop_loops: int = 0) -> list[tuple[str, int]]:
        """(text, generated tokens) per prompt, in order; identical prompts share one prefill, and a sequence
        caught in a loop stops decoding there."""
        import ctranslate2

        ctranslate2.set_random_seed(self.seed)
        tok = self.tokenizer
        unique: dict[str, list[int]] = defaultdict(list)  # prompt -> the positions asking for it
        for i, p in enumerate(prompts):
            unique[p].append(i)
        encoded = {p: tok.convert_ids_to_tokens(tok(p, add_special_tokens=False)["input_ids"]) for p in unique}
        sampling = (dict(sampling_topk=0, sampling_topp=top_p, sampling_temperature=temperature)
                    if temperature > 0 else dict(sampling_topk=1))
        results: list[tuple[str, int]] = [("", 0)] * len(prompts)
        for static, batch in _batches(list(unique), encoded, self.batch_size, self.length_tolerance):
            chat = self._cached_chat_prompt(encoded[batch[0]]) if len(batch) == 1 else []
            static, cached = (chat, True) if chat else (static, False)
            # greedy answers of one prompt are all the same: decode it once and copy it
            wanted = {p: len(unique[p]) if temperature > 0 else 1 for p in batch}
            for n in sorted(set(wanted.values())):  # one call per hypothesis count
                same_n = [p for p in batch if wanted[p] == n]
                out = self.generator.generate_batch(
                    [encoded[p][len(static):] for p in same_n], static_prompt=static or None,
                    cache_static_prompt=cached, max_length=max_new_tokens, num_hypotheses=n,
                    end_token=sorted(self.stop_ids), include_prompt_in_result=False,
                    callback=_loop_stopper(stop_loops) if stop_loops else None, **sampling)
                for p, res in zip(same_n, out):
                    for k, pos in enumerate(unique[p]):
                        ids = res.sequences_ids[k % n]
                        # CTranslate2 drops the end token: a sequence shorter than the limit and not stopped
                        # in a loop ended on one
                        results[pos] = self._cut(ids, stop_loops, end_dropped=len(ids) < max_new_tokens)
        return results

    def next_tokens(self, prompt: str, *, n: int) -> list[str]:
        tokens = self.tokenizer.convert_ids_to_tokens(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        static = self._cached_chat_prompt(tokens)
        # the prompt but its last token is forwarded at once; the alternatives are ranked at the one position
        # decoded after it
        out = self.generator.generate_batch(
            [tokens[len(static):]], static_prompt=static or None, cache_static_prompt=bool(static),
            return_alternatives=True, num_hypotheses=n, max_length=1, sampling_topk=1, include_prompt_in_result=False)
        return [self.tokenizer.decode(ids[:1], skip_special_tokens=False) for ids in out[0].sequences_ids]

    def _cached_chat_prompt(self, tokens: list[str]) -> list[str]:
        """The chat prompt before the answer that `tokens` go on from, its state cached by CTranslate2; [] when
        no answer has begun. A prompt is always split there, cached or not, so a cache hit changes no answer."""
        start = answer_start(tokens, self.answer_marker)
        if start == 0 or start == len(tokens):
            return []
        key = tuple(tokens[:start])
        if key not in self._cached:
            if self._cached and self._cached_tokens + start > self.cache_tokens:
                # the cache has no eviction: reloading the model drops every cached state at once
                self.generator.unload_model()
                self.generator.load_model()
                self._cached.clear()
                self._cached_tokens = 0
            self._cached.add(key)
            self._cached_tokens += start
        return list(key)


def generation_prompt(tokenizer) -> list[str]:
    """The tokens the chat template writes before an assistant's answer (`<|im_start|>assistant\\n` in
    ChatML); [] for a template that writes none."""
    messages = [{"role": "user", "content": "x"}]
    closed, opened = (tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=g)
                      for g in (False, True))
    if not opened.startswith(closed) or opened == closed:
        return []
    return tokenizer.convert_ids_to_tokens(tokenizer(opened[len(closed):], add_special_tokens=False)["input_ids"])


def answer_start(tokens: list[str], marker: list[str]) -> int:
    """The position after the last `marker` in `tokens`, where the answer being written starts; 0 without one."""
    m = len(marker)
    for i in range(len(tokens) - m, -1, -1) if m else ():
        if tokens[i:i + m] == marker:
            return i + m
    return 0


def state_bytes_per_token(model_dir: Path) -> int:
    """What the decoder state of one prompt token takes in float32: keys and values of every layer."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return 2 * config["num_hidden_layers"] * config["hidden_size"] * 4


def _loop_stopper(repeats: int):
    """A generate_batch callback that stops each sequence (batch index and hypothesis) once it loops."""
    watches: dict[tuple[int, int], LoopWatch] = {}

    def step(result) -> bool:
        key = (result.batch_id, result.hypothesis_id)
        if key not in watches:
            watches[key] = LoopWatch(repeats)
        return watches[key].push(result.token_id)
    return step


def _batches(prompts: list[str], encoded: dict[str, list[str]], batch_size: int, tolerance: int):
    """Yield (shared token prefix or [], prompts): batches of at most batch_size prompts whose lengths differ
    by at most `tolerance` tokens.

    CTranslate2 forwards a batch's prompts at once only up to the shortest one's length and feeds the rest
    token by token, so similar lengths spend far fewer steps. A batch whose prompts share at least
    MIN_SHARED_PREFIX tokens (same system prompt and home) runs that prefix as its static prompt."""
    batch: list[str] = []
    for p in sorted(prompts, key=lambda p: len(encoded[p])):
        if batch and (len(batch) == batch_size or len(encoded[p]) - len(encoded[batch[0]]) > tolerance):
            yield _shared_prefix(batch, encoded), batch
            batch = []
        batch.append(p)
    if batch:
        yield _shared_prefix(batch, encoded), batch


def _shared_prefix(batch: list[str], encoded: dict[str, list[str]]) -> list[str]:
    """The longest token prefix all of the batch's prompts share (less one token, so none is empty), or []
    when shorter than MIN_SHARED_PREFIX or the batch holds one prompt."""
    if len(batch) < 2:
        return []
    first, limit = encoded[batch[0]], min(len(encoded[p]) for p in batch) - 1
    n = 0
    while n < limit and all(encoded[p][n] == first[n] for p in batch):
        n += 1
    return first[:n] if n >= MIN_SHARED_PREFIX else []
