import pytest

from engine import ASSETS
from engine.errors import InputError
from engine.harness.spec import HarnessSpec, edited_name


def test_seed_harnesses_round_trip_through_yaml(tmp_path):
    for path in sorted((ASSETS / "harnesses").glob("*.yaml")):
        spec = HarnessSpec.load(path)
        out = tmp_path / path.name
        out.write_text(spec.to_yaml())
        assert HarnessSpec.load(out) == spec


def test_unknown_interface_names_file_and_field(tmp_path):
    text = (ASSETS / "harnesses" / "smart_home_json.yaml").read_text().replace("name: json", "name: yaml_v9")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        HarnessSpec.load(path)
    assert "bad.yaml" in str(e.value) and "interface.name" in str(e.value) and "yaml_v9" in str(e.value)


def test_unknown_key_and_bad_placeholder_are_rejected(tmp_path):
    base = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml").to_dict()
    with pytest.raises(InputError, match="retries"):
        HarnessSpec.from_dict({**base, "loop": {**base["loop"], "retries": 3}})
    with pytest.raises(InputError, match="system_prompt"):
        HarnessSpec.from_dict({**base, "system_prompt": "Hi {user}"})


def test_broken_yaml_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ninterface: {name: json\nstrict: true\n")
    with pytest.raises(InputError, match=r"broken.yaml:\d"):
        HarnessSpec.load(path)


@pytest.mark.parametrize("parent_name, old_interface, new_interface, round_label, expected", [
    ("smart_home-xml", "xml", "json", "r1", "smart_home-json@r1"),    # the stem names the format: renamed
    ("smart_home-xml@r2", "xml", "xml", "r4", "smart_home-xml@r4"),   # same format: only the round changes
    ("smart_home-json@r2", "json", "tool_call", "r3.2", "smart_home-tool_call@r3.2"),
    ("kitchen-assistant", "json", "xml", "r5", "kitchen-assistant-xml@r5"),  # a free name gains the format
])
def test_an_edited_harness_is_named_after_the_format_it_speaks(parent_name, old_interface, new_interface,
                                                               round_label, expected):
    parent = {**HarnessSpec.load(ASSETS / "harnesses" / "smart_home_xml.yaml").to_dict(), "name": parent_name,
              "interface": {"name": old_interface}}
    child = {**parent, "interface": {"name": new_interface}}
    assert edited_name(parent, child, round_label) == expected
