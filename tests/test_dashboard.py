"""The dashboard's pages, run headless with Streamlit's AppTest over a small synthetic archive."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.nav import PAGES  # noqa: E402
from engine.archive import Archive  # noqa: E402

MAIN = str(REPO / "app" / "main.py")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from engine.testing.synthetic import build_synthetic
    path = tmp_path_factory.mktemp("synthetic") / "archive.db"
    build_synthetic(path, harnesses=14, checkpoints=20, evaluations=200, turns=4000, pending_decisions=2, seed=3)
    return path


@pytest.fixture
def archive_copy(synthetic, tmp_path):
    """A private copy: the tests that decide write to it."""
    import sqlite3
    dst = tmp_path / "archive.db"
    with sqlite3.connect(synthetic) as src, sqlite3.connect(dst) as out:
        src.backup(out)
    return dst


def open_app(path, monkeypatch, page="overview", **state) -> AppTest:
    import streamlit as st
    st.cache_data.clear()  # AppTest keeps the cache across instances
    monkeypatch.setenv("COEVO_ARCHIVE", str(path))
    monkeypatch.delenv("COEVO_DASHBOARD_TOKEN", raising=False)
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    for k, v in state.items():
        at.session_state[k] = v
    if page != "overview":
        at.switch_page(PAGES[page][0]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def typed_array(value):
    """A numeric array of a plotly figure's JSON: a list, or plotly's base64 typed-array form."""
    import base64

    import numpy as np
    if isinstance(value, dict):
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.array(value)


def metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_draws_without_error(synthetic, monkeypatch, page):
    at = open_app(synthetic, monkeypatch, page)
    assert [t.value for t in at.title] == [PAGES[page][1]]
    assert not at.error, [e.value for e in at.error]


def test_overview_reports_the_archive(synthetic, monkeypatch):
    at = open_app(synthetic, monkeypatch)
    with Archive(synthetic, readonly=True) as a:
        harnesses, checkpoints = len(a.harnesses()), len(a.checkpoints())
        evals = a.evaluations()
        rounds_done = sum(r["state"] == "done" for r in a.rounds())
        pending = len(a.decisions("proposed"))
    assert metric(at, "Harnesses") == str(harnesses)
    assert metric(at, "Checkpoints") == str(checkpoints)
    assert metric(at, "Evaluations") == str(len(evals))
    assert metric(at, "Rounds done") == str(rounds_done)
    turns, mismatched = sum(e["turns"] for e in evals), sum(e["mismatched_turns"] for e in evals)
    assert metric(at, "TIMR, all turns") == f"{mismatched / turns:.1%}"
    assert any(s.value == f"Pending decisions ({pending})" for s in at.subheader)


def test_heatmap_cells_carry_their_evaluation_and_a_click_opens_it(synthetic, monkeypatch):
    at = open_app(synthetic, monkeypatch, "heatmaps")
    with Archive(synthetic, readonly=True) as a:
        task, split = a.query("SELECT task, split FROM evaluations GROUP BY task, split "
                              "ORDER BY COUNT(*) DESC, task, split LIMIT 1")[0].values()
        cells = {(c["harness"], c["checkpoint"]): c for c in a.matrix(task, split)}
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    trace, layout = spec["data"][0], spec["layout"]
    customdata, colors = typed_array(trace["customdata"]), typed_array(trace["marker"]["color"])
    xs, ys = typed_array(trace["x"]), typed_array(trace["y"])
    rows, cols = layout["yaxis"]["ticktext"], layout["xaxis"]["ticktext"]  # a cell's position names its pair
    assert len(customdata) == len(cells)
    for y, x, eid, timr in zip(ys, xs, customdata, colors):
        h, c = rows[int(y)], cols[int(x)]
        assert cells[(h, c)]["id"] == eid and cells[(h, c)]["timr"] == timr

    # AppTest cannot click a plotly point: give the chart the selection a click makes
    eid = int(customdata[0])
    at.session_state["heatmap-0"] = {"selection": {"points": [{"customdata": eid}], "point_indices": [0],
                                                   "box": [], "lasso": []}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Trajectories"]
    assert at.subheader[0].value.startswith(f"Evaluation {eid}:")


def test_trajectories_mark_mismatched_turns_and_filter(synthetic, monkeypatch):
    with Archive(synthetic, readonly=True) as a:
        eid = a.query("SELECT id FROM evaluations WHERE mismatched_turns > 0 AND mismatched_turns < turns "
                      "ORDER BY id LIMIT 1")[0]["id"]
        mismatched_eps = a.query("SELECT COUNT(*) AS n FROM episodes WHERE evaluation_id = ? "
                                 "AND mismatched_turns > 0", (eid,))[0]["n"]
        predictions = [r["prediction"] for r in a.query("SELECT prediction FROM episodes WHERE evaluation_id = ?",
                                                         (eid,))]
    at = open_app(synthetic, monkeypatch, "trajectories", evaluation=eid)
    # the share of the most frequent answer: a pair that answers everything alike shows as such
    top = max(predictions.count(p) for p in predictions) / len(predictions)
    assert next(m for m in at.metric if m.label == "Top answer").value == f"{top:.1%}"
    at.radio(key="traj-mismatch").set_value("with a mismatched turn").run()
    assert not at.exception
    assert any(c.value == f"{mismatched_eps} episodes" for c in at.caption)
    assert any("MISMATCH" in m.value for m in at.markdown)
    assert any("Parse error" in m.value for m in at.markdown)
    at.radio(key="traj-mismatch").set_value("no mismatch").run()
    assert not any("MISMATCH" in m.value for m in at.markdown)
    assert not any("Parse error" in m.value for m in at.markdown)


def test_lineage_node_detail_and_neighbourhood(synthetic, monkeypatch):
    with Archive(synthetic, readonly=True) as a:
        merge = a.query("SELECT id FROM checkpoints WHERE kind = 'merge' ORDER BY rowid LIMIT 1")[0]["id"]
        parents = a.checkpoint(merge)["parents"]
    at = open_app(synthetic, monkeypatch, "lineage", **{"lineage-view": "trees", "lineage-node": ("checkpoint", merge)})
    assert any(s.value.startswith(f"Checkpoint {merge} ") for s in at.subheader)
    assert all(f"{p['parent']} ({p['role']})" in " ".join(m.value for m in at.markdown) for p in parents)
    full = next(c.value for c in at.caption if c.value.startswith("Checkpoints:"))
    at.toggle(key="lineage-narrow").set_value(True).run()
    narrow = next(c.value for c in at.caption if c.value.startswith("Checkpoints:"))
    n_full, n_narrow = (int(s.split(":")[1].split()[0]) for s in (full, narrow))
    assert len(parents) + 1 <= n_narrow < n_full


def test_approve_and_override_change_the_archive(archive_copy, monkeypatch):
    with Archive(archive_copy, readonly=True) as a:
        first, second = a.decisions("proposed")[:2]
    at = open_app(archive_copy, monkeypatch, "decisions")
    at.text_input(key="person").set_value("ada").run()
    at.text_input(key=f"comment-{first['id']}").set_value("looks right")
    next(b for b in at.button if b.label == f"Approve {first['choice']}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    with Archive(archive_copy, readonly=True) as a:
        d = a.decision(first["id"])
    assert (d["status"], d["choice"], d["decided_by"], d["comment"]) == ("approved", first["choice"], "ada",
                                                                         "looks right")
    assert any(f"Decision {first['id']} approved by ada" in s.value for s in at.success)

    other = next(c for c in json.loads(second["candidates"]) if c != second["choice"])
    at.selectbox(key=f"choice-{second['id']}").set_value(other)
    at.text_input(key=f"comment-{second['id']}").set_value("the other fits the interface")
    next(b for b in at.button if b.label == "Override").click().run()
    with Archive(archive_copy, readonly=True) as a:
        d = a.decision(second["id"])
        trail = a.decisions()
    assert (d["status"], d["choice"], d["decided_by"]) == ("overridden", other, "ada")
    assert not any(r["status"] == "proposed" for r in trail)
    assert any(s.value == "Pending (0)" for s in at.subheader)


def test_compare_two_harnesses(synthetic, monkeypatch):
    at = open_app(synthetic, monkeypatch, "compare")
    diff = at.code[0].value
    left, right = at.selectbox(key="compare-left-harness").value, at.selectbox(key="compare-right-harness").value
    assert diff.startswith(f"--- {left}\n+++ {right}")
    at.radio(key="compare-kind").set_value("checkpoint").run()
    assert not at.exception
    assert at.code[0].value.startswith("--- ")


def test_a_token_guards_every_page(synthetic, monkeypatch):
    import streamlit as st
    st.cache_data.clear()
    monkeypatch.setenv("COEVO_ARCHIVE", str(synthetic))
    monkeypatch.setenv("COEVO_DASHBOARD_TOKEN", "s3cret")
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    assert not at.title and at.text_input[0].label == "Access token"
    at.text_input[0].set_value("wrong").run()
    assert not at.title and at.error[0].value == "Wrong token."
    at.text_input[0].set_value("s3cret").run()
    assert [t.value for t in at.title] == ["Overview"]


def test_pages_never_load_the_ml_stack(synthetic):
    """Every page, run in a fresh interpreter, leaves torch, swift and mergekit unimported."""
    code = (
        "import os, sys, json\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from streamlit.testing.v1 import AppTest\nfrom app.nav import PAGES\n"
        f"at = AppTest.from_file({MAIN!r}, default_timeout=60).run()\n"
        "for f, *_ in PAGES.values():\n    at.switch_page(f).run()\n    assert not at.exception, f\n"
        "print(json.dumps(sorted(m for m in ('torch', 'swift', 'mergekit', 'transformers') if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COEVO_ARCHIVE": str(synthetic)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_reads_an_archive_while_it_is_written(archive_copy, monkeypatch):
    """A writer commits evaluations while the pages rerun: no error, and one rerun after the last
    commit shows it."""
    with Archive(archive_copy, readonly=True) as a:
        template = a.query("SELECT * FROM evaluations ORDER BY id LIMIT 1")[0]
        episodes = a.episodes(template["id"])
        turns = a.turns(template["id"])
    stop = threading.Event()

    def write():
        with Archive(archive_copy) as w:
            for i in range(40):
                row = {k: template[k] for k in ("harness_id", "checkpoint_id", "task", "split", "score", "episodes",
                                                "turns", "mismatched_turns", "timr", "tokens", "seconds")}
                w.add_evaluation({**row, "metrics": {"i": i}},
                                 [{k: v for k, v in e.items() if k != "evaluation_id"} for e in episodes],
                                 [{k: v for k, v in t.items() if k != "evaluation_id"} for t in turns])
                time.sleep(0.02)
        stop.set()

    at = open_app(archive_copy, monkeypatch)
    writer = threading.Thread(target=write)
    writer.start()
    seen = set()
    pages = list(PAGES)
    i = 0
    while not stop.is_set():
        at.switch_page(PAGES[pages[i % len(pages)]][0]).run()
        assert not at.exception, [e.value for e in at.exception]
        i += 1
        if pages[(i - 1) % len(pages)] == "overview":
            seen.add(metric(at, "Evaluations"))
    writer.join()
    at.switch_page(PAGES["overview"][0]).run()
    with Archive(archive_copy, readonly=True) as a:
        final = len(a.evaluations())
    assert metric(at, "Evaluations") == str(final)
    assert i >= len(pages)


@pytest.mark.slow
def test_jobs_page_starts_an_evaluation_that_runs_in_a_worker(small_default, tmp_path, monkeypatch):
    from conftest import copy_default
    path = copy_default(small_default, tmp_path)
    with Archive(path, readonly=True) as a:
        before = len(a.evaluations())
    at = open_app(path, monkeypatch, "jobs")
    at.selectbox(key="job-kind").set_value("eval").run()
    at.selectbox(key="job-harness").set_value("h1")
    at.selectbox(key="job-checkpoint").set_value("c2")
    at.number_input(key="job-limit").set_value(4)
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (started,) = [s.value for s in at.success]
    job_id = int(started.split()[1])
    deadline = time.time() + 240
    while True:  # the page returned at once; the worker goes on without it
        with Archive(path, readonly=True) as a:
            job = a.job(job_id)
        if job["state"] not in ("queued", "running") or time.time() > deadline:
            break
        time.sleep(0.5)
    assert job["state"] == "done", job
    assert job["progress"] == job["total"] == 4
    with Archive(path, readonly=True) as a:
        ev = a.evaluation(job["result"]["evaluation"])
        assert len(a.evaluations()) == before + 1
    assert (ev["harness_id"], ev["checkpoint_id"], ev["episodes"]) == ("h1", "c2", 4)
    at.run()  # the page lists it with its log
    assert str(job_id) in at.selectbox(key="job-log").options


def test_dashboard_refuses_to_bind_beyond_loopback_without_a_token(synthetic, tmp_path, monkeypatch):
    from conftest import coevo
    from engine.dashboard import DashboardConfig, command, load_dashboard_config
    env = {k: v for k, v in os.environ.items() if k != "COEVO_DASHBOARD_TOKEN"}
    out = coevo("dashboard", "--archive", str(synthetic), "--host", "0.0.0.0", check=False, env=env)
    assert out.returncode == 2 and "needs a token" in out.stderr
    cmd, _ = command(synthetic, DashboardConfig())
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    monkeypatch.setenv("COEVO_DASHBOARD_TOKEN", "t0ken")
    cmd, run_env = command(synthetic, load_dashboard_config(host="0.0.0.0", port=9000))
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0" and cmd[cmd.index("--server.port") + 1] == "9000"
    assert run_env["COEVO_DASHBOARD_TOKEN"] == "t0ken" and run_env["COEVO_ARCHIVE"] == str(synthetic.resolve())
    bad = tmp_path / "dashboard.yaml"
    bad.write_text("host: 0.0.0.0\nport: eighty\n")
    with pytest.raises(Exception, match=r"dashboard.yaml.*port"):
        load_dashboard_config(bad)


def test_presentation_mode_hides_the_developer_toolbar(synthetic):
    from engine.dashboard import DashboardConfig, command
    for present, mode in ((False, "auto"), (True, "minimal")):
        cmd, _ = command(synthetic, DashboardConfig(present=present))
        assert cmd[cmd.index("--client.toolbarMode") + 1] == mode


def test_overview_follows_the_open_round(archive_copy, monkeypatch):
    from engine.evolve import steering
    with Archive(archive_copy, readonly=True) as a:
        (open_round,) = [r for r in a.rounds() if r["state"] != "done"][:1]
        done = {s["step"] for s in a.round_steps(open_round["id"]) if s["state"] == "done"}
    at = open_app(archive_copy, monkeypatch)
    heading = next(m.value for m in at.markdown if m.value.startswith("#### Round"))
    current = next(s for s in ("curate", "edit", "inherit", "sample", "sft", "evaluate") if s not in done)
    assert heading.startswith(f"#### Round {open_round['id']} ") and f"**{current}**" in heading
    assert not at.warning
    with Archive(archive_copy) as a:  # a person pauses: the page shows it on its next run
        steering.pause(a, by="ops", why="GPU maintenance")
    at.run()
    assert any("Paused by ops: GPU maintenance" in w.value for w in at.warning)


def test_jobs_form_starts_on_a_task_the_archive_holds(tmp_path, monkeypatch):
    from engine.testing.synthetic import build_synthetic
    path = tmp_path / "archive.db"
    build_synthetic(path, harnesses=6, checkpoints=6, evaluations=30, turns=600, tasks=("rbac_sql",), seed=1)
    at = open_app(path, monkeypatch, "jobs")
    assert at.selectbox(key="job-round-task").value == "rbac_sql"
    at.selectbox(key="job-kind").set_value("eval").run()
    assert at.selectbox(key="job-task").value == "rbac_sql"


def test_trajectories_open_the_newest_evaluation_without_a_click(synthetic, monkeypatch):
    with Archive(synthetic, readonly=True) as a:
        newest = a.query("SELECT MAX(id) AS id FROM evaluations WHERE split NOT LIKE '%:probe'")[0]["id"]
    at = open_app(synthetic, monkeypatch, "trajectories")
    assert at.subheader[0].value.startswith(f"Evaluation {newest}:")
