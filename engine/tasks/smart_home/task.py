"""The smart-home vertical (HomeBench): the home is the context, an action is a list of device calls,
and an operation the home cannot do must be answered with the call `error_input`.

Task options (a harness's `task_options`):
- `rooms`: `all` shows every device of the home (HomeBench's own prompt); `mentioned` shows only the
  rooms the instruction names, with the whole-home devices (every room when it names none). HomeBench's
  homes list about 140 methods; `mentioned` keeps the prompt to the rooms at stake.
- `state`: `values` adds each device's current state (power, attribute values, number ranges) after its
  methods, as HomeBench's own prompt shows the home's status; a relative request ("lower the temperature by
  2 degrees") is answered from it. `none` shows the methods alone."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from engine.errors import InputError
from engine.harness.interfaces import Call
from engine.tasks import TASKS
from engine.tasks.base import Environment, Item, StepResult, Task, validate_options
from engine.tasks.smart_home import generator
from engine.tasks.smart_home.catalog import DEVICES, param_names, spoken_room
from engine.tasks.smart_home.data import HOMES_FILE, NO_ROOM, Home, load_homes, load_rows
from engine.tasks.smart_home.scorer import parse_operations, score_homebench_files, score_rows

ERROR = "error_input"
_OP = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\((?P<args>.*)\)$")


def split_name(name: str) -> tuple[str, str, str] | None:
    parts = name.split(".")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return NO_ROOM, parts[0], parts[1]
    return None


def _arg_text(v) -> str:
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(str(x) for x in v) + ")"
    return str(v)


def call_to_operation(call: Call) -> str:
    if call.name == ERROR:
        return ERROR
    return f"{call.name}({','.join(_arg_text(v) for v in call.args.values())})"


def operation_to_call(op: str) -> Call:
    """'room.device.method(a)' -> Call, naming the arguments from the catalog."""
    if op == ERROR:
        return Call(ERROR)
    m = _OP.match(op)
    parsed = split_name(m.group("name")) if m else None
    if not parsed or parsed[1] not in DEVICES or parsed[2] not in DEVICES[parsed[1]]:
        raise ValueError(f"not a catalog operation: {op!r}")
    names = param_names(parsed[1], parsed[2])
    raw = m.group("args")
    values = [raw] if len(names) == 1 and raw.startswith("(") else ([v for v in raw.split(",")] if raw else [])
    if len(values) != len(names):
        raise ValueError(f"{op!r}: expected {len(names)} argument(s)")
    return Call(m.group("name"), {n: (int(v) if re.fullmatch(r"-?\d+", v) else v) for n, v in zip(names, values)})


class SmartHomeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rooms: Literal["all", "mentioned"] = "all"
    state: Literal["none", "values"] = "none"


def parse_options(options: dict | None) -> SmartHomeOptions:
    return validate_options(SmartHomeOptions, options)


def mentioned_rooms(home: Home, text: str) -> set[str]:
    """The home's rooms that the instruction names ("master bedroom" for master_bedroom, "dining room" for
    ding_room), as whole words."""
    lowered = text.lower()
    return {room for room, _ in home.devices if room != NO_ROOM
            and any(re.search(r"\b" + re.escape(name.lower()) + r"\b", lowered)
                    for name in {room.replace("_", " "), spoken_room(room)})}


def _state_text(state) -> str:
    """ " (now: on, brightness=34 of 0-100, mode=cool)", or "" for a device the status does not describe."""
    if state is None:
        return ""
    parts = [state.power] if state.power else []
    for name, value in state.values.items():
        lo_hi = state.ranges.get(name)
        parts.append(f"{name}={value}" + (f" of {lo_hi[0]}-{lo_hi[1]}" if lo_hi else ""))
    return f" (now: {', '.join(parts)})" if parts else ""


class SmartHomeEnvironment(Environment):
    def __init__(self, home: Home, gold: str):
        self.home, self.gold = home, Counter(parse_operations(gold))

    def step(self, calls: list[Call]) -> StepResult:
        prediction = [call_to_operation(c) for c in calls]
        lines = []
        for c, op in zip(calls, prediction):
            parsed = split_name(c.name)
            if c.name == ERROR:
                lines.append(f"{op}: noted")
            elif parsed and self.home.has(*parsed):
                lines.append(f"{op}: ok")
            else:
                lines.append(f"{op}: failed, the home has no such device or method")
        success = Counter(parse_operations(prediction)) == self.gold
        return StepResult("\n".join(lines), float(success), True, success, prediction)


@TASKS.register("smart_home")
class SmartHomeTask(Task):
    name = "smart_home"
    benchmark = "homebench"
    options_model = SmartHomeOptions
    option_space = {"rooms": ["all", "mentioned"], "state": ["none", "values"]}
    max_calls = generator.MAX_OPERATIONS  # one call per operation, error_input included

    def __init__(self, data_dir):
        super().__init__(data_dir)
        self._homes: dict[int, Home] | None = None

    @property
    def homes(self) -> dict[int, Home]:
        if self._homes is None:
            self._homes = load_homes(self.data_dir / HOMES_FILE)
        return self._homes

    def split_path(self, split: str) -> Path:
        for candidate in (self.data_dir / f"{split}.jsonl", Path(split)):
            if candidate.is_file():
                return candidate
        raise InputError(f"no split {split!r}: neither {self.data_dir / (split + '.jsonl')} nor a file {split!r}")

    def load(self, split: str, limit: int | None = None) -> list[Item]:
        rows = load_rows(self.split_path(split), self.homes)
        if limit is not None:
            rows = rows[:limit]
        return [Item(r.id, r.input, r.output, r.category, context=self.homes[r.home_id],
                     meta={"type": r.type, "home_id": r.home_id}) for r in rows]

    def context(self, item: Item, options: dict | None = None) -> str:
        home: Home = item.context
        opts = parse_options(options)
        shown = mentioned_rooms(home, item.input) if opts.rooms == "mentioned" else set()
        return "\n".join(
            f"{home.address(room, dev)}: " + " ".join(f"{m}({','.join(p)})" if p else m for m, p in methods.items())
            + (_state_text(home.state(room, dev)) if opts.state == "values" else "")
            for (room, dev), methods in home.devices.items() if not shown or room in shown or room == NO_ROOM)

    def arg_names(self, item: Item, name: str) -> list[str] | None:
        """The home's own parameters of the method, else the catalog's."""
        if name == ERROR:
            return []
        parsed = split_name(name)
        if parsed is None:
            return None
        room, device, method = parsed
        declared = item.context.devices.get((room, device), {}) if item.context else {}
        if method in declared:
            return declared[method]
        return param_names(device, method) if device in DEVICES and method in DEVICES[device] else None

    def check_call(self, call: Call, item: Item) -> str | None:
        if call.name == ERROR:
            return f"{ERROR} takes no arguments" if call.args else None
        expected = self.arg_names(item, call.name)
        if expected is None:
            suffix = ": expected room.device.method" if split_name(call.name) is None else ""
            return f"unknown tool {call.name!r}{suffix}"
        if sorted(call.args) != sorted(expected):
            return f"wrong arguments for {call.name}: expected {expected}, got {sorted(call.args)}"
        return None

    def call_names(self, item: Item, options: dict | None = None) -> list[str]:
        """`error_input` and every method of the home's devices: the item's own tool list."""
        home: Home = item.context
        return [ERROR] + [f"{home.address(room, dev)}.{m}" for (room, dev), methods in home.devices.items()
                          for m in methods]

    def environment(self, item: Item, options: dict | None = None) -> Environment:
        return SmartHomeEnvironment(item.context, item.gold)

    def gold_calls(self, item: Item) -> list[Call]:
        return [operation_to_call(op) for op in parse_operations(item.gold)]

    def answer_kind(self, item: Item) -> str:
        """`error_input` alone (a single or multiple invalid request) or calls: the abstention is the easy
        success that a model drifts to, so it is balanced against every request with a call to make."""
        return ERROR if set(parse_operations(item.gold)) == {ERROR} else "calls"

    def score(self, items: list[Item], predictions: list) -> tuple[float, dict]:
        metrics = score_rows([i.gold for i in items], predictions, [i.category for i in items])
        return metrics["overall"]["success"] or 0.0, metrics

    @classmethod
    def score_files(cls, gold, pred, **_) -> dict:
        return score_homebench_files(gold, pred)

    @classmethod
    def format_scores(cls, result: dict) -> str:
        fmt = (lambda v: f"{v:.3f}" if v is not None else "-")
        lines = [f"{'':<8}{'n':>6}{'success':>10}{'precision':>11}{'recall':>9}{'f1':>8}"]
        lines += [f"{cat:<8}{m['n']:>6}{fmt(m['success']):>10}{fmt(m['precision']):>11}{fmt(m['recall']):>9}"
                  f"{fmt(m['f1']):>8}" for cat, m in result.items()]
        return "\n".join(lines)

    @classmethod
    def generate(cls, out_dir, *, seed: int, sizes: dict[str, int], homes: str | None = None,
                 relative_share: float = 0.0, max_ops: int = 3) -> None:
        options = validate_options(generator.GeneratorOptions,  # command-line strings are read as numbers here
                                   {"relative_share": relative_share, "max_ops": max_ops}, where="data")
        generator.write_dataset(out_dir, seed=seed, sizes=sizes, homes_file=homes, options=options)
