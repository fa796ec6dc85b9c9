"""Steering acts from the CLI: each is a decision row with who and why; errors name the file and line."""
from conftest import coevo

from engine import ASSETS
from engine.archive import Archive
from engine.evolve import steering


def test_cli_steering_acts_are_on_the_audit_trail(tmp_path):
    from engine.testing.synthetic import build_synthetic
    path = tmp_path / "archive.db"
    build_synthetic(path, harnesses=6, checkpoints=6, evaluations=30, turns=600, tasks=("smart_home",), seed=2)
    args = ("--archive", str(path), "--by", "alice")
    good = (ASSETS / "harnesses" / "smart_home_json.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    lines = good.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if t.startswith("strict:"))
    lines[line - 1] = "strict: perhaps"
    bad.write_text("\n".join(lines) + "\n")
    out = coevo("steer", "harness", str(bad), *args, check=False)
    assert out.returncode == 2 and f"bad.yaml:{line} [strict]" in out.stderr
    mine = tmp_path / "mine.yaml"
    mine.write_text(good.replace("name: smart_home-json", "name: alice-json"))
    assert "next round's candidate" in coevo("steer", "harness", str(mine), "--parent", "h1", *args,
                                            "--why", "shorter prompt").stdout
    coevo("steer", "pin", "c2", *args)
    coevo("steer", "exclude", "c3", *args, "--why", "overfit")
    coevo("pause", *args)
    again = coevo("pause", *args, check=False)
    assert again.returncode == 2 and "paused already" in again.stderr
    with Archive(path, readonly=True) as a:
        assert steering.paused(a)["decided_by"] == "alice"
        assert steering.excluded(a) == {"c3"} and steering.next_pin(a)["choice"] == "c2"
        cand = steering.next_harness(a, "smart_home")
        h = a.harness(cand["choice"])
        assert (h["name"], h["creator"], h["parents"], cand["comment"]) == ("alice-json", "person:alice", ["h1"],
                                                                             "shorter prompt")
    coevo("resume", *args)
    coevo("steer", "include", "c3", *args)
    out = coevo("steer", "pin", "nope", *args, check=False)
    assert out.returncode == 2 and "no checkpoint 'nope'" in out.stderr
    with Archive(path, readonly=True) as a:
        assert steering.paused(a) is None and steering.excluded(a) == set()
        trail = a.query("SELECT kind, decided_by, status FROM decisions WHERE status = 'steer' ORDER BY id")
    assert [t["kind"] for t in trail] == ["harness", "pin", "exclude", "pause", "resume", "include"]
    assert {t["decided_by"] for t in trail} == {"alice"}
