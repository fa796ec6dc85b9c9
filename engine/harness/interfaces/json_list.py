"""JSON: the answer is a JSON array of {"name": ..., "args": {...}} objects."""
from __future__ import annotations

import json
import re

from engine.harness.interfaces.base import Call, Interface, ParseError, SchemaError, check_call_obj, check_calls, strip_fence


_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()  # stateless: one serves every call


class JsonInterface(Interface):
    name = "json"

    lead = "Answer with a JSON array of calls and nothing else"
    default_example = '[{"name": "room.device.method", "args": {"param": value}}]'

    def render(self, calls: list[Call]) -> str:
        return json.dumps([c.to_dict() for c in calls], ensure_ascii=False)

    def parse(self, text: str, strict: bool = True) -> list[Call]:
        body = text.strip()
        if not strict:
            body = strip_fence(body)
            start, end = body.find("["), body.rfind("]")
            if start < 0 or end < start:
                raise ParseError("no JSON array in the output")
            body = body[start:end + 1]
        try:
            data = json.loads(body)
        except json.JSONDecodeError as e:
            raise ParseError(f"not valid JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(data, list):
            raise SchemaError(f"expected a JSON array, got {type(data).__name__}")
        return check_calls([check_call_obj(obj, f"call {i}", "name", "args") for i, obj in enumerate(data)])

    def answer_end(self, text: str) -> int | None:
        body = text.lstrip()
        if not body.startswith("["):
            return None
        try:
            _, end = _DECODER.raw_decode(body)
        except json.JSONDecodeError:
            return None
        return len(text) - len(body) + end

    def leading_calls(self, text: str) -> list[tuple[Call, int]]:
        body = text.lstrip()
        offset, calls, pos = len(text) - len(body), [], 1
        if not body.startswith("["):
            return []
        while True:
            pos = _SPACE.match(body, pos).end()
            try:
                obj, end = _DECODER.raw_decode(body, pos)
                calls.append((check_call_obj(obj, f"call {len(calls)}", "name", "args"), offset + end))
            except (json.JSONDecodeError, SchemaError):
                return calls
            pos = _SPACE.match(body, end).end()
            if not body.startswith(",", pos):
                return calls
            pos += 1
