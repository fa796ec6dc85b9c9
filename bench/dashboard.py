"""Server-side time of every dashboard page over a large synthetic archive.

    .venv/bin/python bench/dashboard.py [--harnesses 500 --checkpoints 500 --evaluations 50000 --turns 5000000]

Builds the archive once (kept in bench/out/, reused while its size arguments match), then runs each page
headless with Streamlit's AppTest: `cold` is the first run after the cache is cleared (every query
runs), `warm` a rerun at the same archive version (what a person clicking around sees). AppTest's
time includes its own protobuf handling, so the figures are upper bounds of the script's time.
Goal: at most 1 s per page."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # AppTest warns on every run outside a server

GOAL_S = 1.0


def build(name: str, **want) -> Path:
    """A synthetic archive in bench/out/, reused while its build arguments match."""
    from engine.testing.synthetic import build_synthetic
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.db"
    stamp = path.with_suffix(".json")
    want = {k: list(v) if isinstance(v, tuple) else v for k, v in want.items()}
    if path.exists() and stamp.exists() and json.loads(stamp.read_text()) == want:
        from engine.archive import Archive
        Archive(path).close()  # an archive of an older schema migrates as a user's would
        print(f"reusing {path} ({path.stat().st_size / 2**20:.0f} MiB)")
        return path
    for p in out.glob(f"{name}.db*"):
        p.unlink()
    t0 = time.time()
    counts = build_synthetic(path, **want)
    print(f"built {path} in {time.time() - t0:.0f}s: {counts['harnesses']} harnesses, {counts['checkpoints']} "
          f"checkpoints, {counts['evaluations']} evaluations, {counts['turns']} turns, "
          f"{path.stat().st_size / 2**20:.0f} MiB")
    stamp.write_text(json.dumps(want))
    return path


def scenarios(path: Path) -> list[tuple[str, str, dict]]:
    """(label, page key, session state): every page, plus the states that do the most work."""
    from engine.archive import Archive
    with Archive(path, readonly=True) as a:
        busiest = a.query("SELECT id FROM evaluations ORDER BY turns DESC, id LIMIT 1")[0]["id"]
        merge = a.query("SELECT id FROM checkpoints WHERE kind = 'merge' ORDER BY rowid DESC LIMIT 1")
        node = ("checkpoint", merge[0]["id"]) if merge else ("harness", "h1")
    trees = {"lineage-view": "trees"}
    return [
        ("overview", "overview", {}),
        ("lineage, co-lineage of pairs", "lineage", {}),
        ("lineage, trees", "lineage", trees),
        ("lineage, a node's detail", "lineage", {**trees, "lineage-node": node}),
        ("lineage, neighbourhood", "lineage", {**trees, "lineage-node": node, "lineage-narrow": True}),
        ("heatmaps", "heatmaps", {}),
        ("trajectories, busiest evaluation", "trajectories", {"evaluation": busiest}),
        ("decisions", "decisions", {}),
        ("steer", "steer", {}),
        ("jobs", "jobs", {}),
        ("compare harnesses", "compare", {}),
    ]


def dense_scenarios() -> list[tuple[str, str, dict]]:
    """The two views a filled matrix makes heavy: every evaluation on one task split or its probes."""
    return [
        ("filled heatmap, lineage order", "heatmaps", {}),
        ("filled heatmap, score order", "heatmaps", {"heatmap-order": "score"}),
        ("co-lineage, filled matrix", "lineage", {}),
    ]


def time_page(path: Path, page: str, state: dict) -> tuple[float, float]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from app.nav import PAGES
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.run()  # the entry and the overview, to reach the page
    for k, v in state.items():
        at.session_state[k] = v
    at.switch_page(PAGES[page][0])
    st.cache_data.clear()
    t0 = time.perf_counter()
    at.run()
    cold = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception[0].value}")
    t0 = time.perf_counter()
    at.run()
    warm = time.perf_counter() - t0
    return cold, warm


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harnesses", type=int, default=500)
    p.add_argument("--checkpoints", type=int, default=500)
    p.add_argument("--evaluations", type=int, default=50_000)
    p.add_argument("--turns", type=int, default=5_000_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    sizes = dict(harnesses=args.harnesses, checkpoints=args.checkpoints, evaluations=args.evaluations, seed=args.seed)
    runs = [
        ("the full archive", build("dashboard-archive", turns=args.turns, **sizes), scenarios),
        # one task, its dev split and the dev split's inheritance probes: a filled matrix of ~70 % full cells
        ("a filled matrix", build("dashboard-filled", turns=args.turns // 10, tasks=("smart_home",),
                                  splits=("dev", "dev:probe"), **sizes), lambda _: dense_scenarios()),
    ]
    print(f"\n{'page':<40}{'cold s':>8}{'warm s':>8}  goal <= {GOAL_S:.0f} s")
    worst = 0.0
    for title, path, pages in runs:
        os.environ["COEVO_ARCHIVE"] = str(path)
        print(f"-- {title}: {path.name}")
        for label, page, state in pages(path):
            cold, warm = time_page(path, page, state)
            worst = max(worst, cold)
            print(f"{label:<40}{cold:>8.3f}{warm:>8.3f}  {'ok' if cold <= GOAL_S else 'SLOW'}")
    print(f"\nslowest cold page: {worst:.3f} s ({'met' if worst <= GOAL_S else 'not met'}: goal {GOAL_S:.0f} s)")


if __name__ == "__main__":
    main()
