"""ms-swift `messages` data sets: whole conversations under a harness, one JSON row each."""
from __future__ import annotations

from engine.harness.interfaces import get_interface
from engine.harness.spec import HarnessSpec
from engine.rollout import build_messages
from engine.tasks.base import Item, Task


def gold_conversations(spec: HarnessSpec, task: Task, items: list[Item]) -> list[dict]:
    """Each item's prompt under the harness with its gold answer rendered in the harness's interface;
    in a multi-turn protocol the environment's feedback comes between the gold turns, as at run time."""
    interface = get_interface(spec.interface.name)
    rows = []
    for item in items:
        messages = build_messages(spec, task, item)
        turns = task.gold_turns(item, spec.task_options)
        env = task.environment(item, spec.task_options) if len(turns) > 1 else None
        for i, calls in enumerate(turns):
            messages.append({"role": "assistant", "content": interface.render(calls)})
            if env is not None and i < len(turns) - 1:
                feedback = env.step(calls).feedback
                messages.append({"role": "user", "content": feedback})
        rows.append({"messages": messages})
    return rows
