"""The harness spec: everything of the agent's body that is not weights, versioned and YAML-round-trippable."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.config import dump_yaml, load_yaml, parse_yaml, validate
from engine.harness.interfaces import INTERFACES, Call

SPEC_VERSION = 1


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InterfaceSpec(Strict):
    name: str = Field(description="a registered interface: " + ", ".join(INTERFACES.names()))

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in INTERFACES:
            raise ValueError(f"unknown interface {v!r} (known: {', '.join(INTERFACES.names())})")
        return v


class FewShot(Strict):
    """An example shown before the task; its answer is rendered in the harness's interface."""
    input: str
    calls: list[dict[str, Any]]

    def as_calls(self) -> list[Call]:
        return [Call(c["name"], c.get("args", {})) for c in self.calls]


class TurnLoop(Strict):
    max_turns: int = Field(1, ge=1, le=16)
    retry_on_parse_error: bool = False
    retry_message: str = "Your answer could not be parsed ({error}). Answer again in the required format."
    feedback: str = Field("execution", pattern="^(execution|none)$",
                          description="what the environment answers after an action")


class Sampling(Strict):
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(160, ge=1, le=8192)
    constrain_calls: bool = Field(False, description=(
        "decode calls under the task's tools for the item: a call whose name leaves them, or whose argument "
        "names are not the tool's, is decoded again from where it went wrong (local backends only)"))
    stop_loops: int = Field(0, ge=0, le=16, description=(
        "cut an answer where its tokens end in one span repeated this many times (0: never; local backends "
        "only): a model caught in a loop writes nothing more of use, and its decoding stops there"))

    @field_validator("stop_loops")
    @classmethod
    def _loops_repeat(cls, v: int) -> int:
        if v == 1:
            raise ValueError("1 would cut every answer: 0 (never) or 2 and more repeats")
        return v


class HarnessSpec(Strict):
    spec_version: int = SPEC_VERSION
    name: str
    task: str = "smart_home"
    system_prompt: str = Field(description="template; {context} is the task context, {format} the interface's instructions")
    user_template: str = "{input}"
    few_shot: list[FewShot] = []
    task_options: dict[str, Any] = Field(default_factory=dict, description=(
        "how this harness presents its task (each task validates its own): e.g. a trace window or "
        "protocol for failure attribution, the schema view for text-to-SQL"))
    interface: InterfaceSpec
    strict: bool = Field(True, description="parser strictness: the whole output must be the format")
    loop: TurnLoop = TurnLoop()
    sampling: Sampling = Sampling()

    @field_validator("system_prompt")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        try:
            v.format(context="", format="")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"bad template placeholder {e}; use {{context}} and {{format}}") from None
        return v

    @classmethod
    def load(cls, path) -> "HarnessSpec":
        return load_yaml(cls, path)

    @classmethod
    def from_yaml(cls, text: str, *, source=None) -> "HarnessSpec":
        """A spec from YAML text; an error names the line of the offending field."""
        return parse_yaml(cls, text, path=source)

    @classmethod
    def from_dict(cls, data: dict, *, source=None) -> "HarnessSpec":
        return validate(cls, data, path=source)

    def to_yaml(self) -> str:
        return dump_yaml(self)

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


def edited_name(parent: dict, child: dict, round_label: str) -> str:
    """The name of a harness edited from `parent`: the parent's stem and the round (`smart_home-json@r3`).
    A stem that names the parent's interface (`<task>-xml`) names the child's instead, so a harness is
    never called after a format it does not speak."""
    stem = parent["name"].split("@")[0]
    old, new = parent["interface"]["name"], child["interface"]["name"]
    if old != new:
        stem = stem[:-len(old)] + new if stem.endswith(f"-{old}") else f"{stem}-{new}"
    return f"{stem}@{round_label}"
