"""Rejection sampling: k sampled episodes per training task under a harness; only verified successes
(the task's checker says success and no turn is a mismatch) become ms-swift `messages` rows."""
from __future__ import annotations

from pathlib import Path

from engine.harness.runtime import run_episodes
from engine.harness.spec import HarnessSpec
from engine.jsonl import write_jsonl
from engine.tasks.base import Item, Task


def rejection_sample(spec: HarnessSpec, task: Task, backend, items: list[Item], *, k: int, temperature: float,
                     out_path) -> dict:
    """Write the kept conversations to out_path; return the counts for the archive."""
    episodes = run_episodes(spec, task, backend, items, k=k, temperature=temperature)
    rows, seen = [], set()
    for e in episodes:
        if not e.success or e.mismatched_turns:
            continue
        key = (e.item.id, tuple(m["content"] for m in e.messages if m["role"] == "assistant"))
        if key in seen:
            continue
        seen.add(key)
        rows.append({"messages": e.messages})  # the whole episode, every turn of it
    write_jsonl(Path(out_path), rows)
    return {"tasks_tried": len(items), "samples": len(episodes), "kept": len(rows)}
