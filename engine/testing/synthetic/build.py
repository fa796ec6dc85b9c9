"""A fast generator of realistic synthetic archives, for dashboard benchmarks and tests, built from the
real engine: the archive's own schema and migrations (`Archive(path)`), its bulk insert, each task's
own items, gold turns and judge (`items`), the harness spec model and the run config.

Rows are written through a raw sqlite3 connection with synchronous=OFF and one transaction per chunk of
evaluations, which is what makes five million turns take minutes rather than hours. Everything random
comes from generators seeded by `seed`, and timestamps from a fixed clock, so the same arguments give
the same file content."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import yaml

from engine import ASSETS
from engine.archive import Archive, insert_rows
from engine.testing.synthetic.evaluations import EvalWriter, plan_evaluations
from engine.testing.synthetic.items import build_pools
from engine.testing.synthetic.lineage import (build_checkpoints, build_harnesses, checkpoint_parent_rows,
                                              checkpoint_rows, dataset_rows, harness_parent_rows, harness_rows)
from engine.testing.synthetic.rounds import RoundWriter, job_rows, round_mains

EVAL_CHUNK = 1000           # evaluations (with their episodes and turns) per transaction


def _insert(conn: sqlite3.Connection, table: str, rows) -> int:
    """One table's rows in one transaction."""
    conn.execute("BEGIN")
    n = insert_rows(conn, table, rows)
    conn.execute("COMMIT")
    return n


def _check_sizes(harnesses, checkpoints, evaluations, turns, rounds, pending) -> int:
    if harnesses < 3 or checkpoints < 3:
        raise ValueError("need at least 3 harnesses (the seeds) and 3 checkpoints (base and two roots)")
    if evaluations < 0 or turns < evaluations or (evaluations == 0 and turns):
        raise ValueError("need at least one turn per evaluation, and evaluations for any turns")
    most = min(harnesses - 3, checkpoints - 3)
    if rounds is None:
        rounds = min(50, most)
    if rounds > most or (rounds == 0 and (harnesses > 3 or checkpoints > 3)) or rounds < 0:
        raise ValueError(f"rounds must be between 1 and {most} (each round adds a harness and a checkpoint)")
    if pending < 0:
        raise ValueError("pending_decisions must be >= 0")
    return rounds


def build_synthetic(path, *, harnesses: int = 500, checkpoints: int = 500, evaluations: int = 50_000,
                    turns: int = 5_000_000, tasks=("smart_home", "failure_attribution", "rbac_sql"),
                    splits=("dev", "test"), rounds: int | None = None, pending_decisions: int = 3, seed: int = 0,
                    overwrite: bool = False) -> dict:
    """Write a synthetic archive at `path`; returns the row counts written, the seconds taken and the size.

    `rounds` done rounds (default: min(50, harnesses - 3, checkpoints - 3)), plus, when
    `pending_decisions` > 0, one more round in state 'running' holding that many proposed decisions.
    """
    t0 = time.perf_counter()
    tasks, splits = tuple(tasks), tuple(splits)
    rounds = _check_sizes(harnesses, checkpoints, evaluations, turns, rounds, pending_decisions)
    path = Path(path)
    if path.exists():
        if not overwrite:
            raise FileExistsError(f"{path}: exists (pass overwrite=True to replace it)")
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)
    with Archive(path) as archive:   # the real schema, through the real migrations
        files_dir = archive.files_dir

    pools = build_pools(tasks, splits, seed, files_dir / "tasks")
    hs = build_harnesses(harnesses, rounds, seed, pools)
    profile = yaml.safe_load((ASSETS / "train" / "cpu.yaml").read_text())
    cks, dss = build_checkpoints(checkpoints, rounds, seed, hs, files_dir, tasks[0], profile)
    mains = round_mains(hs, cks, rounds)
    plans = plan_evaluations(evaluations, turns, rounds, seed, hs, cks, tasks, splits, mains)
    max_turns = max(1, min(4, turns // (2 * evaluations))) if evaluations else 1  # at least 2 episodes

    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")       # a crash mid-build leaves a file nobody wants anyway
        conn.execute("PRAGMA cache_size = -131072")    # 128 MiB: the B-tree right edges stay in memory
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
        counts = {
            "harnesses": _insert(conn, "harnesses", harness_rows(hs)),
            "harness_parents": _insert(conn, "harness_parents", harness_parent_rows(hs)),
            "datasets": _insert(conn, "datasets", dataset_rows(dss)),
            "checkpoints": _insert(conn, "checkpoints", checkpoint_rows(cks, files_dir)),
            "checkpoint_parents": _insert(conn, "checkpoint_parents", checkpoint_parent_rows(cks)),
            "evaluations": 0, "episodes": 0, "turns": 0,
        }
        writer = EvalWriter(pools, seed, max_turns)
        results = []
        for i in range(0, len(plans), EVAL_CHUNK):
            # one transaction per chunk: its turns (generated), then the episodes and evaluations they summed to
            conn.execute("BEGIN")
            counts["turns"] += insert_rows(conn, "turns", writer.turns(plans[i:i + EVAL_CHUNK]))
            counts["episodes"] += insert_rows(conn, "episodes", writer.episodes)
            counts["evaluations"] += insert_rows(conn, "evaluations", writer.evaluations)
            conn.execute("COMMIT")
            results += writer.results
            writer.episodes, writer.evaluations, writer.results = [], [], []
        rw = RoundWriter(seed, rounds, pending_decisions, hs, cks, dss, results, mains, tasks, splits)
        rw.build()
        counts["rounds"] = _insert(conn, "rounds", rw.round_rows)
        counts["round_steps"] = _insert(conn, "round_steps", rw.step_rows)
        counts["decisions"] = _insert(conn, "decisions", rw.decision_rows)
        counts["pending_decisions"] = sum(1 for d in rw.decision_rows if d["status"] == "proposed")
        waiting = next((d["id"] for d in rw.decision_rows if d["status"] == "proposed"), None)
        counts["jobs"] = _insert(conn, "jobs", job_rows(rounds, files_dir, hs, cks, results, tasks[0], waiting))
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")   # readers' caches see one write
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA analysis_limit = 1000")   # sampled statistics: ANALYZE in seconds, not minutes
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    counts["seconds"] = round(time.perf_counter() - t0, 3)
    counts["bytes"] = path.stat().st_size
    counts["path"] = str(path.resolve())
    return counts
