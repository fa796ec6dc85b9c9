import collections
import filecmp
import json
import re

import pytest

from conftest import SHARED_DATA, write_lines
from engine import ASSETS
from engine.errors import InputError
from engine.harness.interfaces import Call
from engine.harness.spec import HarnessSpec
from engine.tasks import get_task
from engine.tasks.smart_home import SmartHomeTask
from engine.tasks.smart_home.data import HOMES_FILE, Home, load_homes, load_rows
from engine.tasks.smart_home.task import mentioned_rooms, operation_to_call

REAL = SHARED_DATA / "homebench"


def test_generator_is_seeded_and_covers_every_category(tmp_path, home_data):
    SmartHomeTask.generate(tmp_path, seed=7, sizes={"train": 120, "dev": 40})
    for name in (HOMES_FILE, "train.jsonl", "dev.jsonl"):
        assert filecmp.cmp(tmp_path / name, home_data / name, shallow=False)
    items = get_task("smart_home", home_data).load("train")
    assert set(collections.Counter(i.category for i in items)) == {"VS", "IS", "VM", "IM", "MM"}


def test_generator_draws_instructions_over_a_given_homes_file(tmp_path, home_data):
    """A benchmark's own homes as the environments: copied as they are, whole-home devices never named."""
    homes = [json.loads(line) for line in (home_data / HOMES_FILE).read_text().splitlines()]
    homes[0]["method"].append({"room_name": "None", "device_name": "vacuum_robot", "operation": "turn_on",
                               "parameters": []})
    write_lines(tmp_path / "homes.jsonl", [json.dumps(h) for h in homes])
    out = tmp_path / "data"
    SmartHomeTask.generate(out, seed=3, sizes={"train": 80}, homes=str(tmp_path / "homes.jsonl"))
    assert filecmp.cmp(out / HOMES_FILE, tmp_path / "homes.jsonl", shallow=False)
    task = get_task("smart_home", out)
    items = task.load("train")
    assert {i.meta["home_id"] for i in items} <= {h["home_id"] for h in homes}
    assert not any("None" in i.input or "vacuum" in i.input for i in items)
    assert all(task.environment(i).step(task.gold_calls(i)).success for i in items)


def test_requests_are_worded_many_ways_and_the_wording_never_gives_the_answer_away(tmp_path):
    """A model fine-tuned on the generated requests must learn to read them, not one template: the same
    frames and device names appear in valid and invalid requests, and there are many of each."""
    SmartHomeTask.generate(tmp_path, seed=1, sizes={"train": 600})
    items = get_task("smart_home", tmp_path).load("train")
    def opening(text):
        return " ".join(text.split()[:2]).lower()
    valid = collections.Counter(opening(i.input) for i in items if i.category == "VS")
    invalid = collections.Counter(opening(i.input) for i in items if i.category == "IS")
    assert len(valid) >= 15 and len(invalid) >= 15
    common = [w for w, _ in invalid.most_common(8)]
    assert sum(w in valid for w in common) >= 6  # the wording of a refusal is the wording of a call
    assert any("?" in i.input for i in items) and any(" AC" in i.input for i in items)
    assert max(valid.values()) / sum(valid.values()) < 0.2


def test_a_room_is_found_by_its_spoken_name(home_data):
    """HomeBench's homes spell the dining room `ding_room`; a request says "dining room"."""
    home = Home(0, {}, {("ding_room", "light"): {"turn_on": []}, ("master_bedroom", "fan"): {"turn_on": []}})
    assert mentioned_rooms(home, "Turn on the light in the dining room.") == {"ding_room"}
    assert mentioned_rooms(home, "Turn on the master bedroom fan.") == {"master_bedroom"}
    assert mentioned_rooms(home, "Turn on the bedroom fan.") == set()


def test_gold_answers_pass_the_tool_schema_and_succeed(home_data):
    task = get_task("smart_home", home_data)
    for item in task.load("dev"):
        calls = task.gold_calls(item)
        assert [task.check_call(c, item) for c in calls] == [None] * len(calls)
        assert task.environment(item).step(calls).success


def test_tool_schema_separates_mismatch_from_wrong_answer(home_data):
    task = get_task("smart_home", home_data)
    item = task.load("dev")[0]
    assert "unknown tool" in task.check_call(Call("kitchen.toaster.toast"), item)
    assert "wrong arguments" in task.check_call(Call("kitchen.light.set_brightness", {"level": 3}), item)
    assert "takes no arguments" in task.check_call(Call("error_input", {"x": 1}), item)
    # a real device type the home lacks is a wrong answer, not an interface mismatch
    assert task.check_call(Call("nowhere_room.light.turn_on"), item) is None
    result = task.environment(item).step([Call("nowhere_room.light.turn_on")])
    assert not result.success and "failed" in result.feedback


def test_the_mentioned_rooms_option_shows_only_the_rooms_an_instruction_names(home_data):
    task = get_task("smart_home", home_data)
    item = next(i for i in task.load("dev") if len({r for r, _ in i.context.devices}) >= 2 and i.category == "VS")
    room = task.gold_calls(item)[0].name.split(".")[0]
    full = task.context(item, {"rooms": "all"})
    narrow = task.context(item, {"rooms": "mentioned"})
    assert full == task.context(item) and len(narrow) < len(full)
    assert {line.split(".")[0] for line in narrow.splitlines()} == {room}
    assert [line for line in full.splitlines() if line.startswith(room + ".")] == narrow.splitlines()
    nowhere = type(item)(item.id, "Turn on the light in the attic.", item.gold, item.category, context=item.context)
    assert task.context(nowhere, {"rooms": "mentioned"}) == full  # no room named: the whole home
    with pytest.raises(InputError, match="task_options.rooms"):
        task.context(item, {"rooms": "some"})


def test_operation_strings_convert_to_calls():
    assert operation_to_call("living_room.light.set_color((1,2,3))").args == {"color": "(1,2,3)"}
    assert operation_to_call("vacuum_robot.set_mode(auto)") == Call("vacuum_robot.set_mode", {"mode": "auto"})
    with pytest.raises(ValueError):
        operation_to_call("kitchen.toaster.toast()")


def test_broken_jsonl_line_is_named(tmp_path, home_data):
    rows = (home_data / "dev.jsonl").read_text().splitlines()
    path = write_lines(tmp_path / "dev.jsonl", rows[:2] + ['{"id": "x", "input": '] + rows[2:4])
    with pytest.raises(InputError, match=r"dev.jsonl:3: not valid JSON"):
        load_rows(path)


def test_unknown_device_in_a_home_file_is_named(tmp_path, home_data):
    homes = [json.loads(l) for l in (home_data / HOMES_FILE).read_text().splitlines()]
    homes[1]["method"][2]["device_name"] = "toaster"
    path = write_lines(tmp_path / HOMES_FILE, homes)
    with pytest.raises(InputError) as e:
        load_homes(path)
    assert f"{HOMES_FILE}:2" in str(e.value) and "method[2].device_name" in str(e.value) and "toaster" in str(e.value)


def test_rows_with_missing_fields_or_homes_are_named(tmp_path, home_data):
    homes = load_homes(home_data / HOMES_FILE)
    path = write_lines(tmp_path / "x.jsonl", [{"id": "a", "input": "x", "output": "'''error_input'''",
                                               "home_id": 9999, "type": "normal"}])
    with pytest.raises(InputError, match=r"x.jsonl:1 \[home_id\]"):
        load_rows(path, homes)
    path = write_lines(tmp_path / "y.jsonl", [{"id": "a", "input": "x", "home_id": 0, "type": "normal"}])
    with pytest.raises(InputError, match=r"y.jsonl:1 \[output\]: missing field"):
        load_rows(path)
    path = write_lines(tmp_path / "z.jsonl", [{"id": "a", "input": "x", "output": "", "home_id": 0, "type": "odd"}])
    with pytest.raises(InputError, match=r"z.jsonl:1 \[type\]"):
        load_rows(path)


@pytest.mark.skipif(not (REAL / HOMES_FILE).exists(), reason="../shared/data/homebench is not here")
def test_loader_reads_the_official_homebench_files():
    task = get_task("smart_home", REAL)
    items = task.load(str(REAL / "dev_sample_160.jsonl"))
    assert len(items) == 160 and len(task.homes) == 100
    assert collections.Counter(i.category for i in items) == {"VS": 40, "IS": 40, "VM": 40, "MM": 40}
    ok = sum(task.environment(i).step(task.gold_calls(i)).success for i in items)
    assert ok == 160
    assert "master_bedroom.light: turn_on turn_off" in task.context(items[0]) or task.context(items[0])


def test_init_passes_generator_options_and_seed_task_options(tmp_path):
    from engine.archive import Archive
    from engine.init import Init, InitConfig
    with Archive(tmp_path / "archive.db") as archive:
        with pytest.raises(InputError, match="takes no option 'houses'"):
            Init(archive, InitConfig(sizes={"train": 10}, data={"houses": "h.jsonl"})).data()
        init = Init(archive, InitConfig(sizes={"train": 10}, seed_task_options={"rooms": "mentioned"},
                                        seed_sampling={"constrain_calls": True}))
        init.harnesses()
        assert len(init.specs) == 3
        assert all(spec.task_options == {"rooms": "mentioned"} and spec.sampling.constrain_calls
                   and spec.sampling.max_new_tokens == HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml")
                   .sampling.max_new_tokens for _, spec in init.specs.values())
        with pytest.raises(InputError, match="constrain_call"):  # a misspelt setting names itself
            Init(archive, InitConfig(seed_sampling={"constrain_call": True})).harnesses()


def _home_with_quirks(tmp_path):
    """A HomeBench-format home whose status spells things as the benchmark's file does: bounds as strings,
    an attribute name with a leading space, a colour list, and a whole-home device without a room."""
    home = {"home_id": 0, "method": [
        {"room_name": "kitchen", "device_name": "light", "operation": op, "parameters": ps} for op, ps in
        [("turn_on", []), ("turn_off", []), ("set_brightness", [{"name": "brightness", "type": "int"}])]] + [
        {"room_name": "kitchen", "device_name": "curtain", "operation": op, "parameters": ps} for op, ps in
        [("open", []), ("close", []), ("set_degree", [{"name": "degree", "type": "int"}])]] + [
        {"room_name": "None", "device_name": "vacuum_robot", "operation": "start", "parameters": []}],
        "home_status": {"kitchen": {"room_name": "kitchen",
                                    "light": {"state": "on", "attributes": {
                                        "brightness": {"value": 79, "lowest": "0", "highest": "100"},
                                        "color": {"value": [1, 2, 3]}}},
                                    "curtain": {"state": "open", "attributes": {
                                        " degree": {"value": 10, "lowest": 0, "highest": "100"}}}},
                        "VacuumRobot": {"state": "off"}}}
    write_lines(tmp_path / HOMES_FILE, [json.dumps(home)])
    return home


def test_the_state_option_shows_each_devices_current_values_and_ranges(tmp_path):
    _home_with_quirks(tmp_path)
    write_lines(tmp_path / "dev.jsonl", [json.dumps({"id": "a", "input": "Raise the kitchen light by 30%.",
                                                     "output": "''' kitchen.light.set_brightness(100)'''",
                                                     "home_id": 0, "type": "normal"})])
    task = get_task("smart_home", tmp_path)
    (item,) = task.load("dev")
    assert task.context(item, {"state": "values"}).splitlines() == [
        "kitchen.light: turn_on turn_off set_brightness(brightness) (now: on, brightness=79 of 0-100)",
        "kitchen.curtain: open close set_degree(degree) (now: open, degree=10 of 0-100)",
        "vacuum_robot: start"]
    assert task.context(item, {"state": "none"}) == task.context(item)
    assert "now:" not in task.context(item)
    assert task.option_space["state"] == ["none", "values"]  # an editor may turn it on or off


def _direction(text: str) -> int:
    lowered = text.lower()
    up = any(w in lowered for w in ("increase", "raise", "turn up", " up by"))
    down = any(w in lowered for w in ("decrease", "lower", "turn down", "reduce"))
    assert up != down, text
    return 1 if up else -1


def test_relative_requests_are_answered_from_the_current_value_within_its_range(tmp_path):
    """A valid single request "raise ... by N" asks for the current value plus N, held to the range; with
    `relative_share` 0 (the default) no request is relative and the files are those of earlier versions."""
    SmartHomeTask.generate(tmp_path, seed=4, sizes={"train": 1500}, relative_share=0.6, max_ops=10)
    task = get_task("smart_home", tmp_path)
    items = task.load("train")
    relative = [i for i in items if re.search(r" by \d+", i.input)]
    assert 0.1 < len(relative) / len(items) < 0.6
    assert {i.category for i in relative} >= {"VS", "IS", "VM", "MM"}  # invalid requests are phrased alike
    clamped = 0
    for item in (i for i in relative if i.category == "VS"):
        (call,) = task.gold_calls(item)
        room, device, _ = call.name.split(".")
        ((param, value),) = call.args.items()
        state = item.context.state(room, device)
        lo, hi = state.ranges[param]
        delta = int(re.search(r" by (\d+)", item.input).group(1))
        expected = state.values[param] + _direction(item.input) * delta
        assert value == min(hi, max(lo, expected)), item.input
        clamped += value != expected
    assert clamped > 0  # some changes run past the range and are held to it
    plain = tmp_path / "plain"
    SmartHomeTask.generate(plain, seed=4, sizes={"train": 400})
    assert not [i for i in get_task("smart_home", plain).load("train") if re.search(r" by \d+", i.input)]


def test_multi_device_requests_run_up_to_max_ops_and_options_are_checked(tmp_path):
    SmartHomeTask.generate(tmp_path, seed=2, sizes={"train": 400}, max_ops="10")  # a command-line string
    items = get_task("smart_home", tmp_path).load("train")
    sizes = collections.Counter(int(re.match(r"multi(\d+)_", i.meta["type"]).group(1)) for i in items
                                if i.meta["type"].startswith("multi"))
    assert set(sizes) == set(range(2, 11))
    assert all(len(get_task("smart_home", tmp_path).gold_calls(i)) == int(re.match(r"multi(\d+)", i.meta["type"])
                                                                          .group(1))
               for i in items if i.meta["type"].startswith("multi"))
    with pytest.raises(InputError, match=r"data.max_ops"):
        SmartHomeTask.generate(tmp_path / "bad", seed=0, sizes={"train": 1}, max_ops=11)
    with pytest.raises(InputError, match=r"data.relative_share"):
        SmartHomeTask.generate(tmp_path / "bad", seed=0, sizes={"train": 1}, relative_share="half")
