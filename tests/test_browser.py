"""The dashboard in a real browser: Playwright drives Debian's Chromium against `coevo dashboard`
serving an archive made by `coevo run` (with a round waiting at its approval gate)."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, coevo, copy_default

from app.nav import PAGES  # noqa: E402
from engine.archive import Archive  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-extensions", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def waiting_run(small_default, tmp_path):
    """A copy of the default archive with round 1 stopped at its first decision."""
    path = copy_default(small_default, tmp_path)
    root = Path(small_default[0]).parent
    out = coevo("run", "--rounds", "1", "--gate", "require", "--archive", str(path),
                "--config", str(root / "init.yaml"), "--run-config", str(root / "run.yaml"))
    assert "waiting: decision" in out.stdout, out.stdout + out.stderr
    return path


@pytest.fixture
def dashboard(waiting_run):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "dashboard", "--archive", str(waiting_run),
                             "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    url = proc.stdout.readline().split(": ", 1)[1].split()[0]  # the printed local URL
    assert url == f"http://127.0.0.1:{port}/"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.3)
    yield url, waiting_run
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def settle(page, heading: str) -> None:
    """Wait for the page's title and for Streamlit to finish the script run."""
    page.get_by_role("heading", name=heading, level=1).wait_for(timeout=60_000)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=60_000)
    page.wait_for_function("document.querySelectorAll('[data-testid=\"stSkeleton\"]').length === 0",
                           timeout=60_000)


@pytest.mark.slow
def test_dashboard_in_chromium(dashboard, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright
    url, archive_path = dashboard
    shots = Path(os.environ.get("COEVO_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with Archive(archive_path, readonly=True) as a:
        (pending,) = a.decisions("proposed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 2200})
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
        assert "evaluation=" in page.url
        page.screenshot(path=str(shots / "trajectory.png"), full_page=True)

        # approve the pending decision
        page.goto(url + "decisions")
        settle(page, "Decisions")
        page.get_by_label("Your name (for the audit trail)").fill("browser")
        page.get_by_label("Your name (for the audit trail)").press("Enter")
        page.get_by_role("button", name=f"Approve {pending['choice']}").click()
        page.get_by_text(f"Decision {pending['id']} approved by browser").wait_for(timeout=30_000)
        page.screenshot(path=str(shots / "approved.png"), full_page=True)
        browser.close()
    with Archive(archive_path, readonly=True) as a:
        d = a.decision(pending["id"])
    assert (d["status"], d["decided_by"]) == ("approved", "browser")
    assert sorted(f.name for f in shots.glob("*.png")) == sorted(
        [f"{k}.png" for k in PAGES] + ["trajectory.png", "approved.png"])
