"""Any OpenAI-compatible chat-completions server (vLLM, `swift deploy`, a llama.cpp server, a hosted API)
as a model backend, through the `openai` client: its retries with exponential backoff on connection
errors, 429 and 5xx, and its timeouts; a thread pool bounds the requests in flight.

The server applies the model's chat template, so the prompt the turn log keeps is the chat itself, as
JSON. The API key is read from the environment variable the spec names, never stored."""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from engine.errors import CoevoError


class EndpointError(CoevoError):
    """The server failed a request after its retries (or answered something unusable)."""


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, *, model: str, api_key_env: str = "OPENAI_API_KEY", concurrency: int = 4,
                 timeout_s: float = 60.0, retries: int = 3, seed: int = 0):
        from openai import OpenAI
        if not model:
            raise CoevoError(f"{base_url}: the openai backend needs a model name")
        self.base_url, self.model, self.seed = base_url, model, seed
        self.concurrency = max(1, concurrency)
        # local servers take any key; hosted ones read theirs from the environment
        self.client = OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "EMPTY",
                             timeout=timeout_s, max_retries=retries)
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()

    def chat_prompt(self, messages: list[dict]) -> str:
        return json.dumps(messages, ensure_ascii=False)

    def generate(self, prompts: list[str], *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = 160, stop_loops: int = 0) -> list[tuple[str, int]]:
        if stop_loops:  # an endpoint returns text, not the model's tokens a loop is found in
            raise CoevoError(f"the endpoint backend ({self.model}) cannot stop loops (sampling.stop_loops)")

        def one(prompt: str) -> tuple[str, int]:
            return self._complete(json.loads(prompt), temperature, top_p, max_new_tokens)
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(one, prompts))

    def _complete(self, messages, temperature, top_p, max_new_tokens) -> tuple[str, int]:
        import openai
        try:
            r = self.client.chat.completions.create(model=self.model, messages=messages, temperature=temperature,
                                                    top_p=top_p, max_tokens=max_new_tokens, seed=self.seed)
        except openai.APIStatusError as e:
            raise EndpointError(f"{self.base_url} ({self.model}): HTTP {e.status_code}: {_brief(e.message)}") from None
        except openai.APITimeoutError:
            raise EndpointError(f"{self.base_url} ({self.model}): no answer within the timeout") from None
        except openai.APIConnectionError as e:
            raise EndpointError(f"{self.base_url} ({self.model}): cannot connect: {e}") from None
        if not r.choices:
            raise EndpointError(f"{self.base_url} ({self.model}): an answer without choices")
        text = r.choices[0].message.content or ""
        tokens = r.usage.completion_tokens if r.usage else 0
        with self._lock:
            self.usage["requests"] += 1
            if r.usage:
                self.usage["prompt_tokens"] += r.usage.prompt_tokens
                self.usage["completion_tokens"] += r.usage.completion_tokens
        return text, tokens


def _brief(text: str, n: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."
