"""End to end on a small embedded default: `coevo init` trains two roots with ms-swift in worker
processes, `coevo run` evaluates the matrix, and killed evaluations leave the archive valid."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


from conftest import coevo


def _status(archive):
    return json.loads(coevo("status", "--archive", str(archive), "--json").stdout)


def test_roots_answer_their_own_interface_and_mismatch_the_other(small_default):
    archive, stdout = small_default
    status = _status(archive)
    names = {c["name"]: c for c in status["checkpoints"]}
    assert {"tiny-base", "root-json", "root-xml"} <= set(names)
    assert names["root-json"]["kind"] == "sft" and names["root-json"]["dataset_id"]
    harness = {h["id"]: h["interface"] for h in status["harnesses"]}
    cells = {(harness[e["harness"]], e["checkpoint"]): e for e in status["evaluations"]}
    for e in status["evaluations"]:
        assert {"harness", "checkpoint", "task", "split", "score", "timr", "turns"} <= set(e)
    json_root, xml_root = names["root-json"]["id"], names["root-xml"]["id"]
    assert cells[("json", json_root)]["timr"] < 0.05 and cells[("xml", xml_root)]["timr"] < 0.05
    assert cells[("xml", json_root)]["timr"] > 0.5 and cells[("json", xml_root)]["timr"] > 0.5
    assert "score / TIMR" in stdout


def test_every_turn_is_stored_with_its_verdict(small_default):
    archive, _ = small_default
    conn = sqlite3.connect(archive)
    rows = conn.execute("SELECT e.turns, e.mismatched_turns, COUNT(t.turn), SUM(t.mismatch), "
                        "SUM(t.parse_error IS NOT NULL) FROM evaluations e JOIN turns t ON t.evaluation_id = e.id "
                        "GROUP BY e.id").fetchall()
    assert rows and all(r[0] == r[2] and r[1] == r[3] == r[4] for r in rows)


def test_init_again_does_nothing_new(small_default):
    archive, _ = small_default
    before = _status(archive)
    config = archive.parent / "init.yaml"
    coevo("init", "--archive", str(archive), "--config", str(config))
    after = _status(archive)
    assert len(after["checkpoints"]) == len(before["checkpoints"])
    assert len(after["harnesses"]) == len(before["harnesses"])


def _consistent(archive):
    conn = sqlite3.connect(archive)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    bad = conn.execute("SELECT e.id FROM evaluations e WHERE e.turns != "
                       "(SELECT COUNT(*) FROM turns t WHERE t.evaluation_id = e.id)").fetchall()
    assert bad == []
    return conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]


def test_killed_eval_leaves_a_valid_archive_with_no_partial_evaluation(small_default):
    archive, _ = small_default
    args = ["eval", "--archive", str(archive), "--harness", "smart_home-json", "--checkpoint", "root-json",
            "--split", "train"]
    n0 = _consistent(archive)
    t0 = time.time()
    coevo(*args)
    full = time.time() - t0
    assert _consistent(archive) == n0 + 1
    for fraction in (0.3, 0.6, 0.85):
        n = _consistent(archive)
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(full * fraction)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _consistent(archive) in (n, n + 1)


def test_a_local_model_directory_registers_as_the_base(small_default, tmp_path):
    archive, _ = small_default
    base_dir = next(c["path"] for c in _status(archive)["checkpoints"] if c["name"] == "tiny-base")
    fresh = tmp_path / "real.db"
    coevo("init", "--archive", str(fresh), "--base-model", base_dir)
    status = _status(fresh)
    assert [(c["kind"], c["path"]) for c in status["checkpoints"]] == [("base", base_dir)]
    assert len(status["harnesses"]) == 3
    bad = coevo("init", "--archive", str(fresh), "--base-model", str(tmp_path), check=False)
    assert bad.returncode == 2 and "no config.json" in bad.stderr
