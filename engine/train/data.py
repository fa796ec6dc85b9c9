"""ms-swift `messages` data sets: whole conversations under a harness, one JSON row each."""
from __future__ import annotations

from engine.harness.interfaces import get_interface
from engine.harness.runtime import build_messages
from engine.harness.spec import HarnessSpec
from engine.tasks.base import Item, Task


def gold_conversations(spec: HarnessSpec, task: Task, items: list[Item]) -> list[dict]:
    """Each item's prompt under the harness with its gold answer rendered in the harness's interface."""
    interface = get_interface(spec.interface.name)
    rows = []
    for item in items:
        messages = build_messages(spec, task, item)
        messages.append({"role": "assistant", "content": interface.render(task.gold_calls(item))})
        rows.append({"messages": messages})
    return rows
