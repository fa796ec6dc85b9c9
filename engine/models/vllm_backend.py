"""Rollouts on a GPU node through vLLM's offline engine (`vllm.LLM`): the checkpoint's own tokenizer and
chat template, the k samples of a prompt as one request with n outputs sharing its prefill."""
from __future__ import annotations

from engine.models.generation import MAX_RANKED, ChatBackend


class VllmBackend(ChatBackend):
    name = "vllm"

    def __init__(self, model_dir, *, seed: int = 0, gpu_memory_utilization: float = 0.85):
        super().__init__(model_dir, seed=seed)
        from vllm import LLM

        # prefix caching also serves constrained decoding, which resumes a turn from a prefix of it
        self.llm = LLM(model=str(self.model_dir), dtype="bfloat16", seed=seed, max_logprobs=MAX_RANKED,
                       gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True)

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160, stop_loops: int = 0) -> list[tuple[str, int]]:
        from vllm import SamplingParams
        # identical prompts (the k samples of one item) become one request with n outputs
        unique = list(dict.fromkeys(prompts))
        n = {p: prompts.count(p) for p in unique}
        params = [SamplingParams(n=n[p], temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                                 max_tokens=max_new_tokens, stop_token_ids=sorted(self.stop_ids), seed=self.seed)
                  for p in unique]
        results = self.llm.generate(unique, params, use_tqdm=False)  # one batch: vLLM schedules it
        # vLLM has no per-token hook here: an answer caught in a loop is cut after decoding, where the loop ends
        outs = {p: [self._cut(list(o.token_ids), stop_loops) if stop_loops else (o.text, len(o.token_ids))
                    for o in r.outputs] for p, r in zip(unique, results)}
        return [outs[p].pop(0) for p in prompts]

    def next_tokens(self, prompt: str, *, n: int) -> list[str]:
        from vllm import SamplingParams
        out = self.llm.generate([prompt], SamplingParams(max_tokens=1, temperature=0.0, logprobs=n), use_tqdm=False)
        top = out[0].outputs[0].logprobs[0]  # token id -> Logprob: the n most probable and the one chosen
        ranked = sorted(top.items(), key=lambda kv: kv[1].rank)[:n]
        return [self.tokenizer.decode([t], skip_special_tokens=False) for t, _ in ranked]
