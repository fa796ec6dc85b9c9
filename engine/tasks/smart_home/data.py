"""Reading HomeBench's own files: homes (home_status_method.jsonl) and instruction rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import InputError
from engine.jsonl import read_jsonl, require
from engine.tasks.smart_home.catalog import DEVICES
from engine.tasks.smart_home.scorer import category

HOMES_FILE = "home_status_method.jsonl"
NO_ROOM = "None"  # HomeBench's room_name for whole-home devices


@dataclass
class DeviceState:
    """A device's state as the homes file gives it: power, attribute values, and the ranges of numbers."""
    power: str | None
    values: dict[str, int | str]
    ranges: dict[str, tuple[int, int]]


def device_state(entry) -> DeviceState | None:
    """One `home_status[room][device]` entry. HomeBench writes some bounds as strings ("16") and some
    attribute names with a leading space (" degree"); free-form values (colours) are left out."""
    if not isinstance(entry, dict):
        return None
    values, ranges = {}, {}
    for name, attr in (entry.get("attributes") or {}).items():
        value = attr.get("value") if isinstance(attr, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            continue
        values[name.strip()] = value
        try:
            ranges[name.strip()] = (int(attr["lowest"]), int(attr["highest"]))
        except (KeyError, TypeError, ValueError):
            pass
    power = entry.get("state")
    return DeviceState(power if isinstance(power, str) else None, values, ranges)


@dataclass
class Home:
    home_id: int
    status: dict
    # (room, device) -> {method: [parameter names]} in file order
    devices: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)

    def state(self, room: str, device: str) -> DeviceState | None:
        room_status = self.status.get(room) if room != NO_ROOM else None
        return device_state(room_status.get(device)) if isinstance(room_status, dict) else None

    def has(self, room: str, device: str, method: str) -> bool:
        return method in self.devices.get((room, device), {})

    def address(self, room: str, device: str) -> str:
        return device if room == NO_ROOM else f"{room}.{device}"


def load_homes(path) -> dict[int, Home]:
    path = Path(path)
    homes: dict[int, Home] = {}
    for line, obj in read_jsonl(path):
        home_id = require(obj, "home_id", int, path=path, line=line)
        status = require(obj, "home_status", dict, path=path, line=line)
        methods = require(obj, "method", list, path=path, line=line)
        home = Home(home_id, status)
        for i, m in enumerate(methods):
            where = f"method[{i}]"
            if not isinstance(m, dict):
                raise InputError("expected an object", path=path, line=line, field=where)
            for key in ("room_name", "device_name", "operation"):
                if not isinstance(m.get(key), str):
                    raise InputError("missing or not a string", path=path, line=line, field=f"{where}.{key}")
            if m["device_name"] not in DEVICES:
                raise InputError(f"unknown device {m['device_name']!r} (known: {', '.join(sorted(DEVICES))})",
                                 path=path, line=line, field=f"{where}.device_name")
            params = m.get("parameters", [])
            if not isinstance(params, list) or not all(isinstance(p, dict) and "name" in p for p in params):
                raise InputError("expected a list of {name, type}", path=path, line=line, field=f"{where}.parameters")
            home.devices.setdefault((m["room_name"], m["device_name"]), {})[m["operation"]] = [p["name"] for p in params]
        if home_id in homes:
            raise InputError(f"duplicate home_id {home_id}", path=path, line=line, field="home_id")
        homes[home_id] = home
    return homes


@dataclass
class Row:
    id: str
    input: str
    output: str
    home_id: int
    type: str
    category: str


def load_rows(path, homes: dict[int, Home] | None = None) -> list[Row]:
    path = Path(path)
    rows, seen = [], set()
    for line, obj in read_jsonl(path):
        rid = require(obj, "id", str, path=path, line=line)
        text = require(obj, "input", str, path=path, line=line)
        output = require(obj, "output", str, path=path, line=line)
        home_id = require(obj, "home_id", int, path=path, line=line)
        row_type = require(obj, "type", str, path=path, line=line)
        if rid in seen:
            raise InputError(f"duplicate id {rid!r}", path=path, line=line, field="id")
        seen.add(rid)
        if homes is not None and home_id not in homes:
            raise InputError(f"home {home_id} is not in the homes file", path=path, line=line, field="home_id")
        try:
            cat = category(row_type)
        except ValueError as e:
            raise InputError(str(e), path=path, line=line, field="type") from None
        rows.append(Row(rid, text, output, home_id, row_type, cat))
    return rows
