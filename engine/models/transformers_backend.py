"""Generation through Hugging Face transformers (CPU or GPU): left-padded batches, one generate per batch."""
from __future__ import annotations

from engine.models.generation import ChatBackend
from engine.models.loops import LoopWatch


class TransformersBackend(ChatBackend):
    name = "transformers"

    def __init__(self, model_dir, *, batch_size: int = 32, device: str | None = None, seed: int = 0,
                 dtype: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        from engine.models import resolve_dtype

        super().__init__(model_dir, seed=seed)
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = resolve_dtype(dtype, self.device)
        self.dtype_asked = dtype is not None  # a spec without a dtype keeps the plain label
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=getattr(torch, self.dtype))
        self.model.to(self.device).eval()
        self.batch_size = batch_size

    @property
    def label(self) -> str:
        return f"transformers:{self.dtype}" if self.dtype_asked else "transformers"

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160, stop_loops: int = 0) -> list[tuple[str, int]]:
        """(text, generated tokens) per prompt, in order; text stops before the stop token, and a sequence
        caught in a loop stops decoding there."""
        torch = self.torch
        torch.manual_seed(self.seed)
        encoded = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))  # similar lengths pad less
        results: list[tuple[str, int]] = [("", 0)] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            batch = self.tokenizer.pad({"input_ids": [encoded[i] for i in idx]}, return_tensors="pt").to(self.device)
            sampling = dict(do_sample=True, temperature=temperature, top_p=top_p) if temperature > 0 else \
                dict(do_sample=False, temperature=None, top_p=None, top_k=None)
            if stop_loops:
                sampling["stopping_criteria"] = [self._loop_stopper(stop_loops, len(idx))]
            with torch.inference_mode():
                out = self.model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                                          eos_token_id=sorted(self.stop_ids), **sampling)
            new = out[:, batch["input_ids"].shape[1]:].tolist()
            for i, ids in zip(idx, new):
                results[i] = self._cut(ids, stop_loops)
        return results

    def _loop_stopper(self, repeats: int, rows: int):
        """A stopping criterion that ends each row of the batch once its new tokens loop."""
        from transformers import StoppingCriteria

        torch, watches = self.torch, [LoopWatch(repeats) for _ in range(rows)]

        class StopLoops(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return torch.tensor([w.push(t) for w, t in zip(watches, input_ids[:, -1].tolist())],
                                    dtype=torch.bool, device=input_ids.device)
        return StopLoops()

    def next_tokens(self, prompt: str, *, n: int) -> list[str]:
        ids = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(self.device)
        with self.torch.inference_mode():
            logits = self.model(ids).logits[0, -1]
        return [self.tokenizer.decode([t], skip_special_tokens=False)
                for t in self.torch.topk(logits, min(n, logits.shape[-1])).indices.tolist()]
