"""A model backend that answers from a script: for each episode (known by its opening messages), the
answers of its turns in order. It drives the real rollout runtime, judge and environments without a model."""
from __future__ import annotations

import json


def tokens(text: str) -> int:
    """A rough token count (three characters a token) for scripted outputs."""
    return max(1, len(text) // 3)


class ScriptedBackend:
    name = "scripted"

    def __init__(self, opening: int):
        """`opening`: how many messages start every chat (system prompt, few-shot pairs, the task input)."""
        self.opening = opening
        self.scripts: dict[str, list[str]] = {}

    def add(self, messages: list[dict], answers: list[str]) -> None:
        self.scripts[json.dumps(messages[:self.opening])] = answers

    def chat_prompt(self, messages: list[dict]) -> str:
        return json.dumps(messages)

    def generate(self, prompts: list[str], **_) -> list[tuple[str, int]]:
        out = []
        for prompt in prompts:
            messages = json.loads(prompt)
            answers = self.scripts[json.dumps(messages[:self.opening])]
            turn = sum(m["role"] == "assistant" for m in messages[self.opening:])
            text = answers[min(turn, len(answers) - 1)]  # a script that ran out repeats its last answer
            out.append((text, tokens(text)))
        return out
