"""Multi-agent failure traces: one internal type, read from Who&When and TraceElephant files.

A trace is the log of a multi-agent run that failed, with the annotated decisive error: the agent
responsible and the step (0-based here, whatever the source's convention).

**Who&When** (ag2ai/Agents_Failure_Attribution): one JSON file per trace, anywhere under a root
(`Algorithm-Generated/17.json`, `Hand-Crafted/3.json`); the trace id is the path relative to the root
without `.json`. Fields: `question` (str), `ground_truth`, `history` (list of `{content, name, role}`;
Hand-Crafted entries carry the agent in `role` and have no `name`, e.g. `"Orchestrator (thought)"`),
`mistake_agent` (str), `mistake_step` (a string holding a 0-based index into `history`),
`mistake_reason`. Anything else (`question_ID`, `level`, `is_correct`, `system_prompt`) is ignored but
for a few keys kept in `meta`.

**TraceElephant**: one directory per task holding two files. No sample ships with this project, so
these fields are assumed (from the public release's description) and read defensively:
- `trace_metadata.json`: `task_instruction` (str; `question` accepted), `ground_truth`,
  `mistake_agent`, `mistake_step` (**1-based**, int or numeric string), optionally `mistake_reason`,
  `agent_system_intro`, `tests_status`;
- `step_records.json`: a list (or `{"steps": [...]}` / `{"step_records": [...]}`) of
  `{agent_name, input, output}`: `input` is the full OpenAI chat request the agent sent
  (`{"model", "messages": [...]}`), `output` the completion, either a ChatCompletion object
  (`{"choices": [{"message": {"role", "content", "tool_calls"}}]}`), its Python repr string
  (`"ChatCompletion(... content='...' ...)"`) or plain text. A step's content is the completion's text
  (or its tool calls); when there is none, the last message of the request.
The trace id is the task directory relative to the root (the directory's own name when the root is
one task).

A trace whose label cannot be used (no agent, a step that is no index, or out of range) is returned
in `rejected` with the reason; a malformed file (bad JSON, a missing required field, a wrong type)
raises InputError naming the file and the field.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from engine.errors import InputError
from engine.sorting import natural_key

WHO_AND_WHEN = "who_and_when"
TRACE_ELEPHANT = "trace_elephant"
TE_METADATA = "trace_metadata.json"
TE_STEPS = "step_records.json"
# extra Who&When / TraceElephant keys worth keeping for analysis (the rest is ignored)
META_KEYS = ("question_ID", "level", "mistake_kind", "agent_system_intro", "tests_status")
NO_LABEL = {"", "none", "null", "n/a", "na"}


class Step(NamedTuple):
    agent: str
    role: str
    content: str


@dataclass
class Trace:
    id: str
    question: str
    ground_truth: str
    steps: list[Step]
    mistake_agent: str
    mistake_step: int  # 0-based index into steps
    mistake_reason: str
    source: str        # who_and_when | trace_elephant
    subfolder: str     # Algorithm-Generated, Hand-Crafted, a TraceElephant runs folder, or the root's name
    meta: dict = field(default_factory=dict)

    @property
    def agents(self) -> list[str]:
        return list(dict.fromkeys(s.agent for s in self.steps))


@dataclass
class Rejected:
    id: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.id}: {self.reason}"


class _Unusable(Exception):
    """The file is well-formed but its label cannot be scored."""


def load_traces(path) -> tuple[list[Trace], list[Rejected]]:
    """Every trace under `path`: a Who&When file, a folder of them (searched recursively), a
    TraceElephant task folder, or a folder of those (the two formats may be mixed)."""
    root = Path(path)
    if not root.exists():
        raise InputError("no such file or directory", path=root)
    if root.is_file():
        found = [(root, root.stem, root.parent.name, WHO_AND_WHEN)]
    elif (root / TE_METADATA).is_file():
        found = [(root, root.name, root.parent.name or root.name, TRACE_ELEPHANT)]
    else:
        te_dirs = sorted({p.parent for p in root.rglob(TE_METADATA)})
        found = [(d, _rel_id(d, root), _subfolder(d, root), TRACE_ELEPHANT) for d in te_dirs]
        for f in root.rglob("*.json"):
            if f.name.startswith(".") or any(d == f.parent or d in f.parents for d in te_dirs):
                continue  # a TraceElephant task's own files
            found.append((f, _rel_id(f.with_suffix(""), root), _subfolder(f, root), WHO_AND_WHEN))
    traces, rejected = [], []
    for p, tid, sub, source in sorted(found, key=lambda x: natural_key(x[1])):
        try:
            reader = read_whowhen if source == WHO_AND_WHEN else read_trace_elephant
            traces.append(reader(p, tid, sub))
        except _Unusable as e:
            rejected.append(Rejected(tid, str(p), str(e)))
    return traces, rejected


def _rel_id(p: Path, root: Path) -> str:
    return p.relative_to(root).as_posix()


def _subfolder(p: Path, root: Path) -> str:
    parts = p.relative_to(root).parts
    return parts[0] if len(parts) > 1 else root.name


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason}", path=path) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", path=path) from None


def _object(data, path: Path) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object, got {type(data).__name__}", path=path)
    return data


def _field(obj: dict, name: str, types, path: Path, *, where: str | None = None, required: bool = True,
           default=None):
    """obj[name] checked against types; a missing required field or a wrong type names the field."""
    label = where or name
    if name not in obj:
        if required:
            raise InputError("missing field", path=path, field=label)
        return default
    value = obj[name]
    if value is None and not required:
        return default
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _tuple(types):
        names = "/".join(t.__name__ for t in _tuple(types))
        raise InputError(f"expected {names}, got {type(value).__name__}", path=path, field=label)
    return value


def _tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def _text(value) -> str:
    return "" if value is None else str(value)


def _label(obj: dict, path: Path, n_steps: int, *, one_based: bool) -> tuple[str, int]:
    """(agent, 0-based step) of the annotated decisive error, or _Unusable saying why not."""
    agent = _field(obj, "mistake_agent", (str, type(None)), path)
    raw = _field(obj, "mistake_step", (str, int, type(None)), path)
    if agent is None or agent.strip().lower() in NO_LABEL:
        raise _Unusable(f"no mistake_agent ({agent!r})")
    text = str(raw).strip() if raw is not None else ""
    if not re.fullmatch(r"-?\d+", text):
        raise _Unusable(f"mistake_step {raw!r} is not a step index")
    step = int(text) - (1 if one_based else 0)
    if not 0 <= step < n_steps:
        base = "1-based" if one_based else "0-based"
        raise _Unusable(f"mistake_step {raw!r} is out of range ({base}; the trace has {n_steps} steps)")
    return agent.strip(), step


def read_whowhen(path, trace_id: str | None = None, subfolder: str | None = None) -> Trace:
    path = Path(path)
    d = _object(_read_json(path), path)
    question = _field(d, "question", str, path)
    ground_truth = _text(_field(d, "ground_truth", (str, int, float), path, required=False))
    history = _field(d, "history", list, path)
    steps = []
    for i, h in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(h, dict):
            raise InputError(f"expected an object, got {type(h).__name__}", path=path, field=where)
        content = _field(h, "content", str, path, where=f"{where}.content", required=False, default="")
        role = _field(h, "role", str, path, where=f"{where}.role", required=False, default="")
        name = _field(h, "name", str, path, where=f"{where}.name", required=False, default="")
        agent = name.strip() or role.strip()  # Hand-Crafted traces name the agent in `role`
        if not agent:
            raise InputError("no agent: neither `name` nor `role` is a non-empty string", path=path,
                             field=f"{where}.name")
        steps.append(Step(agent, role, content))
    agent, step = _label(d, path, len(steps), one_based=False)
    reason = _text(_field(d, "mistake_reason", str, path, required=False))
    return Trace(trace_id or path.stem, question, ground_truth, steps, agent, step, reason, WHO_AND_WHEN,
                 subfolder if subfolder is not None else path.parent.name,
                 {k: d[k] for k in META_KEYS if isinstance(d.get(k), (str, int, float))})


def read_trace_elephant(task_dir, trace_id: str | None = None, subfolder: str | None = None) -> Trace:
    task_dir = Path(task_dir)
    meta_path, steps_path = task_dir / TE_METADATA, task_dir / TE_STEPS
    meta = _object(_read_json(meta_path), meta_path)
    key = "task_instruction" if "task_instruction" in meta or "question" not in meta else "question"
    question = _field(meta, key, str, meta_path)
    ground_truth = _text(_field(meta, "ground_truth", (str, int, float), meta_path, required=False))
    records = _read_json(steps_path)
    if isinstance(records, dict):  # tolerate a wrapped list
        wrapped = [k for k in ("steps", "step_records") if isinstance(records.get(k), list)]
        if not wrapped:
            raise InputError("expected a list of step records (or an object with `steps`)", path=steps_path)
        records = records[wrapped[0]]
    if not isinstance(records, list):
        raise InputError(f"expected a list of step records, got {type(records).__name__}", path=steps_path)
    steps = []
    for i, r in enumerate(records):
        where = f"[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"expected an object, got {type(r).__name__}", path=steps_path, field=where)
        agent = _field(r, "agent_name", str, steps_path, where=f"{where}.agent_name").strip()
        if not agent:
            raise InputError("empty agent name", path=steps_path, field=f"{where}.agent_name")
        role, content = _completion(r.get("output"), steps_path, f"{where}.output")
        if not content:
            content = _last_request_message(r.get("input"), steps_path, f"{where}.input")
        steps.append(Step(agent, role, content))
    agent, step = _label(meta, meta_path, len(steps), one_based=True)
    reason = _text(_field(meta, "mistake_reason", str, meta_path, required=False))
    return Trace(trace_id or task_dir.name, question, ground_truth, steps, agent, step, reason, TRACE_ELEPHANT,
                 subfolder if subfolder is not None else task_dir.parent.name,
                 {k: meta[k] for k in META_KEYS if isinstance(meta.get(k), (str, int, float))})


_REPR_CONTENT = re.compile(r"content=(?P<q>['\"])(?P<text>.*?)(?<!\\)(?P=q)", re.S)


def _completion(output, path: Path, where: str) -> tuple[str, str]:
    """(role, text) of an agent's completion: a ChatCompletion object, its repr, or plain text."""
    if output is None:
        return "assistant", ""
    if isinstance(output, str):
        if output.lstrip().startswith("ChatCompletion("):
            m = _REPR_CONTENT.search(output)
            text = m.group("text") if m else ""
            return "assistant", text.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')
        return "assistant", output
    if not isinstance(output, dict):
        raise InputError(f"expected a completion object or text, got {type(output).__name__}",
                         path=path, field=where)
    choices = output.get("choices")
    message = output  # a bare message {role, content, tool_calls} is accepted too
    if choices is not None:
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise InputError("`choices` must be a non-empty list of objects", path=path, field=f"{where}.choices")
        message = choices[0].get("message") or {}
        if not isinstance(message, dict):
            raise InputError("expected an object", path=path, field=f"{where}.choices[0].message")
    role = message.get("role") if isinstance(message.get("role"), str) else "assistant"
    text = _message_text(message.get("content"))
    calls = message.get("tool_calls") or []
    if not text and isinstance(calls, list):  # a step that only calls tools: show the calls
        text = "; ".join(f"{(c.get('function') or {}).get('name', '?')}({(c.get('function') or {}).get('arguments', '')})"
                         for c in calls if isinstance(c, dict))
    return role, text


def _message_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _last_request_message(request, path: Path, where: str) -> str:
    if request is None or isinstance(request, str):
        return request or ""
    if not isinstance(request, dict):
        raise InputError(f"expected a chat request object, got {type(request).__name__}", path=path, field=where)
    messages = request.get("messages") or []
    if not isinstance(messages, list):
        raise InputError("`messages` must be a list", path=path, field=f"{where}.messages")
    for m in reversed(messages):
        if isinstance(m, dict) and _message_text(m.get("content")):
            return _message_text(m.get("content"))
    return ""
