"""Rounds on the small embedded default: resume after SIGKILL at several points, and the approval gate."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from conftest import coevo, copy_default
from engine.archive import Archive, is_probe
from engine.evaluate import task_dir
from engine.harness.spec import HarnessSpec
from engine.jsonl import read_jsonl
from engine.tasks import get_task
from engine.train.data import gold_conversations

pytestmark = pytest.mark.slow


def _run_args(archive, small_default, *extra):
    root = small_default[0].parent
    return ["run", "--rounds", "1", "--archive", str(archive), "--config", str(root / "init.yaml"),
            "--run-config", str(root / "run.yaml"), *extra]


def _kill_when(args, marker: str, delay: float = 0.0) -> bool:
    """Start `coevo run`, SIGKILL it `delay` seconds after it prints `marker`; False if it ended first."""
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if marker in line:
            time.sleep(delay)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
    proc.wait()
    return False


def _no_duplicates(path):
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE round IS NOT NULL AND split NOT LIKE '%:probe' "
                        "GROUP BY round HAVING COUNT(*) > 1").fetchall() == []
    # a probe killed and redone is found, not stored twice
    assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE split LIKE '%:probe' "
                        "GROUP BY harness_id, checkpoint_id, split, episodes HAVING COUNT(*) > 1").fetchall() == []
    assert conn.execute("SELECT name FROM checkpoints GROUP BY name HAVING COUNT(*) > 1").fetchall() == []
    assert conn.execute("SELECT round_id, step FROM decisions GROUP BY round_id, step "
                        "HAVING COUNT(*) > 1").fetchall() == []
    assert conn.execute("SELECT path FROM datasets GROUP BY path HAVING COUNT(*) > 1").fetchall() == []


def test_a_round_killed_at_any_step_resumes_without_duplicates(small_default, tmp_path):
    """With gold replay on: the round's SFT data is its verified samples followed by gold conversations of
    other train items under the round's harness, written once however often the round was killed."""
    archive = copy_default(small_default, tmp_path)
    run = yaml.safe_load((small_default[0].parent / "run.yaml").read_text())
    run["sample"]["replay"] = 6
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    args = [*_run_args(archive, small_default)[:-2], "--run-config", str(tmp_path / "run.yaml")]
    kills = 0
    for marker, delay in [("] inherit ...", 0.5), ("] sample ...", 1.0), ("] sft ...", 6.0), ("] evaluate ...", 0.3)]:
        kills += _kill_when(args, marker, delay)
        _no_duplicates(archive)
    assert kills >= 3
    out = coevo(*args)
    _no_duplicates(archive)
    with Archive(archive) as a:
        rounds = a.rounds()
        assert [r["state"] for r in rounds] == ["done"]
        steps = {s["step"]: s for s in a.round_steps(rounds[0]["id"])}
        assert set(steps) == {"curate", "edit", "inherit", "sample", "sft", "evaluate"}
        assert len([e for e in a.evaluations() if e["round"] == rounds[0]["id"] and not is_probe(e["split"])]) == 1
        sample = a.step_result(rounds[0]["id"], "sample")
        rows = [row for _, row in read_jsonl(a.dataset(sample["dataset"])["path"])]
        spec = HarnessSpec.from_dict(a.harness(a.step_result(rounds[0]["id"], "evaluate")["harness"])["spec"])
        task = get_task("smart_home", task_dir(a, "smart_home"))
    assert sample["replayed"] == 6 and len(rows) == sample["kept"] + 6
    assert spec.name.split("@")[0].endswith("-" + spec.interface.name)  # named after the format it speaks
    gold = {json.dumps(row) for row in gold_conversations(spec, task, task.load("train"))}
    assert all(json.dumps(row) in gold for row in rows[-6:])
    assert "score" in out.stdout and "TIMR" in out.stdout


def test_gate_require_waits_and_the_persons_choice_is_used(small_default, tmp_path):
    archive = copy_default(small_default, tmp_path)
    args = _run_args(archive, small_default, "--gate", "require")
    out = coevo(*args).stdout
    assert "waiting: decision" in out
    with Archive(archive) as a:
        (pending,) = a.decisions("proposed")
        assert pending["kind"] == "parents"
    coevo("approve", str(pending["id"]), "--archive", str(archive), "--by", "ana")
    out = coevo(*args).stdout
    assert "waiting: decision" in out
    with Archive(archive) as a:
        (pending,) = [a.decision(d["id"]) for d in a.decisions("proposed")]
        assert pending["kind"] == "inheritance"
        other = next(c for c in pending["candidates"] if c != pending["choice"])
    coevo("override", str(pending["id"]), "--choice", other, "--archive", str(archive), "--by", "bo",
          "--comment", "try the other one")
    coevo(*args)
    with Archive(archive) as a:
        rid = a.rounds()[0]["id"]
        assert a.rounds()[0]["state"] == "done"
        assert a.step_result(rid, "inherit")["checkpoint"] == other
        sample = a.step_result(rid, "sample")
        if sample["dataset"]:
            assert a.dataset(sample["dataset"])["checkpoint_id"] == other
        sft = a.step_result(rid, "sft")
        if sft["trained"]:
            assert [p["parent"] for p in a.checkpoint(sft["checkpoint"])["parents"]] == [other]
        else:
            assert sft["checkpoint"] == other
        trail = [(d["kind"], d["status"], d["decided_by"]) for d in a.decisions()]
        assert trail == [("parents", "approved", "ana"), ("inheritance", "overridden", "bo")]


@pytest.mark.parametrize("rule", ["not_worse", "not_significantly_worse"])
def test_an_edit_that_probes_worse_than_its_parent_pair_is_rejected(small_default, tmp_path, rule):
    """A harness asking for an interface no checkpoint was trained on loses to its parent pair, clearly
    enough for either rule, and the round goes on with the parent; an edit that changes nothing the model
    sees stands."""
    from engine.evolve.rounds import RoundRunner
    from engine.run_config import load_run_config
    archive = copy_default(small_default, tmp_path)
    cfg = load_run_config(small_default[0].parent / "run.yaml", accept_edit=rule)
    with Archive(archive) as a:
        runner = RoundRunner(a, cfg, log=lambda m: None)
        parent = a.harness(cfg.start_harness)
        best = a.best_scores(cfg.task, cfg.split)[parent["id"]]
        assert best["score"] > 0  # the parent pair solves something, which tool calls cannot

        def round_with(spec_changes: dict, name: str) -> dict:
            rid = a.open_round(cfg.mode, {})["id"]
            a.finish_step(rid, "curate", {"parents": [parent["id"]]})
            hid = a.add_harness({**parent["spec"], **spec_changes, "name": name}, creator="editor:offline",
                                rationale="test", parents=[parent["id"]], round=rid)
            results = {"curate": a.step_result(rid, "curate"),
                       "edit": runner._finish(rid, "edit", {"harness": hid, "operator": "test"})}
            results["inherit"] = runner._inherit(rid, results)
            return rid, hid, results

        rid, hid, results = round_with({"interface": {"name": "tool_call"}}, "worse")
        acceptance = a.decision(results["inherit"]["decision"])["evidence"]["acceptance"]
        assert not acceptance["accepted"] and acceptance["rule"] == rule
        assert acceptance["parent_probe"]["score"] > acceptance["edited_probe"]["score"]
        # the parent pair's probe is read off its own evaluation on the split, not run again
        assert acceptance["parent_probe"]["evaluation"] == best["id"]
        assert acceptance["parent_probe"]["n"] == acceptance["edited_probe"]["n"] == cfg.probe.items
        if rule == "not_significantly_worse":
            test = acceptance["test"]
            assert test["parent_wins"] > test["edited_wins"] and test["p"] < cfg.edit_alpha
            assert f"p={test['p']:.3f}" in a.decision(results["inherit"]["decision"])["rationale"]
        assert results["inherit"] == {**results["inherit"], "harness": parent["id"],
                                      "checkpoint": best["checkpoint_id"]}
        sample = runner._sample(rid, results)
        assert a.dataset(sample["dataset"])["harness_id"] == parent["id"]
        a.finish_round(rid)

        _, same, results = round_with({}, "renamed")
        acceptance = a.decision(results["inherit"]["decision"])["evidence"]["acceptance"]
        assert acceptance["accepted"] and "harness" not in results["inherit"]
        assert runner._harness(results) == same


def test_an_ablation_runs_every_mode_from_one_start_and_a_second_call_redoes_nothing(small_default, tmp_path):
    """`coevo ablate`: each mode runs its rounds on its own copy of the start and moves only what the mode
    lets move (sampling is kept small and below min_kept: what is checked is which step runs, not SFT)."""
    from engine.evolve.ablate import ablate, mode_archive_path
    from engine.run_config import MODES, load_run_config
    start = copy_default(small_default, tmp_path)
    cfg = load_run_config(small_default[0].parent / "run.yaml")
    cfg = cfg.model_copy(update={"sample": cfg.sample.model_copy(update={"tasks": 4, "min_kept": 10 ** 6})})
    with Archive(start) as a:
        seed_evaluations = len(a.evaluations())
        table = ablate(a, cfg, 1, log=lambda m: None)
        assert a.rounds() == [] and len(a.evaluations()) == seed_evaluations  # the start is left as it was
        paths = {m: mode_archive_path(a, cfg, m) for m in MODES}
        start_checkpoint = a.checkpoint(cfg.start_checkpoint)["id"]
        start_harness = a.harness(cfg.start_harness)["id"]
        seed_pairs = {(e["harness"], e["checkpoint"]) for e in a.evaluations()}
    assert list(table) == list(MODES) and all(len(rows) == 1 for rows in table.values())
    steps = {}
    for mode, path in paths.items():
        with Archive(path) as m:
            (rnd,) = m.rounds()
            assert rnd["mode"] == mode and rnd["state"] == "done"
            assert seed_pairs <= {(e["harness"], e["checkpoint"]) for e in m.evaluations()}
            steps[mode] = {s: m.step_result(rnd["id"], s) for s in ("edit", "inherit", "sft", "evaluate")}
            assert table[mode][0]["evaluation"] == steps[mode]["evaluate"]["evaluation"]
    assert steps["model-only"]["edit"] == {"harness": start_harness, "why": "the harness is fixed"}
    assert steps["model-only"]["evaluate"]["harness"] == start_harness
    for mode in ("coevo", "harness-only", "no-inheritance"):
        assert steps[mode]["edit"]["harness"] != start_harness and steps[mode]["edit"]["operator"]
    assert steps["harness-only"]["sft"] == {"checkpoint": start_checkpoint, "trained": False,
                                            "why": "the model is fixed"}
    assert steps["harness-only"]["inherit"]["checkpoint"] == start_checkpoint
    assert "min_kept" in steps["coevo"]["sft"]["why"]

    def evaluations(path) -> int:
        with Archive(path) as m:
            return len(m.evaluations())

    counts = {m: evaluations(p) for m, p in paths.items()}
    with Archive(start) as a:  # resumed: every mode is done, nothing is evaluated again
        assert ablate(a, cfg, 1, log=lambda m: None) == table
    assert {m: evaluations(p) for m, p in paths.items()} == counts
