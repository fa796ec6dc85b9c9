"""A seeded generator of HomeBench-format homes and instructions (all five categories) for the CPU default."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from engine.jsonl import read_jsonl, write_jsonl
from engine.tasks.smart_home.catalog import CORE_METHODS, DEVICES, spoken_room
from engine.tasks.smart_home.data import HOMES_FILE, NO_ROOM, device_state, load_homes

ROOMS = ["living_room", "master_bedroom", "guest_bedroom", "kitchen", "study_room", "dining_room",
         "bathroom", "balcony", "garage", "corridor"]
ROOM_DEVICES = ["light", "air_conditioner", "heating", "fan", "air_purifiers", "humidifier", "dehumidifiers",
                "aromatherapy", "curtain", "blinds", "media_player", "trash"]
OPTIONS = {
    ("air_conditioner", "mode"): ["cool", "heat", "fan_only", "dry"],
    ("heating", "mode"): ["comfort", "eco", "auto"],
    ("air_purifiers", "mode"): ["auto", "sleep", "strong"],
    ("humidifier", "mode"): ["auto", "sleep"],
    ("dehumidifiers", "mode"): ["auto", "sleep"],
    "fan_speed": ["auto", "low", "medium", "high"],
    "speed": ["auto", "low", "medium", "high"],
    "swing": ["auto", "up", "middle", "down"],
}
MAX_OPERATIONS = 10  # in one request: HomeBench's types run from multi2 to multi10
RANGES = {"temperature": (16, 30), "interval": (10, 60)}  # others are 0..100
# instructions are generated for these methods; free-text ones (song, artist, color) are left out
SPOKEN_METHODS = {"turn_on", "turn_off", "open", "close", "play", "pause", "stop", "pack", "set_brightness",
                  "set_temperature", "set_degree", "set_intensity", "set_interval", "set_volume", "set_mode",
                  "set_fan_speed", "set_swing", "set_speed"}
# Many ways to say one thing, so that a model fine-tuned on these instructions learns to read requests,
# not one template: each device type's everyday names, imperative clauses per method and per attribute
# (values with their units), sentence frames, and connectors between the clauses of a multi-device request.
# Valid and invalid requests are phrased alike, so the wording never gives the answer away.
DEVICE_NAMES = {
    "light": ["light", "lights", "lamp"], "air_conditioner": ["air conditioner", "AC", "air conditioning"],
    "heating": ["heating", "heater", "heating system"], "fan": ["fan"],
    "air_purifiers": ["air purifier", "air cleaner"], "humidifier": ["humidifier"],
    "dehumidifiers": ["dehumidifier"], "aromatherapy": ["aromatherapy", "aromatherapy machine", "aroma diffuser"],
    "curtain": ["curtain", "curtains"], "blinds": ["blinds", "shades"],
    "media_player": ["media player", "speaker", "music player"], "trash": ["trash", "trash can", "garbage bin"],
    "garage_door": ["garage door"], "water_heater": ["water heater", "boiler"],
}
VERBS = {
    "turn_on": ["Turn on the {dev} in the {room}", "Switch on the {room} {dev}", "Turn the {room} {dev} on",
                "Power on the {dev} in the {room}", "Get the {room} {dev} running"],
    "turn_off": ["Turn off the {dev} in the {room}", "Switch off the {room} {dev}", "Turn the {room} {dev} off",
                 "Power off the {dev} in the {room}", "Shut off the {room} {dev}"],
    "open": ["Open the {dev} in the {room}", "Open the {room} {dev}", "Open up the {room} {dev}"],
    "close": ["Close the {dev} in the {room}", "Close the {room} {dev}", "Shut the {dev} in the {room}"],
    "play": ["Play the {dev} in the {room}", "Start playing on the {room} {dev}", "Resume the {room} {dev}"],
    "pause": ["Pause the {dev} in the {room}", "Pause the {room} {dev}"],
    "stop": ["Stop the {dev} in the {room}", "Stop the {room} {dev}"],
    "pack": ["Pack the {dev} in the {room}", "Pack up the {room} {dev}"],
}
SETTERS = ["Set the {attr} of the {dev} in the {room} to {value}", "Set the {room} {dev} {attr} to {value}",
           "Change the {attr} of the {room} {dev} to {value}", "Adjust the {room} {dev}'s {attr} to {value}",
           "Make the {attr} of the {dev} in the {room} {value}"]
ATTRIBUTE_SETTERS = {  # phrasings that name the attribute by its value's unit or by the verb
    "temperature": ["Set the {room} {dev} to {value} degrees", "Make the {dev} in the {room} {value} degrees"],
    "brightness": ["Dim the {room} {dev} to {value} percent", "Set the {dev} in the {room} to {value}% brightness"],
    "volume": ["Turn the volume of the {room} {dev} to {value}", "Set the {room} {dev} volume at {value}"],
    "mode": ["Put the {room} {dev} in {value} mode", "Switch the {dev} in the {room} to {value} mode"],
    "degree": ["Open the {room} {dev} to {value} percent"],
    "interval": ["Set the {room} {dev} to run every {value} minutes"],
}
UNITS = {"temperature": "{} degrees", "brightness": "{}%", "degree": "{}%", "interval": "{} minutes"}
# A relative request names a change, not a value, as in HomeBench's own prompt example ("Lower the air
# conditioner temperature in the guest bedroom by 1 degree"): the answer is the device's current value plus or
# minus the change, held to the attribute's range.
RELATIVE = {+1: ["Increase the {attr} of the {dev} in the {room} by {delta}", "Raise the {room} {dev} {attr} by {delta}",
                 "Turn up the {attr} of the {room} {dev} by {delta}", "Bump the {room} {dev}'s {attr} up by {delta}"],
            -1: ["Decrease the {attr} of the {dev} in the {room} by {delta}", "Lower the {room} {dev} {attr} by {delta}",
                 "Turn down the {attr} of the {room} {dev} by {delta}", "Reduce the {room} {dev}'s {attr} by {delta}"]}
FRAMES = [("{}.", 4), ("Please {}.", 2), ("Could you {}?", 1), ("Can you {}?", 1), ("I'd like you to {}.", 1),
          ("Hey, {}.", 1)]
CONNECTORS = [" and ", ", then ", ", and also ", ". Also, "]
TYPE_SHARES = [("VS", 0.35), ("IS", 0.2), ("VM", 0.2), ("IM", 0.1), ("MM", 0.15)]


def _spoken(name: str) -> str:
    return name.replace("_", " ")


def _device(rng, dev: str) -> str:
    return rng.choice(DEVICE_NAMES.get(dev) or [_spoken(dev)])


def _value(rng: random.Random, device: str, param: str):
    opts = OPTIONS.get((device, param)) or OPTIONS.get(param)
    if opts:
        return rng.choice(opts)
    lo, hi = RANGES.get(param, (0, 100))
    return rng.randint(lo, hi)


def make_home(rng: random.Random, home_id: int) -> dict:
    methods, status = [], {}
    for room in rng.sample(ROOMS, rng.randint(2, 3)):
        status[room] = {"room_name": room}
        for dev in rng.sample(ROOM_DEVICES, rng.randint(2, 3)):
            ops = list(CORE_METHODS[dev]) + [m for m, p in DEVICES[dev].items() if p and rng.random() < 0.6]
            attrs = {}
            for op in ops:
                for param, typ in DEVICES[dev][op]:
                    opts = OPTIONS.get((dev, param)) or OPTIONS.get(param)
                    if opts:
                        attrs[param] = {"value": rng.choice(opts), "options": opts}
                    elif typ == "int":
                        lo, hi = RANGES.get(param, (0, 100))
                        attrs[param] = {"value": rng.randint(lo, hi), "lowest": lo, "highest": hi}
                methods.append({"room_name": room, "device_name": dev, "operation": op,
                                "parameters": [{"name": p, "type": t} for p, t in DEVICES[dev][op]]})
            status[room][dev] = {"state": rng.choice(["on", "off"]), "attributes": attrs}
    return {"home_id": home_id, "method": methods, "home_status": status}


def _devices(home: dict) -> dict[tuple[str, str], set[str]]:
    """(room, device) -> methods, for the devices an instruction can name by room (not whole-home ones)."""
    out: dict[tuple[str, str], set[str]] = {}
    for m in home["method"]:
        if m["room_name"] != NO_ROOM and m["operation"] in SPOKEN_METHODS:
            out.setdefault((m["room_name"], m["device_name"]), set()).add(m["operation"])
    return out


def _amount(param: str, n: int) -> str:
    unit = UNITS.get(param, "{}")
    return unit.format(n)[:-1] if n == 1 and unit.endswith("s") else unit.format(n)


def _relative(rng, where: dict, param: str, state, fallback: tuple[int, int]) -> tuple[str, int]:
    """A request to change a number by an amount, and the value it asks for. Without a known current
    value (a device the home lacks) the request is phrased alike; its answer is error_input anyway."""
    lo, hi = state.ranges.get(param, fallback) if state else fallback
    delta = rng.randint(1, max(1, (hi - lo) // 2))
    sign = rng.choice([+1, -1])
    current = state.values.get(param) if state else None
    value = min(hi, max(lo, current + sign * delta)) if isinstance(current, int) else None
    text = rng.choice(RELATIVE[sign]).format(attr=_spoken(param), delta=_amount(param, delta), **where)
    return text, value


def _clause(rng, room: str, dev: str, method: str, home: dict | None = None,
            relative_share: float = 0.0) -> tuple[str, str]:
    """(instruction clause, operation string) for one call, valid or not; an integer setting is asked for
    as a change from its current value in a `relative_share` of the clauses."""
    params = DEVICES[dev][method]
    where = {"dev": _device(rng, dev), "room": spoken_room(room)}
    if not params:
        return rng.choice(VERBS[method]).format(**where), f"{room}.{dev}.{method}()"
    param, typ = params[0]
    if typ == "int" and relative_share > 0 and rng.random() < relative_share:
        state = device_state(home["home_status"].get(room, {}).get(dev)) if home else None
        text, value = _relative(rng, where, param, state, RANGES.get(param, (0, 100)))
        if value is not None or home is None:  # else the home's status lacks it: ask for a value
            return text, f"{room}.{dev}.{method}({value})"
    value = _value(rng, dev, param)
    if param in ATTRIBUTE_SETTERS and rng.random() < 0.4:
        text = rng.choice(ATTRIBUTE_SETTERS[param]).format(value=value, **where)
    else:
        shown = UNITS[param].format(value) if param in UNITS and rng.random() < 0.5 else value
        text = rng.choice(SETTERS).format(attr=_spoken(param), value=shown, **where)
    return text, f"{room}.{dev}.{method}({value})"


def _valid(rng, devices, home=None, relative_share=0.0) -> tuple[str, str]:
    (room, dev) = rng.choice(sorted(devices))
    method = rng.choice(sorted(devices[(room, dev)]))
    return _clause(rng, room, dev, method, home, relative_share)


def _invalid(rng, devices, relative_share=0.0) -> tuple[str, str, str]:
    """An operation the home cannot do: a device the room lacks, or an attribute the device lacks."""
    lacking = [(r, d, m) for (r, d), ops in devices.items()
               for m in DEVICES[d] if m not in ops and m in SPOKEN_METHODS]
    if lacking and rng.random() < 0.5:
        room, dev, method = rng.choice(sorted(lacking))
        kind = "unexist_attribute"
    else:
        room = rng.choice(sorted({r for r, _ in devices if any((r, d) not in devices for d in ROOM_DEVICES)}))
        dev = rng.choice([d for d in ROOM_DEVICES if (room, d) not in devices])
        method = rng.choice(sorted(set(DEVICES[dev]) & SPOKEN_METHODS))
        kind = "unexist_device"
    text, _ = _clause(rng, room, dev, method, relative_share=relative_share)
    return text, "error_input", kind


def _sentence(rng, clauses: list[str]) -> str:
    """The clauses as one request: joined by connectors, in a frame such as "Could you ...?"."""
    text = clauses[0]
    for i, clause in enumerate(clauses[1:], 1):
        if len(clauses) == 2:
            connector = rng.choice(CONNECTORS)
        else:  # a longer list: commas and the like, " and " before its last clause
            connector = rng.choice(CONNECTORS[:3]) if i < len(clauses) - 1 else " and "
        text += connector + clause[0].lower() + clause[1:]
    frame = rng.choices([f for f, _ in FRAMES], weights=[w for _, w in FRAMES])[0]
    return frame.format(text if frame.startswith("{") else text[0].lower() + text[1:])


def make_row(rng: random.Random, home: dict, n: int, relative_share: float = 0.0, max_ops: int = 3) -> dict:
    """One instruction row over `home`; a multi-device request has 2 to `max_ops` operations."""
    devices = _devices(home)
    cat = rng.choices([c for c, _ in TYPE_SHARES], weights=[w for _, w in TYPE_SHARES])[0]
    hid = home["home_id"]

    def valid():
        return _valid(rng, devices, home, relative_share)

    def invalid():
        return _invalid(rng, devices, relative_share)

    if cat == "VS":
        text, op = valid()
        return {"id": f"home{hid}_one_{n}", "input": _sentence(rng, [text]), "output": f"''' {op}'''", "home_id": hid,
                "type": "normal"}
    if cat == "IS":
        text, op, kind = invalid()
        return {"id": f"home{hid}_one_{n}", "input": _sentence(rng, [text]), "output": f"'''{op}'''", "home_id": hid,
                "type": kind}
    k = rng.randint(2, max_ops)
    if cat == "VM":
        picks, kind = [valid() for _ in range(k)], f"multi{k}_normal"
    elif cat == "IM":
        inv = [invalid() for _ in range(k)]
        picks, kind = [(t, o) for t, o, _ in inv], f"multi{k}_{inv[0][2]}"
    else:
        picks = [valid(), invalid()[:2]] + [(valid() if rng.random() < 0.5 else invalid()[:2]) for _ in range(k - 2)]
        rng.shuffle(picks)
        kind = f"multi{k}_mix"
    return {"id": f"home{hid}_multi_{n}", "input": _sentence(rng, [t for t, _ in picks]),
            "output": "'''" + "".join(o + "," for _, o in picks) + "'''", "home_id": hid, "type": kind}


class GeneratorOptions(BaseModel):
    """What the generated requests ask: `relative_share` of the integer settings as a change from the current
    value (they need the harness option `state: values` to be answerable), and multi-device requests of 2 to
    `max_ops` operations (HomeBench's types run from multi2 to multi10)."""
    model_config = ConfigDict(extra="forbid")
    relative_share: float = Field(0.0, ge=0.0, le=1.0)
    max_ops: int = Field(3, ge=2, le=MAX_OPERATIONS)


def write_dataset(out_dir, *, seed: int, sizes: dict[str, int], n_homes: int = 40, homes_file=None,
                  options: GeneratorOptions = GeneratorOptions()) -> None:
    """Homes plus one JSONL per split, all in HomeBench's format; the same seed gives the same files.
    `homes_file`: a HomeBench homes file (say the benchmark's own 100 homes) to draw the instructions over,
    instead of generated homes, so that training and selection see the environments a benchmark uses."""
    out = Path(out_dir)
    rng = random.Random(seed)
    if homes_file is None:
        homes = [make_home(rng, i) for i in range(n_homes)]
    else:
        load_homes(homes_file)  # a clear error, naming the line, for a malformed file
        homes = [obj for _, obj in read_jsonl(Path(homes_file))]
        out.mkdir(parents=True, exist_ok=True)
    drawn = [h for h in homes if _devices(h)]
    n = 0
    splits = {}
    for split, size in sizes.items():
        rows = []
        for _ in range(size):
            rows.append(make_row(rng, rng.choice(drawn), n, options.relative_share, options.max_ops))
            n += 1
        splits[split] = rows
    if homes_file is None:
        write_jsonl(out / HOMES_FILE, homes)
    else:  # the benchmark's file as it is
        shutil.copyfile(homes_file, out / HOMES_FILE)
    for split, rows in splits.items():
        write_jsonl(out / f"{split}.jsonl", rows)
