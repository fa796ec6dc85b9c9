"""Constrained decoding of calls (a harness's `sampling.constrain_calls`): a call whose name is outside the
item's tools, or whose argument names are not the tool's, is decoded again from where it went wrong.

- A name: from the last name boundary ('.', '_', ...) before it went astray, taking at each point the most
  probable next token that keeps the name one of the allowed ones, backing off a prefix that leads nowhere
  (to the boundaries before it, the model's own ones included). A name is found in output that does not
  parse too (a turn cut off by the token limit while the model repeats an invented name).
- Argument names: the calls so far are rendered in the harness's interface up to the first argument value
  the call lacks (or to the end of the call, without the arguments it should not have), and the model goes
  on from there: it writes the value and the rest.
- A call that is not one (`{"mode": ...}` where `{"name": ...}` belongs, an empty answer): the sound calls
  before it are rendered up to where the next call's name starts, and the name is decoded as above.
- The end: an answer ends where its interface closes it (a JSON array, `</calls>`), and after the most calls
  one answer of the task can need (`Task.max_calls`, a JSON schema's maxItems): what the model writes after
  that is no part of it, as a decoder held to the interface's grammar would stop there. A model that repeats
  calls until the token limit cuts it off thus gives a wrong answer, not an unreadable one.

Engines made for CPUs have no hook into their decoding loop, so the constraint is applied lazily: a turn is
generated freely and only a faulty call is decoded again, at the cost of one generation (and, for a name,
one ranked next-token list) per resumption. The resumptions of one turn share a budget of new tokens
(RESUME_BUDGET turns' worth): a model that runs on to the token limit after every mend would otherwise make
each turn cost MAX_RESUMES x MAX_STEPS generations of that length."""
from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from functools import cache

from engine.harness.interfaces import Call, ParseError, SchemaError, get_interface
from engine.models.generation import MAX_RANKED, ChatBackend

RANKS = (8, MAX_RANKED)  # next tokens looked at for one that keeps the name allowed; the longer list only when needed
MAX_RESUMES = 8  # per turn: a turn may make several calls
MAX_STEPS = 6    # continuations tried per name: one may leave the names again, or lead to a dead end
RESUME_BUDGET = 2  # new tokens all resumptions of a turn may generate, in units of sampling.max_new_tokens
PLACEHOLDER = "qqqq"  # a call name that occurs nowhere else in a rendering


def ranks_next_tokens(backend) -> bool:
    """Whether the backend can rank next tokens, which the name constraint picks from."""
    method = getattr(type(backend), "next_tokens", None)
    return method is not None and method is not ChatBackend.next_tokens


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


@dataclass
class Constrained:
    text: str
    tokens: int
    calls: int  # mends: calls the constraint decoded again, and an answer cut where its interface closes it


@dataclass
class Budget:
    """The new tokens the resumptions of one turn may still generate. A resumption starts only when the
    budget can pay the longest continuation it may generate, so none is cut short by it."""
    left: int


class OutOfBudget(Exception):
    pass


@dataclass
class Fault:
    """The first faulty call of a turn that the constraint can mend: its name, its argument names, or a call
    that is not one."""
    kind: str  # 'name', 'arguments' or 'call'
    before: list[Call]  # the calls before it, all sound
    call: Call
    expected: list[str] | None = None  # the argument names the tool takes
    start: int | None = None  # where the name starts in the output, when it was found without parsing


def first_fault(spec, task, item, output: str, names: NameSet) -> Fault | None:
    """The turn's first fault when it is a call the constraint can mend (None: sound, a fault in argument
    values, or unparseable output without a name that goes astray)."""
    interface = get_interface(spec.interface.name)
    try:
        calls = interface.parse(output, strict=spec.strict)
    except SchemaError:  # the format parsed, but a call in it is not one
        return Fault("call", [call for call, _ in interface.leading_calls(output)], Call(""))
    except ParseError:
        return _astray_name(spec.interface.name, output, names)
    for i, call in enumerate(calls):
        reason = task.check_call(call, item)
        if not reason:
            continue
        if reason.startswith("unknown tool"):
            return Fault("name", calls[:i], call)
        expected = task.arg_names(item, call.name)
        if expected is not None and sorted(call.args) != sorted(expected):
            return Fault("arguments", calls[:i], call, expected)
        return None
    return None


@cache
def name_opener(interface: str) -> re.Pattern:
    """What comes right before a call's name in the interface (`{"name": "` in JSON), whitespace allowed
    around its punctuation: the common end of the text before the name in two renderings."""
    render, name = get_interface(interface).render, PLACEHOLDER
    before = [text[:text.index(name)] for text in (render([Call(name)]), render([Call("aaaa"), Call(name)]))]
    words = re.findall(r"\w+|[^\w\s]", os.path.commonprefix([b[::-1] for b in before])[::-1])
    pattern = re.escape(words[0])
    for a, b in zip(words, words[1:]):
        pattern += (r"\s+" if a[-1].isalnum() and b[0].isalnum() else r"\s*") + re.escape(b)
    return re.compile(pattern)


def _astray_name(interface: str, output: str, names: NameSet) -> Fault | None:
    """The first name in output that does not parse that leaves the allowed names (one still allowed where
    the output ends was cut off, not invented)."""
    for m in name_opener(interface).finditer(output):
        _, state = names.advance("", output[m.end():])
        if state == "astray":
            bad = re.match(r"[^\s\"'<>]*", output[m.end():]).group()
            return Fault("name", [], Call(bad), start=m.end())
    return None


def constrain(spec, task, item, backend, prompt: str, output: str, tokens: int, *, temperature: float
              ) -> Constrained:
    """The turn's output ended where its answer is complete, with each faulty call decoded again under the
    constraint (as far as it reaches: a name no ranked token can keep allowed stays as the model wrote it, and
    so does a call whose mend the turn's budget of new tokens cannot pay)."""
    names, searched = NameSet(task.call_names(item, spec.task_options)), 0
    interface, result = get_interface(spec.interface.name), Constrained(output, tokens, 0)
    budget = Budget(RESUME_BUDGET * spec.sampling.max_new_tokens)
    for _ in range(MAX_RESUMES):
        result = _end_answer(result, interface, backend, task.max_calls)
        if not names.names:
            return result
        fault = first_fault(spec, task, item, result.text, names)
        if fault is None:
            return result
        try:
            if fault.kind == "name":
                start = fault.start if fault.start is not None else result.text.find(fault.call.name, searched)
                resumed = _resume_name(names, backend, prompt, result.text, start, fault.call.name, spec,
                                       temperature, budget) if start >= 0 else None
                searched = max(start, 0)
            elif fault.kind == "call":
                resumed = _resume_call(fault, names, backend, prompt, spec, temperature, budget)
            else:
                resumed = _resume_arguments(fault, backend, prompt, spec, temperature, budget)
        except OutOfBudget:
            resumed = None
        if resumed is None:
            return result
        result = Constrained(resumed[0], resumed[1], result.calls + 1)
    return _end_answer(result, interface, backend, task.max_calls)


def _end_answer(result: Constrained, interface, backend, max_calls: int | None) -> Constrained:
    """The output without what follows the end of its answer, or its `max_calls`-th call."""
    end = interface.answer_end(result.text)
    if end is not None and result.text[end:].strip():
        text = result.text[:end]
        result = Constrained(text, _tokens(backend, text), result.calls + 1)
    if max_calls is None:
        return result
    calls = interface.leading_calls(result.text)
    if len(calls) < max_calls or (len(calls) == max_calls and _ends_there(interface, result.text)):
        return result
    text = interface.render([call for call, _ in calls[:max_calls]])
    return Constrained(text, _tokens(backend, text), result.calls + 1)


def _ends_there(interface, text: str) -> bool:
    """Whether `text` is a whole answer (its last call is where it ends)."""
    try:
        interface.parse(text)
    except ParseError:
        return False
    return True


def _tokens(backend, text: str) -> int:
    return len(backend.tokenizer(text, add_special_tokens=False)["input_ids"])


def _go_on(backend, prompt: str, text: str, spec, temperature: float, budget: Budget) -> tuple[str, int, int]:
    """(the free continuation of `text`, its tokens, the tokens of `text`), paid from the turn's budget."""
    used = _tokens(backend, text)
    limit = max(1, spec.sampling.max_new_tokens - used)
    if limit > budget.left:
        raise OutOfBudget
    rest, n_rest = backend.generate([prompt + text], temperature=temperature, top_p=spec.sampling.top_p,
                                    max_new_tokens=limit, stop_loops=spec.sampling.stop_loops)[0]
    budget.left -= n_rest
    return rest, n_rest, used


def _resume_arguments(fault: Fault, backend, prompt: str, spec, temperature: float, budget: Budget
                      ) -> tuple[str, int]:
    """The calls so far, rendered in the interface up to the first argument value the call lacks (or to the
    end of the call, without the arguments it should not have), then the model's own continuation. Where
    the text stops comes from two renderings that differ only there."""
    interface = get_interface(spec.interface.name)
    kept = {k: fault.call.args[k] for k in fault.expected if k in fault.call.args}
    missing = [k for k in fault.expected if k not in fault.call.args]
    if missing:  # stop where the value of the first missing argument starts
        a, b = ([*fault.before, Call(fault.call.name, {**kept, missing[0]: v})] for v in (1, 2))
    else:        # stop after the call, where the next call or the end starts
        a = [*fault.before, Call(fault.call.name, kept)]
        b = [*a, Call(fault.call.name, kept)]
    text = os.path.commonprefix([interface.render(a), interface.render(b)])
    rest, n_rest, used = _go_on(backend, prompt, text, spec, temperature, budget)
    return text + rest, used + n_rest


def _resume_call(fault: Fault, names: NameSet, backend, prompt: str, spec, temperature: float, budget: Budget
                 ) -> tuple[str, int] | None:
    """The sound calls before the fault, rendered up to where the next call's name starts, and the name
    decoded from there under the constraint."""
    rendered = get_interface(spec.interface.name).render([*fault.before, Call(PLACEHOLDER)])
    text = rendered[:rendered.index(PLACEHOLDER)]
    return _resume_name(names, backend, prompt, text, len(text), "", spec, temperature, budget)


def _resume_name(names: NameSet, backend, prompt: str, output: str, start: int, bad: str, spec, temperature: float,
                 budget: Budget) -> tuple[str, int] | None:
    """(output, tokens) with the name at `start` decoded under the constraint, or None when the ranked tokens
    cannot keep it allowed. A depth-first search: at each point the allowed tokens in rank order, each followed
    by a free continuation; where the continuation leaves the names a new point opens, and a point without
    allowed tokens left sends the search back to the one before ("heat" may lead nowhere where "heating" does).
    The search starts at the last name boundary before the name goes astray, with the boundaries before it
    to fall back on: `set_` may allow no ranked token where `study_room.curtain.` allows `close`."""
    keep = max(n for n in range(len(bad) + 1) if names.viable(bad[:n]))
    bounds = [0] + [i + 1 for i, ch in enumerate(bad[:keep]) if not ch.isalnum()]  # the name boundaries
    points = [(output[:start + b], bad[:b], None) for b in bounds]
    dead = set()  # points without allowed tokens left: a continuation that reaches one again goes no further
    for _ in range(MAX_STEPS):
        while points:
            text, name, options = points[-1]
            if options is None:
                options = _allowed_tokens(names, backend, prompt + text, name)
                points[-1] = (text, name, options)
            pick = next(options, None)
            if pick is not None:
                break
            dead.add(text)
            points.pop()
        else:
            return None
        token, read, state = pick
        text, name = text + token, name + token[:read - (state == "closed")]
        rest, n_rest, used = _go_on(backend, prompt, text, spec, temperature, budget)
        if state == "open":
            read, state = names.advance(name, rest)
            if state == "astray":
                if text + rest[:read] not in dead:
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
