"""Evaluate a (harness, checkpoint) pair on a task split and store the evaluation with every turn."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from engine.archive import Archive
from engine.harness.runtime import episode_rows, run_episodes, summarize, timed
from engine.harness.spec import HarnessSpec
from engine.models import load_backend
from engine.tasks import get_task


def task_dir(archive: Archive, task: str) -> Path:
    """Where the archive keeps a task's data (the generated default, unless --data says otherwise)."""
    return archive.files_dir / "tasks" / task


def evaluate(archive: Archive, harness: str, checkpoint: str, task: str = "smart_home", split: str = "dev",
             **kw) -> dict:
    """Run and store one evaluation (one transaction, after all episodes are done)."""
    record, ep_rows, turn_rows = run_evaluation(archive, harness, checkpoint, task, split, **kw)
    record["id"] = archive.add_evaluation(record, ep_rows, turn_rows)
    return record


def run_evaluation(archive: Archive, harness: str, checkpoint: str, task: str = "smart_home", split: str = "dev", *,
                   data_dir=None, limit: int | None = None, backend=None, backend_name: str = "transformers",
                   round: int | None = None, progress: Callable[[int, int], None] | None = None
                   ) -> tuple[dict, list[dict], list[dict]]:
    """The evaluation record with its episode and turn rows, not yet stored."""
    h = archive.harness(harness)
    c = archive.checkpoint(checkpoint)
    spec = HarnessSpec.from_dict(h["spec"], source=f"harness {h['id']}")
    t = get_task(task, data_dir or task_dir(archive, task))
    items = t.load(split, limit)
    backend = backend or load_backend(backend_name, c["path"])
    episodes, seconds = timed(run_episodes, spec, t, backend, items, progress=progress)
    score, metrics = t.score(items, [e.prediction for e in episodes])
    stats = summarize(episodes)
    ep_rows, turn_rows = episode_rows(episodes)
    record = dict(harness_id=h["id"], checkpoint_id=c["id"], task=task, split=split, score=score, metrics=metrics,
                  seconds=seconds, round=round, config={"limit": limit, "backend": backend_name,
                                                        "data_dir": str(data_dir) if data_dir else None},
                  **stats)
    return record, ep_rows, turn_rows
