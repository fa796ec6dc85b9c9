"""The Harness Editor registry: how a new harness is written from its parent."""
from dataclasses import dataclass, field

from engine.registry import Registry

EDITORS: Registry = Registry("harness editor")


@dataclass
class Edit:
    spec: dict          # the new HarnessSpec as a dict
    rationale: str
    operator: str
    notes: list[str] = field(default_factory=list)  # e.g. why an LLM reply was refused


def get_editor(name: str):
    import engine.evolve.editors.llm  # noqa: F401  (registers)
    import engine.evolve.editors.offline  # noqa: F401
    return EDITORS.get(name)
