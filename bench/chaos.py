"""Kill campaigns: does a run resume after any kill without duplicated or lost rows?

    .venv/bin/python bench/chaos.py [--kills 20] [--ray-kills 5] [--seed 0]

Local: a 2-round run of the small default is killed with SIGKILL (its whole process group) at `--kills`
random moments, each attempt resuming the previous; after every kill the archive must pass SQLite's
integrity check and hold no duplicate; a last attempt runs to the end. Its rows are then counted table by
table against an uninterrupted run of the same seed: more rows are duplicates, fewer are lost.
Ray: a local Ray head on loopback; a 1-round run on `--executor ray` has a running Ray job stopped
`--ray-kills` times (each attempt resumes), then finishes. Prints the counts; goal 20/20 and 5/5, none
duplicated or lost."""
from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.testing.local import ray_head  # noqa: E402

# rows a run makes the same number of, killed or not (turns vary with what the model says: they are
# checked against their evaluations' own counts instead)
TABLES = ("harnesses", "harness_parents", "checkpoints", "checkpoint_parents", "datasets", "evaluations",
          "episodes", "rounds", "round_steps", "decisions")


def configs(root: Path) -> list[str]:
    """The small default (as the tests use it): little data, short training, small sampling."""
    from engine import ASSETS
    profile = yaml.safe_load((ASSETS / "train" / "cpu.yaml").read_text())
    (root / "profile.yaml").write_text(yaml.safe_dump(profile))
    init = yaml.safe_load((ASSETS / "init" / "smart_home.yaml").read_text())
    init.update(sizes={"train": 240, "dev": 24}, profile=str(root / "profile.yaml"))
    (root / "init.yaml").write_text(yaml.safe_dump(init))
    run = yaml.safe_load((ASSETS / "run" / "smart_home.yaml").read_text())
    run.update(sample={"k": 2, "temperature": 1.0, "tasks": 48, "min_kept": 1},
               probe={"items": 8, "stage1": 4, "contenders": 2}, profile=str(root / "profile.yaml"))
    (root / "run.yaml").write_text(yaml.safe_dump(run))
    return ["--config", str(root / "init.yaml"), "--run-config", str(root / "run.yaml")]


def coevo(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "engine.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=ROOT)


def check(path: Path) -> list[str]:
    """What is wrong with the archive: integrity, duplicated round rows."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    bad = []
    if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        bad.append("integrity")
    for name, sql in {
        "round evaluations": "SELECT round FROM evaluations WHERE round IS NOT NULL AND split NOT LIKE '%:probe' "
                             "GROUP BY round HAVING COUNT(*) > 1",
        "probes": "SELECT 1 FROM evaluations WHERE split LIKE '%:probe' GROUP BY harness_id, checkpoint_id, split, "
                  "episodes HAVING COUNT(*) > 1",
        "checkpoints": "SELECT name FROM checkpoints GROUP BY name HAVING COUNT(*) > 1",
        "decisions": "SELECT 1 FROM decisions WHERE round_id IS NOT NULL AND status != 'steer' "
                     "GROUP BY round_id, step HAVING COUNT(*) > 1",
        "datasets": "SELECT path FROM datasets GROUP BY path HAVING COUNT(*) > 1"}.items():
        if conn.execute(sql).fetchall():
            bad.append(f"duplicate {name}")
    conn.close()
    return bad


def steps_done(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = conn.execute("SELECT COUNT(*) FROM round_steps WHERE state = 'done'").fetchone()[0]
    conn.close()
    return n


def counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    stored, declared = conn.execute("SELECT (SELECT COUNT(*) FROM turns), (SELECT SUM(turns) FROM evaluations)").fetchone()
    out["turns beyond their evaluations"] = stored - declared  # < 0: lost turns; > 0: duplicated
    conn.close()
    return out


def compare(ref: dict, got: dict) -> dict:
    turns = got.pop("turns beyond their evaluations")
    ref.pop("turns beyond their evaluations")
    dup = {t: got[t] - ref[t] for t in got if got[t] > ref[t]}
    lost = {t: ref[t] - got[t] for t in got if got[t] < ref[t]}
    if turns > 0:
        dup["turns"] = turns
    elif turns < 0:
        lost["turns"] = -turns
    return {"duplicated": dup, "lost": lost}


def finish(args: list[str], env=None, timeout: float = 1800) -> int:
    proc = coevo(*args, env=env)
    return proc.wait(timeout=timeout)


def local_campaign(work: Path, kills: int, rng: random.Random) -> dict:
    cfg = configs(work)
    base = work / "base.db"
    assert finish(["run", "--rounds", "0", "--archive", str(base), *cfg]) == 0, "init failed"
    from engine.archive import Archive
    from engine.evolve.ablate import copy_archive
    with Archive(base) as a:
        copy_archive(a, work / "reference.db").close()
    t0 = time.time()
    assert finish(["run", "--rounds", "2", "--archive", str(work / "reference.db"), *cfg]) == 0
    span = time.time() - t0
    print(f"reference: 2 rounds uninterrupted in {span:.0f}s")
    survived, problems, landed, runs, dup, lost = 0, [], 0, 0, {}, {}
    # the gap before a kill adapts to the run: halved after an attempt that finished a step, doubled after
    # one that did not (a kill during start-up alone), so the kills land at many moments of both rounds;
    # a run that finishes before all kills landed is checked, and the next starts from the same base
    wait = 4.0
    while landed < kills:
        runs += 1
        chaos = work / f"chaos{runs}.db"
        with Archive(base) as a:
            copy_archive(a, chaos).close()
        while True:
            before = steps_done(chaos)
            proc = coevo("run", "--rounds", "2", "--archive", str(chaos), *cfg)
            at = rng.uniform(0.3, 1.7) * wait
            try:
                proc.wait(timeout=at)
                break  # finished before this kill
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            landed += 1
            bad = check(chaos)
            survived += not bad
            problems += bad
            wait = max(2.0, wait / 2) if steps_done(chaos) > before else min(span, wait * 2)
            print(f"  run {runs}, kill {landed} at {at:5.1f}s ({steps_done(chaos)} steps done): "
                  f"{'consistent' if not bad else ', '.join(bad)}")
            if landed >= kills:
                break
        rc = finish(["run", "--rounds", "2", "--archive", str(chaos), *cfg])
        diff = compare(counts(work / "reference.db"), counts(chaos))
        for t, n in diff["duplicated"].items():
            dup[t] = dup.get(t, 0) + n
        for t, n in diff["lost"].items():
            lost[t] = lost.get(t, 0) + n
        finished = rc == 0 and not check(chaos)
        print(f"  run {runs} resumed to completion: {'yes' if finished else 'NO'}")
        problems += [] if finished else [f"run {runs} did not finish"]
    return {"kills": landed, "consistent_after_kill": survived, "finished": not any("finish" in x for x in problems),
            "runs": runs, "duplicated": dup, "lost": lost, "problems": problems}


def ray_campaign(work: Path, kills: int, rng: random.Random) -> dict:
    from ray.job_submission import JobStatus, JobSubmissionClient

    from engine.archive import Archive
    from engine.evolve.ablate import copy_archive
    cfg = configs(work)
    with ray_head(work / "ray") as address:
        client = JobSubmissionClient(address)
        env = {**os.environ, "RAY_ADDRESS": address}
        base = work / "base.db"
        if not base.exists():
            assert finish(["run", "--rounds", "0", "--archive", str(base), *cfg]) == 0
        with Archive(base) as a:
            copy_archive(a, work / "ray-chaos.db").close()
            copy_archive(a, work / "ray-reference.db").close()
        assert finish(["run", "--rounds", "1", "--archive", str(work / "ray-reference.db"), *cfg]) == 0
        chaos = work / "ray-chaos.db"
        stopped, consistent = 0, 0
        for i in range(kills):
            proc = coevo("run", "--rounds", "1", "--executor", "ray", "--archive", str(chaos), *cfg, env=env)
            victim = None
            while proc.poll() is None and victim is None:
                running = [j for j in client.list_jobs() if j.status == JobStatus.RUNNING
                           and j.submission_id.startswith("coevo-")]
                victim = running[0] if running else None
                time.sleep(0.3)
            if victim is None:
                print(f"  ray kill {i + 1}: the run finished first")
                continue
            time.sleep(rng.uniform(0.5, 3.0))
            client.stop_job(victim.submission_id)
            stopped += 1
            proc.wait(timeout=600)
            bad = check(chaos)
            consistent += not bad
            print(f"  ray kill {i + 1}: stopped {victim.submission_id}: {'consistent' if not bad else bad}")
        rc = finish(["run", "--rounds", "1", "--executor", "ray", "--archive", str(chaos), *cfg], env=env)
        ref, got = counts(work / "ray-reference.db"), counts(chaos)
        return {"kills": stopped, "consistent_after_kill": consistent, "finished": rc == 0 and not check(chaos),
                **compare(ref, got)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--ray-kills", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="coevo-chaos-") as tmp:
        work = Path(tmp)
        results = {}
        if args.kills:
            results["local"] = local_campaign(work, args.kills, rng)
        if args.ray_kills:
            results["ray"] = ray_campaign(work, args.ray_kills, rng)
    for name, r in results.items():
        print(f"\n{name}: {r['consistent_after_kill']}/{r['kills']} kills left a consistent archive"
              + (f" (over {r['runs']} runs from the same start)" if r.get("runs") else "") + "; "
              f"resumed to completion: {'yes' if r['finished'] else 'NO'}; duplicated rows: {r['duplicated'] or 'none'}; "
              f"lost rows: {r['lost'] or 'none'}")


if __name__ == "__main__":
    main()
