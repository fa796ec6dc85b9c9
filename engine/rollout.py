"""The rollout runtime: many episodes at once, generation batched across episodes turn by turn,
every turn judged against the harness interface (a mismatch) and answered by the task's environment."""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from engine.errors import CoevoError
from engine.harness.interfaces import MISMATCH_KINDS, Call, ParseError, get_interface
from engine.harness.spec import HarnessSpec
from engine.call_constraint import constrain, ranks_next_tokens
from engine.tasks.base import Item, Task


@dataclass
class Turn:
    prompt: str
    output: str
    tokens: int
    action: list[dict] | None
    parse_error: str | None
    feedback: str
    reward: float
    mismatch_kind: str | None = None  # one of MISMATCH_KINDS when parse_error is set
    constrained: int = 0  # mends constrained decoding made (`sampling.constrain_calls`): calls decoded again, an answer ended
    free_output: str | None = None  # the model's own output, where constrained decoding mended it

    @property
    def mismatch(self) -> bool:
        return self.parse_error is not None


@dataclass
class Episode:
    item: Item
    sample: int
    messages: list[dict]
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    success: bool = False
    reward: float = 0.0
    prediction: object = None

    @property
    def mismatched_turns(self) -> int:
        return sum(t.mismatch for t in self.turns)


def build_messages(spec: HarnessSpec, task: Task, item: Item) -> list[dict]:
    """The chat an episode starts from: system prompt, few-shot pairs, the task input."""
    interface = get_interface(spec.interface.name)
    messages = [{"role": "system", "content": spec.system_prompt.format(
        context=task.context(item, spec.task_options), format=interface.instructions(task.example_call()))}]
    for shot in spec.few_shot:
        messages.append({"role": "user", "content": spec.user_template.format(input=shot.input)})
        messages.append({"role": "assistant", "content": interface.render(shot.as_calls())})
    messages.append({"role": "user", "content": spec.user_template.format(input=item.input)})
    return messages


def judge(spec: HarnessSpec, task: Task, item: Item, output: str
          ) -> tuple[list[Call] | None, str | None, str | None]:
    """(calls, None, None) when the output honours the interface and tool schema, else (None, why not,
    which of MISMATCH_KINDS)."""
    interface = get_interface(spec.interface.name)
    try:
        calls = interface.parse(output, strict=spec.strict)
    except ParseError as e:
        return None, str(e), e.kind
    for call in calls:
        reason = task.check_call(call, item)
        if reason:  # every task names a call outside its tool set "unknown tool ..."
            return None, reason, "unknown tool" if reason.startswith("unknown tool") else "wrong arguments"
    return calls, None, None


def run_episodes(spec: HarnessSpec, task: Task, backend, items: list[Item], *, k: int = 1,
                 temperature: float | None = None, progress: Callable[[int, int], None] | None = None
                 ) -> list[Episode]:
    """Run k episodes per item to the end; each turn is one batched generate over all live episodes."""
    temp = spec.sampling.temperature if temperature is None else temperature
    if spec.sampling.constrain_calls and not ranks_next_tokens(backend):
        raise CoevoError(f"harness {spec.name!r} constrains calls (sampling.constrain_calls); the "
                         f"{getattr(backend, 'label', backend)} backend ranks no next tokens, which that needs")
    episodes = [Episode(item, s, build_messages(spec, task, item)) for item in items for s in range(k)]
    envs = {id(e): task.environment(e.item, spec.task_options) for e in episodes}
    for turn_no in range(spec.loop.max_turns):
        live = [e for e in episodes if not e.done]
        if not live:
            break
        prompts = [backend.chat_prompt(e.messages) for e in live]
        outputs = backend.generate(prompts, temperature=temp, top_p=spec.sampling.top_p,
                                   max_new_tokens=spec.sampling.max_new_tokens, stop_loops=spec.sampling.stop_loops)
        last_turn = turn_no == spec.loop.max_turns - 1
        for e, prompt, (text, ntok) in zip(live, prompts, outputs):
            constrained, free = 0, None
            if spec.sampling.constrain_calls:
                fixed = constrain(spec, task, e.item, backend, prompt, text, ntok, temperature=temp)
                if fixed.calls:
                    free, text, ntok, constrained = text, fixed.text, fixed.tokens, fixed.calls
            calls, error, kind = judge(spec, task, e.item, text)
            e.messages.append({"role": "assistant", "content": text})
            if calls is None:
                retry = spec.loop.retry_on_parse_error and not last_turn
                feedback = spec.loop.retry_message.format(error=error) if retry else ""
                e.turns.append(Turn(prompt, text, ntok, None, error, feedback, 0.0, kind, constrained, free))
                if retry:
                    e.messages.append({"role": "user", "content": feedback})
                else:
                    e.done = True
                continue
            result = envs[id(e)].step(calls)
            feedback = result.feedback if spec.loop.feedback == "execution" else ""
            e.turns.append(Turn(prompt, text, ntok, [c.to_dict() for c in calls], None, feedback, result.reward,
                                constrained=constrained, free_output=free))
            e.reward += result.reward
            e.prediction = result.prediction
            e.success = result.success
            if result.done or last_turn:
                e.done = True
            elif feedback:
                e.messages.append({"role": "user", "content": feedback})
        if progress:
            progress(sum(e.done for e in episodes), len(episodes))
    return episodes


def summarize(episodes: list[Episode]) -> dict:
    turns = sum(len(e.turns) for e in episodes)
    mismatched = sum(e.mismatched_turns for e in episodes)
    kinds = Counter(t.mismatch_kind for e in episodes for t in e.turns if t.mismatch)
    return {"episodes": len(episodes), "turns": turns, "mismatched_turns": mismatched,
            "timr": mismatched / turns if turns else 0.0,
            "constrained_turns": sum(t.constrained > 0 for e in episodes for t in e.turns),
            "tokens": sum(t.tokens for e in episodes for t in e.turns),
            "mismatch_kinds": {k: kinds[k] for k in MISMATCH_KINDS if kinds[k]}}


def episode_rows(episodes: list[Episode]) -> tuple[list[dict], list[dict]]:
    """Archive rows (episodes, turns) for an evaluation."""
    ep_rows, turn_rows = [], []
    for idx, e in enumerate(episodes):
        ep_rows.append(dict(idx=idx, item_id=e.item.id, input=e.item.input, sample=e.sample, success=int(e.success), reward=e.reward,
                            turns=len(e.turns), mismatched_turns=e.mismatched_turns,
                            prediction=json.dumps(e.prediction) if e.prediction is not None else None))
        for t_no, t in enumerate(e.turns):
            turn_rows.append(dict(episode=idx, turn=t_no, prompt=t.prompt, output=t.output,
                                  action=json.dumps(t.action) if t.action is not None else None,
                                  parse_error=t.parse_error, mismatch=int(t.mismatch), feedback=t.feedback,
                                  reward=t.reward, tokens=t.tokens, constrained=t.constrained,
                                  free_output=t.free_output))
    return ep_rows, turn_rows


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0
