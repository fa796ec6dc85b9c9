"""`coevo run --task failure_attribution|rbac_sql` completes a round on a small embedded default, with
TIMR and the task's metrics in the archive and on the dashboard."""
import json

import pytest

from conftest import coevo, small_configs

from engine.archive import Archive

METRICS = {"failure_attribution": {"agent_accuracy", "step_accuracy"},
           "rbac_sql": {"decision_accuracy", "false_permit_rate"}}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(METRICS))
def test_a_round_of_a_vertical(task, tmp_path, monkeypatch):
    init_yaml, run_yaml = small_configs(tmp_path, task, sizes={"train": 200, "dev": 16})
    archive = tmp_path / "archive.db"
    out = coevo("run", "--task", task, "--rounds", "1", "--archive", str(archive), "--config", str(init_yaml),
                "--run-config", str(run_yaml), check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    with Archive(archive, readonly=True) as a:
        (rnd,) = a.rounds()
        assert rnd["state"] == "done"
        result = a.step_result(rnd["id"], "evaluate")
        ev = a.evaluation(result["evaluation"])
        seeds = [e for e in a.evaluations() if e["round"] is None]
    assert ev["task"] == task and ev["turns"] > 0 and ev["timr"] == ev["mismatched_turns"] / ev["turns"]
    metrics = json.dumps(ev["metrics"])
    assert all(m in metrics for m in METRICS[task]), ev["metrics"]
    # the seed matrix: every seed harness of the task under both roots, and the roots learned their own format
    assert len(seeds) == 6 and {e["task"] for e in seeds} == {task}
    by_pair = {(e["harness"], e["checkpoint"]): e["timr"] for e in seeds}
    assert min(by_pair.values()) < 0.5 < max(by_pair.values()), by_pair

    from streamlit.testing.v1 import AppTest
    import streamlit as st
    from conftest import REPO
    st.cache_data.clear()
    monkeypatch.setenv("COEVO_ARCHIVE", str(archive))
    at = AppTest.from_file(str(REPO / "app" / "main.py"), default_timeout=60).run()
    assert not at.exception
    assert task in json.dumps(at.dataframe[0].value.to_dict())  # the best pair of the task's split
