"""Filling the harness x checkpoint matrix: the top-k harnesses and the top-k checkpoints of a task (by
their best full score on a split), and the current round's pair, each pair evaluated in full once. Every
evaluation is its own transaction, so a killed fill resumes with the pairs still missing."""
from __future__ import annotations

import json
from typing import Callable

from engine.archive import Archive
from engine.evaluate import evaluate
from engine.models import BackendSpec, load_backend
from engine.sorting import natural_key


def ranked(best: dict[str, float], ids: list[str]) -> list[str]:
    """Best score first; ids without a full evaluation last; ties by id (so filling never reorders the
    top: a filled pair can only raise the best score of its own row and column)."""
    return sorted(ids, key=lambda i: (-best.get(i, -1.0), natural_key(i)))


def top_pairs(archive: Archive, task: str, split: str, k: int) -> tuple[list[str], list[str]]:
    """The top-k harnesses and checkpoints of a task, plus the newest round's pair."""
    cells = archive.matrix(task, split)
    best_h: dict[str, float] = {}
    best_c: dict[str, float] = {}
    for c in cells:
        best_h[c["harness"]] = max(best_h.get(c["harness"], -1.0), c["score"])
        best_c[c["checkpoint"]] = max(best_c.get(c["checkpoint"], -1.0), c["score"])
    tasks = archive.checkpoint_tasks()
    harnesses = ranked(best_h, [h["id"] for h in archive.harnesses(task)])[:k]
    checkpoints = ranked(best_c, [c["id"] for c in archive.checkpoints()  # baselines: `coevo baselines`
                                  if tasks.get(c["id"]) in (task, None) and c["kind"] != "endpoint"])[:k]
    for r in reversed(archive.rounds()):
        done = archive.step_result(r["id"], "evaluate")
        if done and archive.evaluation(done["evaluation"])["task"] == task:
            harnesses += [done["harness"]] if done["harness"] not in harnesses else []
            checkpoints += [done["checkpoint"]] if done["checkpoint"] not in checkpoints else []
            break
    return harnesses, checkpoints


def fill_settings(archive: Archive, task: str) -> tuple[BackendSpec, int | None]:
    """The backend and item limit the run used: the newest round's of the task, else the task's default
    round config's."""
    from engine.run_config import RunConfig, load_run_config
    for r in reversed(archive.rounds()):
        cfg = RunConfig.model_validate(json.loads(r["config"]))
        if cfg.task == task:
            return cfg.backend, cfg.eval_limit
    cfg = load_run_config(task=task)
    return cfg.backend, cfg.eval_limit


def fill(archive: Archive, task: str, split: str, k: int, *, limit: int | None = None,
         backend_spec: BackendSpec | None = None, log: Callable[[str], None] = lambda m: None,
         progress: Callable[[int, int], None] | None = None) -> dict:
    """Evaluate every missing pair of the top-k harnesses x checkpoints; one model load per checkpoint."""
    harnesses, checkpoints = top_pairs(archive, task, split, k)
    done = {(c["harness"], c["checkpoint"]) for c in archive.matrix(task, split)}
    todo = [(h, c) for c in checkpoints for h in harnesses if (h, c) not in done]
    log(f"{task}/{split}: {len(harnesses)} harnesses x {len(checkpoints)} checkpoints, "
        f"{len(todo)} of {len(harnesses) * len(checkpoints)} pairs to evaluate")
    spec = backend_spec or BackendSpec()
    evaluated = []
    for c in checkpoints:
        mine = [h for h, cc in todo if cc == c]
        if not mine:
            continue
        backend = load_backend(spec, archive.checkpoint(c)["path"])
        for h in mine:
            r = evaluate(archive, h, c, task, split, limit=limit, backend=backend, backend_spec=spec)
            evaluated.append(r["id"])
            log(f"  {h:<8} x {c:<8} score {r['score']:.3f}  TIMR {r['timr']:6.1%}")
            if progress:
                progress(len(evaluated), len(todo))
    return {"harnesses": harnesses, "checkpoints": checkpoints, "evaluated": evaluated,
            "skipped": len(harnesses) * len(checkpoints) - len(todo)}
