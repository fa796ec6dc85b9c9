"""The dashboard in a real browser: Playwright drives Debian's Chromium against `coevo dashboard`
serving an archive made by `coevo run` (with a round waiting at its approval gate)."""
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import REPO, coevo, copy_default

from engine import views  # noqa: E402

from app.nav import PAGES  # noqa: E402
from engine.archive import Archive  # noqa: E402
from engine.testing.local import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-extensions", "--disable-sync", "--no-first-run"]


@pytest.fixture
def waiting_run(small_default, tmp_path):
    """A copy of the default archive with round 1 stopped at its first decision."""
    path = copy_default(small_default, tmp_path)
    root = Path(small_default[0]).parent
    out = coevo("run", "--rounds", "1", "--gate", "require", "--archive", str(path),
                "--config", str(root / "init.yaml"), "--run-config", str(root / "run.yaml"))
    assert "waiting: decision" in out.stdout, out.stdout + out.stderr
    return path


@contextmanager
def serving(archive: Path):
    """`coevo dashboard` over an archive on a free loopback port; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "dashboard", "--archive", str(archive),
                             "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        url = proc.stdout.readline().split(": ", 1)[1].split()[0]  # the printed local URL
        assert url == f"http://127.0.0.1:{port}/"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


@pytest.fixture
def dashboard(waiting_run):
    with serving(waiting_run) as url:
        yield url, waiting_run


@contextmanager
def chromium(viewport=(1400, 2200)):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        finally:
            browser.close()


def screenshots(tmp_path) -> Path:
    shots = Path(os.environ.get("COEVO_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def settle(page, heading: str) -> None:
    """Wait for the page's title and for Streamlit to finish the script run."""
    page.get_by_role("heading", name=heading, level=1).wait_for(timeout=60_000)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=60_000)
    page.wait_for_function("document.querySelectorAll('[data-testid=\"stSkeleton\"]').length === 0",
                           timeout=60_000)


@pytest.mark.slow
def test_dashboard_in_chromium(dashboard, tmp_path):
    url, archive_path = dashboard
    shots = screenshots(tmp_path)
    with Archive(archive_path, readonly=True) as a:
        (pending,) = a.decisions("proposed")
        shown = views.task_splits(a)[0]  # the heatmap page's first task split; its first cell is drawn first
        first_cell = views.matrix(a, shown["task"], shown["split"])["cells"]["id"][0]
    with chromium() as page:
        for key, (file, title, _) in PAGES.items():
            page.goto(url if key == "overview" else url + Path(file).stem)
            settle(page, title)
            assert page.locator('[data-testid="stException"]').count() == 0, key
            page.screenshot(path=str(shots / f"{key}.png"), full_page=True)

        # a heatmap cell through to its trajectory
        page.goto(url + "heatmaps")
        settle(page, "Heatmaps")
        page.locator(".js-plotly-plot .scatterlayer .point").first.click(force=True)
        settle(page, "Trajectories")
        page.get_by_text("Raw output").first.wait_for(timeout=30_000)
        assert page.url.endswith(f"evaluation={first_cell}")  # the click carried the cell's own evaluation
        page.screenshot(path=str(shots / "trajectory.png"), full_page=True)

        # approve the pending decision
        page.goto(url + "decisions")
        settle(page, "Decisions")
        page.get_by_label("Your name (for the audit trail)").fill("browser")
        page.get_by_label("Your name (for the audit trail)").press("Enter")
        page.get_by_role("button", name=f"Approve {pending['choice']}").click()
        page.get_by_text(f"Decision {pending['id']} approved by browser").wait_for(timeout=30_000)
        page.screenshot(path=str(shots / "approved.png"), full_page=True)
    with Archive(archive_path, readonly=True) as a:
        d = a.decision(pending["id"])
    assert (d["status"], d["decided_by"]) == ("approved", "browser")
    assert {f"{k}.png" for k in PAGES} | {"trajectory.png", "approved.png"} <= {f.name for f in shots.glob("*.png")}


def click_button(page, name: str) -> None:
    page.get_by_role("button", name=name).click()


def job_row(path, job_id) -> dict:
    with Archive(path, readonly=True) as a:
        return a.job(job_id)


def wait_for(predicate, what: str, timeout: float = 240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_steer_a_round_in_chromium(one_round, small_default, tmp_path):
    """A co-lineage pair opens its trajectories; a harness with an error shows the error's line, a valid
    one is the next round's harness; a pinned checkpoint is the round's inheritance; a pause stops the
    round's job at the next step boundary until a resume."""
    path = copy_default(one_round, tmp_path)
    shots = screenshots(tmp_path)
    with Archive(path, readonly=True) as a:
        first = next(n for n in views.co_lineage(a, "smart_home", "dev")["nodes"] if n["score"] is not None)
        newest_ckpt = a.checkpoints()[-1]["id"]
    with serving(path) as url, chromium() as page:
        page.goto(url + "lineage")
        settle(page, "Lineage")
        page.locator(".js-plotly-plot .scatterlayer .trace").nth(2).locator(".point").first.click(force=True)
        settle(page, "Trajectories")
        page.get_by_text("Raw output").first.wait_for(timeout=30_000)
        assert f"evaluation={first['evaluation']}" in page.url
        page.get_by_role("heading", name=f"Evaluation {first['evaluation']}:").wait_for()

        page.goto(url + "steer")
        settle(page, "Steer")
        page.get_by_label("Your name (for the audit trail)").fill("browser")
        page.get_by_label("Why (for the audit trail)").fill("a stricter harness of my own")
        page.get_by_label("Why (for the audit trail)").press("Enter")
        settle(page, "Steer")
        editor = page.get_by_label("Harness YAML")
        text = editor.input_value()
        lines = text.splitlines()
        line = next(i for i, t in enumerate(lines, 1) if t.startswith("strict:"))
        lines[line - 1] = "strict: sometimes"
        editor.fill("\n".join(lines))
        editor.press("Control+Enter")
        settle(page, "Steer")
        click_button(page, "Validate and enter as the next round's harness")
        page.get_by_text(f"harness YAML:{line} [strict]").wait_for(timeout=30_000)  # the error's line
        page.screenshot(path=str(shots / "steer-error.png"), full_page=True)
        lines[line - 1] = "strict: true"
        lines = [f"name: browser-harness" if t.startswith("name:") else t for t in lines]
        editor.fill("\n".join(lines))
        editor.press("Control+Enter")
        settle(page, "Steer")
        click_button(page, "Validate and enter as the next round's harness")
        page.get_by_text("Waiting for the next round: harness").wait_for(timeout=30_000)
        settle(page, "Steer")  # a click while the script still runs can land on a widget about to be replaced
        click_button(page, "Pin as the next inheritance")
        page.get_by_text(f"Pinned for the next round: {newest_ckpt}").wait_for(timeout=30_000)
        with Archive(path, readonly=True) as a:
            (entered,) = a.steering(("harness",))
            (pinned,) = a.steering(("pin",))
        assert (entered["decided_by"], entered["comment"], pinned["choice"]) == (
            "browser", "a stricter harness of my own", newest_ckpt)

        # a round job; paused once its first step is done, it waits at the next boundary
        root = Path(small_default[0]).parent
        out = coevo("job", "start", "round", "--arg", f"run_config={root / 'run.yaml'}", "--archive", str(path))
        job_id = int(out.stdout.split()[1])
        wait_for(lambda: Archive(path, readonly=True).step_result(2, "curate") is not None, "round 2's curate")
        click_button(page, "Pause at the next step boundary")
        page.get_by_text("Paused by browser").wait_for(timeout=30_000)
        wait_for(lambda: "paused" in job_row(path, job_id)["message"], "the job to pause")
        with Archive(path, readonly=True) as a:
            steps_at_pause = len(a.round_steps(2))
        time.sleep(3)
        with Archive(path, readonly=True) as a:
            assert len(a.round_steps(2)) == steps_at_pause < 6
            assert a.job(job_id)["state"] == "running"
        page.screenshot(path=str(shots / "steer-paused.png"), full_page=True)
        click_button(page, "Resume")
        page.get_by_text("Running freely").wait_for(timeout=30_000)
        job = wait_for(lambda: (j := job_row(path, job_id))["state"] not in ("queued", "running") and j, "the job")
        assert job["state"] == "done", job
    with Archive(path, readonly=True) as a:
        edit, inherit = a.step_result(2, "edit"), a.step_result(2, "inherit")
        assert (edit["harness"], edit["operator"]) == (entered["choice"], "person")
        assert a.harness(edit["harness"])["spec"]["name"] == "browser-harness"
        assert inherit["checkpoint"] == newest_ckpt
        d = a.decision(inherit["decision"])
        assert (d["evidence"]["policy"], d["status"], d["decided_by"]) == ("pin", "overridden", "browser")
        assert [x["round_id"] for x in (a.decision(entered["id"]), a.decision(pinned["id"]))] == [2, 2]
        assert [x["kind"] for x in a.steering(("pause", "resume"))] == ["pause", "resume"]


@pytest.mark.slow
def test_report_opens_offline_with_every_section(one_round, tmp_path):
    out = tmp_path / "report.html"
    coevo("report", "--archive", str(one_round[0]), "--out", str(out))
    text = out.read_text()
    for pattern in (r"<script[^>]+src=[\"']?https?:", r"<link[^>]+href=[\"']?https?:", r"url\(\s*[\"']?https?:",
                    r"@import"):
        assert not re.search(pattern, text, re.I), pattern
    shots = screenshots(tmp_path)
    requests = []
    with chromium((1280, 900)) as page:
        def block(route):
            requests.append(route.request.url)
            return route.continue_() if route.request.url.startswith("file:") else route.abort()
        page.route("**/*", block)
        page.goto(out.as_uri())
        for heading in ("Run settings", "Score and TIMR per round", "Ablation", "The best pair against the seed pairs",
                        "Co-lineage", "Harness x checkpoint heatmap", "Example trajectories"):
            page.get_by_role("heading", name=heading, level=2).wait_for(timeout=30_000)
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3", timeout=60_000)
        assert page.get_by_text("A success (the best pair)").count() == 1
        assert page.get_by_text("A mismatch", exact=True).count() == 1
        page.screenshot(path=str(shots / "report.png"), full_page=True)
    assert [r for r in requests if not r.startswith("file:")] == []
