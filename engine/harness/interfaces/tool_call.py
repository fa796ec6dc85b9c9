"""Function calling in the Hermes/Qwen style: one <tool_call>{"name", "arguments"}</tool_call> block a call."""
from __future__ import annotations

import json
import re

from engine.harness.interfaces.base import Call, Interface, ParseError, SchemaError, check_call_obj, check_calls

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_NEXT_BLOCK = re.compile(r"\s*" + _BLOCK.pattern, re.S)


class ToolCallInterface(Interface):
    name = "tool_call"

    lead = "Call functions, one block per call and nothing else"
    default_example = '<tool_call>\n{"name": "room.device.method", "arguments": {"param": value}}\n</tool_call>'

    def render(self, calls: list[Call]) -> str:
        return "\n".join(
            "<tool_call>\n" + json.dumps({"name": c.name, "arguments": c.args}, ensure_ascii=False) + "\n</tool_call>"
            for c in calls)

    def parse(self, text: str, strict: bool = True) -> list[Call]:
        blocks = list(_BLOCK.finditer(text))
        if not blocks:
            raise ParseError("no <tool_call> block in the output")
        if strict:
            leftover = _BLOCK.sub("", text).strip()
            if leftover:
                raise ParseError(f"text outside <tool_call> blocks: {leftover[:40]!r}")
        calls = []
        for i, m in enumerate(blocks):
            try:
                obj = json.loads(m.group(1))
            except json.JSONDecodeError as e:
                raise ParseError(f"tool call {i}: not valid JSON: {e.msg}") from None
            calls.append(check_call_obj(obj, f"tool call {i}", "name", "arguments"))
        return check_calls(calls)

    def leading_calls(self, text: str) -> list[tuple[Call, int]]:
        calls, pos = [], 0
        while m := _NEXT_BLOCK.match(text, pos):
            try:
                calls.append((check_call_obj(json.loads(m.group(1)), f"tool call {len(calls)}", "name", "arguments"),
                              m.end()))
            except (json.JSONDecodeError, SchemaError):
                return calls
            pos = m.end()
        return calls
