"""XML: <calls><call name="..."><arg name="...">value</arg></call></calls>."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from engine.harness.interfaces.base import Call, Interface, ParseError, SchemaError, check_calls, strip_fence

_INT = re.compile(r"^-?\d+$")
_CALL = re.compile(r"\s*(<call\b.*?</call>)", re.S)


def _value(text: str):
    return int(text) if _INT.match(text) else text


class XmlInterface(Interface):
    name = "xml"

    lead = "Answer with XML and nothing else"
    default_example = '<calls><call name="room.device.method"><arg name="param">value</arg></call></calls>'

    def render(self, calls: list[Call]) -> str:
        parts = []
        for c in calls:
            args = "".join(f'<arg name="{_esc(k)}">{_esc(str(v))}</arg>' for k, v in c.args.items())
            parts.append(f'<call name="{_esc(c.name)}">{args}</call>')
        return "<calls>" + "".join(parts) + "</calls>"

    def answer_end(self, text: str) -> int | None:
        end = text.find("</calls>")
        return end + len("</calls>") if text.lstrip().startswith("<calls>") and end >= 0 else None

    def leading_calls(self, text: str) -> list[tuple[Call, int]]:
        body = text.lstrip()
        offset, calls, pos = len(text) - len(body), [], len("<calls>")
        if not body.startswith("<calls>"):
            return []
        while m := _CALL.match(body, pos):
            try:
                read = self.parse("<calls>" + m.group(1) + "</calls>")  # one call, read as an answer's are
            except ParseError:
                return calls
            if len(read) != 1:  # a self-closed <call/> the match ran past
                return calls
            calls.append((read[0], offset + m.end()))
            pos = m.end()
        return calls

    def parse(self, text: str, strict: bool = True) -> list[Call]:
        body = text.strip()
        if not strict:
            body = strip_fence(body)
            start, end = body.find("<calls>"), body.rfind("</calls>")
            if start < 0 or end < start:
                raise ParseError("no <calls> element in the output")
            body = body[start:end + len("</calls>")]
        if "<!DOCTYPE" in body or "<!ENTITY" in body:
            raise ParseError("DOCTYPE and entity declarations are not allowed")
        try:
            root = ET.fromstring(body)
        except ET.ParseError as e:
            raise ParseError(f"not well-formed XML: {e}") from None
        if root.tag != "calls":
            raise SchemaError(f"root element must be <calls>, got <{root.tag}>")
        calls = []
        for i, el in enumerate(root):
            if el.tag != "call" or not el.get("name"):
                raise SchemaError(f"element {i}: expected <call name=...>, got <{el.tag}>")
            args = {}
            for a in el:
                if a.tag != "arg" or not a.get("name"):
                    raise SchemaError(f"call {i}: expected <arg name=...>, got <{a.tag}>")
                args[a.get("name")] = _value((a.text or "").strip())
            calls.append(Call(el.get("name"), args))
        return check_calls(calls)


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
