"""Generation through CTranslate2, an inference engine made for CPUs (int8 on AVX-512/VNNI).

A checkpoint is converted once with CTranslate2's own converter (float32 weights; int8 is applied when
the model is loaded, so one conversion serves every compute type) and cached beside it; a checkpoint
whose weights changed is converted again. The k samples of one prompt share one prefill
(`num_hypotheses`), and prompts that start with the same long prefix (system prompt + home) run
as one batch behind a `static_prompt`, whose state CTranslate2 computes once."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

from engine.models.generation import ChatBackend

STAMP = "coevo_source.json"
MIN_SHARED_PREFIX = 64  # tokens; shorter shared prefixes are not worth a separate batch


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
        self.generator = ctranslate2.Generator(str(ensure_converted(self.model_dir)), device="cpu",
                                               compute_type=compute_type, intra_threads=threads)

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160) -> list[tuple[str, int]]:
        """(text, generated tokens) per prompt, in order; identical prompts share one prefill."""
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
        for static, group in _prefix_groups(list(unique), encoded):
            for start in range(0, len(group), self.batch_size):
                chunk = group[start:start + self.batch_size]
                # greedy answers of one prompt are all the same: decode it once and copy it
                wanted = {p: len(unique[p]) if temperature > 0 else 1 for p in chunk}
                for n in sorted(set(wanted.values())):  # one call per hypothesis count
                    same_n = [p for p in chunk if wanted[p] == n]
                    out = self.generator.generate_batch(
                        [encoded[p][len(static):] for p in same_n], static_prompt=static or None,
                        cache_static_prompt=False, max_length=max_new_tokens, num_hypotheses=n,
                        end_token=sorted(self.stop_ids), include_prompt_in_result=False, **sampling)
                    for p, res in zip(same_n, out):
                        for k, pos in enumerate(unique[p]):
                            results[pos] = self._cut(res.sequences_ids[k % n], max_new_tokens)
        return results

    def _cut(self, ids: list[int], limit: int) -> tuple[str, int]:
        # CTranslate2 drops the end token; a sequence shorter than the limit ended on one
        text, n = super()._cut(ids)
        return text, n + (len(ids) < limit)


def _prefix_groups(prompts: list[str], encoded: dict[str, list[str]]):
    """Yield (shared token prefix or [], prompts): prompts grouped by their first MIN_SHARED_PREFIX tokens,
    each group with the longest prefix all of its prompts share (less one token, so none is empty)."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for p in prompts:
        groups[tuple(encoded[p][:MIN_SHARED_PREFIX])].append(p)
    for key, group in groups.items():
        if len(group) < 2 or len(key) < MIN_SHARED_PREFIX:
            yield [], group
            continue
        first, n = encoded[group[0]], MIN_SHARED_PREFIX
        limit = min(len(encoded[p]) for p in group) - 1
        while n < limit and all(encoded[p][n] == first[n] for p in group):
            n += 1
        yield first[:n], group
