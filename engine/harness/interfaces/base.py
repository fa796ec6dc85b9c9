"""What every output interface does: describe its format, render calls in it, parse calls out of it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One tool call: the harness-level action unit, whatever the interface's surface syntax."""
    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "args": self.args}


# what kind of mismatch a refused turn is: the interface's syntax, its schema, or the task's tools
MISMATCH_KINDS = ("unparseable", "wrong schema", "unknown tool", "wrong arguments")


class ParseError(ValueError):
    """The output violates the interface: such a turn is a mismatch. This one is unparseable (the format
    is not in the output)."""
    kind = "unparseable"


class SchemaError(ParseError):
    """The format parsed, but its structure is not the interface's."""
    kind = "wrong schema"


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.S)


def strip_fence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text


class Interface:
    name: str = ""

    lead: str = ""             # how to answer
    default_example: str = ""  # an answer in this format, when the task gives no example call

    def instructions(self, example: Call | None = None) -> str:
        """How to answer, for the system prompt, with the task's example call rendered in this format."""
        return f"{self.lead}, for example: {self.render([example]) if example else self.default_example}"

    def render(self, calls: list[Call]) -> str:
        raise NotImplementedError

    def parse(self, text: str, strict: bool = True) -> list[Call]:
        """Strict: the whole output must be the format. Lenient: find it inside other text."""
        raise NotImplementedError

    def answer_end(self, text: str) -> int | None:
        """Where the answer that `text` starts with is complete, so that what follows is not part of it (None:
        it is not complete there, or the format has no end of its own)."""
        return None

    def leading_calls(self, text: str) -> list[tuple[Call, int]]:
        """The whole, well-formed calls the answer in `text` starts with, each with the offset where it ends:
        up to the first that is cut off or is not a call of this interface (as a decoder held to its grammar
        reads a truncated answer)."""
        return []


def check_calls(calls: list[Call]) -> list[Call]:
    if not calls:
        raise SchemaError("no call in the output")
    return calls


def check_call_obj(obj: Any, where: str, name_key: str, args_key: str) -> Call:
    """A JSON call object must be {name_key: str, args_key: object} and nothing else."""
    if not isinstance(obj, dict):
        raise SchemaError(f"{where}: expected an object, got {type(obj).__name__}")
    extra = set(obj) - {name_key, args_key}
    if extra:
        raise SchemaError(f"{where}: unexpected key(s) {sorted(extra)}")
    name = obj.get(name_key)
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{where}: '{name_key}' must be a non-empty string")
    args = obj.get(args_key, {})
    if not isinstance(args, dict):
        raise SchemaError(f"{where}: '{args_key}' must be an object")
    return Call(name, args)
