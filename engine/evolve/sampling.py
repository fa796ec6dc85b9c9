"""Rejection sampling: k sampled episodes per training task under a harness; only verified successes
(the task's checker says success and no turn is a mismatch) become ms-swift `messages` rows."""
from __future__ import annotations

from pathlib import Path

from engine.harness.spec import HarnessSpec
from engine.jsonl import read_jsonl, write_jsonl
from engine.rollout import run_episodes
from engine.tasks.base import Item, Task
from engine.train.data import gold_conversations


def rejection_sample(spec: HarnessSpec, task: Task, backend, items: list[Item], *, k: int, temperature: float,
                     out_path, max_share: float = 1.0, constrain: bool = False) -> dict:
    """Write the kept conversations to out_path; return the counts for the archive. Without `constrain` the
    harness's constrained decoding is off here: a faulty sample is dropped as the model wrote it."""
    if spec.sampling.constrain_calls and not constrain:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"constrain_calls": False})})
    episodes = run_episodes(spec, task, backend, items, k=k, temperature=temperature)
    kept: dict[str, list[dict]] = {}
    seen = set()
    for e in episodes:
        if not e.success or e.mismatched_turns:
            continue
        key = (e.item.id, tuple(m["content"] for m in e.messages if m["role"] == "assistant"))
        if key in seen:
            continue
        seen.add(key)
        kept.setdefault(task.answer_kind(e.item), []).append({"messages": e.messages})  # the whole episode
    rows = [r for group in balance(kept, max_share).values() for r in group]
    write_jsonl(Path(out_path), rows)
    return {"tasks_tried": len(items), "samples": len(episodes), "kept": len(rows)}


def balance(by_kind: dict[str, list], max_share: float) -> dict[str, list]:
    """Cap the largest group (of one kind of answer) at `max_share` of the kept rows, so that a model is not
    fine-tuned on one kind of answer only (say, only refusals, when its SQL never matches). Successes of
    one kind alone are then dropped entirely. With max_share >= 0.5 only the largest group can exceed it."""
    if not 0.5 <= max_share <= 1.0:
        raise ValueError(f"max_share must be within [0.5, 1], not {max_share}")
    if max_share == 1.0 or not by_kind:
        return by_kind
    largest = max(by_kind, key=lambda c: (len(by_kind[c]), c))
    others = sum(len(v) for c, v in by_kind.items() if c != largest)
    cap = int(max_share / (1 - max_share) * others + 1e-9)
    return {**by_kind, largest: by_kind[largest][:cap]}


def with_replay(sampled_path, spec: HarnessSpec, task: Task, items: list[Item], out_path) -> int:
    """Write the sampled rows followed by the items' gold conversations under `spec` to out_path (a new
    file, so that writing it again after a kill gives the same file); return the number of gold rows."""
    rows = [row for _, row in read_jsonl(Path(sampled_path))]
    gold = gold_conversations(spec, task, items)
    write_jsonl(Path(out_path), rows + gold)
    return len(gold)
