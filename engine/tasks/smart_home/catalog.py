"""HomeBench's device catalog: device types, their methods and parameters, as in home_status_method.jsonl."""
from __future__ import annotations

# device type -> method -> [(parameter name, type)]
_ONOFF = {"turn_on": [], "turn_off": []}
DEVICES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "light": {**_ONOFF, "set_brightness": [("brightness", "int")],
              "set_color": [("color", "typing.Tuple[int, int, int]")]},
    "air_conditioner": {**_ONOFF, "set_temperature": [("temperature", "int")], "set_mode": [("mode", "str")],
                        "set_fan_speed": [("fan_speed", "str")], "set_swing": [("swing", "str")]},
    "heating": {**_ONOFF, "set_temperature": [("temperature", "int")], "set_mode": [("mode", "str")],
                "set_fan_speed": [("fan_speed", "str")]},
    "fan": {**_ONOFF, "set_speed": [("speed", "str")], "set_swing": [("swing", "str")]},
    "air_purifiers": {**_ONOFF, "set_mode": [("mode", "str")], "set_fan_speed": [("fan_speed", "str")]},
    "humidifier": {**_ONOFF, "set_intensity": [("intensity", "int")], "set_mode": [("mode", "str")]},
    "dehumidifiers": {**_ONOFF, "set_intensity": [("intensity", "int")], "set_mode": [("mode", "str")]},
    "aromatherapy": {**_ONOFF, "set_intensity": [("intensity", "int")], "set_interval": [("interval", "int")]},
    "curtain": {"open": [], "close": [], "set_degree": [("degree", "int")]},
    "blinds": {"open": [], "close": []},
    "garage_door": {"open": [], "close": []},
    "trash": {"pack": []},
    "media_player": {"play": [], "pause": [], "stop": [], "set_volume": [("volume", "int")],
                     "set_artist": [("artist", "str")], "set_song": [("song", "str")], "set_style": [("style", "str")]},
    "water_heater": {**_ONOFF, "set_temperature": [("temperature", "int")], "set_mode": [("mode", "str")]},
    "vacuum_robot": {"start": [], "stop": [], "pause": [], "set_mode": [("mode", "str")],
                     "set_cleaning_area": [("area", "str")]},
}

# Whole-home devices are addressed without a room: vacuum_robot.pause()
WHOLE_HOME = {"vacuum_robot"}

# methods every instance of a device type has; the others are attributes a given home may lack
CORE_METHODS = {dev: [m for m in methods if not methods[m]] for dev, methods in DEVICES.items()}


def known_tool(device: str, method: str) -> bool:
    return method in DEVICES.get(device, {})


def param_names(device: str, method: str) -> list[str]:
    return [p for p, _ in DEVICES[device][method]]


# How people name a room in speech, where its identifier does not say it plainly (HomeBench's homes spell
# the dining room `ding_room`); every other room is spoken as its identifier with spaces.
ROOM_SPOKEN = {"ding_room": "dining room"}


def spoken_room(room: str) -> str:
    return ROOM_SPOKEN.get(room, room.replace("_", " "))
