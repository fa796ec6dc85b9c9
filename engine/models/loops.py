"""Loops in generated tokens (a harness's `sampling.stop_loops`): an answer whose tokens end in one span
repeated n times in a row, such as a small model writing the same call until the token limit. Nothing it
writes after that is of use, and each such token costs a decoding step; the answer is cut where the loop is
first seen, whether the backend stopped it there (CTranslate2, transformers) or not."""
from __future__ import annotations

MAX_SPAN = 64     # tokens: a longer repeated span is not looked for
MIN_LOOP = 32     # tokens: the repeats of a loop cover at least this many, so "0000" or indentation is none


class LoopWatch:
    """Reads one sequence's tokens one at a time and tells when they end in a loop. For each span length p
    it keeps how many tokens in a row equal the one p before: n repeats of a p-token span are (n - 1) * p."""

    def __init__(self, repeats: int):
        self.repeats = repeats
        self.tokens: list[int] = []
        self.run = [0] * (MAX_SPAN + 1)

    def push(self, token: int) -> bool:
        """Adds a token; whether the tokens now end in a loop."""
        self.tokens.append(token)
        n, looped = len(self.tokens), False
        for p in range(1, min(MAX_SPAN, n - 1) + 1):
            self.run[p] = self.run[p] + 1 if self.tokens[-1 - p] == token else 0
            looped |= self.run[p] >= (self.repeats - 1) * p and self.repeats * p >= MIN_LOOP
        return looped


def loop_end(ids: list[int], repeats: int) -> int | None:
    """How many tokens of `ids` come before the end of the first loop of `repeats` repeats (None: no loop)."""
    if repeats < 2:
        return None
    watch = LoopWatch(repeats)
    return next((i + 1 for i, t in enumerate(ids) if watch.push(t)), None)
