"""Constrained decoding of call names (a harness's `sampling.constrain_names`): a call that names a tool outside
the task's tools for the item is decoded again from where its name went astray, taking at each point the most
probable next token that keeps the name one of the allowed ones.

Engines made for CPUs have no hook into their decoding loop, so the constraint is applied lazily: a turn is
generated freely, and only a turn whose name leaves the allowed set is resumed, from the last name boundary
('.', '_', ...) before the divergence. A resumption costs one ranked next-token list and one generation."""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from engine.harness.interfaces import ParseError, get_interface
from engine.models.generation import MAX_RANKED, ChatBackend

RANKS = (8, MAX_RANKED)  # next tokens looked at for one that keeps the name allowed; the longer list only when needed
MAX_RESUMES = 8  # per turn: a turn may name several calls
MAX_STEPS = 6    # continuations tried per name: one may leave the names again, or lead to a dead end


class NameSet:
    """The allowed call names, as prefix tests."""

    def __init__(self, names):
        self.names = sorted(set(names))
        self.known = set(self.names)
        self.chars = set("".join(self.names))  # any other character ends a name

    def viable(self, prefix: str) -> bool:
        i = bisect.bisect_left(self.names, prefix)
        return i < len(self.names) and self.names[i].startswith(prefix)

    def advance(self, name: str, text: str) -> tuple[int, str]:
        """Read `text` on from the partial `name`: (characters read, state), the state 'open' (all of it is
        still an allowed prefix), 'closed' (an allowed name ended before the character read last) or 'astray'
        (the characters read keep the name allowed, the next one does not)."""
        for i, ch in enumerate(text):
            if ch not in self.chars:
                return (i + 1, "closed") if name in self.known else (i, "astray")
            name += ch
            if not self.viable(name):
                return i, "astray"
        return len(text), "open"


def ranks_next_tokens(backend) -> bool:
    """Whether the backend can rank next tokens, which the constraint picks from."""
    method = getattr(type(backend), "next_tokens", None)
    return method is not None and method is not ChatBackend.next_tokens


@dataclass
class Constrained:
    text: str
    tokens: int
    names: int  # names the constraint chose


def unknown_name(spec, task, item, output: str) -> str | None:
    """The first call name in `output` outside the task's tools, when that is the turn's first fault."""
    try:
        calls = get_interface(spec.interface.name).parse(output, strict=spec.strict)
    except ParseError:
        return None
    for call in calls:
        reason = task.check_call(call, item)
        if reason:
            return call.name if reason.startswith("unknown tool") else None
    return None


def constrain(spec, task, item, backend, prompt: str, output: str, tokens: int, *, temperature: float
              ) -> Constrained:
    """The turn's output with every name outside the allowed set decoded again under the constraint (as far
    as the ranked tokens reach: a name no ranked token can keep allowed stays as the model wrote it)."""
    allowed = task.call_names(item, spec.task_options)
    result = Constrained(output, tokens, 0)
    if not allowed:
        return result
    names, searched = NameSet(allowed), 0
    for _ in range(MAX_RESUMES):
        bad = unknown_name(spec, task, item, result.text)
        start = result.text.find(bad, searched) if bad else -1
        if start < 0:
            return result
        resumed = _resume(names, backend, prompt, result.text, start, bad, spec, temperature)
        if resumed is None:
            return result
        result = Constrained(resumed[0], resumed[1], result.names + 1)
        searched = start
    return result


def _resume(names: NameSet, backend, prompt: str, output: str, start: int, bad: str, spec, temperature: float
            ) -> tuple[str, int] | None:
    """(output, tokens) with the name at `start` decoded under the constraint, or None when the ranked tokens
    cannot keep it allowed. A depth-first search: at each point the allowed tokens in rank order, each followed
    by a free continuation; where the continuation leaves the names a new point opens, and a point without
    allowed tokens left sends the search back to the one before ("heat" may lead nowhere where "heating" does)."""
    keep = max(n for n in range(len(bad) + 1) if names.viable(bad[:n]))
    keep = max((i + 1 for i, ch in enumerate(bad[:keep]) if not ch.isalnum()), default=0)  # a name boundary
    points = [(output[:start + keep], bad[:keep], None)]
    for _ in range(MAX_STEPS):
        while points:
            text, name, options = points[-1]
            if options is None:
                options = _allowed_tokens(names, backend, prompt + text, name)
                points[-1] = (text, name, options)
            pick = next(options, None)
            if pick is not None:
                break
            points.pop()
        else:
            return None
        token, read, state = pick
        text, name = text + token, name + token[:read - (state == "closed")]
        used = len(backend.tokenizer(text, add_special_tokens=False)["input_ids"])
        rest, n_rest = backend.generate([prompt + text], temperature=temperature, top_p=spec.sampling.top_p,
                                        max_new_tokens=max(1, spec.sampling.max_new_tokens - used))[0]
        if state == "open":
            read, state = names.advance(name, rest)
            if state == "astray":
                points.append((text + rest[:read], name + rest[:read], None))
                continue
        return text + rest, used + n_rest
    return None


def _allowed_tokens(names: NameSet, backend, prompt: str, name: str):
    """The next tokens that keep `name` allowed, most probable first: (token, characters read, state)."""
    seen = set()
    for n in RANKS:
        ranked = backend.next_tokens(prompt, n=n)
        for token in ranked:
            read, state = names.advance(name, token)
            if token and token not in seen and state != "astray":
                yield token, read, state
            seen.add(token)
        if len(ranked) < n:
            return
