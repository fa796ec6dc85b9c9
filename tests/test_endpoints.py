"""Models behind an OpenAI-compatible server: a checkpoint served by `swift deploy` on loopback, evaluated
through the `openai` backend, answers as the transformers backend does; a failing server gives a clear
error and stores nothing."""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import coevo, copy_default

from engine.archive import Archive
from engine.testing.local import free_port


@pytest.fixture(scope="module")
def served(small_default):
    """root-json of the small default behind `swift deploy` (transformers engine, its SFT template)."""
    with Archive(small_default[0], readonly=True) as a:
        ckpt = a.checkpoint("root-json")
    template = json.loads((Path(ckpt["path"]) / "train_result.json").read_text())["template"]
    port = free_port()
    log = open(Path(small_default[0]).parent / "deploy.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "swift.cli.deploy", "--model", ckpt["path"], "--model_type",
                             json.loads((Path(ckpt["path"]) / "config.json").read_text())["model_type"],
                             "--template", template, "--infer_backend", "transformers", "--host", "127.0.0.1",
                             "--port", str(port), "--served_model_name", "tiny-served", "--use_hf", "true"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 180
    while True:
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                os.killpg(proc.pid, 9)
                pytest.fail("swift deploy did not come up: " + (Path(log.name).read_text()[-2000:]))
            time.sleep(1)
    yield url
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


@pytest.mark.slow
def test_a_served_checkpoint_answers_as_the_transformers_backend(served, small_default, tmp_path):
    path = copy_default(small_default, tmp_path)
    common = ("--harness", "smart_home-json", "--task", "smart_home", "--split", "dev", "--limit", "8",
              "--archive", str(path))
    local = coevo("eval", "--checkpoint", "root-json", *common)
    remote = coevo("eval", "--backend", "openai", "--base-url", served, "--model", "tiny-served", *common)
    again = coevo("eval", "--backend", "openai", "--base-url", served, "--model", "tiny-served", *common)
    with Archive(path, readonly=True) as a:
        evs = a.evaluations()[-3:]
        local_ev, remote_ev = a.evaluation(evs[0]["id"]), a.evaluation(evs[1]["id"])
        endpoint = a.checkpoint("tiny-served")
        outputs = [[t["output"] for t in a.turns(e["id"])] for e in evs]
        assert evs[1]["checkpoint"] == evs[2]["checkpoint"] == endpoint["id"]  # registered once, by name
    assert (endpoint["kind"], endpoint["path"], endpoint["recipe"]["model"]) == ("endpoint", served, "tiny-served")
    assert "api_key" not in json.dumps(endpoint["recipe"]).replace("api_key_env", "")
    assert remote_ev["config"]["backend"] == "openai:tiny-served"
    assert outputs[0] == outputs[1] == outputs[2]  # greedy: the same answers, turn by turn
    assert (remote_ev["score"], remote_ev["timr"]) == (local_ev["score"], local_ev["timr"])
    assert f"score {local_ev['score']:.3f}" in remote.stdout and "TIMR" in remote.stdout and local.stdout


class Failing(BaseHTTPRequestHandler):
    mode = "500"

    def do_POST(self):  # noqa: N802
        if self.server.mode == "hang":
            time.sleep(5)
            return
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": {"message": "the model crashed"}}')

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("mode, message", [("500", "HTTP 500"), ("hang", "no answer within the timeout")])
def test_a_failing_server_is_a_clear_error_and_no_evaluation(small_default, tmp_path, mode, message):
    path = copy_default(small_default, tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    server.mode = mode
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with Archive(path, readonly=True) as a:
        before = a.query("SELECT (SELECT COUNT(*) FROM evaluations) AS e, (SELECT COUNT(*) FROM turns) AS t")[0]
    out = coevo("eval", "--backend", "openai", "--base-url", f"http://127.0.0.1:{server.server_port}/v1",
                "--model", "broken", "--timeout", "1", "--harness", "smart_home-json", "--task", "smart_home",
                "--split", "dev", "--limit", "2", "--archive", str(path), check=False)
    server.shutdown()
    assert out.returncode == 2 and message in out.stderr and "broken" in out.stderr, out.stderr
    with Archive(path, readonly=True) as a:
        after = a.query("SELECT (SELECT COUNT(*) FROM evaluations) AS e, (SELECT COUNT(*) FROM turns) AS t")[0]
    assert after == before


@pytest.mark.slow
def test_baselines_put_the_best_coevolved_pair_beside_the_served_models(served, one_round, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    path = copy_default(one_round, tmp_path)
    coevo("eval", "--backend", "openai", "--base-url", served, "--model", "tiny-served", "--harness",
          "smart_home-json", "--task", "smart_home", "--split", "dev", "--limit", "2", "--archive", str(path))
    out = coevo("baselines", "--task", "smart_home", "--split", "dev", "--limit", "6", "--archive", str(path))
    assert "the best co-evolved pair against the served models" in out.stdout, out.stdout + out.stderr
    stored = json.loads((path.parent / "archive.d" / "baselines" / "smart_home-dev.json").read_text())
    assert {r["kind"] for r in stored} == {"endpoint", "co-evolved"}
    with Archive(path, readonly=True) as a:
        served_ckpt = a.checkpoint("tiny-served")["id"]
        seeds = [h["id"] for h in a.harnesses("smart_home") if h["creator"] == "seed"]
        for h in seeds:  # every seed harness under the served model
            assert a.find_evaluation(h, served_ckpt, "smart_home", "dev")
        best = a.step_result(1, "evaluate")
    coevolved = next(r for r in stored if r["kind"] == "co-evolved")
    assert (coevolved["harness"], coevolved["checkpoint"]) == (best["harness"], best["checkpoint"])
    for r in stored:
        assert r["model"] in out.stdout
    # the Overview shows the table
    import streamlit as st
    st.cache_data.clear()
    monkeypatch.setenv("COEVO_ARCHIVE", str(path))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app" / "main.py"), default_timeout=60)
    at.run()
    assert any(s.value == "Against served models" for s in at.subheader)
