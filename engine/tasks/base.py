"""What a task (vertical) provides to the rollout runtime."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.errors import InputError
from engine.harness.interfaces import Call


def validate_options(model: type[BaseModel], options: dict | None, where: str = "task_options"):
    """Options as their model (a harness's task_options, or a generator's `data`); an error names
    `<where>.<field>`."""
    try:
        return model.model_validate(options or {})
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(err["msg"], field=f"{where}.{loc}" if loc else where) from None


@dataclass
class Item:
    """One task instance: an id, the user-facing input, the gold answer, and task-specific context."""
    id: str
    input: str
    gold: Any
    category: str
    context: Any = None
    meta: dict = field(default_factory=dict)


@dataclass
class StepResult:
    feedback: str
    reward: float
    done: bool
    success: bool
    prediction: Any = None


class Environment:
    """Answers the turns of one episode."""

    def step(self, calls: list[Call]) -> StepResult:
        raise NotImplementedError


class Task:
    """A vertical. `options` everywhere are the harness's `task_options`: how this harness presents
    the task (how much of a trace, which schema view, which protocol); each task validates its own."""
    name: str = ""
    benchmark: str = ""  # the official benchmark whose prediction files `coevo score` reads
    # the task_options a harness may set (a pydantic model, whose defaults hold where a harness is silent),
    # with the values the offline editor tries
    options_model: type[BaseModel] | None = None
    option_space: dict[str, list] = {}
    # the most calls one answer can need, which constrained decoding ends an answer at (a JSON schema's
    # maxItems); None where there is no such bound
    max_calls: int | None = None

    def __init__(self, data_dir):
        self.data_dir = Path(data_dir)

    @classmethod
    def options_in_force(cls, options: dict | None) -> dict:
        """A harness's task options with the defaults filled in where it is silent."""
        return {**(cls.options_model().model_dump() if cls.options_model else {}), **(options or {})}

    def load(self, split: str, limit: int | None = None) -> list[Item]:
        raise NotImplementedError

    def has_split(self, split: str) -> bool:
        """Whether the data folder holds this split (else `generate` makes it)."""
        return (self.data_dir / f"{split}.jsonl").is_file()

    def context(self, item: Item, options: dict | None = None) -> str:
        """The text the harness puts in its system prompt's {context}."""
        raise NotImplementedError

    def example_call(self) -> Call | None:
        """A call shown in the interface's instructions (None: the interface's generic example)."""
        return None

    def check_call(self, call: Call, item: Item) -> str | None:
        """Interface-level schema check: the reason the call violates the tool schema, or None."""
        raise NotImplementedError

    def call_names(self, item: Item, options: dict | None = None) -> list[str] | None:
        """Every call name the item allows, which constrained decoding keeps a call to (a harness's
        `sampling.constrain_calls`); None where names are open-ended."""
        return None

    def arg_names(self, item: Item, name: str) -> list[str] | None:
        """The argument names a call of this name takes, all of them required; None where the tool is
        unknown or its arguments are not a fixed set."""
        return None

    def environment(self, item: Item, options: dict | None = None) -> Environment:
        raise NotImplementedError

    def gold_calls(self, item: Item) -> list[Call]:
        """The gold answer as calls (rendered through a harness to make supervised data)."""
        raise NotImplementedError

    def answer_kind(self, item: Item) -> str:
        """The kind of answer the item wants, which rejection sampling balances (`sample.max_share`):
        an easy kind, such as a refusal, must not crowd out the others. By default its category."""
        return item.category

    def gold_turns(self, item: Item, options: dict | None = None) -> list[list[Call]]:
        """The gold episode, one list of calls per turn; the environment answers each turn in between.
        One turn unless a multi-turn protocol needs more."""
        return [self.gold_calls(item)]

    def score(self, items: list[Item], predictions: list[Any]) -> tuple[float, dict]:
        """(headline score, task metrics) of predictions aligned with items."""
        raise NotImplementedError

    @classmethod
    def score_files(cls, gold, pred, **options) -> dict:
        """The official metric of a prediction file against the benchmark's gold rows."""
        raise NotImplementedError

    @classmethod
    def format_scores(cls, result: dict) -> str:
        """`score_files`'s result as a table for the terminal."""
        raise NotImplementedError

    @classmethod
    def generate(cls, out_dir, *, seed: int, sizes: dict[str, int], **options) -> None:
        """Write a seeded synthetic data set in the official format; `options` are the generator's own
        keyword arguments (an init config's `data`)."""
        raise NotImplementedError
