import pytest

from engine import ASSETS
from engine.errors import InputError
from engine.harness.spec import HarnessSpec


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
